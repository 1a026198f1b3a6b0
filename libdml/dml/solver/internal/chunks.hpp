#pragma once
// Splitting a pass over rows or columns among threads, for the solvers whose
// passes are sums (newGLMNET, truncated Newton), on threads kept between
// passes (ChunkRunner).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include "dml/data/sparse.hpp"

namespace dml::internal {

/// One step of a spin-wait: the CPU's pause hint (x86), else nothing.
inline void CpuPause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/// Waits until done() holds: `spins` pauses first, then yielding (the
/// thread it waits for may have lost its core).
template <typename Done>
void SpinUntil(Done&& done, int spins) {
  for (int k = 0; !done(); ++k) {
    if (k < spins) {
      CpuPause();
    } else {
      std::this_thread::yield();
    }
  }
}

/// Runs fn(chunk, begin, end) over `bounds` (chunks + 1 increasing
/// offsets), chunk 0 on the calling thread, the others on workers kept
/// between calls: a solver making hundreds of short passes (newGLMNET's
/// line-search sums, Newton's CG products) paid a thread start and join,
/// about 60 us here, per pass when they were started per call (w8a
/// L1-logistic: 64 starts; news20 logistic -s 0: 288). Workers start on the
/// first call that needs them, spin about 50 us after each chunk (passes
/// come in bursts), then sleep on a condition variable. A worker that
/// cannot be started leaves its chunks to the caller; an exception thrown
/// by fn on any chunk is rethrown on the caller once every chunk ended.
/// With more chunks than threads (LimitThreads), thread t runs chunks t,
/// t + T, t + 2T, ...: a solver can split its sums the same way whatever
/// the thread count, so its runs are the same bits on 1 thread as on 2.
/// One caller at a time (not thread-safe); the destructor joins.
class ChunkRunner {
 public:
  ChunkRunner() = default;
  ChunkRunner(const ChunkRunner&) = delete;
  ChunkRunner& operator=(const ChunkRunner&) = delete;
  ~ChunkRunner() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      exit_.store(true, std::memory_order_release);
    }
    cv_.notify_all();
    for (std::thread& t : workers_) t.join();
  }

  /// At most this many threads (the caller's included) from now on.
  void LimitThreads(std::size_t threads) { max_threads_ = std::max<std::size_t>(threads, 1); }

  template <typename F>
  void Run(const std::vector<std::size_t>& bounds, F&& fn) {
    const std::size_t chunks = bounds.size() - 1;
    const std::size_t want = std::min(chunks, max_threads_);
    if (want <= 1) {
      for (std::size_t c = 0; c < chunks; ++c) fn(c, bounds[c], bounds[c + 1]);
      return;
    }
    while (workers_.size() + 1 < want && !start_failed_) {
      try {
        const std::size_t c = workers_.size() + 1;
        const uint64_t now = gen_.load(std::memory_order_relaxed);  // jobs before it: not its
        workers_.emplace_back([this, c, now] { Work(c, now); });
      } catch (...) {  // no thread: its chunks run on the caller
        start_failed_ = true;
      }
    }
    errors_.assign(chunks, nullptr);
    bounds_ = bounds.data();
    chunks_ = chunks;
    stride_ = std::min(workers_.size() + 1, want);
    obj_ = &fn;
    call_ = [](void* o, std::size_t c, std::size_t b, std::size_t e) {
      (*static_cast<std::remove_reference_t<F>*>(o))(c, b, e);
    };
    pending_.store(workers_.size(), std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(mu_);
      gen_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    for (std::size_t c = 0; c < chunks; c += stride_) RunChunk(c);
    SpinUntil([this] { return pending_.load(std::memory_order_acquire) == 0; }, 1024);
    for (const std::exception_ptr& e : errors_) {
      if (e) std::rethrow_exception(e);
    }
  }

 private:
  void RunChunk(std::size_t c) {
    try {
      call_(obj_, c, bounds_[c], bounds_[c + 1]);
    } catch (...) {
      errors_[c] = std::current_exception();
    }
  }
  void Work(std::size_t c, uint64_t seen) {
    using Clock = std::chrono::steady_clock;
    for (;;) {
      const Clock::time_point idle = Clock::now();
      for (int spins = 0;; ++spins) {
        if (gen_.load(std::memory_order_acquire) != seen) break;
        if (exit_.load(std::memory_order_acquire)) return;
        CpuPause();
        if ((spins & 63) == 63 && Clock::now() - idle > std::chrono::microseconds(50)) {
          std::unique_lock<std::mutex> lock(mu_);
          cv_.wait(lock, [&] {
            return gen_.load(std::memory_order_acquire) != seen ||
                   exit_.load(std::memory_order_acquire);
          });
        }
      }
      seen = gen_.load(std::memory_order_acquire);
      if (c < stride_) {
        for (std::size_t k = c; k < chunks_; k += stride_) RunChunk(k);
      }
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  std::vector<std::thread> workers_;
  bool start_failed_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> gen_{0};
  std::atomic<std::size_t> pending_{0};
  std::atomic<bool> exit_{false};
  // The job, written before gen_ moves (release) and read after (acquire).
  const std::size_t* bounds_ = nullptr;
  std::size_t chunks_ = 0;
  std::size_t stride_ = 1;  // the threads of this job: thread t runs chunks t mod stride_
  std::size_t max_threads_ = static_cast<std::size_t>(-1);
  void* obj_ = nullptr;
  void (*call_)(void*, std::size_t, std::size_t, std::size_t) = nullptr;
  std::vector<std::exception_ptr> errors_;
};

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
