#include "dml/data/sparse.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <system_error>
#include <thread>
#include <utility>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "absl/strings/str_cat.h"

namespace dml {
namespace {
constexpr const char* OuterName(Layout l) { return l == Layout::kRowMajor ? "row" : "column"; }
}  // namespace

template <Layout L>
CompressedMatrix<L>::CompressedMatrix(int64_t rows, int64_t cols)
    : rows_(rows), cols_(cols), offsets_(static_cast<std::size_t>(outer_size()) + 1, 0) {}

template <Layout L>
absl::StatusOr<CompressedMatrix<L>> CompressedMatrix<L>::FromArrays(
    int64_t rows, int64_t cols, std::vector<int64_t> offsets, std::vector<uint32_t> indices,
    std::vector<float> values) {
  if (rows < 0 || cols < 0) {
    return absl::InvalidArgumentError(absl::StrCat("negative shape ", rows, "x", cols));
  }
  const int64_t outer = L == Layout::kRowMajor ? rows : cols;
  const int64_t inner = L == Layout::kRowMajor ? cols : rows;
  if (inner > int64_t{std::numeric_limits<uint32_t>::max()} + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("inner dimension ", inner, " exceeds 32-bit indices"));
  }
  if (static_cast<int64_t>(offsets.size()) != outer + 1) {
    return absl::InvalidArgumentError(absl::StrCat("offsets has ", offsets.size(),
                                                   " entries, expected ", outer + 1));
  }
  if (indices.size() != values.size()) {
    return absl::InvalidArgumentError(absl::StrCat("indices has ", indices.size(),
                                                   " entries but values has ", values.size()));
  }
  if (offsets.front() != 0 || offsets.back() != static_cast<int64_t>(indices.size())) {
    return absl::InvalidArgumentError(absl::StrCat("offsets must run from 0 to nnz=",
                                                   indices.size(), ", got ", offsets.front(),
                                                   "..", offsets.back()));
  }
  for (int64_t i = 0; i < outer; ++i) {
    const int64_t b = offsets[i], e = offsets[i + 1];
    if (e < b) {
      return absl::InvalidArgumentError(
          absl::StrCat("offsets decrease at ", OuterName(L), " ", i));
    }
    for (int64_t k = b; k < e; ++k) {
      if (static_cast<int64_t>(indices[k]) >= inner) {
        return absl::InvalidArgumentError(absl::StrCat(OuterName(L), " ", i, ", entry ", k - b,
                                                       ": index ", indices[k],
                                                       " out of range [0, ", inner, ")"));
      }
      if (k > b && indices[k] <= indices[k - 1]) {
        return absl::InvalidArgumentError(absl::StrCat(OuterName(L), " ", i, ", entry ", k - b,
                                                       ": index ", indices[k],
                                                       " not strictly increasing"));
      }
      if (!std::isfinite(values[k])) {
        return absl::InvalidArgumentError(
            absl::StrCat(OuterName(L), " ", i, ", entry ", k - b, ": non-finite value"));
      }
    }
  }
  return FromArraysUnchecked(rows, cols, std::move(offsets), std::move(indices),
                             std::move(values));
}

template <Layout L>
CompressedMatrix<L> CompressedMatrix<L>::FromArraysUnchecked(int64_t rows, int64_t cols,
                                                             std::vector<int64_t> offsets,
                                                             std::vector<uint32_t> indices,
                                                             std::vector<float> values) {
  CompressedMatrix m;
  m.rows_ = rows;
  m.cols_ = cols;
  m.offsets_ = std::move(offsets);
  m.indices_ = std::move(indices);
  m.values_ = std::move(values);
  return m;
}

template <Layout L>
CompressedMatrix<L> CompressedMatrix<L>::SliceOuter(int64_t begin, int64_t end) const {
  const int64_t b = offsets_[begin], e = offsets_[end];
  std::vector<int64_t> off(static_cast<std::size_t>(end - begin) + 1);
  for (int64_t i = begin; i <= end; ++i) off[i - begin] = offsets_[i] - b;
  std::vector<uint32_t> idx(indices_.begin() + b, indices_.begin() + e);
  std::vector<float> val(values_.begin() + b, values_.begin() + e);
  const int64_t n = end - begin;
  return FromArraysUnchecked(L == Layout::kRowMajor ? n : rows_,
                             L == Layout::kRowMajor ? cols_ : n, std::move(off),
                             std::move(idx), std::move(val));
}

template <Layout L>
CompressedMatrix<L> CompressedMatrix<L>::SliceInner(int64_t begin, int64_t end) const {
  std::vector<int64_t> off(offsets_.size(), 0);
  std::vector<uint32_t> idx;
  std::vector<float> val;
  const int64_t outer = outer_size();
  for (int64_t i = 0; i < outer; ++i) {
    for (int64_t k = offsets_[i]; k < offsets_[i + 1]; ++k) {
      const int64_t j = indices_[k];
      if (j >= begin && j < end) {
        idx.push_back(static_cast<uint32_t>(j - begin));
        val.push_back(values_[k]);
      }
    }
    off[i + 1] = static_cast<int64_t>(idx.size());
  }
  const int64_t n = end - begin;
  return FromArraysUnchecked(L == Layout::kRowMajor ? rows_ : n,
                             L == Layout::kRowMajor ? n : cols_, std::move(off),
                             std::move(idx), std::move(val));
}

template <Layout L>
CompressedMatrix<L> CompressedMatrix<L>::GatherOuter(const std::vector<int64_t>& which) const {
  std::vector<int64_t> off(which.size() + 1, 0);
  for (std::size_t i = 0; i < which.size(); ++i) off[i + 1] = off[i] + outer_nnz(which[i]);
  std::vector<uint32_t> idx(static_cast<std::size_t>(off.back()));
  std::vector<float> val(idx.size());
  for (std::size_t i = 0; i < which.size(); ++i) {
    const int64_t b = offsets_[which[i]], n = outer_nnz(which[i]);
    std::copy_n(indices_.begin() + b, n, idx.begin() + off[i]);
    std::copy_n(values_.begin() + b, n, val.begin() + off[i]);
  }
  const int64_t n = static_cast<int64_t>(which.size());
  return FromArraysUnchecked(L == Layout::kRowMajor ? n : rows_,
                             L == Layout::kRowMajor ? cols_ : n, std::move(off),
                             std::move(idx), std::move(val));
}

namespace {

/// Sizes v to n, asking the kernel for huge pages first (Linux, THP in
/// madvise mode): the scatter below writes all over arrays of tens of
/// megabytes, and 4 KiB pages cost it a TLB miss on most writes (real-sim's
/// shape: 72 -> 47 ms).
template <typename T>
void ResizeForScatter(std::vector<T>& v, std::size_t n) {
  v.reserve(n);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHuge = uintptr_t{1} << 21;
  const uintptr_t b = (reinterpret_cast<uintptr_t>(v.data()) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t e = reinterpret_cast<uintptr_t>(v.data() + n) & ~(kHuge - 1);
  if (e > b) madvise(reinterpret_cast<void*>(b), e - b, MADV_HUGEPAGE);  // a hint: errors ignored
#endif
  v.resize(n);
}

/// Below this many nonzeros a second thread costs more than it saves.
constexpr int64_t kConvertThreadNnz = int64_t{1} << 20;

}  // namespace

template <Layout L>
typename CompressedMatrix<L>::Transposed CompressedMatrix<L>::Convert(int threads) const {
  const int64_t inner = inner_size();
  const int64_t outer = outer_size();
  const int64_t nnz = static_cast<int64_t>(indices_.size());
  // Each thread counts its outer slots per inner index (T vectors of
  // `inner` int64s): at most as many of those as nonzeros (the counters
  // then cost no more than the indices and values they place).
  const int t_count =
      nnz >= kConvertThreadNnz && inner > 0
          ? static_cast<int>(std::clamp<int64_t>(std::min<int64_t>(threads, nnz / inner), 1, 8))
          : 1;
  auto first = [&](int t) { return outer * t / t_count; };
  std::vector<std::vector<int64_t>> cursor(static_cast<std::size_t>(t_count),
                                           std::vector<int64_t>(static_cast<std::size_t>(inner)));
  std::vector<int64_t> off(static_cast<std::size_t>(inner) + 1, 0);
  std::vector<uint32_t> idx;
  std::vector<float> val;
  ResizeForScatter(idx, indices_.size());
  ResizeForScatter(val, values_.size());
  // Phase 0 counts, phase 1 scatters; slot ranges in order and, within
  // one, outer slots in order, so the new inner indices come out sorted.
  auto work = [&](int t, int phase) {
    std::vector<int64_t>& cur = cursor[static_cast<std::size_t>(t)];
    const int64_t b = first(t), e = first(t + 1);
    if (phase == 0) {
      for (int64_t k = offsets_[b]; k < offsets_[e]; ++k) ++cur[indices_[k]];
      return;
    }
    for (int64_t i = b; i < e; ++i) {
      for (int64_t k = offsets_[i]; k < offsets_[i + 1]; ++k) {
        const int64_t dst = cur[indices_[k]]++;
        idx[dst] = static_cast<uint32_t>(i);
        val[dst] = values_[k];
      }
    }
  };
  auto run_phase = [&](int phase) {
    std::vector<std::thread> helpers;
    std::vector<int> mine{0};
    // Reserved first: an allocation failing between thread starts would
    // leave a joinable thread to terminate the process.
    helpers.reserve(static_cast<std::size_t>(t_count));
    mine.reserve(static_cast<std::size_t>(t_count));
    for (int t = 1; t < t_count; ++t) {
      try {
        helpers.emplace_back(work, t, phase);
      } catch (const std::system_error&) {
        mine.push_back(t);
      }
    }
    for (int t : mine) work(t, phase);
    for (std::thread& h : helpers) h.join();
  };
  run_phase(0);
  // Inner index j's entries: range 0's, then range 1's, ...
  int64_t pos = 0;
  for (int64_t j = 0; j < inner; ++j) {
    off[j] = pos;
    for (auto& cur : cursor) {
      const int64_t c = cur[j];
      cur[j] = pos;
      pos += c;
    }
  }
  off[inner] = pos;
  run_phase(1);
  return Transposed::FromArraysUnchecked(rows_, cols_, std::move(off), std::move(idx),
                                         std::move(val));
}

template <Layout L>
absl::Status CompressedMatrix<L>::ResizeInner(int64_t inner) {
  if (inner < inner_size()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot shrink the inner dimension from ",
                                                   inner_size(), " to ", inner));
  }
  if (inner > int64_t{std::numeric_limits<uint32_t>::max()} + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("inner dimension ", inner, " exceeds 32-bit indices"));
  }
  (L == Layout::kRowMajor ? cols_ : rows_) = inner;
  return absl::OkStatus();
}

template <Layout L>
std::vector<double> CompressedMatrix<L>::OuterSquaredNorms() const {
  std::vector<double> out(static_cast<std::size_t>(outer_size()), 0.0);
  for (int64_t i = 0; i < outer_size(); ++i) {
    double s = 0;
    for (int64_t k = offsets_[i]; k < offsets_[i + 1]; ++k) {
      s += static_cast<double>(values_[k]) * values_[k];
    }
    out[i] = s;
  }
  return out;
}

template class CompressedMatrix<Layout::kRowMajor>;
template class CompressedMatrix<Layout::kColMajor>;

CsrMatrix WithConstantColumn(const CsrMatrix& x, float value, int64_t column) {
  const int64_t rows = x.rows();
  const auto col = static_cast<uint32_t>(column);
  const int64_t add = value != 0.0f ? 1 : 0;
  std::vector<int64_t> offsets(static_cast<std::size_t>(rows) + 1, 0);
  std::vector<uint32_t> indices;
  std::vector<float> values;
  indices.reserve(static_cast<std::size_t>(x.nnz() + add * rows));
  values.reserve(indices.capacity());
  for (int64_t i = 0; i < rows; ++i) {
    const SparseView r = x.outer(i);
    const std::size_t keep = static_cast<std::size_t>(
        std::lower_bound(r.index, r.index + r.size, col) - r.index);
    indices.insert(indices.end(), r.index, r.index + keep);
    values.insert(values.end(), r.value, r.value + keep);
    if (add) {
      indices.push_back(col);  // after every other index: rows stay sorted
      values.push_back(value);
    }
    offsets[static_cast<std::size_t>(i) + 1] = static_cast<int64_t>(indices.size());
  }
  return CsrMatrix::FromArraysUnchecked(rows, column + 1, std::move(offsets), std::move(indices),
                                        std::move(values));
}

}  // namespace dml
