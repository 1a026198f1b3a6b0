#pragma once
// Lasso, solved in the primal by coordinate descent over features.
//
// Problem:   min_w  P(w) = (1/2n) ||A w - y||^2 + lambda ||w||_1,
//            A = data.x (n x d), no intercept; f(v) = (1/2n) ||v - y||^2.
// Variables: w (one coordinate per feature). The solvers keep the residual
//            r = A w - y, i.e. the shared vector v = A w shifted by y.
// Step:      exact minimisation along w_j (Friedman, Hastie, Tibshirani,
//            "Regularization paths for generalized linear models via
//            coordinate descent", J. Stat. Softw. 2010):
//              w_j' = SoftThreshold(q_j w_j - g_j, lambda) / q_j,
//              g_j = a_j^T r / n,  q_j = ||a_j||^2 / n.
//            For the CoCoA+ local subproblem (1/s) f(v + s A_k dw) the same
//            step runs with curvature s q_j and moves r by s a_j dw_j.
// Gap:       (Duenner, Forte, Takac, Jaggi, "Primal-dual rates and
//            certificates", ICML 2016) u = grad f(v) = r / n and
//              gap_j = g_j(w_j) + g_j*(-a_j^T u) + w_j a_j^T u >= 0,
//            summed over j. |.|'s conjugate is an indicator, so the L1 term
//            uses the bounded-support ("Lipschitzing") modification
//              gbar_j(w) = lambda |w| for |w| <= B, +inf otherwise,
//              gbar_j*(s) = B max(0, |s| - lambda),
//            with B = P(0)/lambda: every w with P(w) <= P(0) has
//            ||w||_1 <= B, so the minimiser is the same and the gap finite.
//            For an iterate outside that ball (P(w) > P(0), e.g. a model
//            supplied from outside) B is raised to max_j |w_j|; the box then
//            still contains both w and the minimiser, so the certificate
//            P(w) - P* <= gap stays valid.
//
// Each objective struct (LassoObjective here, ElasticNetObjective,
// LogisticL1Objective) offers the same interface to the solvers, which are
// templates over it: Make, PrimalAtZero, PrepareColumns, InitState (state
// from an exact v), LossFromState (running estimate), ValueAndDerivative
// (for EvaluatePrimal), Regularizer, Conjugate, CoordinateGap, Violation,
// L1, and Step<Access>, which returns the new w_j and the gradient a_j^T u
// it saw before the step (so gap_j = CoordinateGap(w_j, grad) costs nothing).
//
// Header-only so the solvers inline the step. Thread-safety: the objective
// structs are immutable values; the state arrays belong to the caller, who
// chooses plain or atomic access through the `Access` policy:
//   static constexpr bool kPlain;           // no concurrent writers: SIMD
//                                           // kernels may bypass Load
//   static double Load(const double* p);
//   static void Add(double* p, double x);   // *p += x
//   static void Mul(double* p, double x);   // *p *= x

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "dml/data/sparse.hpp"
#include "dml/objective/host_device.hpp"
#include "dml/objective/losses.hpp"
#include "dml/objective/model.hpp"
#include "dml/objective/regularizers.hpp"

namespace dml {

/// Coordinate descent for the squared loss f(v) = (1/2n)||v - y||^2 with any
/// elastic-net penalty: the kernel shared by LassoObjective and
/// ElasticNetObjective. The state is the residual r = v - y.
namespace squared_cd {

/// Per-column constant: q_j = ||a_j||^2 / n.
struct Column {
  double curvature = 0.0;  ///< q_j
};

/// q_j for every column of `a` (n = a.rows()).
inline std::vector<Column> PrepareColumns(const CscMatrix& a) {
  std::vector<Column> c(static_cast<std::size_t>(a.cols()));
  const double inv_n = a.rows() > 0 ? 1.0 / static_cast<double>(a.rows()) : 0.0;
  for (int64_t j = 0; j < a.cols(); ++j) {
    const SparseView col = a.outer(j);
    double s = 0.0;
    for (std::size_t k = 0; k < col.size; ++k) {
      s += static_cast<double>(col.value[k]) * col.value[k];
    }
    c[j].curvature = s * inv_n;
  }
  return c;
}

/// (y - z)^2 / 2 and its derivative z - y, for the certificate.
DML_HD inline void ValueAndDerivative(double y, double z, double* value, double* derivative) {
  *value = 0.5 * (y - z) * (y - z);
  *derivative = z - y;
}

/// loss*(a) = sup_z a z - (y - z)^2 / 2 = a^2 / 2 + a y (the scaled dual,
/// evaluate_primal.cpp).
DML_HD inline double LossConjugate(double y, double a) { return 0.5 * a * a + a * y; }

/// P(0) = (1/2n) sum_i y_i^2.
inline double PrimalAtZero(const std::vector<float>& y) {
  double s = 0.0;
  for (float yi : y) s += static_cast<double>(yi) * yi;
  return y.empty() ? 0.0 : 0.5 * s / static_cast<double>(y.size());
}

/// state = r = v - y.
inline void InitState(const std::vector<double>& v, const std::vector<float>& y, double* r) {
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = v[i] - y[i];
}

/// (1/2n) ||r||^2 from the state.
inline double LossFromState(const double* r, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += r[i] * r[i];
  return n > 0 ? 0.5 * s / static_cast<double>(n) : 0.0;
}

/// What one Step did.
struct StepResult {
  double w = 0.0;     ///< the new w_j
  double grad = 0.0;  ///< g_j = a_j^T u before the step
  int64_t nnz = 0;    ///< nonzeros read or written
  bool resync = false;  ///< never for the squared loss (its state is additive)
};

/// One exact coordinate step on w_j (current value `w`) with the residual
/// `r`; `scale` = 1 for plain CD, sigma' for the CoCoA+ local subproblem.
/// Updates r by scale * (w_j' - w_j) a_j.
template <typename Access>
StepResult Step(const reg::ElasticNet& reg, SparseView col, const Column& c, double inv_n,
                double* r, double w, double scale) {
  double dot = 0.0;
  for (std::size_t k = 0; k < col.size; ++k) {
    dot += static_cast<double>(col.value[k]) * Access::Load(r + col.index[k]);
  }
  StepResult out{w, dot * inv_n, static_cast<int64_t>(col.size)};
  // An empty column leaves only lambda R(w_j): its minimiser is 0.
  if (!(c.curvature > 0.0)) {
    out.w = 0.0;
    return out;
  }
  const double q = scale * c.curvature;
  out.w = reg.Prox(w - out.grad / q, q);
  const double delta = scale * (out.w - w);
  if (delta != 0.0) {
    for (std::size_t k = 0; k < col.size; ++k) {
      Access::Add(r + col.index[k], delta * col.value[k]);
    }
    out.nnz += static_cast<int64_t>(col.size);
  }
  return out;
}

}  // namespace squared_cd

/// lambda ||w||_1 with the squared loss; see the file comment.
struct LassoObjective {
  /// The loss and the squared_cd kernel's types.
  using Loss = loss::Squared;
  using Column = squared_cd::Column;
  using StepResult = squared_cd::StepResult;

  /// The model's lambda, and 1/n.
  double lambda = 0.0;
  double inv_n = 0.0;
  /// B of the bounded-support modification.
  double bound = 0.0;

  /// For labels `y` (n of them); `w_max` = max_j |w_j| of the iterate to
  /// certify (0 for a solver, whose iterates stay in the ball P(w) <= P(0)).
  static LassoObjective Make(const ModelSpec& model, const std::vector<float>& y,
                             double w_max = 0.0) {
    LassoObjective o;
    o.lambda = model.lambda;
    o.inv_n = y.empty() ? 0.0 : 1.0 / static_cast<double>(y.size());
    o.bound = std::max(PrimalAtZero(y) / model.lambda, w_max);
    return o;
  }
  /// The squared_cd functions of the same names (y unused by PrepareColumns).
  static double PrimalAtZero(const std::vector<float>& y) { return squared_cd::PrimalAtZero(y); }
  DML_HD static void ValueAndDerivative(double y, double z, double* value, double* derivative) {
    squared_cd::ValueAndDerivative(y, z, value, derivative);
  }
  static double LossConjugate(double y, double a) { return squared_cd::LossConjugate(y, a); }
  static std::vector<Column> PrepareColumns(const CscMatrix& a, const std::vector<float>&) {
    return squared_cd::PrepareColumns(a);
  }
  static void InitState(const std::vector<double>& v, const std::vector<float>& y, double* r) {
    squared_cd::InitState(v, y, r);
  }
  /// f(v) from the state (the running estimate; exact up to drift).
  double LossFromState(const double* r, int64_t n, const std::vector<Column>&,
                       const std::vector<double>&) const {
    return squared_cd::LossFromState(r, n);
  }

  /// The penalty as an elastic net with eta = 1 (for its Prox).
  DML_HD reg::ElasticNet Reg() const { return {lambda, 1.0}; }
  /// The L1 weight: a feature at 0 moves only if |a_j^T u| > this.
  DML_HD double L1() const { return lambda; }
  /// lambda |w|.
  DML_HD double Regularizer(double w) const { return lambda * std::abs(w); }
  /// gbar*(s) = B max(0, |s| - lambda).
  DML_HD double Conjugate(double s) const { return bound * std::max(0.0, std::abs(s) - lambda); }
  /// gap_j = gbar(w) + gbar*(-grad) + w grad, grad = a_j^T u; >= 0 in exact
  /// arithmetic for |w| <= B, clamped at 0 against rounding.
  DML_HD double CoordinateGap(double w, double grad) const {
    return std::max(0.0, Regularizer(w) + Conjugate(-grad) + w * grad);
  }
  /// Distance of -grad from the subdifferential of lambda|.| at w (the
  /// optimality violation LIBLINEAR's shrinking uses).
  double Violation(double w, double grad) const {
    if (w > 0) return std::abs(grad + lambda);
    if (w < 0) return std::abs(grad - lambda);
    return std::max(0.0, std::abs(grad) - lambda);
  }

  /// squared_cd::Step on column `col` with residual `r`; scratch is unused.
  template <typename Access>
  StepResult Step(SparseView col, const Column& c, double* r, double* /*scratch*/, double w,
                  double scale) const {
    return squared_cd::Step<Access>(Reg(), col, c, inv_n, r, w, scale);
  }
};

}  // namespace dml
