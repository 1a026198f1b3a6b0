#include "dml/data/partition.hpp"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace dml {

absl::StatusOr<std::vector<Range>> BalancedRanges(const std::vector<int64_t>& offsets, int k) {
  if (k < 1) return absl::InvalidArgumentError(absl::StrCat("number of parts must be >= 1, got ", k));
  if (offsets.empty()) return absl::InvalidArgumentError("offsets must hold at least one entry");
  const int64_t n = static_cast<int64_t>(offsets.size()) - 1;
  const int64_t total = offsets.back() - offsets.front();
  std::vector<Range> parts(static_cast<std::size_t>(k));
  int64_t begin = 0;
  for (int p = 0; p < k; ++p) {
    int64_t end;
    if (p == k - 1) {
      end = n;
    } else {
      // The cut for part p sits where the prefix nnz is closest to
      // total*(p+1)/k; leave at least one slot for each later part.
      const int64_t target = offsets.front() + total * (p + 1) / k;
      auto it = std::lower_bound(offsets.begin() + begin, offsets.end(), target);
      end = std::min<int64_t>(it - offsets.begin(), n);
      if (end > begin && end <= n && offsets[end] - target > target - offsets[end - 1]) --end;
      const int64_t remaining_parts = k - 1 - p;
      // With more parts than slots the later parts cannot all get one: lo
      // bounds hi then (std::clamp with lo > hi is undefined).
      const int64_t lo = std::min(begin + 1, n);
      const int64_t hi = std::max(lo, n - remaining_parts);
      end = std::clamp<int64_t>(end, lo, hi);
    }
    parts[p] = Range{begin, end};
    begin = end;
  }
  return parts;
}

namespace {
template <Layout L>
absl::StatusOr<std::vector<CompressedMatrix<L>>> Partition(const CompressedMatrix<L>& m, int k) {
  auto ranges = BalancedRanges(m.offsets(), k);
  if (!ranges.ok()) return ranges.status();
  std::vector<CompressedMatrix<L>> out;
  out.reserve(ranges->size());
  for (const Range& r : *ranges) out.push_back(m.SliceOuter(r.begin, r.end));
  return out;
}
}  // namespace

absl::StatusOr<std::vector<CsrMatrix>> PartitionRows(const CsrMatrix& m, int k) {
  return Partition(m, k);
}
absl::StatusOr<std::vector<CscMatrix>> PartitionCols(const CscMatrix& m, int k) {
  return Partition(m, k);
}

}  // namespace dml
