#pragma once
// Splitting a pass over rows or columns among threads, for the solvers whose
// passes are sums (newGLMNET, truncated Newton). Threads are started per
// pass: these solvers make tens to hundreds of passes, each far longer than
// a thread's start.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

#include "dml/data/sparse.hpp"

namespace dml::internal {

/// Runs fn(chunk, begin, end) over `bounds` (chunks + 1 increasing offsets),
/// chunk 0 on the calling thread. If a thread cannot be started, its chunk
/// runs on the caller.
/// An exception thrown by fn (std::bad_alloc of a partial vector) on any
/// chunk is rethrown on the caller once every thread has joined.
template <typename F>
void ForChunks(const std::vector<std::size_t>& bounds, F&& fn) {
  const std::size_t chunks = bounds.size() - 1;
  std::vector<std::exception_ptr> errors(chunks);
  auto run = [&fn, &bounds, &errors](std::size_t c) {
    try {
      fn(c, bounds[c], bounds[c + 1]);
    } catch (...) {
      errors[c] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  std::vector<std::size_t> inline_chunks;
  try {
    pool.reserve(chunks);
  } catch (const std::bad_alloc&) {
  }
  for (std::size_t c = 1; c < chunks; ++c) {
    try {
      pool.emplace_back(run, c);
    } catch (...) {  // no thread (std::system_error) or no room for one
      inline_chunks.push_back(c);
    }
  }
  run(0);
  for (std::size_t c : inline_chunks) run(c);
  for (auto& t : pool) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

/// Even split of [0, n) into at most `threads` chunks of at least `grain`.
inline std::vector<std::size_t> EvenBounds(std::size_t n, int threads, std::size_t grain) {
  const std::size_t chunks = std::clamp<std::size_t>(
      n / std::max<std::size_t>(grain, 1), 1,
      std::min(static_cast<std::size_t>(threads), std::max<std::size_t>(n, 1)));
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
  const std::size_t outer = static_cast<std::size_t>(std::max<int64_t>(1, a.outer_size()));
  const std::size_t chunks = std::clamp<std::size_t>(
      nnz / std::max<std::size_t>(grain, 1), 1, std::min(static_cast<std::size_t>(threads), outer));
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
