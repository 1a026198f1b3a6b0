#include "dml/objective/evaluate.hpp"

#include "absl/strings/str_cat.h"
#include "dml/objective/losses.hpp"
#include "dml/objective/regularizers.hpp"

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

absl::StatusOr<Certificate> Evaluate(const Dataset& data, const ModelSpec& model,
                                     const std::vector<double>& w,
                                     const std::vector<double>& alpha, bool per_coordinate) {
  return FormulationOf(model.kind) == Formulation::kDual
             ? EvaluateDual(data, model, alpha, per_coordinate)
             : EvaluatePrimal(data, model, w, per_coordinate);
}

}  // namespace dml
