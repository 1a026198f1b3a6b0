#pragma once
// Exact objective values and duality-gap certificates for every model, from
// the current iterate. These are the numbers every solver reports and every
// test checks; they are recomputed from scratch (double accumulation), never
// taken from a solver's running state.
//
// Thread-safety: pure functions of their arguments.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "dml/data/sparse.hpp"
#include "dml/objective/model.hpp"

namespace dml {

/// Objective values at one iterate; gap bounds its suboptimality.
struct Certificate {
  double primal = 0.0;  ///< P(w).
  double dual = 0.0;    ///< D(alpha), a lower bound on min P.
  double gap = 0.0;  ///< primal - dual >= 0
  /// Per-coordinate gaps (examples for dual models, features for primal
  /// ones), scaled so they sum to `gap`. Empty unless asked for.
  std::vector<double> coordinate_gaps;
};

/// Dual models (ridge, L2-logistic, hinge, squared hinge): alpha has one entry
/// per example; w is recomputed as A^T alpha / (lambda n). Errors: wrong
/// model formulation, size mismatch, alpha outside the dual domain.
absl::StatusOr<Certificate> EvaluateDual(const Dataset& data, const ModelSpec& model,
                                         const std::vector<double>& alpha,
                                         bool per_coordinate = false);

/// Primal models (lasso, elastic net, L1-logistic): w has one entry per
/// feature. For the L1 term the dual uses the bounded-support modification
/// g_j = lambda|w_j| on |w_j| <= B, B = P(0)/lambda, so the gap is finite.
/// Errors: InvalidArgument for a dual model, size mismatch, no examples, a
/// non-finite weight, or a label the model does not accept.
absl::StatusOr<Certificate> EvaluatePrimal(const Dataset& data, const ModelSpec& model,
                                           const std::vector<double>& w,
                                           bool per_coordinate = false);

/// Either formulation: from the solver's natural variables (alpha for dual
/// models, w for primal ones). Errors: those of EvaluateDual/EvaluatePrimal.
absl::StatusOr<Certificate> Evaluate(const Dataset& data, const ModelSpec& model,
                                     const std::vector<double>& w,
                                     const std::vector<double>& alpha, bool per_coordinate = false);

/// sum_i loss(y_i, x_i.w) over the rows of `data` (not divided by n): a
/// partition's share of P(w), so K workers can add theirs. Errors: size
/// mismatch.
absl::StatusOr<double> LossSum(const Dataset& data, const ModelSpec& model,
                               const std::vector<double>& w);

/// lambda * R(w) for the model's regulariser.
double RegularizerValue(const ModelSpec& model, const std::vector<double>& w);

/// P(w) for any model (SGD reports this). Errors: size mismatch.
absl::StatusOr<double> PrimalValue(const Dataset& data, const ModelSpec& model,
                                   const std::vector<double>& w);

/// w = A^T alpha / (lambda n), accumulated in double (n = x.rows()). alpha
/// must have x.rows() entries; otherwise the result is the zero vector.
std::vector<double> PrimalFromDual(const CsrMatrix& x, const std::vector<double>& alpha,
                                   double lambda);

}  // namespace dml
