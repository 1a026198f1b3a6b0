#pragma once
// Splitting a pass over rows or columns among threads, for the solvers whose
// passes are sums (newGLMNET, truncated Newton). Threads are started per
// pass: these solvers make tens to hundreds of passes, each far longer than
// a thread's start.

#include <algorithm>
#include <cstddef>
#include <system_error>
#include <thread>
#include <vector>

#include "dml/data/sparse.hpp"

namespace dml::internal {

/// Runs fn(chunk, begin, end) over `bounds` (chunks + 1 increasing offsets),
/// chunk 0 on the calling thread. If a thread cannot be started, its chunk
/// runs on the caller.
template <typename F>
void ForChunks(const std::vector<std::size_t>& bounds, F&& fn) {
  const std::size_t chunks = bounds.size() - 1;
  std::vector<std::thread> pool;
  std::vector<std::size_t> inline_chunks;
  for (std::size_t c = 1; c < chunks; ++c) {
    try {
      pool.emplace_back([&fn, &bounds, c] { fn(c, bounds[c], bounds[c + 1]); });
    } catch (const std::system_error&) {
      inline_chunks.push_back(c);
    }
  }
  fn(0, bounds[0], bounds[1]);
  for (std::size_t c : inline_chunks) fn(c, bounds[c], bounds[c + 1]);
  for (auto& t : pool) t.join();
}

/// Even split of [0, n) into at most `threads` chunks of at least `grain`.
inline std::vector<std::size_t> EvenBounds(std::size_t n, int threads, std::size_t grain) {
  const std::size_t chunks =
      std::clamp<std::size_t>(n / grain, 1, static_cast<std::size_t>(threads));
  std::vector<std::size_t> b(chunks + 1);
  for (std::size_t c = 0; c <= chunks; ++c) b[c] = n * c / chunks;
  return b;
}

/// Outer slots [0, outer_size) (columns of a CSC, rows of a CSR) split so
/// each of at most `threads` chunks holds about the same number of
/// nonzeros, at least `grain`.
template <Layout L>
std::vector<std::size_t> NnzBounds(const CompressedMatrix<L>& a, int threads, std::size_t grain) {
  const std::size_t nnz = static_cast<std::size_t>(a.nnz());
  const std::size_t chunks =
      std::clamp<std::size_t>(nnz / grain, 1, static_cast<std::size_t>(threads));
  const std::vector<int64_t>& off = a.offsets();
  std::vector<std::size_t> b{0};
  for (std::size_t c = 1; c < chunks; ++c) {
    const int64_t target = static_cast<int64_t>(nnz * c / chunks);
    b.push_back(static_cast<std::size_t>(std::lower_bound(off.begin(), off.end(), target) -
                                         off.begin()));
  }
  b.push_back(static_cast<std::size_t>(a.outer_size()));
  for (std::size_t c = 1; c < b.size(); ++c) b[c] = std::min(std::max(b[c], b[c - 1]), b.back());
  return b;
}

}  // namespace dml::internal
