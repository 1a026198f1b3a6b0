#pragma once
// The ill-conditioned problem the SGD tests share: 2000 x 40 dense
// classification rows (label noise 0.5) whose features come in units
// spread over 4 decades (SyntheticOptions::scale_decades), so their mean
// squares span 8.

#include <boost/test/unit_test.hpp>

#include "dml/data/synthetic.hpp"

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

}  // namespace dml::testing
