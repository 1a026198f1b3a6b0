#pragma once
// Prediction and evaluation metrics for a trained linear model: margins
// z = x.w, and the usual scores over (label, margin or prediction) pairs.
//
// Conventions: classification labels are -1/+1 (as everywhere in libdml) and
// the classification metrics refuse anything else, naming the position, so a
// regression file passed by mistake is caught. Sums are accumulated in double.
//
// Errors: InvalidArgument naming both sizes when the label and score vectors
// differ in length, naming the position of the first non-finite score or bad
// label, and on empty input. Thread-safety: pure functions of their arguments.

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dml/data/sparse.hpp"

namespace dml {

/// Margins x_i.w for every row of `x`, O(nnz). `x` may have fewer or more
/// columns than `w` has weights: a feature beyond w's length has weight 0
/// (a model trained on narrower data scores wider test data and vice versa).
std::vector<double> Predict(const CsrMatrix& x, const std::vector<double>& w);

/// Fraction of examples whose predicted sign matches the label. A margin of
/// exactly 0 predicts -1, as LIBLINEAR's predict and dml-predict do (dec > 0
/// is the first label), so a model scores the same here and there: rows
/// whose features are all new to the model score exactly 0.
/// Errors: size mismatch, empty input, a label not in {-1,+1}, a non-finite
/// margin.
absl::StatusOr<double> Accuracy(absl::Span<const float> y, absl::Span<const double> margins);

/// Area under the ROC curve: the probability that a random positive scores
/// above a random negative, ties counting one half. Exact, in O(n log n), by
/// the Mann-Whitney rank sum with average ranks for tied scores. Errors: size
/// mismatch, empty input, a label not in {-1,+1}, a non-finite score, or one
/// class missing (the AUC is then undefined).
absl::StatusOr<double> Auc(absl::Span<const float> y, absl::Span<const double> scores);

/// Mean logistic loss (1/n) sum log(1 + exp(-y_i z_i)) over margins z (not
/// probabilities), evaluated stably for any |z| (no overflow, no log(0)).
/// Natural log. Errors: size mismatch, empty input, a label not in {-1,+1},
/// a non-finite margin.
absl::StatusOr<double> LogLoss(absl::Span<const float> y, absl::Span<const double> margins);

/// Root mean squared error sqrt((1/n) sum (y_i - p_i)^2). Errors: size
/// mismatch, empty input, a non-finite label or prediction.
absl::StatusOr<double> Rmse(absl::Span<const float> y, absl::Span<const double> pred);

/// Coefficient of determination 1 - SS_res / SS_tot, SS_tot = sum (y_i -
/// mean y)^2. May be negative (worse than predicting the mean). Errors: size
/// mismatch, empty input, non-finite values, or constant labels (SS_tot = 0,
/// R^2 undefined).
absl::StatusOr<double> R2(absl::Span<const float> y, absl::Span<const double> pred);

}  // namespace dml
