// The certificate of a primal iterate for solvers that keep no dual (see
// IterateShare in evaluate.hpp): one pass over a partition's rows gives its
// loss, its share of A^T loss'(A w) and, for the dual models, the dual
// objective's sums at the dual point of the margins; the sums of all
// partitions make P, D and the gap. Double accumulation throughout.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "dml/objective/elastic_net.hpp"
#include "dml/objective/evaluate.hpp"
#include "dml/objective/hinge_svm.hpp"
#include "dml/objective/internal/iterate_checks.hpp"
#include "dml/objective/lasso.hpp"
#include "dml/objective/logistic_l1.hpp"
#include "dml/objective/logistic_l2.hpp"
#include "dml/objective/newton_certificate.hpp"
#include "dml/objective/losses.hpp"
#include "dml/objective/ridge.hpp"
#include "dml/objective/squared_hinge_svm.hpp"
#include "dml/util/status.hpp"

namespace dml {
namespace {

constexpr int kHeader = 3 + kIterateDualScaleCount;  // rows, loss, zero loss, negconj[]

// The loss of each dual model, for its derivative in the margin.
template <typename Obj> struct LossOf;
template <> struct LossOf<RidgeObjective> { using type = loss::Squared; };
template <> struct LossOf<LogisticL2Objective> { using type = loss::Logistic; };
template <> struct LossOf<HingeSvmObjective> { using type = loss::Hinge; };
template <> struct LossOf<SquaredHingeSvmObjective> { using type = loss::SquaredHinge; };

// keep: also the rows' loss' and loss'' and the share's curvature.
template <typename Obj>
void DualShare(const Dataset& part, const std::vector<double>& w, IterateShare& s,
               NewtonRows* keep) {
  using Loss = typename LossOf<Obj>::type;
  if (keep) {
    keep->derivative.assign(part.x.rows(), 0.0);
    keep->second.assign(part.x.rows(), 0.0);
    s.curvature.assign(w.size(), 0.0);
  }
  for (int64_t i = 0; i < part.x.rows(); ++i) {
    const SparseView r = part.x.outer(i);
    double z = 0.0;
    for (std::size_t k = 0; k < r.size; ++k) z += static_cast<double>(r.value[k]) * w[r.index[k]];
    const double y = part.y[i];
    s.loss_sum += Obj::Loss(y, z);
    s.zero_loss_sum += Obj::Loss(y, 0.0);
    const double g = Loss::Derivative(y, z);
    for (int k = 0; k < kIterateDualScaleCount; ++k) {
      s.negconj_sums[k] += Obj::NegConj(y, -kIterateDualScales[k] * g);
    }
    if (keep) {
      const double h = Loss::Second(y, z);
      keep->derivative[i] = g;
      keep->second[i] = h;
      if (h != 0.0) {
        for (std::size_t k = 0; k < r.size; ++k) {
          const double v = r.value[k];
          s.curvature[r.index[k]] += h * v * v;
        }
      }
    }
    if (g == 0.0) continue;
    for (std::size_t k = 0; k < r.size; ++k) s.grad[r.index[k]] += g * r.value[k];
  }
}

template <typename Obj>
void PrimalShare(const Dataset& part, const std::vector<double>& w, IterateShare& s) {
  for (int64_t i = 0; i < part.x.rows(); ++i) {
    const SparseView r = part.x.outer(i);
    double z = 0.0;
    for (std::size_t k = 0; k < r.size; ++k) z += static_cast<double>(r.value[k]) * w[r.index[k]];
    double value, derivative, value0, derivative0;
    Obj::ValueAndDerivative(part.y[i], z, &value, &derivative);
    Obj::ValueAndDerivative(part.y[i], 0.0, &value0, &derivative0);
    s.loss_sum += value;
    s.zero_loss_sum += value0;
    if (derivative == 0.0) continue;
    for (std::size_t k = 0; k < r.size; ++k) s.grad[r.index[k]] += derivative * r.value[k];
  }
}

// EvaluatePrimal's gap, its bound B = max(P(0) / lambda, max |w_j|) from
// the partitions' sum of loss(y_i, 0).
template <typename Obj>
Certificate PrimalCertificate(const ModelSpec& model, const std::vector<double>& w,
                              const IterateShare& t) {
  const double inv_n = 1.0 / static_cast<double>(t.rows);
  double w_max = 0.0;
  for (double wj : w) w_max = std::max(w_max, std::abs(wj));
  Obj obj = Obj::Make(model, {}, w_max);
  obj.inv_n = inv_n;
  obj.bound = std::max(t.zero_loss_sum * inv_n / model.lambda, w_max);
  double penalty = 0.0, gap = 0.0;
  for (std::size_t j = 0; j < w.size(); ++j) {
    penalty += obj.Regularizer(w[j]);
    gap += obj.CoordinateGap(w[j], t.grad[j] * inv_n);
  }
  // The bounded-support gap alone: the scaled dual (EvaluatePrimal) needs
  // the total gradient's max before a second pass over every partition.
  Certificate c;
  c.primal = t.loss_sum * inv_n + penalty;
  c.gap = gap;
  c.separable_gap = gap;
  c.dual = c.primal - gap;
  return c;
}

Certificate DualCertificate(const ModelSpec& model, const std::vector<double>& w,
                            const IterateShare& t) {
  const double n = static_cast<double>(t.rows);
  double wsq = 0.0, gsq = 0.0;
  for (std::size_t j = 0; j < w.size(); ++j) {
    wsq += w[j] * w[j];
    gsq += t.grad[j] * t.grad[j];
  }
  Certificate c;
  c.primal = t.loss_sum / n + 0.5 * model.lambda * wsq;
  // ||w(s alpha)||^2 = s^2 ||A^T alpha||^2 / (lambda n)^2, A^T alpha = -grad.
  const double quad = gsq / (2.0 * model.lambda * n * n);
  double best = -std::numeric_limits<double>::infinity(), error = 0.0;
  const int64_t terms = t.rows + static_cast<int64_t>(w.size());
  for (int k = 0; k < kIterateDualScaleCount; ++k) {
    const double s = kIterateDualScales[k];
    const double v = t.negconj_sums[k] / n - s * s * quad;
    if (v > best) {
      best = v;
      error = DualRoundingBound(t.negconj_sums[k] / n, s * s * quad, terms);
    }
  }
  SetIterateDual(c, best, error);
  return c;
}

}  // namespace

absl::StatusOr<IterateShare> IterateShareOf(const Dataset& part, const ModelSpec& model,
                                            const std::vector<double>& w) {
  return IterateShareOf(part, model, w, nullptr);
}

absl::StatusOr<IterateShare> IterateShareOf(const Dataset& part, const ModelSpec& model,
                                            const std::vector<double>& w, NewtonRows* rows) {
  DML_RETURN_IF_ERROR(Validate(model));
  DML_RETURN_IF_ERROR(
      internal::CheckIterateInputs("IterateShareOf", part, model, w, /*allow_empty=*/true));
  IterateShare s;
  s.rows = part.x.rows();
  s.grad.assign(w.size(), 0.0);
  switch (model.kind) {
    case ModelKind::kRidge: DualShare<RidgeObjective>(part, w, s, rows); break;
    case ModelKind::kLogisticL2: DualShare<LogisticL2Objective>(part, w, s, rows); break;
    case ModelKind::kHingeSvm: DualShare<HingeSvmObjective>(part, w, s, rows); break;
    case ModelKind::kSquaredHingeSvm: DualShare<SquaredHingeSvmObjective>(part, w, s, rows); break;
    case ModelKind::kLasso: PrimalShare<LassoObjective>(part, w, s); break;
    case ModelKind::kElasticNet: PrimalShare<ElasticNetObjective>(part, w, s); break;
    case ModelKind::kLogisticL1: PrimalShare<LogisticL1Objective>(part, w, s); break;
  }
  return s;
}

absl::Status AddIterateShare(IterateShare& into, const IterateShare& from) {
  if (into.grad.empty()) into.grad.assign(from.grad.size(), 0.0);
  if (into.grad.size() != from.grad.size()) {
    return absl::InvalidArgumentError(absl::StrCat("AddIterateShare: gradients of ",
                                                   into.grad.size(), " and ", from.grad.size(),
                                                   " entries"));
  }
  if (into.curvature.size() != from.curvature.size()) {
    if (!into.curvature.empty() || into.rows > 0) {
      return absl::InvalidArgumentError(absl::StrCat("AddIterateShare: curvatures of ",
                                                     into.curvature.size(), " and ",
                                                     from.curvature.size(), " entries"));
    }
    into.curvature.assign(from.curvature.size(), 0.0);
  }
  for (std::size_t j = 0; j < into.curvature.size(); ++j) into.curvature[j] += from.curvature[j];
  into.rows += from.rows;
  into.loss_sum += from.loss_sum;
  into.zero_loss_sum += from.zero_loss_sum;
  for (int k = 0; k < kIterateDualScaleCount; ++k) into.negconj_sums[k] += from.negconj_sums[k];
  for (std::size_t j = 0; j < into.grad.size(); ++j) into.grad[j] += from.grad[j];
  return absl::OkStatus();
}

absl::StatusOr<Certificate> CertifyIterate(const ModelSpec& model, const std::vector<double>& w,
                                           const IterateShare& total) {
  DML_RETURN_IF_ERROR(Validate(model));
  if (total.rows <= 0) return absl::InvalidArgumentError("CertifyIterate: no rows");
  if (total.grad.size() != w.size()) {
    return absl::InvalidArgumentError(absl::StrCat("CertifyIterate: gradient of ",
                                                   total.grad.size(), " entries for ", w.size(),
                                                   " weights"));
  }
  switch (model.kind) {
    case ModelKind::kLasso: return PrimalCertificate<LassoObjective>(model, w, total);
    case ModelKind::kElasticNet: return PrimalCertificate<ElasticNetObjective>(model, w, total);
    case ModelKind::kLogisticL1: return PrimalCertificate<LogisticL1Objective>(model, w, total);
    default: return DualCertificate(model, w, total);
  }
}

std::vector<double> PackIterateShare(const IterateShare& s) {
  std::vector<double> v;
  v.reserve(kHeader + s.grad.size() + s.curvature.size());
  v.push_back(static_cast<double>(s.rows));
  v.push_back(s.loss_sum);
  v.push_back(s.zero_loss_sum);
  v.insert(v.end(), std::begin(s.negconj_sums), std::end(s.negconj_sums));
  v.insert(v.end(), s.grad.begin(), s.grad.end());
  v.insert(v.end(), s.curvature.begin(), s.curvature.end());
  return v;
}

absl::StatusOr<IterateShare> UnpackIterateShare(const std::vector<double>& v, int64_t d) {
  const int64_t size = static_cast<int64_t>(v.size());
  if (size != kHeader + d && size != kHeader + 2 * d) {
    return absl::InvalidArgumentError(absl::StrCat("iterate share of ", v.size(),
                                                   " values; expected ", kHeader, " + ", d,
                                                   " or ", kHeader, " + 2 * ", d));
  }
  if (!(v[0] >= 0 && v[0] <= 9e15) || v[0] != std::floor(v[0])) {
    return absl::InvalidArgumentError(absl::StrCat("iterate share: row count ", v[0]));
  }
  for (std::size_t k = 1; k < v.size(); ++k) {
    if (!std::isfinite(v[k])) {
      return absl::InvalidArgumentError(absl::StrCat("iterate share: value ", k, " is ", v[k]));
    }
  }
  IterateShare s;
  s.rows = static_cast<int64_t>(v[0]);
  s.loss_sum = v[1];
  s.zero_loss_sum = v[2];
  std::copy(v.begin() + 3, v.begin() + kHeader, std::begin(s.negconj_sums));
  s.grad.assign(v.begin() + kHeader, v.begin() + kHeader + d);
  s.curvature.assign(v.begin() + kHeader + d, v.end());
  return s;
}

}  // namespace dml
