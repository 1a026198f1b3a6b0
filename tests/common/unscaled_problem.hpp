#pragma once
// The ill-conditioned problem the SGD tests share: 2000 x 40 dense
// classification rows (label noise 0.5) whose features come in units
// spread over 4 decades (SyntheticOptions::scale_decades), so their mean
// squares span 8.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "dml/data/synthetic.hpp"
#include "dml/util/rng.hpp"

namespace dml::testing {

inline Dataset UnscaledProblem(int64_t cols = 40, double decades = 4.0,
                               Task task = Task::kClassification) {
  SyntheticOptions g;
  g.rows = 2000;
  g.cols = cols;
  g.nnz_per_row = cols;
  g.noise = 0.5;
  g.task = task;
  g.seed = 3;
  g.scale_decades = decades;
  auto gen = GenerateSynthetic(g);
  BOOST_REQUIRE_MESSAGE(gen.ok(), gen.status().ToString());
  return std::move(gen->data);
}

// Dense classification rows as unscaled tabular data has them (569 x 30
// is the size of a well-known diagnostic set; bench/solver_bench.py writes
// the same kind): column j is z * s_j + c_j s_j with z standard normal,
// units s_j = 10^u over 5 decades (u uniform in [-2, 3]) and offsets c_j
// uniform in [0, max_offset], so the columns are far from centred (H's
// flat directions are what is left once the common offset is taken out);
// labels from a planted model on z plus noise of 1.5.
inline Dataset OffsetProblem(int64_t rows = 569, int64_t cols = 30, double max_offset = 3.0,
                             uint64_t seed = 41) {
  Rng rng(seed);
  const auto gauss = [&rng] {
    const double u = std::max(rng.Uniform(), 1e-300), v = rng.Uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
  };
  std::vector<double> unit(static_cast<std::size_t>(cols)), shift(unit.size()), planted(unit.size());
  for (std::size_t j = 0; j < unit.size(); ++j) {
    unit[j] = std::pow(10.0, -2.0 + 5.0 * rng.Uniform());
    shift[j] = max_offset * rng.Uniform() * unit[j];
    planted[j] = gauss();
  }
  std::vector<int64_t> off{0};
  std::vector<uint32_t> idx;
  std::vector<float> val;
  std::vector<float> y;
  for (int64_t i = 0; i < rows; ++i) {
    double margin = 1.5 * gauss();
    for (std::size_t j = 0; j < unit.size(); ++j) {
      const double z = gauss();
      margin += planted[j] * z;
      idx.push_back(static_cast<uint32_t>(j));
      val.push_back(static_cast<float>(z * unit[j] + shift[j]));
    }
    off.push_back(static_cast<int64_t>(idx.size()));
    y.push_back(margin > 0 ? 1.0f : -1.0f);
  }
  auto x = CsrMatrix::FromArrays(rows, cols, off, idx, val);
  BOOST_REQUIRE_MESSAGE(x.ok(), x.status().ToString());
  return Dataset{*std::move(x), std::move(y), Task::kClassification, {}};
}

}  // namespace dml::testing
