#pragma once
// The model family and its conventions (keep them; tests and benchmarks rely
// on them):
//   P(w) = (1/n) sum_i loss(y_i, x_i.w) + lambda * R(w), no intercept.
//   R = ||w||^2/2 (L2), ||w||_1 (L1), eta*||w||_1 + (1-eta)/2*||w||^2 (elastic net).
//   Losses, z = x_i.w: squared (y-z)^2/2, logistic log(1+exp(-yz)),
//   hinge max(0, 1-yz), squared hinge max(0, 1-yz)^2. Labels -1/+1 for
//   classification. LIBLINEAR's C is lambda = 1/(C n).
// L2-regularised models are solved in the dual (one coordinate per example,
// shared w = A^T alpha / (lambda n)); L1 models in the primal (one coordinate
// per feature, shared v = A w), with the bounded-support trick for the gap.

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "dml/data/sparse.hpp"

namespace dml {

/// The seven models of the family above.
enum class ModelKind {
  kRidge,            ///< squared loss + L2, dual
  kLasso,            ///< squared loss + L1, primal
  kElasticNet,       ///< squared loss + elastic net, primal
  kLogisticL2,       ///< logistic loss + L2, dual
  kLogisticL1,       ///< logistic loss + L1, primal
  kHingeSvm,         ///< hinge loss + L2, dual
  kSquaredHingeSvm,  ///< squared hinge loss + L2, dual
};

/// Which variables a model is solved in: dual (per example) or primal (per feature).
enum class Formulation { kDual, kPrimal };

/// A model and its regularisation; checked by Validate.
struct ModelSpec {
  ModelKind kind = ModelKind::kLogisticL2;  ///< loss and regulariser
  double lambda = 1e-4;  ///< Regularisation weight; > 0 and finite.
  /// Elastic net's eta in eta*||w||_1 + (1-eta)/2*||w||^2; (0, 1].
  double l1_ratio = 0.5;
};

/// Primal for the L1 models (lasso, elastic net, L1-logistic), else dual.
Formulation FormulationOf(ModelKind kind);
/// Classification models need labels in {-1,+1}.
Task TaskOf(ModelKind kind);
/// "ridge", "lasso", "elastic-net", "logistic" (L2), "logistic-l1", "svm"
/// (hinge), "svm-squared".
std::string_view ModelName(ModelKind kind);
/// Inverse of ModelName (also accepts "hinge", "l2-logistic", "l1-logistic",
/// "squared-hinge", "enet"); InvalidArgument listing the valid names.
absl::StatusOr<ModelKind> ParseModelKind(std::string_view name);
/// lambda > 0 and finite; for elastic net also 0 < l1_ratio <= 1. Errors:
/// InvalidArgument naming the field.
absl::Status Validate(const ModelSpec& spec);

/// LIBLINEAR's C for n examples: lambda = 1/(C n).
inline double LambdaFromC(double c, int64_t n) { return 1.0 / (c * static_cast<double>(n)); }

}  // namespace dml
