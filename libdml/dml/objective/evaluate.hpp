#pragma once
// Exact objective values and duality-gap certificates for every model, from
// the current iterate. These are the numbers every solver reports and every
// test checks; they are recomputed from scratch (double accumulation), never
// taken from a solver's running state.
//
// Thread-safety: pure functions of their arguments.

#include <algorithm>
#include <cmath>
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
  /// The separable gap (set by EvaluatePrimal, EvaluateDual and the
  /// iterate certificates): what coordinate_gaps add up to. Equal to `gap`
  /// except from EvaluatePrimal for the pure-L1 models (lasso,
  /// L1-logistic, elastic net at l1_ratio 1), whose separable gap uses the
  /// bounded-support dual and is >= `gap`.
  double separable_gap = 0.0;
  /// Per-coordinate gaps (examples for dual models, features for primal
  /// ones), scaled so they sum to `separable_gap`. Empty unless asked for.
  std::vector<double> coordinate_gaps;
};

/// Dual models (ridge, L2-logistic, hinge, squared hinge): alpha has one entry
/// per example; w is recomputed as A^T alpha / (lambda n). Errors: wrong
/// model formulation, size mismatch, alpha outside the dual domain.
absl::StatusOr<Certificate> EvaluateDual(const Dataset& data, const ModelSpec& model,
                                         const std::vector<double>& alpha,
                                         bool per_coordinate = false);

/// Primal models (lasso, elastic net, L1-logistic): w has one entry per
/// feature. For the L1 term the separable dual uses the bounded-support
/// modification g_j = lambda|w_j| on |w_j| <= B, B = P(0)/lambda, so the gap
/// is finite; for lasso and L1-logistic the dual is the better of that and
/// the scaled dual point t loss'(A w)/n, t = min(1, lambda / ||A^T loss'/n||_inf)
/// (feasible for the unmodified problem, tight near the optimum).
/// Errors: InvalidArgument for a dual model, size mismatch, no examples, a
/// non-finite weight, or a label the model does not accept.
absl::StatusOr<Certificate> EvaluatePrimal(const Dataset& data, const ModelSpec& model,
                                           const std::vector<double>& w,
                                           bool per_coordinate = false);

/// EvaluatePrimal's certificate of a lasso or L1-logistic w from the sums a
/// solver keeps, taken at w's own margins (recomputed from w, not carried
/// through its steps): loss_sum = sum_i loss(y_i, x_i.w), grad_j = sum_i
/// x_ij loss'(y_i, x_i.w) / n, derivative[i] = loss'(y_i, x_i.w). The same
/// formulas as EvaluatePrimal, its sums in the solver's order. Errors:
/// InvalidArgument for another model or lengths that do not match.
absl::StatusOr<Certificate> CertifyPrimalFromSums(const ModelSpec& model,
                                                  const std::vector<float>& y,
                                                  const std::vector<double>& w, double loss_sum,
                                                  const std::vector<double>& grad,
                                                  const std::vector<double>& derivative);

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

/// lambda_max of an L1 model (lasso, elastic net, L1-logistic) on `data`:
/// max_j |a_j^T f'(0)| / n, the smallest lambda whose optimum is w = 0
/// (elastic net: the smallest lambda * l1_ratio), where a regularisation
/// path starts. O(nnz). Errors: InvalidArgument for another model, a
/// non-finite label, or data without examples.
absl::StatusOr<double> L1LambdaMax(const Dataset& data, ModelKind kind);

/// P(w) for any model (SGD reports this). Errors: size mismatch.
absl::StatusOr<double> PrimalValue(const Dataset& data, const ModelSpec& model,
                                   const std::vector<double>& w);

/// The certificate of a primal iterate w for solvers that keep no dual (SGD
/// and the SGD modes), computed where the rows are: each partition of the
/// rows makes its IterateShare, the shares add up, CertifyIterate turns the
/// sum into P, D and the gap. Every model:
///  - dual models (ridge, logistic, hinge, squared hinge): the dual point of
///    the margins, alpha_i = -loss'(y_i, x_i.w) (feasible; alpha(w*) = alpha*),
///    at the best of the scales kIterateDualScales (D(s alpha) is concave in
///    s and far from the optimum alpha(w) overshoots):
///    D(s alpha) = (1/n) sum_i NegConj(y_i, s alpha_i) - s^2 ||A^T alpha||^2 / (2 lambda n^2);
///  - primal models (lasso, elastic net, L1-logistic): EvaluatePrimal's
///    bounded-support gap, from s = A^T u / n.
/// Either way gap = P(w) - D >= 0 bounds the suboptimality of w.
inline constexpr double kIterateDualScales[] = {1.0, 0.95, 0.85, 0.7, 0.5, 0.3, 0.15, 0.05};
inline constexpr int kIterateDualScaleCount = 8;

/// An estimate of the rounding error of a dual value computed as
/// negconj - quad from sums of `terms` terms each: (terms + 8) eps
/// (|negconj| + |quad|) (a bound where the sums' terms share a sign: the
/// shares carry the sums, not the sums of magnitudes). The certificates of iterates (CertifyIterate,
/// RefineCertificate, the Newton solver) report a gap of at least this:
/// with features of 1e20 the two parts are 1e37 and cancel, and a dual
/// "above" the primal was clamped to it, certifying a gap of 0 that a
/// recomputation put at 9e21.
inline double DualRoundingBound(double negconj, double quad, int64_t terms) {
  return (static_cast<double>(terms) + 8.0) * 2.220446049250313e-16 *
         (std::abs(negconj) + std::abs(quad));
}

/// Sets c's dual to `dual` and its gap, keeping D <= P (rounding near the
/// optimum may not know it) and the gap at least `rounding`
/// (DualRoundingBound); c.primal must be set.
inline void SetIterateDual(Certificate& c, double dual, double rounding) {
  c.gap = std::max(c.primal - std::min(dual, c.primal), rounding);
  c.dual = c.primal - c.gap;
}

/// One partition's sums (not divided by n).
struct IterateShare {
  int64_t rows = 0;
  double loss_sum = 0.0;       ///< sum_i loss(y_i, x_i.w)
  double zero_loss_sum = 0.0;  ///< sum_i loss(y_i, 0): the primal models' L1 bound
  /// Dual models: sum_i NegConj(y_i, s alpha_i) per scale; else zeros.
  double negconj_sums[kIterateDualScaleCount] = {};
  std::vector<double> grad;  ///< sum_i loss'(y_i, x_i.w) x_i, length d
  /// sum_i loss''(y_i, x_i.w) x_ij^2, length d, only where the share was
  /// taken for a Newton-refined certificate (newton_certificate.hpp);
  /// else empty.
  std::vector<double> curvature;
};

/// The share of the rows of `part` (labels checked as EvaluatePrimal does).
/// Errors: InvalidArgument for a size mismatch, a non-finite weight or a
/// label the model does not accept (naming the row of `part`).
absl::StatusOr<IterateShare> IterateShareOf(const Dataset& part, const ModelSpec& model,
                                            const std::vector<double>& w);
/// Adds `from` into `into` (an empty `into.grad` takes from's length).
/// Errors: gradients of different lengths.
absl::Status AddIterateShare(IterateShare& into, const IterateShare& from);
/// As above, and also keeps what a Newton-refined certificate needs of
/// these rows (newton_certificate.hpp): `rows` gets loss' and loss'' of
/// every row, the share its curvature. Errors: as above.
struct NewtonRows;
absl::StatusOr<IterateShare> IterateShareOf(const Dataset& part, const ModelSpec& model,
                                            const std::vector<double>& w, NewtonRows* rows);
/// P, D and the gap of w from the sum of every partition's share.
/// Errors: no rows, or a gradient whose length is not w's.
absl::StatusOr<Certificate> CertifyIterate(const ModelSpec& model, const std::vector<double>& w,
                                           const IterateShare& total);
/// A share as one flat vector (what a worker sends: scalars first, then
/// grad, then the curvature if any) and back. Errors: a vector whose length
/// is not the header plus d or 2 d,
/// a row count that is not a non-negative integer, a non-finite value.
std::vector<double> PackIterateShare(const IterateShare& s);
absl::StatusOr<IterateShare> UnpackIterateShare(const std::vector<double>& v, int64_t d);

/// w = A^T alpha / (lambda n), accumulated in double (n = x.rows()). alpha
/// must have x.rows() entries; otherwise the result is the zero vector.
std::vector<double> PrimalFromDual(const CsrMatrix& x, const std::vector<double>& alpha,
                                   double lambda);

}  // namespace dml
