// The Newton-refined certificate of newton_certificate.hpp: CG on the
// Hessian of P at w, then the dual at alpha + t loss''.(A q). Double
// accumulation throughout.
#include "dml/objective/newton_certificate.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "dml/objective/logistic_conj.hpp"
#include "dml/objective/logistic_l2.hpp"
#include "dml/objective/ridge.hpp"
#include "dml/objective/squared_hinge_svm.hpp"
#include "dml/util/status.hpp"

namespace dml {
namespace {

constexpr double kLastStep = kNewtonDualSteps[kNewtonDualStepCount - 1];

absl::Status Mismatch(absl::string_view who, absl::string_view what, std::size_t got,
                      std::size_t want) {
  return absl::InvalidArgumentError(
      absl::StrCat(who, ": ", what, " of ", got, " entries; expected ", want));
}

double Dot(const SparseView& r, const std::vector<double>& v) {
  double s = 0.0;
  for (std::size_t k = 0; k < r.size; ++k) s += static_cast<double>(r.value[k]) * v[r.index[k]];
  return s;
}

// delta shortened so that b + kLastStep * delta y stays in [lo, hi] (b =
// alpha y), with a margin for rounding.
double Feasible(double b, double db, double lo, double hi) {
  const double room = db > 0.0 ? hi - b : b - lo;
  if (!(room > 0.0)) return 0.0;
  const double reach = std::abs(db) * kLastStep;
  return reach <= room * (1.0 - 1e-9) ? 1.0 : room * (1.0 - 1e-9) / reach;
}

// Rows [begin, end): delta_i = loss''_i xq(i), shortened to feasibility.
template <typename Obj, typename XQ>
void DualSteps(const Dataset& data, int64_t begin, int64_t end, const double* derivative,
               const double* second, XQ xq, double lo, double hi, NewtonDualShare& s) {
  // Logistic's sums over blocks of rows (AddLogisticNegConjSteps: its logs
  // as vectors), in row order as the others'.
  constexpr int64_t kBlock = 256;
  double alphas[kBlock], deltas[kBlock];
  for (int64_t block = begin; block < end; block += kBlock) {
    const int64_t block_end = std::min(end, block + kBlock);
    for (int64_t i = block; i < block_end; ++i) {
      const double y = data.y[i];
      const double alpha = -derivative[i];
      double delta = 0.0;
      const SparseView r = data.x.outer(i);
      if (second[i] != 0.0) {
        delta = second[i] * xq(i, r);
        delta = std::isfinite(delta) ? delta * Feasible(alpha * y, delta * y, lo, hi) : 0.0;
      }
      if constexpr (std::is_same_v<Obj, LogisticL2Objective>) {
        alphas[i - block] = alpha;
        deltas[i - block] = delta;
      } else {
        for (int k = 0; k < kNewtonDualStepCount; ++k) {
          s.negconj_sums[k] += Obj::NegConj(y, alpha + kNewtonDualSteps[k] * delta);
        }
      }
      if (delta == 0.0) continue;
      for (std::size_t k = 0; k < r.size; ++k) s.step[r.index[k]] += delta * r.value[k];
    }
    if constexpr (std::is_same_v<Obj, LogisticL2Objective>) {
      static_assert(kNewtonDualStepCount == 8);
      AddLogisticNegConjSteps(data.y.data() + block, alphas, deltas,
                              static_cast<std::size_t>(block_end - block), kNewtonDualSteps,
                              s.negconj_sums);
    }
  }
}

template <typename XQ>
absl::Status DualStepsOf(const Dataset& data, const ModelSpec& model, int64_t begin,
                         int64_t end, const double* derivative, const double* second, XQ xq,
                         NewtonDualShare& s) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  switch (model.kind) {
    case ModelKind::kRidge:
      DualSteps<RidgeObjective>(data, begin, end, derivative, second, xq, -kInf, kInf, s);
      break;
    case ModelKind::kLogisticL2:
      DualSteps<LogisticL2Objective>(data, begin, end, derivative, second, xq, 0.0, 1.0, s);
      break;
    case ModelKind::kSquaredHingeSvm:
      DualSteps<SquaredHingeSvmObjective>(data, begin, end, derivative, second, xq, 0.0, kInf, s);
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "Newton dual step: model ", std::string(ModelName(model.kind)), " is not refined"));
  }
  return absl::OkStatus();
}

}  // namespace

bool RefinesIterateCertificate(ModelKind kind) {
  return kind == ModelKind::kRidge || kind == ModelKind::kLogisticL2 ||
         kind == ModelKind::kSquaredHingeSvm;
}

absl::StatusOr<std::vector<double>> HessianProductShare(const Dataset& part,
                                                        const NewtonRows& rows,
                                                        const std::vector<double>& p) {
  const auto n = static_cast<std::size_t>(part.x.rows());
  if (rows.second.size() != n) return Mismatch("HessianProductShare", "rows", rows.second.size(), n);
  const auto d = static_cast<std::size_t>(part.x.cols());
  if (p.size() != d) return Mismatch("HessianProductShare", "vector", p.size(), d);
  std::vector<double> out(d, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    if (rows.second[i] == 0.0) continue;
    const SparseView r = part.x.outer(static_cast<int64_t>(i));
    const double s = rows.second[i] * Dot(r, p);
    for (std::size_t k = 0; k < r.size; ++k) out[r.index[k]] += s * r.value[k];
  }
  return out;
}

absl::StatusOr<NewtonDualShare> NewtonDualShareOf(const Dataset& part, const ModelSpec& model,
                                                  const NewtonRows& rows,
                                                  const std::vector<double>& q) {
  const auto n = static_cast<std::size_t>(part.x.rows());
  if (rows.second.size() != n || rows.derivative.size() != n) {
    return Mismatch("NewtonDualShareOf", "rows", rows.second.size(), n);
  }
  const auto d = static_cast<std::size_t>(part.x.cols());
  if (q.size() != d) return Mismatch("NewtonDualShareOf", "direction", q.size(), d);
  if (part.y.size() != n) return Mismatch("NewtonDualShareOf", "labels", part.y.size(), n);
  NewtonDualShare s;
  s.step.assign(d, 0.0);
  DML_RETURN_IF_ERROR(DualStepsOf(
      part, model, 0, static_cast<int64_t>(n), rows.derivative.data(), rows.second.data(),
      [&q](int64_t, const SparseView& r) { return Dot(r, q); }, s));
  return s;
}

absl::Status AddNewtonDualRows(const Dataset& data, const ModelSpec& model, int64_t begin,
                               int64_t end, const double* derivative, const double* second,
                               const double* xq, double xq_scale, NewtonDualShare& into) {
  if (begin < 0 || end > data.x.rows() || begin > end) {
    return absl::InvalidArgumentError(absl::StrCat("AddNewtonDualRows: rows [", begin, ", ", end,
                                                   ") of ", data.x.rows()));
  }
  if (into.step.size() != static_cast<std::size_t>(data.x.cols())) {
    return Mismatch("AddNewtonDualRows", "step", into.step.size(),
                    static_cast<std::size_t>(data.x.cols()));
  }
  return DualStepsOf(
      data, model, begin, end, derivative, second,
      [xq, xq_scale](int64_t i, const SparseView&) { return xq_scale * xq[i]; }, into);
}

Certificate RefineCertificate(const ModelSpec& model, int64_t rows,
                              const std::vector<double>& a_t_alpha, const Certificate& plain,
                              const NewtonDualShare& total) {
  // D(t) = (1/n) sum NegConj(alpha + t delta) - ||A^T alpha + t A^T delta||^2 / (2 lambda n^2)
  const double n = static_cast<double>(rows);
  const double scale = 1.0 / (2.0 * model.lambda * n * n);
  // plain's gap already covers its own rounding.
  double best = plain.dual, error = 0.0;
  if (a_t_alpha.size() == total.step.size() && rows > 0) {
    const std::size_t d = a_t_alpha.size();
    const int64_t terms = rows + static_cast<int64_t>(d);
    for (int k = 0; k < kNewtonDualStepCount; ++k) {
      const double t = kNewtonDualSteps[k];
      // The norm of the sum, not bb + 2 t bs + t^2 ss: far from the
      // optimum A^T alpha is large and A^T delta nearly cancels it (on
      // offset 1e4-scale columns the expanded form put D 1.8e-9 of P above
      // P*); summed directly the error is that of the small result.
      double quad = 0.0;
      for (std::size_t j = 0; j < d; ++j) {
        const double v = a_t_alpha[j] + t * total.step[j];
        quad += v * v;
      }
      quad *= scale;
      const double v = total.negconj_sums[k] / n - quad;
      if (std::isfinite(v) && v > best) {
        best = v;
        error = DualRoundingBound(total.negconj_sums[k] / n, quad, terms);
      }
    }
  }
  Certificate c = plain;
  SetIterateDual(c, best, error);
  return c;
}

absl::Status AddNewtonDualShare(NewtonDualShare& into, const NewtonDualShare& from) {
  if (into.step.empty()) into.step.assign(from.step.size(), 0.0);
  if (into.step.size() != from.step.size()) {
    return Mismatch("AddNewtonDualShare", "step", from.step.size(), into.step.size());
  }
  for (int k = 0; k < kNewtonDualStepCount; ++k) into.negconj_sums[k] += from.negconj_sums[k];
  for (std::size_t j = 0; j < into.step.size(); ++j) into.step[j] += from.step[j];
  return absl::OkStatus();
}

std::vector<double> PackNewtonDualShare(const NewtonDualShare& s) {
  std::vector<double> v(std::begin(s.negconj_sums), std::end(s.negconj_sums));
  v.insert(v.end(), s.step.begin(), s.step.end());
  return v;
}

absl::StatusOr<NewtonDualShare> UnpackNewtonDualShare(const std::vector<double>& v, int64_t d) {
  if (d < 0 || static_cast<int64_t>(v.size()) != kNewtonDualStepCount + d) {
    return absl::InvalidArgumentError(absl::StrCat("Newton dual share of ", v.size(),
                                                   " values; expected ", kNewtonDualStepCount,
                                                   " + ", d));
  }
  for (std::size_t k = 0; k < v.size(); ++k) {
    if (!std::isfinite(v[k])) {
      return absl::InvalidArgumentError(
          absl::StrCat("Newton dual share: value ", k, " is ", v[k]));
    }
  }
  NewtonDualShare s;
  std::copy(v.begin(), v.begin() + kNewtonDualStepCount, std::begin(s.negconj_sums));
  s.step.assign(v.begin() + kNewtonDualStepCount, v.end());
  return s;
}

absl::StatusOr<NewtonCertifier> NewtonCertifier::Start(const ModelSpec& model,
                                                       const std::vector<double>& w,
                                                       const IterateShare& total,
                                                       int max_iterations) {
  DML_RETURN_IF_ERROR(Validate(model));
  if (!RefinesIterateCertificate(model.kind)) {
    return absl::InvalidArgumentError(
        absl::StrCat("NewtonCertifier: model ", std::string(ModelName(model.kind)), " is not refined"));
  }
  if (max_iterations < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("NewtonCertifier: max_iterations ", max_iterations, " < 0"));
  }
  if (total.rows <= 0) return absl::InvalidArgumentError("NewtonCertifier: no rows");
  const std::size_t d = w.size();
  if (total.grad.size() != d) return Mismatch("NewtonCertifier", "gradient", total.grad.size(), d);
  if (total.curvature.size() != d) {
    return Mismatch("NewtonCertifier", "curvature", total.curvature.size(), d);
  }
  NewtonCertifier c;
  c.model_ = model;
  c.n_ = static_cast<double>(total.rows);
  c.max_iterations_ = max_iterations > 0 && d < static_cast<std::size_t>(kCgExactDims)
                          ? std::max(max_iterations, static_cast<int>(d) + 1)
                          : max_iterations;
  c.base_.resize(d);
  c.diag_.resize(d);
  c.x_.assign(d, 0.0);
  c.r_.resize(d);
  c.z_.resize(d);
  for (std::size_t j = 0; j < d; ++j) {
    c.base_[j] = -total.grad[j];
    c.diag_[j] = total.curvature[j] / c.n_ + model.lambda;
    c.r_[j] = total.grad[j] / c.n_ + model.lambda * w[j];  // grad P(w)
    c.z_[j] = c.r_[j] / c.diag_[j];
    c.rz_ += c.r_[j] * c.z_[j];
  }
  double penalty = 0.0;
  for (double wj : w) penalty += wj * wj;
  c.primal_ = total.loss_sum / c.n_ + 0.5 * model.lambda * penalty;
  c.p_ = c.z_;
  if (max_iterations == 0 || !(c.rz_ > 0.0)) {
    c.x_ = c.z_;
    c.done_ = true;
  }
  return c;
}

absl::Status NewtonCertifier::AddProduct(const std::vector<double>& sum) {
  if (done_) return absl::FailedPreconditionError("NewtonCertifier: the direction is final");
  if (sum.size() != p_.size()) return Mismatch("NewtonCertifier", "product", sum.size(), p_.size());
  std::vector<double> hp(sum.size());
  double php = 0.0;
  for (std::size_t j = 0; j < hp.size(); ++j) {
    if (!std::isfinite(sum[j])) {
      return absl::InvalidArgumentError(
          absl::StrCat("NewtonCertifier: product entry ", j, " is ", sum[j]));
    }
    hp[j] = sum[j] / n_ + model_.lambda * p_[j];
    php += p_[j] * hp[j];
  }
  ++products_;
  if (!(php > 0.0)) {  // H is positive definite: only rounding gets here
    done_ = true;
    if (products_ == 1) x_ = z_;
    return absl::OkStatus();
  }
  const double a = rz_ / php;
  double rz = 0.0;
  for (std::size_t j = 0; j < hp.size(); ++j) {
    x_[j] += a * p_[j];
    r_[j] -= a * hp[j];
    z_[j] = r_[j] / diag_[j];
    rz += r_[j] * z_[j];
  }
  // Stop on the gap the residual can still cost, r^T H^-1 r / 2 <=
  // ||r||^2 / (2 lambda) since H >= lambda I, not on the residual's size
  // against the first: on unscaled features the error left in H's flat
  // directions leaves a residual of lambda times it, and a rule relative
  // to the first residual stopped there with a gap ~3000 times P - P*
  // (tab 4601x57 logistic, at every distance from the optimum).
  double rr = 0.0;
  for (double v : r_) rr += v * v;
  if (products_ >= max_iterations_ || rr / (2.0 * model_.lambda) <= kCgGapShare * primal_) {
    done_ = true;
    return absl::OkStatus();
  }
  const double beta = rz / rz_;
  rz_ = rz;
  for (std::size_t j = 0; j < p_.size(); ++j) p_[j] = z_[j] + beta * p_[j];
  return absl::OkStatus();
}

absl::StatusOr<Certificate> NewtonCertifier::Finish(const Certificate& plain,
                                                    const NewtonDualShare& total) const {
  if (total.step.size() != base_.size()) {
    return Mismatch("NewtonCertifier", "dual step", total.step.size(), base_.size());
  }
  return RefineCertificate(model_, static_cast<int64_t>(n_), base_, plain, total);
}

absl::StatusOr<Certificate> CertifyIterateNewton(const Dataset& data, const ModelSpec& model,
                                                 const std::vector<double>& w,
                                                 int max_iterations) {
  if (!RefinesIterateCertificate(model.kind)) {
    DML_ASSIGN_OR_RETURN(IterateShare share, IterateShareOf(data, model, w));
    return CertifyIterate(model, w, share);
  }
  NewtonRows rows;
  DML_ASSIGN_OR_RETURN(IterateShare share, IterateShareOf(data, model, w, &rows));
  DML_ASSIGN_OR_RETURN(Certificate plain, CertifyIterate(model, w, share));
  DML_ASSIGN_OR_RETURN(NewtonCertifier cg, NewtonCertifier::Start(model, w, share, max_iterations));
  while (const std::vector<double>* p = cg.NeedsProduct()) {
    DML_ASSIGN_OR_RETURN(std::vector<double> hp, HessianProductShare(data, rows, *p));
    DML_RETURN_IF_ERROR(cg.AddProduct(hp));
  }
  DML_ASSIGN_OR_RETURN(NewtonDualShare dual, NewtonDualShareOf(data, model, rows, cg.Direction()));
  return cg.Finish(plain, dual);
}

}  // namespace dml
