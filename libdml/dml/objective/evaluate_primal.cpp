// Exact primal value, dual value and duality gap of the primal models
// (lasso, elastic net, L1-logistic) at a given w, from scratch:
//   v = A w,  u = grad f(v) (u_i = loss'(y_i, v_i) / n),  s = A^T u,
//   P = f(v) + sum_j g_j(w_j),
//   gap = sum_j [g_j(w_j) + g_j*(-s_j) + w_j s_j]   (Duenner et al., ICML 2016),
//   D = P - gap  (= -f*(u) - sum_j g_j*(-s_j) by Fenchel-Young).
// The per-coordinate formulas (and the bounded-support L1 conjugate) live in
// the objective headers, shared with the solvers. Double accumulation
// throughout; the coordinate gaps are summed in index order, so they add up
// to `gap` exactly.

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dml/objective/elastic_net.hpp"
#include "dml/objective/evaluate.hpp"
#include "dml/objective/internal/iterate_checks.hpp"
#include "dml/objective/lasso.hpp"
#include "dml/objective/logistic_l1.hpp"
#include "dml/objective/logistic_rows.hpp"
#include "dml/util/status.hpp"

namespace dml {
namespace {

/// The L1 weight where the regulariser is lambda ||w||_1 alone (lasso,
/// L1-logistic, elastic net at eta = 1), else 0.
double PureL1Weight(const LassoObjective& o) { return o.lambda; }
double PureL1Weight(const LogisticL1Objective& o) { return o.lambda; }
double PureL1Weight(const ElasticNetObjective& o) { return o.eta == 1.0 ? o.lambda : 0.0; }

// The objective of w's certificate: its bounded-support B covers w.
template <typename Obj>
Obj ObjectiveFor(const ModelSpec& model, const std::vector<float>& y,
                 const std::vector<double>& w) {
  double w_max = 0.0;
  for (double wj : w) w_max = std::max(w_max, std::abs(wj));
  return Obj::Make(model, y, w_max);
}

// The certificate from the sums of one pass at w: loss_sum = sum_i
// loss(y_i, x_i.w), s = A^T u (u_i = loss'(y_i, x_i.w) / n) and, for the
// pure-L1 models' scaled dual, derivative[i] = loss'(y_i, x_i.w); obj is
// ObjectiveFor(model, y, w).
template <typename Obj>
Certificate CertifyFromSums(const Obj& obj, const std::vector<float>& y,
                            const std::vector<double>& w, double loss_sum,
                            const std::vector<double>& s, const std::vector<double>& derivative,
                            bool per_coordinate) {
  const auto n = static_cast<int64_t>(y.size());
  const auto d = static_cast<int64_t>(w.size());
  const double inv_n = 1.0 / static_cast<double>(n);
  const double l1 = PureL1Weight(obj);

  Certificate c;
  double penalty = 0.0;
  double gap = 0.0;
  if (per_coordinate) c.coordinate_gaps.resize(static_cast<std::size_t>(d));
  for (int64_t j = 0; j < d; ++j) {
    penalty += obj.Regularizer(w[j]);
    const double gj = obj.CoordinateGap(w[j], s[j]);
    gap += gj;
    if (per_coordinate) c.coordinate_gaps[j] = gj;
  }
  c.primal = loss_sum * inv_n + penalty;
  c.gap = gap;
  c.separable_gap = gap;
  c.dual = c.primal - gap;
  if (l1 > 0.0) {
    // The scaled dual: t u with t = min(1, l1 / max_j |s_j|) is feasible for
    // the unmodified problem (||A^T t u||_inf <= l1), so D(t u) bounds min P
    // as well. Near the optimum (max |s_j| -> l1) it is tight, where the
    // bounded-support gap charges B = P(0)/lambda per unit of every
    // feature's excess and stays large until all of them vanish (real-sim's
    // shape at LIBLINEAR's objective: 4.8 against ~1e-6 times P). The
    // certificate takes the better of the two; coordinate_gaps stay the
    // bounded-support terms (they are what is separable).
    double s_max = 0.0;
    for (double sj : s) s_max = std::max(s_max, std::abs(sj));
    const double t = s_max > l1 ? l1 / s_max : 1.0;
    double conj = 0.0;
    if constexpr (std::is_same_v<Obj, LogisticL1Objective>) {
      conj = LogisticConjugateSum(y.data(), derivative.data(), t, static_cast<std::size_t>(n));
    } else {
      for (int64_t i = 0; i < n; ++i) conj += Obj::LossConjugate(y[i], t * derivative[i]);
    }
    const double dual = -conj * inv_n;
    if (std::isfinite(dual) && dual > c.dual) {
      c.dual = std::min(dual, c.primal);  // rounding may put D above P
      c.gap = c.primal - c.dual;
    }
  }
  return c;
}

template <typename Obj>
Certificate Certify(const Dataset& data, const ModelSpec& model, const std::vector<double>& w,
                    bool per_coordinate) {
  const int64_t n = data.x.rows();
  const int64_t d = data.x.cols();
  const double inv_n = 1.0 / static_cast<double>(n);

  const Obj obj = ObjectiveFor<Obj>(model, data.y, w);

  // v = A w row by row; the loss and u_i on the way; s = A^T u scattered.
  std::vector<double> s(static_cast<std::size_t>(d), 0.0);
  // Pure L1 (lasso, L1-logistic): loss'(v_i) is kept for the scaled dual.
  const double l1 = PureL1Weight(obj);
  std::vector<double> derivs(l1 > 0.0 ? static_cast<std::size_t>(n) : 0);
  double loss_sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const SparseView row = data.x.outer(i);
    double v = 0.0;
    for (std::size_t k = 0; k < row.size; ++k) v += static_cast<double>(row.value[k]) * w[row.index[k]];
    double value, derivative;
    Obj::ValueAndDerivative(data.y[i], v, &value, &derivative);
    loss_sum += value;
    if (l1 > 0.0) derivs[i] = derivative;
    const double u = derivative * inv_n;
    if (u == 0.0) continue;
    for (std::size_t k = 0; k < row.size; ++k) s[row.index[k]] += row.value[k] * u;
  }
  return CertifyFromSums(obj, data.y, w, loss_sum, s, derivs, per_coordinate);
}

}  // namespace

absl::StatusOr<Certificate> EvaluatePrimal(const Dataset& data, const ModelSpec& model,
                                           const std::vector<double>& w, bool per_coordinate) {
  DML_RETURN_IF_ERROR(Validate(model));
  if (FormulationOf(model.kind) != Formulation::kPrimal) {
    return absl::InvalidArgumentError(absl::StrCat(
        "EvaluatePrimal: model ", AsAbsl(ModelName(model.kind)),
        " is solved in the dual; use EvaluateDual"));
  }
  DML_RETURN_IF_ERROR(
      internal::CheckIterateInputs("EvaluatePrimal", data, model, w, /*allow_empty=*/false));
  switch (model.kind) {
    case ModelKind::kLasso: return Certify<LassoObjective>(data, model, w, per_coordinate);
    case ModelKind::kElasticNet:
      return Certify<ElasticNetObjective>(data, model, w, per_coordinate);
    case ModelKind::kLogisticL1:
      return Certify<LogisticL1Objective>(data, model, w, per_coordinate);
    default: break;
  }
  return absl::InvalidArgumentError("EvaluatePrimal: not a primal model");
}

absl::StatusOr<Certificate> CertifyPrimalFromSums(const ModelSpec& model,
                                                  const std::vector<float>& y,
                                                  const std::vector<double>& w, double loss_sum,
                                                  const std::vector<double>& grad,
                                                  const std::vector<double>& derivative) {
  DML_RETURN_IF_ERROR(Validate(model));
  if (model.kind != ModelKind::kLasso && model.kind != ModelKind::kLogisticL1) {
    return absl::InvalidArgumentError(absl::StrCat("CertifyPrimalFromSums: model ",
                                                   AsAbsl(ModelName(model.kind)),
                                                   " is not lasso or L1-logistic"));
  }
  if (y.empty() || grad.size() != w.size() || derivative.size() != y.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CertifyPrimalFromSums: ", y.size(), " labels, ", derivative.size(), " derivatives, ",
        w.size(), " weights, ", grad.size(), " gradient entries"));
  }
  for (std::size_t j = 0; j < w.size(); ++j) {
    if (!std::isfinite(w[j])) {
      return absl::InvalidArgumentError(
          absl::StrCat("CertifyPrimalFromSums: weight ", j, " is not finite"));
    }
  }
  if (model.kind == ModelKind::kLogisticL1) {
    for (std::size_t i = 0; i < y.size(); ++i) {
      if (y[i] != 1.0f && y[i] != -1.0f) {
        return absl::InvalidArgumentError(absl::StrCat(
            "CertifyPrimalFromSums: label of example ", i, " is ", y[i], ", not +1 or -1"));
      }
    }
  }
  return model.kind == ModelKind::kLasso
             ? CertifyFromSums(ObjectiveFor<LassoObjective>(model, y, w), y, w, loss_sum, grad,
                               derivative, false)
             : CertifyFromSums(ObjectiveFor<LogisticL1Objective>(model, y, w), y, w, loss_sum,
                               grad, derivative, false);
}

absl::StatusOr<double> L1LambdaMax(const Dataset& data, ModelKind kind) {
  if (kind != ModelKind::kLasso && kind != ModelKind::kElasticNet &&
      kind != ModelKind::kLogisticL1) {
    return absl::InvalidArgumentError(absl::StrCat("L1LambdaMax: model ",
                                                   AsAbsl(ModelName(kind)), " has no L1 part"));
  }
  const int64_t n = data.x.rows();
  if (n == 0) return absl::InvalidArgumentError("L1LambdaMax: no examples");
  // f'(0) per example: -y for the squared loss, -y/2 for the logistic loss
  // (its derivative -y / (1 + exp(y v)) at v = 0).
  const double slope = kind == ModelKind::kLogisticL1 ? 0.5 : 1.0;
  std::vector<double> g(static_cast<std::size_t>(data.x.cols()), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    const double yi = data.y[static_cast<std::size_t>(i)];
    if (!std::isfinite(yi)) {
      return absl::InvalidArgumentError(absl::StrCat("L1LambdaMax: label of example ", i,
                                                     " is not finite"));
    }
    const SparseView r = data.x.outer(i);
    for (std::size_t k = 0; k < r.size; ++k) g[r.index[k]] += r.value[k] * yi * slope;
  }
  double m = 0.0;
  for (double x : g) m = std::max(m, std::abs(x));
  return m / static_cast<double>(n);
}

}  // namespace dml
