#pragma once
// Elastic net, solved in the primal by coordinate descent over features.
//
// Problem:   min_w  P(w) = (1/2n) ||A w - y||^2
//                          + lambda (eta ||w||_1 + (1-eta)/2 ||w||^2),
//            0 < eta <= 1 (ModelSpec::l1_ratio), A = data.x, no intercept.
// Variables: w (one per feature); the solvers keep the residual r = A w - y.
// Step:      exact minimisation along w_j (Friedman, Hastie, Tibshirani,
//            "Regularization paths for generalized linear models via
//            coordinate descent", J. Stat. Softw. 2010, eq. 6):
//              w_j' = SoftThreshold(q_j w_j - g_j, lambda eta)
//                     / (q_j + lambda (1 - eta)),
//              g_j = a_j^T r / n,  q_j = ||a_j||^2 / n
//            (the squared-loss kernel of lasso.hpp; the CoCoA+ local
//            subproblem scales q_j and the residual update by sigma').
// Gap:       (Duenner, Forte, Takac, Jaggi, "Primal-dual rates and
//            certificates", ICML 2016) u = r / n and
//              gap_j = g_j(w_j) + g_j*(-a_j^T u) + w_j a_j^T u.
//            For eta < 1, g_j is strongly convex and its conjugate finite:
//              g*(s) = max(0, |s| - lambda eta)^2 / (2 lambda (1 - eta)).
//            For eta == 1 (pure L1) it falls back to the bounded-support form
//            of lasso.hpp, gbar*(s) = B max(0, |s| - lambda), B = P(0)/lambda.
//
// Header-only; see lasso.hpp for the Access policy and thread-safety.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "dml/objective/lasso.hpp"

namespace dml {

/// lambda (eta ||w||_1 + (1-eta)/2 ||w||^2) with the squared loss; see the
/// file comment.
struct ElasticNetObjective {
  /// The loss and the squared_cd kernel's types.
  using Loss = loss::Squared;
  using Column = squared_cd::Column;
  using StepResult = squared_cd::StepResult;

  /// The model's lambda and eta (l1_ratio), and 1/n.
  double lambda = 0.0;
  double eta = 1.0;
  double inv_n = 0.0;
  /// B of the bounded-support modification, used only when eta == 1.
  double bound = 0.0;

  /// As LassoObjective::Make; eta is model.l1_ratio.
  static ElasticNetObjective Make(const ModelSpec& model, const std::vector<float>& y,
                                  double w_max = 0.0) {
    ElasticNetObjective o;
    o.lambda = model.lambda;
    o.eta = model.l1_ratio;
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

  /// The penalty, for its Prox.
  DML_HD reg::ElasticNet Reg() const { return {lambda, eta}; }
  /// The L1 weight: a feature at 0 moves only if |a_j^T u| > this.
  DML_HD double L1() const { return lambda * eta; }
  /// lambda (eta |w| + (1-eta)/2 w^2).
  DML_HD double Regularizer(double w) const { return Reg().Value(w); }
  /// g*(s) for eta < 1, else gbar*(s); see the file comment.
  DML_HD double Conjugate(double s) const {
    const double excess = std::max(0.0, std::abs(s) - lambda * eta);
    if (eta < 1.0) return excess * excess / (2.0 * lambda * (1.0 - eta));
    return bound * excess;
  }
  /// gap_j = g(w) + g*(-grad) + w grad >= 0 (clamped at 0 against rounding).
  DML_HD double CoordinateGap(double w, double grad) const {
    return std::max(0.0, Regularizer(w) + Conjugate(-grad) + w * grad);
  }
  /// Distance of -grad from the subdifferential of the penalty at w.
  double Violation(double w, double grad) const {
    if (w != 0.0) return std::abs(grad + Reg().Subgradient(w));
    return std::max(0.0, std::abs(grad) - lambda * eta);
  }

  /// squared_cd::Step on column `col` with residual `r`; scratch is unused.
  template <typename Access>
  StepResult Step(SparseView col, const Column& c, double* r, double* /*scratch*/, double w,
                  double scale) const {
    return squared_cd::Step<Access>(Reg(), col, c, inv_n, r, w, scale);
  }
};

}  // namespace dml
