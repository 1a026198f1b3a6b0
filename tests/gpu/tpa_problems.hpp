#pragma once
// Problems shared by the TPA-SCD tests: one per model, small enough for
// sequential SCD to solve to a relative gap of 1e-9 in well under a second.

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "dml/data/synthetic.hpp"
#include "dml/objective/model.hpp"
#include "dml/solver/solver.hpp"

namespace tpa_testing {

inline const std::vector<dml::ModelKind>& AllModels() {
  static const std::vector<dml::ModelKind> kinds = {
      dml::ModelKind::kRidge,      dml::ModelKind::kLasso,      dml::ModelKind::kElasticNet,
      dml::ModelKind::kLogisticL2, dml::ModelKind::kLogisticL1, dml::ModelKind::kHingeSvm,
      dml::ModelKind::kSquaredHingeSvm};
  return kinds;
}

inline dml::Dataset Problem(dml::ModelKind kind, int64_t rows = 3000, int64_t cols = 300) {
  dml::SyntheticOptions o;
  o.rows = rows;
  o.cols = cols;
  o.nnz_per_row = 25;
  o.noise = 0.3;
  o.model_density = 0.3;
  o.seed = 7;
  o.task = dml::TaskOf(kind);
  auto d = dml::GenerateSynthetic(o);
  BOOST_REQUIRE_MESSAGE(d.ok(), d.status().ToString());
  return std::move(d->data);
}

inline dml::ModelSpec Spec(dml::ModelKind kind) {
  dml::ModelSpec m;
  m.kind = kind;
  m.lambda = dml::FormulationOf(kind) == dml::Formulation::kPrimal ? 2e-3 : 1e-3;
  m.l1_ratio = kind == dml::ModelKind::kElasticNet ? 0.5 : 1.0;
  return m;
}

inline dml::SolverOptions Tight(dml::SolverKind kind, uint64_t seed = 1) {
  dml::SolverOptions o;
  o.kind = kind;
  o.seed = seed;
  o.stop.gap_rel = 1e-9;
  o.stop.max_epochs = 20000;
  o.stop.max_seconds = 120;
  return o;
}

inline double RelDiff(double a, double b) { return std::abs(a - b) / std::max(1e-300, std::abs(b)); }

}  // namespace tpa_testing
