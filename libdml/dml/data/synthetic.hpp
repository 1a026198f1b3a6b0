#pragma once
// Synthetic data with a planted model, for tests, samples and benchmarks.
// Deterministic for a given seed on every platform (own RNG, no std::
// distributions whose output is implementation-defined).
//
// Random streams: w* comes from one xoshiro256** stream and every row from
// its own stream, both seeded from (seed, stream id) through splitmix64, so
// the output does not depend on the number of threads, a row does not depend
// on the rows before it, and X does not depend on `noise` or `task`.
// Normals come from Leva's ratio-of-uniforms method: a sample is v/u for two
// uniforms, with a log evaluated only near the acceptance boundary, so the
// values are bit-identical wherever IEEE double arithmetic is (up to a
// last-bit difference of a label where a compiler fuses multiply-adds).

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "dml/data/sparse.hpp"

namespace dml {

/// What GenerateSynthetic draws; see there for the checks.
struct SyntheticOptions {
  /// Shape of X.
  int64_t rows = 1000;
  int64_t cols = 100;
  /// Nonzeros per row (distinct columns drawn uniformly); clamped to cols.
  int64_t nnz_per_row = 10;
  /// Fraction of planted weights that are nonzero (sparse truth for lasso).
  double model_density = 1.0;
  /// Regression: y = x.w* + noise * N(0,1). Classification: y = sign(x.w* +
  /// noise * N(0,1)), so noise = 0 gives separable data consistent with w*.
  double noise = 0.0;
  Task task = Task::kRegression;  ///< Real-valued or -1/+1 labels.
  uint64_t seed = 1;              ///< Same seed, same data, on every platform.
  /// Unscaled features: column j of X is multiplied by 10^(scale_decades
  /// (u_j - 1/2)), u_j uniform in [0, 1) (own stream), after the labels
  /// were drawn from the unscaled row, as a feature's units do not change
  /// what it predicts. 0: no scaling; at most 30.
  double scale_decades = 0.0;
  /// Generator threads; 0 = hardware concurrency. Does not change the output.
  int threads = 0;
};

/// Generated data and the model it was planted with.
struct SyntheticData {
  Dataset data;                 ///< X and y.
  std::vector<double> planted;  ///< w*, length cols
};

/// Draws rows x cols data: each row has min(nnz_per_row, cols) distinct
/// columns, uniformly chosen and sorted, with values N(0, 1) / sqrt(that
/// count), so x.w* has variance about |w*|^2 / cols. w*[j] is N(0, 1) with
/// probability model_density, else 0; at least one is nonzero. Classification
/// labels are +1 where x.w* + noise * N(0, 1) >= 0, else -1 (a row whose
/// columns all have w*[j] == 0 thus gets +1 when noise is 0).
///
/// Errors: InvalidArgument naming the field for non-positive sizes, cols
/// above 2^32, nnz_per_row < 1, density outside (0, 1], negative or
/// non-finite noise, scale_decades outside [0, 30], negative threads, or a
/// matrix too large to index; ResourceExhausted where the data would not fit
/// in memory (MemoryLimit, dml/util/memory.hpp).
absl::StatusOr<SyntheticData> GenerateSynthetic(const SyntheticOptions& options);

}  // namespace dml
