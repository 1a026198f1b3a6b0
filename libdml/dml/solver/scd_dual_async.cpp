// Parallel asynchronous stochastic dual coordinate ascent (PASSCoDe-atomic:
// Hsieh, Yu, Dhillon, "PASSCoDe: Parallel ASynchronous Stochastic dual
// Co-ordinate Descent", ICML 2015) for ridge, logistic, hinge and
// squared-hinge SVM. Same problem, variables and step as scd_dual.cpp.
//
// T = options.threads threads; the examples are dealt to T blocks in a
// random order, of about equal nonzeros, one per thread, and each thread
// visits its own block in a fresh random permutation every epoch (with its
// own LIBLINEAR-style shrinking state). alpha_i is owned by the thread of its
// block. The shared w is read without synchronisation ("wild") and updated by
// lock-free atomic adds (relaxed compare-exchange on each double), so updates
// are never lost but a step may see a w that other threads are changing.
// Threads meet at a barrier after every epoch; there ||w||^2 is measured
// (the per-step deltas miss the concurrent cross terms) and the calling
// thread (which also runs block 0) rebuilds w from alpha before any
// certificate, which is what makes the reported gap exact.
// Fitting the threads to the machine (options.fit_threads): data under
// kMinParallelNnz nonzeros runs on one thread; otherwise epoch 1 (one
// thread) and an eighth of epoch 2 (all) are timed, and where all threads
// did not read nonzeros faster (contention on a short w; cores that share
// their caches) the blocks merge and the rest runs on one thread; so they
// do once shrinking leaves epochs under kMinParallelNnz. TrainResult::threads
// and ::note say so.
// Stopping: StopRule, as DriveDualScd in scd_dual_kernel.hpp.
// With T = 1 no thread is started and the plain (non-atomic) kernel runs:
// the iterates are those of the sequential solver with the same seed.
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <numeric>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dml/solver/internal/scd_dual_kernel.hpp"
#include "dml/solver/internal/solvers.hpp"
#include "dml/util/status.hpp"

namespace dml::internal {
namespace {

/// A reusable barrier (std::barrier is C++20). The mutex also orders every
/// thread's writes before the barrier with everyone's reads after it.
class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t gen = generation_;
    if (++waiting_ == count_) {
      waiting_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation_ != gen; });
    }
  }

  /// One participant leaves for good (it never arrived).
  void Drop() {
    std::unique_lock<std::mutex> lock(mu_);
    --count_;
    if (waiting_ > 0 && waiting_ == count_) {
      waiting_ = 0;
      ++generation_;
      cv_.notify_all();
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int count_;
  int waiting_ = 0;
  uint64_t generation_ = 0;
};

// About 1 ms of steps: data (or, with shrinking, an epoch) shorter than this
// is not worth two barriers per epoch and the threads' start-up.
constexpr int64_t kMinParallelNnz = 1 << 18;
// All threads run when their time per nonzero is below this share of one
// thread's (a second core should buy at least 10%).
constexpr double kParallelMargin = 0.9;

template <typename Obj>
class AsyncEngine {
 public:
  AsyncEngine(const Dataset& data, const ModelSpec& model, const SolverOptions& opt)
      : x_(data.x),
        lambda_(model.lambda),
        inv_ln_(1.0 / (model.lambda * static_cast<double>(data.x.rows()))),
        shrink_(opt.shrinking),
        fit_threads_(opt.fit_threads),
        coords_(MakeDualCoords<Obj>(data, model.lambda)),
        w_(static_cast<std::size_t>(data.x.cols()), 0.0) {
    const int64_t n = data.x.rows();
    // Below kMinParallelNnz an epoch takes well under a millisecond: thread
    // start-up and two barriers per epoch cost more than a second core saves.
    const int threads = opt.fit_threads && data.x.nnz() < kMinParallelNnz
                            ? 1
                            : static_cast<int>(std::min<int64_t>(opt.threads, n));
    // Rows are dealt to the threads in a random order (files often come
    // sorted, e.g. by label: a contiguous split would give each thread a
    // biased half), cut into T runs of about equal nonzeros (every block
    // keeps at least one row). One thread keeps rows in order: it then
    // draws the sequential solver's permutations.
    std::vector<int64_t> rows(static_cast<std::size_t>(n));
    std::iota(rows.begin(), rows.end(), int64_t{0});
    Rng deal(opt.seed ^ 0x5851f42d4c957f2dULL);
    if (threads > 1) deal.Shuffle(rows);
    const std::vector<int64_t>& off = data.x.offsets();
    const int64_t nnz = data.x.nnz();
    blocks_.resize(static_cast<std::size_t>(threads));
    sums_.resize(blocks_.size());
    int64_t begin = 0;
    int64_t seen = 0;  // nonzeros of rows[0, begin)
    for (int t = 0; t < threads; ++t) {
      int64_t end = begin;
      const int64_t target = nnz / threads * (t + 1) + nnz % threads * (t + 1) / threads;
      const int64_t last = n - (threads - 1 - t);  // leave a row for each later block
      while (end < last && (end == begin || seen < target || t + 1 == threads)) {
        seen += off[rows[end] + 1] - off[rows[end]];
        ++end;
      }
      DualBlock& b = blocks_[t];
      b.order.assign(rows.begin() + begin, rows.begin() + end);
      b.active = b.size();
      b.rng = Rng(opt.seed ^ (0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(t)));
      begin = end;
    }
    const DualExact e = DualStartState(x_, coords_.data(), lambda_, w_.data());
    negconj_sum_ = e.negconj_sum;
    wsq_ = e.wsq;
  }

  int Threads() const { return static_cast<int>(blocks_.size()); }
  /// Nanoseconds per nonzero measured on one thread and on all ([1]), or
  /// -1 where not measured.
  const double* NsPerNnz() const { return ns_per_nnz_; }
  bool ShrunkMerge() const { return shrunk_merge_; }
  /// The epoch after which a falling dual merged the threads, or 0.
  int FellMerge() const { return fell_merge_; }

  /// The exact dual fell between certificates: the threads' stale steps
  /// overshoot on this data, so the rest runs on one thread (sequential
  /// SCD from the current, feasible alpha, which converges).
  void DualFell(int epoch) {
    if (blocks_.size() <= 1) return;
    fell_merge_ = epoch;
    MergeBlocks();
  }

  ~AsyncEngine() { Stop(); }

  /// Starts threads 1..T-1. Errors: the system refused a thread.
  absl::Status Start() {
    if (blocks_.size() <= 1) return absl::OkStatus();
    barrier_ = std::make_unique<Barrier>(static_cast<int>(blocks_.size()));
    try {
      for (std::size_t t = 1; t < blocks_.size(); ++t) {
        workers_.emplace_back([this, t] { WorkerLoop(t); });
      }
    } catch (const std::system_error& e) {
      // The threads already started wait for T arrivals: drop the missing
      // ones, then release and join the started ones.
      for (std::size_t t = workers_.size() + 1; t < blocks_.size(); ++t) barrier_->Drop();
      Stop();
      return absl::ResourceExhaustedError(
          absl::StrCat("could not start ", blocks_.size(), " threads: ", e.what()));
    }
    return absl::OkStatus();
  }

  DualEpochSums RunEpoch() {
    DualEpochSums s;
    const auto t0 = std::chrono::steady_clock::now();
    const bool parallel = blocks_.size() > 1 && ChooseParallel();
    if (!parallel) {
      // One thread (or the probe's one-thread epoch, while the others wait
      // at the barrier): the tracked ||w||^2 is exact here.
      for (std::size_t t = 0; t < blocks_.size(); ++t) s.Merge(RunBlock<false>(t));
    } else {
      // The probe's epoch on every thread visits an eighth of each block's
      // active rows (the first of last epoch's random order; a partial
      // epoch is harmless): where threads lose, it costs less than one
      // epoch of one thread. Rows shrunk meanwhile simply stay active.
      const bool probe = fit_threads_ && probe_epochs_ == 2;
      std::vector<int64_t> active;
      if (probe) {
        for (DualBlock& b : blocks_) {
          active.push_back(b.active);
          b.active = std::min<int64_t>(b.active, std::max<int64_t>(256, b.active / 8));
        }
      }
      barrier_->Wait();  // start (orders the truncation before the workers' reads)
      sums_[0] = RunBlock<true>(0);
      barrier_->Wait();  // end: every block's writes are visible here
      for (std::size_t t = 0; t < active.size(); ++t) blocks_[t].active = active[t];
      for (const DualEpochSums& b : sums_) s.Merge(b);
      // The tracked ||w||^2 misses the concurrent steps' cross terms;
      // measure it (the atomic adds lose no update, so this is ||w(alpha)||^2
      // up to rounding) whenever that costs at most half an epoch's work.
      wsq_work_ += s.nnz;
      if (2 * wsq_work_ >= static_cast<int64_t>(w_.size())) {
        double wsq = 0.0;
        for (const double v : w_) wsq += v * v;
        s.wsq_exact = wsq;
        wsq_work_ = 0;
      }
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    Record(parallel, s.nnz, secs);
    return s;
  }

  DualExact Certify() { return CertifyDualCoords<Obj>(x_, coords_.data(), lambda_, w_.data()); }
  double NegConjSum() const { return negconj_sum_; }
  double WSq() const { return wsq_; }
  int64_t Nnz() const { return x_.nnz(); }
  void Unshrink() {
    for (DualBlock& b : blocks_) b.Unshrink();
  }
  std::vector<double> Alpha() const {
    std::vector<double> a(coords_.size());
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = coords_[i].alpha;
    return a;
  }
  std::vector<double> W() const { return w_; }

 private:
  template <bool kAtomic>
  DualEpochSums RunBlock(std::size_t t) {
    const uint32_t* idx = x_.indices().data();
    const float* val = x_.values().data();
    return RunDualEpochMaybeShrink<Obj, kAtomic>(shrink_, idx, val, coords_.data(), w_.data(),
                                                 inv_ln_, blocks_[t]);
  }

  // Whether this epoch runs on every thread. Several threads pay only where
  // their steps rarely touch the same features (on dense low-dimensional
  // data every atomic add bounces a cache line of w between cores) and the
  // machine has the cores free; which holds is measured, not guessed: epoch
  // 1 runs on one thread, then an eighth of epoch 2 on every thread (see
  // RunEpoch). Unless the threads read a nonzero in under kParallelMargin
  // times one thread's time, the blocks merge into one and the rest runs
  // sequentially (one epoch of blocks in turn is harmless; many are not:
  // sweeping whole blocks one after the other converges several times
  // slower on a9a than one random permutation of all rows).
  bool ChooseParallel() {
    if (!fit_threads_) return true;
    if (probe_epochs_ < 2) return ++probe_epochs_ == 2;
    return true;
  }

  void Record(bool parallel, int64_t nnz, double secs) {
    if (!fit_threads_ || blocks_.size() == 1) return;
    if (probe_epochs_ > 2) {
      // Threads won the probe, but shrinking left epochs too short for two
      // barriers a round to pay: one thread from here on.
      if (nnz < kMinParallelNnz) {
        shrunk_merge_ = true;
        MergeBlocks();
      }
      return;
    }
    if (nnz == 0) return;
    ns_per_nnz_[parallel ? 1 : 0] = 1e9 * secs / static_cast<double>(nnz);
    if (probe_epochs_ < 2) return;
    probe_epochs_ = 3;  // decided
    if (!(ns_per_nnz_[1] < kParallelMargin * ns_per_nnz_[0])) MergeBlocks();
  }

  // Stops the other threads and makes one block of every row: the active
  // rows first, the shrinking thresholds the loosest of the blocks'.
  void MergeBlocks() {
    Stop();
    DualBlock one;
    for (const DualBlock& b : blocks_) {
      one.order.insert(one.order.end(), b.order.begin(), b.order.begin() + b.active);
    }
    one.active = one.size();
    one.pg_max_old = blocks_[0].pg_max_old;
    one.pg_min_old = blocks_[0].pg_min_old;
    for (const DualBlock& b : blocks_) {
      one.order.insert(one.order.end(), b.order.begin() + b.active, b.order.end());
      one.eps_pg = std::min(one.eps_pg, b.eps_pg);
      one.pg_max_old = std::max(one.pg_max_old, b.pg_max_old);
      one.pg_min_old = std::min(one.pg_min_old, b.pg_min_old);
    }
    one.rng = blocks_[0].rng;
    blocks_.assign(1, std::move(one));
    sums_.resize(1);
  }

  void WorkerLoop(std::size_t t) {
    for (;;) {
      barrier_->Wait();
      if (exit_) return;
      sums_[t] = RunBlock<true>(t);
      barrier_->Wait();
    }
  }

  void Stop() {
    if (workers_.empty()) return;
    exit_ = true;  // published by the barrier's mutex
    barrier_->Wait();
    for (std::thread& th : workers_) th.join();
    workers_.clear();
  }

  const CsrMatrix& x_;
  double lambda_;
  double inv_ln_;
  bool shrink_;  // options.shrinking (used only where the objective has bounds)
  bool fit_threads_;
  std::vector<DualCoord> coords_;
  std::vector<double> w_;
  std::vector<DualBlock> blocks_;
  std::vector<DualEpochSums> sums_;
  std::unique_ptr<Barrier> barrier_;
  std::vector<std::thread> workers_;
  bool exit_ = false;  // written by the calling thread only before a barrier
  double negconj_sum_ = 0.0;
  double wsq_ = 0.0;
  int64_t wsq_work_ = 0;   // nonzeros read since ||w||^2 was measured
  int probe_epochs_ = 0;   // epochs of the thread-count probe run; 3: decided
  bool shrunk_merge_ = false;  // merged because shrinking left short epochs
  int fell_merge_ = 0;         // merged after this epoch because the dual fell
  double ns_per_nnz_[2] = {-1.0, -1.0};
};

}  // namespace

absl::StatusOr<TrainResult> TrainAsyncScdDual(const Dataset& data, const ModelSpec& model,
                                              const SolverOptions& options) {
  if (FormulationOf(model.kind) != Formulation::kDual) {
    return absl::InvalidArgumentError("TrainAsyncScdDual needs a dual model");
  }
  return VisitDualObjective(model.kind, [&](auto obj) -> absl::StatusOr<TrainResult> {
    using Obj = decltype(obj);
    StopChecker checker(options.stop, options.on_epoch);  // times include the setup
    AsyncEngine<Obj> engine(data, model, options);
    DML_RETURN_IF_ERROR(engine.Start());
    TrainResult r = DriveDualScd<Obj>(options, model.lambda, data.x.rows(), engine, checker);
    r.threads = engine.Threads();
    if (r.threads == options.threads) return r;
    if (engine.FellMerge() > 0) {
      r.note = absl::StrCat("ran 1 thread of ", options.threads, " after epoch ", engine.FellMerge(),
                            ": the exact dual fell between certificates (the threads' steps on a "
                            "stale w overshot)");
    } else if (engine.ShrunkMerge()) {
      r.note = absl::StrCat(options.threads, " threads until shrinking left epochs of fewer than ",
                            kMinParallelNnz, " nonzeros, then 1");
    } else if (engine.NsPerNnz()[1] >= 0) {
      r.note = absl::StrFormat(
          "ran 1 thread of %d after epoch 2: %d threads took %.2f ns per nonzero, 1 took %.2f",
          options.threads, options.threads, engine.NsPerNnz()[1], engine.NsPerNnz()[0]);
    } else {
      r.note = absl::StrCat("ran 1 thread of ", options.threads, ": ", data.x.nnz(),
                            " nonzeros are too few for more to pay (< ", kMinParallelNnz, ")");
    }
    return r;
  });
}

}  // namespace dml::internal
