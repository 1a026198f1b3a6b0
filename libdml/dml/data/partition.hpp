#pragma once
// Splitting a matrix into K contiguous parts with balanced nonzeros: rows of
// a CSR for dual (per-example) methods, columns of a CSC for primal
// (per-feature) methods. Pure functions; thread-safe.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "dml/data/sparse.hpp"

namespace dml {

/// Half-open range [begin, end) of outer slots.
struct Range {
  int64_t begin = 0;  ///< First slot.
  int64_t end = 0;    ///< One past the last slot.
  /// Number of slots.
  int64_t size() const { return end - begin; }
  /// Same begin and end.
  friend bool operator==(Range a, Range b) { return a.begin == b.begin && a.end == b.end; }
};

/// K contiguous ranges covering [0, offsets.size()-1) whose nonzero counts
/// are as even as the slot granularity allows: each part's nnz is within the
/// largest single slot's nnz of total/K. Every part gets at least one slot
/// when there are at least K slots. Errors: InvalidArgument for k < 1 or
/// empty offsets.
absl::StatusOr<std::vector<Range>> BalancedRanges(const std::vector<int64_t>& offsets, int k);

/// Row partition of a CSR into K parts (each a new CSR with all columns).
/// Errors: InvalidArgument for k < 1.
absl::StatusOr<std::vector<CsrMatrix>> PartitionRows(const CsrMatrix& m, int k);
/// Column partition of a CSC into K parts (each a new CSC with all rows).
/// Errors: InvalidArgument for k < 1.
absl::StatusOr<std::vector<CscMatrix>> PartitionCols(const CscMatrix& m, int k);

}  // namespace dml
