// Exact certificates for the dual (SDCA) models: ridge, L2-logistic, hinge and
// squared-hinge SVM. One pass builds w = A^T alpha / (lambda n), a second
// computes the margins; everything accumulates in double.
//
// The gap is accumulated from the per-coordinate gaps
//   gap_i = loss(y_i, z_i) + loss*(-alpha_i) + alpha_i z_i >= 0
// (written by each objective without cancellation), which is the identity
//   P(w(alpha)) - D(alpha) = (1/n) sum_i gap_i,
// because (1/n) sum_i alpha_i z_i = lambda ||w||^2. The dual is reported as
// primal - gap, so gap == primal - dual and gap >= 0 hold to the last bit.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "dml/objective/evaluate.hpp"
#include "dml/objective/hinge_svm.hpp"
#include "dml/objective/logistic_l2.hpp"
#include "dml/objective/ridge.hpp"
#include "dml/objective/squared_hinge_svm.hpp"
#include "dml/util/status.hpp"

namespace dml {
namespace {

template <typename Obj>
absl::StatusOr<Certificate> Certify(const Dataset& data, const ModelSpec& model,
                                    const std::vector<double>& alpha, bool per_coordinate) {
  const int64_t n = data.x.rows();
  for (int64_t i = 0; i < n; ++i) {
    if (!Obj::InDomain(data.y[i], alpha[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "alpha[", i, "] = ", alpha[i], " is outside the dual domain of ",
          AsAbsl(ModelName(model.kind)), " (label ", data.y[i], ")"));
    }
  }
  const std::vector<double> w = PrimalFromDual(data.x, alpha, model.lambda);
  Certificate c;
  if (per_coordinate) c.coordinate_gaps.resize(static_cast<std::size_t>(n));
  const double inv_n = n > 0 ? 1.0 / static_cast<double>(n) : 0.0;
  double loss = 0.0;
  double gap = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const SparseView r = data.x.outer(i);
    double z = 0.0;
    for (std::size_t k = 0; k < r.size; ++k) z += static_cast<double>(r.value[k]) * w[r.index[k]];
    const double y = data.y[i];
    loss += Obj::Loss(y, z);
    const double gi = Obj::CoordinateGap(y, alpha[i], z);
    gap += gi;
    if (per_coordinate) c.coordinate_gaps[i] = gi * inv_n;
  }
  double wsq = 0.0;
  for (double wj : w) wsq += wj * wj;
  c.primal = loss * inv_n + 0.5 * model.lambda * wsq;
  c.gap = gap * inv_n;
  c.separable_gap = c.gap;
  c.dual = c.primal - c.gap;
  return c;
}

}  // namespace

absl::StatusOr<Certificate> EvaluateDual(const Dataset& data, const ModelSpec& model,
                                         const std::vector<double>& alpha, bool per_coordinate) {
  if (FormulationOf(model.kind) != Formulation::kDual) {
    return absl::InvalidArgumentError(absl::StrCat(
        "EvaluateDual needs a dual model (ridge, logistic, svm, svm-squared); got ",
        AsAbsl(ModelName(model.kind))));
  }
  DML_RETURN_IF_ERROR(Validate(model));
  const int64_t n = data.x.rows();
  if (static_cast<int64_t>(data.y.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("data has ", n, " rows but ", data.y.size(), " labels"));
  }
  if (static_cast<int64_t>(alpha.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("alpha has ", alpha.size(), " entries but the data has ", n, " examples"));
  }
  if (TaskOf(model.kind) == Task::kClassification) {
    for (int64_t i = 0; i < n; ++i) {
      if (data.y[i] != 1.0f && data.y[i] != -1.0f) {
        return absl::InvalidArgumentError(absl::StrCat(
            "model ", AsAbsl(ModelName(model.kind)), " needs labels in {-1,+1}; example ", i,
            " has label ", data.y[i]));
      }
    }
  }
  switch (model.kind) {
    case ModelKind::kRidge: return Certify<RidgeObjective>(data, model, alpha, per_coordinate);
    case ModelKind::kLogisticL2:
      return Certify<LogisticL2Objective>(data, model, alpha, per_coordinate);
    case ModelKind::kHingeSvm:
      return Certify<HingeSvmObjective>(data, model, alpha, per_coordinate);
    case ModelKind::kSquaredHingeSvm:
      return Certify<SquaredHingeSvmObjective>(data, model, alpha, per_coordinate);
    default: break;
  }
  return absl::InvalidArgumentError("not a dual model");
}

std::vector<double> PrimalFromDual(const CsrMatrix& x, const std::vector<double>& alpha,
                                   double lambda) {
  std::vector<double> w(static_cast<std::size_t>(x.cols()), 0.0);
  const int64_t n = x.rows();
  if (n == 0 || static_cast<int64_t>(alpha.size()) != n) return w;  // callers check sizes
  const int64_t* off = x.offsets().data();
  const uint32_t* idx = x.indices().data();
  const float* val = x.values().data();
  for (int64_t i = 0; i < n; ++i) {
    const double a = alpha[i];
    if (a == 0.0) continue;
    for (int64_t k = off[i]; k < off[i + 1]; ++k) w[idx[k]] += a * static_cast<double>(val[k]);
  }
  const double scale = 1.0 / (lambda * static_cast<double>(n));
  for (double& wj : w) wj *= scale;
  return w;
}

}  // namespace dml
