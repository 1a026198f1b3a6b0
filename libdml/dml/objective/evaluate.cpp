#include "dml/objective/evaluate.hpp"

#include "absl/strings/str_cat.h"
#include "dml/objective/losses.hpp"
#include "dml/objective/regularizers.hpp"

namespace dml {
namespace {

template <typename Loss>
double MeanLoss(const Dataset& data, const std::vector<double>& w) {
  double sum = 0.0;
  for (int64_t i = 0; i < data.x.rows(); ++i) {
    const SparseView r = data.x.outer(i);
    double z = 0.0;
    for (std::size_t k = 0; k < r.size; ++k) z += r.value[k] * w[r.index[k]];
    sum += Loss::Value(data.y[i], z);
  }
  return data.x.rows() > 0 ? sum / static_cast<double>(data.x.rows()) : 0.0;
}

}  // namespace

absl::StatusOr<double> PrimalValue(const Dataset& data, const ModelSpec& model,
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
  double loss = 0.0;
  double eta = 0.0;  // L2
  switch (model.kind) {
    case ModelKind::kRidge: loss = MeanLoss<loss::Squared>(data, w); break;
    case ModelKind::kLasso: loss = MeanLoss<loss::Squared>(data, w); eta = 1.0; break;
    case ModelKind::kElasticNet:
      loss = MeanLoss<loss::Squared>(data, w);
      eta = model.l1_ratio;
      break;
    case ModelKind::kLogisticL2: loss = MeanLoss<loss::Logistic>(data, w); break;
    case ModelKind::kLogisticL1: loss = MeanLoss<loss::Logistic>(data, w); eta = 1.0; break;
    case ModelKind::kHingeSvm: loss = MeanLoss<loss::Hinge>(data, w); break;
    case ModelKind::kSquaredHingeSvm: loss = MeanLoss<loss::SquaredHinge>(data, w); break;
  }
  const reg::ElasticNet r{model.lambda, eta};
  double penalty = 0.0;
  for (double wj : w) penalty += r.Value(wj);
  return loss + penalty;
}

absl::StatusOr<Certificate> Evaluate(const Dataset& data, const ModelSpec& model,
                                     const std::vector<double>& w,
                                     const std::vector<double>& alpha, bool per_coordinate) {
  return FormulationOf(model.kind) == Formulation::kDual
             ? EvaluateDual(data, model, alpha, per_coordinate)
             : EvaluatePrimal(data, model, w, per_coordinate);
}

}  // namespace dml
