#pragma once
// LIBLINEAR's model file (linear.cpp save_model / load_model), read so that
// dml-predict applies models trained by `liblinear-train`, and written so
// that `liblinear-predict` applies ours.
//
// Format (text, one item per line):
//   solver_type <NAME>          e.g. L2R_LR, L2R_L2LOSS_SVC_DUAL, L2R_L2LOSS_SVR
//   nr_class <k>
//   label <l1> ... <lk>         classification only
//   nr_feature <d>
//   bias <b>                    < 0: no bias feature; else feature d+1 has value b
//   [rho <r>]                   one-class SVM only (refused here)
//   w
//   <w_i,1> ... <w_i,nr_w>      d (+1 with a bias) lines; nr_w = 1 for two classes
//
// Only binary classification and regression models are supported (ours are
// binary); a multi-class model is refused naming nr_class.
//
// Errors: ReadLiblinearModel returns NotFound for a file that cannot be
// opened and InvalidArgument "path:line: ..." naming the field that is wrong.
// Thread-safety: reentrant.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dml/data/sparse.hpp"
#include "dml/objective/model.hpp"

namespace dml {

/// A binary LIBLINEAR model: decision value w . x (+ w_bias * bias).
struct LiblinearModel {
  std::string solver_type;     ///< LIBLINEAR's name, e.g. "L2R_LR"
  std::vector<double> labels;  ///< classification: {label[0], label[1]}; empty for regression
  int64_t nr_feature = 0;
  double bias = -1.0;          ///< < 0: no bias term
  std::vector<double> w;       ///< nr_feature weights, then the bias weight if bias >= 0

  /// SVR solvers (11, 12, 13): the decision value is the prediction.
  bool regression() const;
  /// Logistic solvers (0, 6, 7): probabilities 1 / (1 + exp(-dec)) exist.
  bool probabilistic() const;
  /// The decision value of every row of `x` (features at or beyond
  /// nr_feature are ignored, as liblinear-predict does), by dml::Predict
  /// plus the bias term.
  std::vector<double> Decisions(const CsrMatrix& x) const;
  /// Classification: label[0] for dec > 0, else label[1]; regression: dec.
  double Label(double decision) const;
};

/// Reads a model written by liblinear-train (or WriteLiblinearModel).
absl::StatusOr<LiblinearModel> ReadLiblinearModel(const std::string& path);

/// Writes `model` in LIBLINEAR's format (weights as %.17g, as save_model).
/// Errors: Unavailable if the file cannot be written.
absl::Status WriteLiblinearModel(const LiblinearModel& model, const std::string& path);

/// LIBLINEAR's solver number (`-s N`) as one of our models. Errors:
/// InvalidArgument naming the solver when we have no counterpart (multi-class
/// Crammer-Singer, L1-regularized squared hinge, the epsilon-insensitive
/// regressions, one-class SVM) or the number is unknown.
absl::StatusOr<ModelKind> ModelOfLiblinearSolver(int solver);

/// The LIBLINEAR model of a dml model trained on labels -1/+1 whose -1 was
/// `negative` and +1 `positive` in the data. Solver types: logistic L2R_LR,
/// logistic-l1 L1R_LR, svm L2R_L1LOSS_SVC_DUAL, svm-squared
/// L2R_L2LOSS_SVC_DUAL; the regression models (ridge, lasso, elastic net)
/// are written as L2R_L2LOSS_SVR, the one regression type whose prediction
/// (w . x) liblinear-predict computes the same way for them. With `bias` >= 0
/// the last weight is the bias feature's (the data had -B bias).
LiblinearModel ToLiblinear(const ModelSpec& spec, const std::vector<double>& w,
                           double negative = -1.0, double positive = 1.0, double bias = -1.0);

}  // namespace dml
