#pragma once
// A tighter certificate for a primal iterate w of the smooth L2 models
// (ridge, L2-logistic, squared hinge), for SGD and the SGD modes.
//
// Why: the dual point of the margins, alpha_i = -loss'(y_i, x_i.w), gives
// P(w) - D(alpha) = ||grad P(w)||^2 / (2 lambda) (IterateShare): where the
// features' curvatures h_j are far above lambda (unscaled features, small
// lambda) it overstates the suboptimality about h_j / lambda times (a
// relative 2e-5 from the optimum certified as 0.4). The dual optimum is
// alpha* = -loss'(A w*), and linearising around w gives
//   alpha* ~ alpha + loss'' . (A q),   H q = grad P(w),
//   H = A^T diag(loss'') A / n + lambda I,
// the primal Newton step mapped to the dual. q comes from a few conjugate
// gradient steps on H (Jacobi preconditioner: the curvature the first pass
// summed), each one Hessian product that the partitions add up; a last
// pass evaluates D at alpha + t delta for the steps kNewtonDualSteps (delta
// shortened per row so that every one stays dual-feasible) and the best of
// them, and of the plain certificate's, is the dual. Near the optimum the
// gap then bounds the suboptimality within a small factor.
//
// Every pass is a sum over row partitions, so K workers compute their
// shares and a coordinator adds them (NewtonCertifier); CertifyIterateNewton
// does all of it in one process. Hinge (no second derivative) and the L1
// models (bounded-support gap) keep the plain certificate.
//
// Thread-safety: free functions are pure; a NewtonCertifier is used by one
// thread. Errors: InvalidArgument for lengths that do not match, a model
// that is not refined, a non-finite share.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "dml/data/sparse.hpp"
#include "dml/objective/evaluate.hpp"
#include "dml/objective/model.hpp"

namespace dml {

/// The steps t of the last pass: alpha + t delta. Around 1 (a converged
/// Newton step) and up to 1.5 (delta is shortened so that 1.5 stays
/// feasible).
inline constexpr double kNewtonDualSteps[] = {0.25, 0.5, 0.7, 0.85, 1.0, 1.15, 1.3, 1.5};
inline constexpr int kNewtonDualStepCount = 8;

/// NewtonCertifier's CG ends once the gap its residual can still cost is
/// below this share of P(w): far below any tolerance a job stops on.
inline constexpr double kCgGapShare = 1e-13;
inline constexpr int kCgExactDims = 64;

/// Whether the model's certificate is refined (ridge, L2-logistic, squared
/// hinge).
bool RefinesIterateCertificate(ModelKind kind);

/// What a partition keeps of its rows between the passes: loss' and loss''
/// at the iterate of the first pass (IterateShareOf(..., rows)).
struct NewtonRows {
  std::vector<double> derivative;  ///< loss'(y_i, x_i.w) per row
  std::vector<double> second;      ///< loss''(y_i, x_i.w) per row
};

/// A CG pass: sum_i loss''_i (x_i.p) x_i over the partition's rows (not
/// divided by n), length d.
absl::StatusOr<std::vector<double>> HessianProductShare(const Dataset& part,
                                                        const NewtonRows& rows,
                                                        const std::vector<double>& p);

/// The last pass's sums over a partition's rows.
struct NewtonDualShare {
  /// sum_i NegConj(y_i, alpha_i + t delta_i) per step of kNewtonDualSteps.
  double negconj_sums[kNewtonDualStepCount] = {};
  std::vector<double> step;  ///< A^T delta (sum_i delta_i x_i), length d
};

/// The last pass at direction q (NewtonCertifier::Direction):
/// delta_i = loss''_i (x_i.q), shortened where alpha_i + 1.5 delta_i would
/// leave the dual domain.
absl::StatusOr<NewtonDualShare> NewtonDualShareOf(const Dataset& part, const ModelSpec& model,
                                                  const NewtonRows& rows,
                                                  const std::vector<double>& q);
absl::Status AddNewtonDualShare(NewtonDualShare& into, const NewtonDualShare& from);
/// The same sums for rows [begin, end) of `data`, added into `into` (whose
/// step has d entries), for a solver that keeps per-row arrays over the
/// whole data: derivative, second and xq indexed by row, delta_i =
/// second_i * xq_scale * xq_i (a solver with direction d = -q passes A d
/// and -1). Errors: a row range or step length that does not fit.
absl::Status AddNewtonDualRows(const Dataset& data, const ModelSpec& model, int64_t begin,
                               int64_t end, const double* derivative, const double* second,
                               const double* xq, double xq_scale, NewtonDualShare& into);
/// `plain` with its dual raised to the best of D(alpha + t delta) over
/// kNewtonDualSteps, from A^T alpha (= -sum_i loss'_i x_i) and the total
/// of the rows' shares (what NewtonCertifier::Finish computes). A step
/// vector of the wrong length leaves `plain`.
Certificate RefineCertificate(const ModelSpec& model, int64_t rows,
                              const std::vector<double>& a_t_alpha, const Certificate& plain,
                              const NewtonDualShare& total);
/// Flat form (sums, then step) and back; Unpack checks the length (the
/// sums plus d) and that every value is finite.
std::vector<double> PackNewtonDualShare(const NewtonDualShare& s);
absl::StatusOr<NewtonDualShare> UnpackNewtonDualShare(const std::vector<double>& v, int64_t d);

/// The coordinator's side: preconditioned CG on H q = grad P(w) from the
/// first pass's total (which must carry the curvature), at most
/// `max_iterations` Hessian products (0: the Jacobi step alone; a positive
/// count below d + 1 is raised to d + 1 where d < kCgExactDims: CG is exact
/// after d steps, and on a small ill-conditioned model 16 steps left the
/// gap 70x P - P*, tab 569x30 logistic), ending
/// early once what the residual r can still add to the gap, at most
/// ||r||^2 / (2 lambda), is below kCgGapShare of P(w).
class NewtonCertifier {
 public:
  /// Errors: model not refined, w or the total's vectors of the wrong
  /// length, no rows, max_iterations < 0.
  static absl::StatusOr<NewtonCertifier> Start(const ModelSpec& model,
                                               const std::vector<double>& w,
                                               const IterateShare& total, int max_iterations);
  /// The vector whose Hessian product the partitions sum next; null once
  /// the direction is final.
  const std::vector<double>* NeedsProduct() const { return done_ ? nullptr : &p_; }
  /// The partitions' sum of HessianProductShare(NeedsProduct()).
  absl::Status AddProduct(const std::vector<double>& sum);
  /// The Newton direction q (final once NeedsProduct() is null).
  const std::vector<double>& Direction() const { return x_; }
  /// Hessian products used so far.
  int Products() const { return products_; }
  /// The refined certificate: `plain` (CertifyIterate of the same total)
  /// with the dual raised to the best of the last pass's steps.
  absl::StatusOr<Certificate> Finish(const Certificate& plain,
                                     const NewtonDualShare& total) const;

 private:
  ModelSpec model_;
  double n_ = 0.0;
  std::vector<double> base_;  // A^T alpha = -sum of the loss gradients
  std::vector<double> diag_;  // Jacobi: curvature / n + lambda
  std::vector<double> x_, r_, z_, p_;
  double rz_ = 0.0;
  double primal_ = 0.0;  // P(w), for the stopping rule
  int max_iterations_ = 0;
  int products_ = 0;
  bool done_ = false;
};

/// All passes over `data` in one process: CertifyIterate refined by at
/// most max_iterations CG steps (the plain certificate for models that are
/// not refined). Errors: those of IterateShareOf.
absl::StatusOr<Certificate> CertifyIterateNewton(const Dataset& data, const ModelSpec& model,
                                                 const std::vector<double>& w,
                                                 int max_iterations);

}  // namespace dml
