#pragma once
// Problems shared by the TPA-SCD tests: one per model, small enough for
// sequential SCD to solve to a relative gap of 1e-9 in well under a second.

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <memory>
#include <utility>
#include <cstdint>
#include <vector>

#include "dml/data/synthetic.hpp"
#include "dml/objective/evaluate.hpp"
#include "dml/objective/model.hpp"
#include "dml/solver/cocoa_local.hpp"
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

/// The model of `kind` the tests train on `data`: lambda 1e-3 for the dual
/// models; a tenth of lambda_max for the primal ones, so that their optimum
/// is neither w = 0 (certified before any step) nor dense.
inline dml::ModelSpec Spec(dml::ModelKind kind, const dml::Dataset& data) {
  dml::ModelSpec m;
  m.kind = kind;
  m.l1_ratio = kind == dml::ModelKind::kElasticNet ? 0.5 : 1.0;
  m.lambda = 1e-3;
  if (dml::FormulationOf(kind) == dml::Formulation::kPrimal) {
    auto lambda_max = dml::L1LambdaMax(data, kind);
    BOOST_REQUIRE_MESSAGE(lambda_max.ok(), lambda_max.status().ToString());
    m.lambda = 0.1 * *lambda_max / m.l1_ratio;
  }
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

/// max_i |got_i - want_i| and max_i |want_i| (got is want to rounding when
/// the first is a small multiple of the second).
inline std::pair<double, double> MaxDiffAndNorm(const std::vector<double>& want,
                                                const std::vector<double>& got) {
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(want[i] - got[i]));
    norm = std::max(norm, std::abs(want[i]));
  }
  return {err, norm};
}

}  // namespace tpa_testing

namespace tpa_testing {

/// CoCoA+ (adding: gamma 1, sigma' K) over K row blocks of `data` with the
/// local solvers `make` returns, `rounds` rounds of one local epoch each;
/// returns the final w (shared vector) and the blocks' alphas in row order.
template <class Make>
std::pair<std::vector<double>, std::vector<double>> RunCocoa(const dml::Dataset& data,
                                                             const dml::ModelSpec& spec, int k,
                                                             int rounds, Make make) {
  const int64_t n = data.x.rows();
  std::vector<std::unique_ptr<dml::LocalSolver>> solvers;
  std::vector<int64_t> sizes;
  for (int b = 0; b < k; ++b) {
    const int64_t begin = n * b / k, end = n * (b + 1) / k;
    dml::LocalBlock block;
    block.rows = data.x.SliceOuter(begin, end);
    block.y.assign(data.y.begin() + begin, data.y.begin() + end);
    block.n_global = n;
    auto s = make(std::move(block), static_cast<uint64_t>(b + 1));
    BOOST_REQUIRE_MESSAGE(s.ok(), s.status().ToString());
    solvers.push_back(*std::move(s));
    sizes.push_back(end - begin);
  }
  std::vector<double> w(static_cast<std::size_t>(data.x.cols()), 0.0);
  for (int r = 0; r < rounds; ++r) {
    std::vector<double> sum(w.size(), 0.0);
    for (int b = 0; b < k; ++b) {
      auto up = solvers[b]->Solve(w, static_cast<double>(k), 1.0, sizes[b]);
      BOOST_REQUIRE_MESSAGE(up.ok(), up.status().ToString());
      for (std::size_t j = 0; j < w.size(); ++j) sum[j] += up->delta_shared[j];
    }
    for (std::size_t j = 0; j < w.size(); ++j) w[j] += sum[j];
  }
  std::vector<double> alpha;
  for (auto& s : solvers) {
    const std::vector<double>& c = s->coordinates();
    alpha.insert(alpha.end(), c.begin(), c.end());
  }
  return {w, alpha};
}

}  // namespace tpa_testing

namespace tpa_testing {

/// Rounds of RunCocoaPrimal over 3 blocks that reach a relative gap of 1e-6
/// on Problem's primal models with exact (sequential) local solvers.
constexpr int kPrimalCocoaRounds = 150;

/// CoCoA+ (adding) for a primal model over K column blocks of `data` with
/// the local solvers `make` returns, `rounds` rounds of one local epoch
/// each; returns the final v (shared vector) and the blocks' w in column
/// order.
template <class Make>
std::pair<std::vector<double>, std::vector<double>> RunCocoaPrimal(const dml::Dataset& data,
                                                                   int k, int rounds, Make make) {
  const int64_t n = data.x.rows(), d = data.x.cols();
  const dml::CscMatrix a = data.x.Convert();
  std::vector<std::unique_ptr<dml::LocalSolver>> solvers;
  std::vector<int64_t> sizes;
  for (int b = 0; b < k; ++b) {
    const int64_t begin = d * b / k, end = d * (b + 1) / k;
    dml::LocalBlock block;
    block.cols = a.SliceOuter(begin, end);
    block.y = data.y;
    block.n_global = n;
    block.loss_row_begin = n * b / k;
    block.loss_row_end = n * (b + 1) / k;
    auto s = make(std::move(block), static_cast<uint64_t>(b + 1));
    BOOST_REQUIRE_MESSAGE(s.ok(), s.status().ToString());
    solvers.push_back(*std::move(s));
    sizes.push_back(end - begin);
  }
  std::vector<double> v(static_cast<std::size_t>(n), 0.0);
  for (int r = 0; r < rounds; ++r) {
    std::vector<double> sum(v.size(), 0.0);
    for (int b = 0; b < k; ++b) {
      auto up = solvers[b]->Solve(v, static_cast<double>(k), 1.0, sizes[b]);
      BOOST_REQUIRE_MESSAGE(up.ok(), up.status().ToString());
      for (std::size_t i = 0; i < v.size(); ++i) sum[i] += up->delta_shared[i];
    }
    for (std::size_t i = 0; i < v.size(); ++i) v[i] += sum[i];
  }
  std::vector<double> w;
  for (auto& s : solvers) {
    const std::vector<double>& c = s->coordinates();
    w.insert(w.end(), c.begin(), c.end());
  }
  return {v, w};
}

}  // namespace tpa_testing
