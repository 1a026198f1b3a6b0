#include "dml/objective/model.hpp"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "dml/util/status.hpp"

namespace dml {

Formulation FormulationOf(ModelKind kind) {
  switch (kind) {
    case ModelKind::kLasso:
    case ModelKind::kElasticNet:
    case ModelKind::kLogisticL1:
      return Formulation::kPrimal;
    default:
      return Formulation::kDual;
  }
}

Task TaskOf(ModelKind kind) {
  switch (kind) {
    case ModelKind::kRidge:
    case ModelKind::kLasso:
    case ModelKind::kElasticNet:
      return Task::kRegression;
    default:
      return Task::kClassification;
  }
}

std::string_view ModelName(ModelKind kind) {
  switch (kind) {
    case ModelKind::kRidge: return "ridge";
    case ModelKind::kLasso: return "lasso";
    case ModelKind::kElasticNet: return "elastic-net";
    case ModelKind::kLogisticL2: return "logistic";
    case ModelKind::kLogisticL1: return "logistic-l1";
    case ModelKind::kHingeSvm: return "svm";
    case ModelKind::kSquaredHingeSvm: return "svm-squared";
  }
  return "unknown";
}

absl::StatusOr<ModelKind> ParseModelKind(std::string_view name) {
  struct Alias {
    std::string_view name;
    ModelKind kind;
  };
  static constexpr Alias kAliases[] = {
      {"ridge", ModelKind::kRidge},          {"lasso", ModelKind::kLasso},
      {"elastic-net", ModelKind::kElasticNet}, {"enet", ModelKind::kElasticNet},
      {"logistic", ModelKind::kLogisticL2},  {"l2-logistic", ModelKind::kLogisticL2},
      {"logistic-l1", ModelKind::kLogisticL1}, {"l1-logistic", ModelKind::kLogisticL1},
      {"svm", ModelKind::kHingeSvm},         {"hinge", ModelKind::kHingeSvm},
      {"svm-squared", ModelKind::kSquaredHingeSvm},
      {"squared-hinge", ModelKind::kSquaredHingeSvm},
  };
  for (const Alias& a : kAliases) {
    if (a.name == name) return a.kind;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown model \"", AsAbsl(name),
      "\"; expected one of ridge, lasso, elastic-net, logistic, logistic-l1, svm, svm-squared"));
}

absl::Status Validate(const ModelSpec& spec) {
  const int kind = static_cast<int>(spec.kind);
  if (kind < static_cast<int>(ModelKind::kRidge) || kind > static_cast<int>(ModelKind::kSquaredHingeSvm)) {
    return absl::InvalidArgumentError(absl::StrCat("model kind ", kind, " is not a ModelKind"));
  }
  if (!(spec.lambda > 0.0) || !std::isfinite(spec.lambda)) {
    return absl::InvalidArgumentError(
        absl::StrCat("lambda must be positive and finite, got ", spec.lambda));
  }
  // A subnormal lambda (1e-320) trained 1000 iterations to a gap of 1e283:
  // w's scale 1/lambda leaves double's range.
  if (spec.lambda < std::numeric_limits<double>::min()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lambda ", spec.lambda, " is below the smallest normal double (",
        std::numeric_limits<double>::min(), "): the weights' scale 1/lambda overflows"));
  }
  if (spec.kind == ModelKind::kElasticNet && !(spec.l1_ratio > 0.0 && spec.l1_ratio <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("l1_ratio must be in (0, 1], got ", spec.l1_ratio));
  }
  return absl::OkStatus();
}

}  // namespace dml
