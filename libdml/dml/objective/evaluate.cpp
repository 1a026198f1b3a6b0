#include "dml/objective/evaluate.hpp"

#include <cmath>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "dml/objective/internal/iterate_checks.hpp"
#include "dml/objective/losses.hpp"
#include "dml/objective/regularizers.hpp"
#include "dml/util/status.hpp"

namespace dml {
namespace {

template <typename Loss>
double SumLoss(const Dataset& data, const std::vector<double>& w) {
  double sum = 0.0;
  for (int64_t i = 0; i < data.x.rows(); ++i) {
    const SparseView r = data.x.outer(i);
    double z = 0.0;
    for (std::size_t k = 0; k < r.size; ++k) z += r.value[k] * w[r.index[k]];
    sum += Loss::Value(data.y[i], z);
  }
  return sum;
}

double L1Ratio(const ModelSpec& model) {
  switch (model.kind) {
    case ModelKind::kLasso:
    case ModelKind::kLogisticL1: return 1.0;
    case ModelKind::kElasticNet: return model.l1_ratio;
    default: return 0.0;  // L2
  }
}

}  // namespace

absl::StatusOr<double> LossSum(const Dataset& data, const ModelSpec& model,
                               const std::vector<double>& w) {
  if (static_cast<int64_t>(w.size()) != data.x.cols()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model has ", w.size(), " weights but the data has ", data.x.cols(),
                     " features"));
  }
  if (static_cast<int64_t>(data.y.size()) != data.x.rows()) {
    return absl::InvalidArgumentError(
        absl::StrCat("data has ", data.x.rows(), " rows but ", data.y.size(), " labels"));
  }
  switch (model.kind) {
    case ModelKind::kRidge:
    case ModelKind::kLasso:
    case ModelKind::kElasticNet: return SumLoss<loss::Squared>(data, w);
    case ModelKind::kLogisticL2:
    case ModelKind::kLogisticL1: return SumLoss<loss::Logistic>(data, w);
    case ModelKind::kHingeSvm: return SumLoss<loss::Hinge>(data, w);
    case ModelKind::kSquaredHingeSvm: return SumLoss<loss::SquaredHinge>(data, w);
  }
  return absl::InvalidArgumentError("LossSum: unknown model");
}

double RegularizerValue(const ModelSpec& model, const std::vector<double>& w) {
  const reg::ElasticNet r{model.lambda, L1Ratio(model)};
  double penalty = 0.0;
  for (double wj : w) penalty += r.Value(wj);
  return penalty;
}

absl::StatusOr<double> PrimalValue(const Dataset& data, const ModelSpec& model,
                                   const std::vector<double>& w) {
  absl::StatusOr<double> loss = LossSum(data, model, w);
  if (!loss.ok()) return loss.status();
  const double n = static_cast<double>(data.x.rows());
  return (data.x.rows() > 0 ? *loss / n : 0.0) + RegularizerValue(model, w);
}

namespace internal {

absl::Status CheckIterateInputs(std::string_view who, const Dataset& data, const ModelSpec& model,
                                const std::vector<double>& w, bool allow_empty) {
  const absl::string_view name(who.data(), who.size());
  if (static_cast<int64_t>(w.size()) != data.x.cols()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": model has ", w.size(),
                                                   " weights but the data has ", data.x.cols(),
                                                   " features"));
  }
  if (static_cast<int64_t>(data.y.size()) != data.x.rows()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": data has ", data.x.rows(),
                                                   " rows but ", data.y.size(), " labels"));
  }
  if (!allow_empty && data.x.rows() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": data has no examples"));
  }
  for (std::size_t j = 0; j < w.size(); ++j) {
    if (!std::isfinite(w[j])) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": weight of feature ", j, " is not finite"));
    }
  }
  const bool classification = TaskOf(model.kind) == Task::kClassification;
  for (std::size_t i = 0; i < data.y.size(); ++i) {
    const float y = data.y[i];
    if (!std::isfinite(y) || (classification && y != 1.0f && y != -1.0f)) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": label of example ", i, " is ", y, "; model ", AsAbsl(ModelName(model.kind)),
          classification ? " needs labels in {-1,+1}" : " needs finite labels"));
    }
  }
  return absl::OkStatus();
}

}  // namespace internal

absl::StatusOr<Certificate> Evaluate(const Dataset& data, const ModelSpec& model,
                                     const std::vector<double>& w,
                                     const std::vector<double>& alpha, bool per_coordinate) {
  return FormulationOf(model.kind) == Formulation::kDual
             ? EvaluateDual(data, model, alpha, per_coordinate)
             : EvaluatePrimal(data, model, w, per_coordinate);
}

}  // namespace dml
