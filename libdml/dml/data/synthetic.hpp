#pragma once
// Synthetic data with a planted model, for tests, samples and benchmarks.
// Deterministic for a given seed on every platform (own RNG, no std::
// distributions whose output is implementation-defined).

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "dml/data/sparse.hpp"

namespace dml {

struct SyntheticOptions {
  int64_t rows = 1000;
  int64_t cols = 100;
  /// Nonzeros per row (distinct columns drawn uniformly); clamped to cols.
  int64_t nnz_per_row = 10;
  /// Fraction of planted weights that are nonzero (sparse truth for lasso).
  double model_density = 1.0;
  /// Regression: y = x.w* + noise * N(0,1). Classification: y = sign(x.w* +
  /// noise * N(0,1)), so noise = 0 gives separable data consistent with w*.
  double noise = 0.0;
  Task task = Task::kRegression;
  uint64_t seed = 1;
};

struct SyntheticData {
  Dataset data;
  std::vector<double> planted;  ///< w*, length cols
};

/// Errors: non-positive sizes, nnz_per_row < 1, density outside (0, 1],
/// negative noise.
absl::StatusOr<SyntheticData> GenerateSynthetic(const SyntheticOptions& options);

}  // namespace dml
