// Parallel asynchronous stochastic dual coordinate ascent (PASSCoDe:
// Hsieh, Yu, Dhillon, "PASSCoDe: Parallel ASynchronous Stochastic dual
// Co-ordinate Descent", ICML 2015) for ridge, logistic, hinge and
// squared-hinge SVM. Same problem, variables and step as scd_dual.cpp.
//
// T = options.threads threads. For a parallel epoch the active examples are
// dealt to T blocks (round robin over the last epoch's random order), one
// per thread, and each thread visits its block in a fresh random permutation.
// alpha_i is owned by the thread of its block. The shared w is kept in one
// of two ways (AsyncDualReplicas, solvers.hpp):
//  - replicas (at most kAsyncDualReplicaMaxCols features, rows of at least
//    kAsyncDualReplicaMinRowNnz nonzeros on average: dense sets of a few
//    hundred features): each thread steps on its own copy of w and about
//    every kReplicaSyncRows rows (ReplicaEvery) adds its change to the
//    shared w and takes the others'; a sync costs O(d), and the steps'
//    staleness is bounded by the interval;
//  - atomic (elsewhere): read without synchronisation ("wild") and updated
//    by lock-free atomic adds (relaxed compare-exchange on each double), so
//    updates are never lost but a step may see a w that other threads are
//    changing (PASSCoDe-atomic). On short rows over a short w (a9a) every
//    add bounces a cache line between the cores and the probe below
//    usually finds one thread faster.
// Threads meet at a barrier (spinning briefly, then sleeping) after every
// parallel epoch; there ||w||^2 is measured (the per-step deltas miss the
// concurrent cross terms). Before any certificate w is rebuilt from alpha,
// which is what makes the reported gap exact.
// Shrinking (hinge, squared hinge) follows LIBLINEAR's rule over all rows at
// once, as one thread would: the engine merges the blocks' projected-
// gradient extremes and unshrinks every block together.
// Fitting the threads to the machine (options.fit_threads): data under
// kMinParallelNnz nonzeros runs on one thread; an epoch predicted to read
// fewer than kMinEpochNnz (shrinking leaves hinge runs mostly such epochs)
// runs on one thread over all active rows, while the others wait; the first
// sequential epoch of at least kMinEpochNnz is timed, then the second
// parallel epoch of at least that (the first is a warm-up), and where all
// threads did not read nonzeros faster the rest runs on one thread.
// Whatever fit_threads says, a dual that stale steps lowered makes the
// replicas sync more often, and then puts the rest on one thread (the
// atomic path: at once), and so does a certified gap that stalled over
// parallel epochs (DriveDualScd's kStallCertificates). TrainResult::threads
// and ::note say so.
// Stopping: StopRule, as DriveDualScd in scd_dual_kernel.hpp.
// With T = 1 no thread is started and the plain (non-atomic) kernel runs:
// the iterates are those of the sequential solver with the same seed.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dml/solver/internal/scd_dual_kernel.hpp"
#include "dml/solver/internal/solvers.hpp"
#include "dml/util/status.hpp"

namespace dml::internal {
namespace {

/// A reusable barrier (std::barrier is C++20). Threads on cores of their
/// own spin for up to kSpin on arrival (an epoch of a few hundred
/// microseconds is over before a sleeping thread would wake), then sleep on
/// a condition variable (a long certificate pass, or the sequential epochs
/// of a shrunk run, do not burn the other cores); with more threads than
/// the machine's hardware threads they sleep at once (a spinner would take
/// the core of a thread still working). Acquire/release on the generation
/// orders every thread's writes before the barrier with everyone's reads
/// after it.
class Barrier {
 public:
  explicit Barrier(int count)
      : count_(count),
        spin_(static_cast<unsigned>(count) <= std::thread::hardware_concurrency()
                  ? kSpin
                  : std::chrono::microseconds{0}) {}
  void Wait() {
    const uint64_t gen = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 ==
        count_.load(std::memory_order_relaxed)) {
      Release(gen);
      return;
    }
    const auto until = std::chrono::steady_clock::now() + spin_;
    for (int i = 0;; ++i) {
      if (generation_.load(std::memory_order_acquire) != gen) return;
      if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) break;
      Pause();
    }
    std::unique_lock<std::mutex> lock(mu_);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    cv_.wait(lock, [&] { return generation_.load(std::memory_order_seq_cst) != gen; });
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
  }

  /// One participant leaves for good (it never arrived).
  void Drop() {
    const uint64_t gen = generation_.load(std::memory_order_acquire);
    const int count = count_.fetch_sub(1, std::memory_order_acq_rel) - 1;
    const int arrived = arrived_.load(std::memory_order_acquire);
    if (arrived > 0 && arrived == count) Release(gen);
  }

 private:
  static constexpr std::chrono::microseconds kSpin{200};

  static void Pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    std::this_thread::yield();
#endif
  }

  void Release(uint64_t gen) {
    arrived_.store(0, std::memory_order_relaxed);
    generation_.store(gen + 1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      // Under the mutex: a sleeper between its predicate check and its
      // wait holds it, so the notification cannot fall in that gap.
      std::lock_guard<std::mutex> lock(mu_);
      cv_.notify_all();
    }
  }

  std::atomic<int> count_;
  const std::chrono::microseconds spin_;
  std::atomic<int> arrived_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> sleepers_{0};
  std::mutex mu_;
  std::condition_variable cv_;
};

// About 1 ms of steps: data shorter than this is not worth the threads.
constexpr int64_t kMinParallelNnz = 1 << 18;
// An epoch predicted to read fewer nonzeros (about 0.2 ms on one thread)
// runs on one thread: its share per thread is too short for the barrier and
// the replicas' syncs, and on the few rows that shrinking leaves active,
// stale steps slow convergence (a9a hinge: the active set's projected
// gradients never settled below LIBLINEAR's 0.1 with 12k-nonzero epochs).
constexpr int64_t kMinEpochNnz = 1 << 16;
// All threads run when their time per nonzero is below this share of one
// thread's (a second core should buy at least 10%).
constexpr double kParallelMargin = 0.9;
// A replica syncs about every this many rows.
constexpr int64_t kReplicaSyncRows = 32;
// Falls of the dual (TrackDual) after which replicas give way to one thread:
// their syncs are then 64x as frequent as at first.
constexpr int kMaxFalls = 3;

/// Publishes a thread's steps on its private copy of w (local - base) to the
/// shared w by atomic adds, and takes the shared w (with the other threads'
/// published steps) as its new copy.
struct ReplicaSync {
  static constexpr bool kEnabled = true;
  int64_t every;  ///< nonzeros read between syncs
  double* shared;
  double* local;
  double* base;
  int64_t d;
  void Publish() {
    for (int64_t j = 0; j < d; ++j) {
      const double dl = local[j] - base[j];
      if (dl != 0.0) SharedW<true>::Add(shared + j, dl);
    }
  }
  void operator()() {
    for (int64_t j = 0; j < d; ++j) {
      const double dl = local[j] - base[j];
      if (dl != 0.0) SharedW<true>::Add(shared + j, dl);
      const double v = SharedW<true>::Load(shared + j);
      local[j] = v;
      base[j] = v;
    }
  }
};

template <typename Obj>
class AsyncEngine {
 public:
  AsyncEngine(const Dataset& data, const ModelSpec& model, const SolverOptions& opt,
              const AsyncDualKnobs& knobs)
      : x_(data.x),
        lambda_(model.lambda),
        inv_ln_(1.0 / (model.lambda * static_cast<double>(data.x.rows()))),
        shrink_(opt.shrinking && Obj::kShrinkable),
        fit_threads_(opt.fit_threads),
        coords_(MakeDualCoords<Obj>(data, model.lambda)),
        w_(static_cast<std::size_t>(data.x.cols()), 0.0) {
    const int64_t n = data.x.rows();
    threads_ = opt.fit_threads && data.x.nnz() < kMinParallelNnz
                   ? 1
                   : static_cast<int>(std::min<int64_t>(opt.threads, n));
    replica_ = threads_ > 1 && (knobs.share == AsyncDualKnobs::Share::kAuto
                                    ? AsyncDualReplicas(data.x)
                                    : knobs.share == AsyncDualKnobs::Share::kReplicas);
    if (knobs.ran != nullptr) {
      *knobs.ran = replica_ ? AsyncDualKnobs::Share::kReplicas : AsyncDualKnobs::Share::kAtomic;
    }
    // One block of every row, in order: with one thread this draws the
    // sequential solver's permutations. Parallel epochs deal it out.
    DualBlock all;
    all.order.resize(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) all.order[static_cast<std::size_t>(i)] = i;
    all.active = n;
    all.rng = Rng(opt.seed);
    // Several threads: the shrinking rule is the engine's (SharedShrinkRule).
    all.shared_rule = threads_ > 1;
    blocks_.push_back(std::move(all));
    for (int t = 0; t < threads_; ++t) {
      rngs_.emplace_back(opt.seed ^ (0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(t + 1)));
    }
    sums_.resize(static_cast<std::size_t>(threads_));
    if (replica_) {
      local_.assign(static_cast<std::size_t>(threads_), std::vector<double>(w_.size()));
      base_.assign(static_cast<std::size_t>(threads_), std::vector<double>(w_.size()));
    }
    const DualExact e = DualStartState(x_, coords_.data(), lambda_, w_.data());
    negconj_sum_ = e.negconj_sum;
    wsq_ = e.wsq;
    negconj_run_ = e.negconj_sum;
    wsq_run_ = e.wsq;
    last_dual_ = negconj_run_ / static_cast<double>(n) - 0.5 * lambda_ * wsq_run_;
  }

  /// Threads that run epochs together at the end of the run (1 where none
  /// ever did, or after the engine went to one thread for good).
  int Threads() const { return parallel_epochs_ > 0 ? threads_ : 1; }
  int StartedThreads() const { return started_threads_; }
  /// Nanoseconds per nonzero measured on one thread and on all ([1]), or
  /// -1 where not measured.
  const double* NsPerNnz() const { return ns_per_nnz_; }
  int ParallelEpochs() const { return parallel_epochs_; }
  /// Epochs run on one thread for being short, after a parallel one.
  int ShortEpochs() const { return short_epochs_; }
  /// The epoch after which a falling dual merged the threads, or 0.
  int FellMerge() const { return fell_merge_; }
  bool ProbeLost() const { return probe_lost_; }
  int ProbeEpoch() const { return probe_epoch_; }

  /// The exact dual fell between certificates: the threads' stale steps
  /// overshoot on this data. Replicas sync more often (TrackDual's ladder,
  /// unless it already took this fall); the atomic path, or replicas at the
  /// ladder's end, run the rest on one thread (sequential SCD from the
  /// current, feasible alpha, which converges).
  void DualFell(int epoch) {
    if (threads_ <= 1) return;
    if (replica_) {
      if (fall_epoch_ != epoch) OnFall(epoch);
      return;
    }
    fell_merge_ = epoch;
    OneThreadForGood();
  }

  /// The certified gap stalled over epochs [since, epoch] (DriveDualScd):
  /// on several threads, stale gradients near the optimum can keep
  /// shrinking coordinates that should move; if any of those epochs ran on
  /// the threads, the rest runs on one.
  void Stalled(int since, int epoch) {
    if (threads_ <= 1 || last_parallel_epoch_ < since) return;
    stalled_ = epoch;
    OneThreadForGood();
  }
  int StalledAt() const { return stalled_; }

  ~AsyncEngine() { Stop(); }

  /// Starts threads 1..T-1. Errors: the system refused a thread.
  absl::Status Start() {
    started_threads_ = threads_;
    if (threads_ <= 1) return absl::OkStatus();
    barrier_ = std::make_unique<Barrier>(threads_);
    try {
      // Reserved first: a failed push_back after a started thread would
      // otherwise leave it waiting for arrivals that never come.
      workers_.reserve(static_cast<std::size_t>(threads_ - 1));
      for (int t = 1; t < threads_; ++t) {
        workers_.emplace_back([this, t] { WorkerLoop(static_cast<std::size_t>(t)); });
      }
    } catch (const std::exception& e) {
      // The threads already started wait for T arrivals: drop the missing
      // ones, then release and join the started ones.
      for (int t = static_cast<int>(workers_.size()) + 1; t < threads_; ++t) barrier_->Drop();
      Stop();
      return absl::ResourceExhaustedError(
          absl::StrCat("could not start ", threads_, " threads: ", e.what()));
    }
    return absl::OkStatus();
  }

  DualEpochSums RunEpoch() {
    DualEpochSums s;
    auto t0 = std::chrono::steady_clock::now();
    ++epoch_;
    const int64_t predicted = PredictedNnz();
    const bool parallel = threads_ > 1 && ChooseParallel(predicted);
    bool probe = false;
    if (!parallel) {
      Merge();
      s = RunBlock<false>(0);
      if (parallel_epochs_ > 0) ++short_epochs_;
    } else {
      Split();
      ++parallel_epochs_;
      last_parallel_epoch_ = epoch_;
      // The probe is the second whole parallel epoch: an eighth of one, or
      // the first, was mostly the other threads' wake-up and their first
      // reads of rows the calling thread had just stepped on (6000 x 60
      // dense: 8.0 against 1.7 ns per nonzero).
      probe = fit_threads_ && !decided_ && warmed_;
      if (fit_threads_) warmed_ = true;
      replica_every_ = ReplicaEvery(predicted);
      t0 = std::chrono::steady_clock::now();  // the steps' time, not the deal's
      // The barriers order the above before the workers' reads, and every
      // block's writes before what follows.
      RunOnThreads(Job::kEpoch);
      for (const DualEpochSums& b : sums_) s.Merge(b);
      // The tracked ||w||^2 misses the concurrent steps' cross terms;
      // measure it (no update is lost, so this is ||w(alpha)||^2 up to
      // rounding) after every epoch with replicas (TrackDual needs it),
      // else once the epochs since read at least d/2 nonzeros.
      wsq_work_ += s.nnz;
      if (replica_ || 2 * wsq_work_ >= static_cast<int64_t>(w_.size())) {
        double wsq = 0.0;
        for (const double v : w_) wsq += v * v;
        s.wsq_exact = wsq;
        wsq_work_ = 0;
      }
    }
    if (blocks_.front().shared_rule && shrink_) SharedShrinkRule(s);
    TrackDual(parallel, s);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    Record(parallel, probe, s, secs);
    return s;
  }

  DualExact Certify() {
    const bool threaded =
        threads_ > 1 && static_cast<int64_t>(w_.size()) <= kAsyncDualReplicaMaxCols;
    const DualExact e = threaded ? CertifyOnThreads()
                                 : CertifyDualCoords<Obj>(x_, coords_.data(), lambda_, w_.data());
    w_exact_ = !threaded;
    negconj_run_ = e.negconj_sum;
    wsq_run_ = e.wsq;
    last_dual_ = TrackedDual();  // the formula TrackDual compares with
    return e;
  }
  double NegConjSum() const { return negconj_sum_; }
  double WSq() const { return wsq_; }
  int64_t Nnz() const { return x_.nnz(); }
  void Unshrink() {
    for (DualBlock& b : blocks_) b.Unshrink();
    rule_.Unshrink();
  }
  std::vector<double> Alpha() const {
    std::vector<double> a(coords_.size());
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = coords_[i].alpha;
    return a;
  }
  /// w(alpha) in PrimalFromDual's order (so bitwise that vector). After a
  /// certificate on the threads, which sums it in another order, it is
  /// rebuilt: the reported P and gap are then those of a w that differs
  /// from this one by rounding.
  std::vector<double> W() const {
    if (w_exact_) return w_;
    std::vector<double> w(w_.size());
    RebuildDualW(x_, coords_.data(), lambda_, w.data());
    return w;
  }

 private:
  // What the threads run between two barriers.
  enum class Job { kEpoch, kCertW, kCertMargins };

  template <bool kParallel>
  DualEpochSums RunBlock(std::size_t t) {
    const uint32_t* idx = x_.indices().data();
    const float* val = x_.values().data();
    if constexpr (kParallel) {
      if (replica_) {
        std::vector<double>& loc = local_[t];
        std::vector<double>& base = base_[t];
        const int64_t d = static_cast<int64_t>(w_.size());
        for (int64_t j = 0; j < d; ++j) loc[j] = base[j] = SharedW<true>::Load(w_.data() + j);
        ReplicaSync sync{replica_every_, w_.data(), loc.data(), base.data(), d};
        const DualEpochSums s = RunDualEpochMaybeShrink<Obj, false, ReplicaSync>(
            shrink_, idx, val, coords_.data(), loc.data(), inv_ln_, blocks_[t], sync);
        sync.Publish();
        return s;
      }
    }
    return RunDualEpochMaybeShrink<Obj, kParallel>(shrink_, idx, val, coords_.data(), w_.data(),
                                                   inv_ln_, blocks_[t]);
  }

  // Nonzeros between a thread's syncs: kReplicaSyncRows rows' worth, within
  // [2 d, max(8192, 8 d)] (the sync reads all of w), times every_scale_
  // (each fall of the dual quarters it), never under d.
  int64_t ReplicaEvery(int64_t predicted) const {
    const int64_t d = static_cast<int64_t>(w_.size());
    const int64_t row_nnz = std::max<int64_t>(1, x_.nnz() / x_.rows());
    int64_t every = std::clamp<int64_t>(kReplicaSyncRows * row_nnz, 2 * d,
                                              std::max<int64_t>(8192, 8 * d));
    // At least 16 syncs in a thread's share of a short epoch (tests with
    // fit_threads off), never under 2 d.
    every = std::max<int64_t>(2 * d, std::min<int64_t>(every, predicted / (16 * threads_)));
    return std::max<int64_t>(d, static_cast<int64_t>(every_scale_ * static_cast<double>(every)));
  }

  double TrackedDual() const {
    return negconj_run_ / static_cast<double>(coords_.size()) - 0.5 * lambda_ * wsq_run_;
  }

  // The dual from the tracked sum of NegConj and ||w||^2, exact (up to
  // rounding, and logistic's cached-logit steps) after an epoch whose
  // ||w||^2 was measured: with replicas that is every parallel epoch.
  // Coordinate ascent never lowers it; where the threads' stale steps did
  // (dense, low-dimensional data: every row moves every feature), OnFall
  // makes the syncs more frequent. Without this a run with eval_every = 0
  // oscillated to max epochs (4000 x 12 dense hinge). The threshold is
  // relative to the dual's two terms, not to their difference (near 0).
  void TrackDual(bool parallel, const DualEpochSums& s) {
    negconj_run_ += s.negconj_delta;
    wsq_run_ = std::isnan(s.wsq_exact) ? wsq_run_ + s.wsq_delta : s.wsq_exact;
    const double dual = TrackedDual();
    const double scale = std::abs(negconj_run_) / static_cast<double>(coords_.size()) +
                         0.5 * lambda_ * wsq_run_;
    if (parallel && replica_ && dual < last_dual_ - 1e-9 * scale - 1e-15) OnFall(epoch_);
    last_dual_ = dual;
  }

  // A fall of the dual with replicas: syncs 4x as frequent, and after
  // kMaxFalls of them the rest on one thread.
  void OnFall(int epoch) {
    fall_epoch_ = epoch;
    every_scale_ *= 0.25;
    if (++dual_falls_ >= kMaxFalls) {
      fell_merge_ = epoch;
      OneThreadForGood();
    }
  }

  // Nonzeros the next epoch will read: those of the rows the last epoch
  // left active, or every row's where all are active again.
  int64_t PredictedNnz() const {
    for (const DualBlock& b : blocks_) {
      if (b.active < b.size()) return next_nnz_;
    }
    return x_.nnz();
  }

  // Whether this epoch runs on every thread. Several threads pay only where
  // the epoch is long enough and the machine has the cores free; which
  // holds is measured, not guessed (see Record).
  bool ChooseParallel(int64_t predicted) const {
    if (!fit_threads_) return true;
    if (predicted < kMinEpochNnz) return false;
    // The probe needs one thread's time first.
    return decided_ || ns_per_nnz_[0] >= 0;
  }

  void Record(bool parallel, bool probe, const DualEpochSums& s, double secs) {
    const int64_t nnz = s.nnz;
    next_nnz_ = nnz - s.shrunk_nnz;
    if (!fit_threads_ || decided_ || threads_ <= 1 || nnz < kMinEpochNnz) {
      return;
    }
    if (!parallel) {
      ns_per_nnz_[0] = 1e9 * secs / static_cast<double>(nnz);
      return;
    }
    if (!probe) return;
    ns_per_nnz_[1] = 1e9 * secs / static_cast<double>(nnz);
    decided_ = true;
    probe_epoch_ = epoch_;
    if (!(ns_per_nnz_[1] < kParallelMargin * ns_per_nnz_[0])) {
      probe_lost_ = true;
      OneThreadForGood();
    }
  }

  // LIBLINEAR's end-of-epoch shrinking rule over all rows at once, as one
  // thread would apply it (each block on its own unshrank out of step with
  // the others: a9a hinge read 1.6x the nonzeros).
  void SharedShrinkRule(const DualEpochSums& s) {
    bool full = true;
    for (const DualBlock& b : blocks_) full = full && b.active == b.size();
    const bool unshrink = ApplyShrinkRule(s.pg_max, s.pg_min, full, s.began_full, rule_);
    for (DualBlock& b : blocks_) {
      if (unshrink) b.Unshrink();
      b.pg_max_old = rule_.pg_max_old;
      b.pg_min_old = rule_.pg_min_old;
      b.eps_pg = rule_.eps_pg;
    }
  }

  // The blocks become one: the active rows first (in their last order),
  // then the shrunk; the thresholds are the rule's, shared by all.
  void Merge() {
    if (blocks_.size() == 1) return;
    DualBlock one;
    for (const DualBlock& b : blocks_) {
      one.order.insert(one.order.end(), b.order.begin(), b.order.begin() + b.active);
    }
    one.active = one.size();
    for (std::size_t t = 0; t < blocks_.size(); ++t) {
      const DualBlock& b = blocks_[t];
      one.order.insert(one.order.end(), b.order.begin() + b.active, b.order.end());
      rngs_[t] = b.rng;
    }
    one.pg_max_old = rule_.pg_max_old;
    one.pg_min_old = rule_.pg_min_old;
    one.eps_pg = rule_.eps_pg;
    one.shared_rule = true;
    one.rng = seq_rng_;
    blocks_.assign(1, std::move(one));
  }

  // One block per thread: the active rows dealt round robin in their last
  // (random) order, then the shrunk ones likewise, so every block gets a
  // random share of both.
  void Split() {
    if (static_cast<int>(blocks_.size()) == threads_) return;
    DualBlock one = std::move(blocks_.front());
    seq_rng_ = one.rng;
    blocks_.assign(static_cast<std::size_t>(threads_), DualBlock{});
    const std::size_t t_count = blocks_.size();
    for (std::size_t k = 0; k < static_cast<std::size_t>(one.active); ++k) {
      blocks_[k % t_count].order.push_back(one.order[k]);
    }
    for (DualBlock& b : blocks_) b.active = b.size();
    for (std::size_t k = static_cast<std::size_t>(one.active); k < one.order.size(); ++k) {
      blocks_[k % t_count].order.push_back(one.order[k]);
    }
    for (std::size_t t = 0; t < t_count; ++t) {
      DualBlock& b = blocks_[t];
      b.pg_max_old = one.pg_max_old;
      b.pg_min_old = one.pg_min_old;
      b.eps_pg = one.eps_pg;
      b.shared_rule = true;
      b.rng = rngs_[t];
    }
  }

  void OneThreadForGood() {
    Merge();
    Stop();
    threads_ = 1;
  }

  void WorkerLoop(std::size_t t) {
    for (;;) {
      barrier_->Wait();
      if (exit_) return;
      RunJob(t);
      barrier_->Wait();
    }
  }

  void RunJob(std::size_t t) {
    switch (job_) {
      case Job::kEpoch: sums_[t] = RunBlock<true>(t); break;
      case Job::kCertW: CertW(t); break;
      case Job::kCertMargins: CertMargins(t); break;
    }
  }

  // Every thread runs `job` on its share, the calling thread too; between
  // the two barriers.
  void RunOnThreads(Job job) {
    job_ = job;
    barrier_->Wait();
    RunJob(0);
    barrier_->Wait();
  }

  // The certificate of CertifyDualCoords, its two passes (w rebuilt from
  // alpha, then the margins) each shared by the threads over contiguous
  // rows of about equal nonzeros; w is short here (at most
  // kAsyncDualReplicaMaxCols), so each thread sums its rows' share into a
  // vector of its own. The same values up to the order of the sums. With
  // eval_every = 1 on the dense 30000 x 300 hinge set the certificates took
  // about 3x the epochs' time.
  DualExact CertifyOnThreads() {
    if (cert_rows_.empty()) {
      const std::vector<int64_t>& off = x_.offsets();
      const int64_t n = x_.rows();
      cert_rows_.assign(static_cast<std::size_t>(threads_) + 1, n);
      cert_rows_[0] = 0;
      for (int t = 1; t < threads_; ++t) {
        const int64_t target = x_.nnz() / threads_ * t;
        cert_rows_[static_cast<std::size_t>(t)] =
            std::lower_bound(off.begin(), off.begin() + n, target) - off.begin();
      }
      cert_w_.assign(static_cast<std::size_t>(threads_), std::vector<double>(w_.size()));
      cert_sums_.assign(static_cast<std::size_t>(threads_), {});
    }
    RunOnThreads(Job::kCertW);
    const double scale = 1.0 / (lambda_ * static_cast<double>(x_.rows()));
    double wsq = 0.0;
    for (std::size_t j = 0; j < w_.size(); ++j) {
      double v = 0.0;
      for (const std::vector<double>& part : cert_w_) v += part[j];
      w_[j] = v * scale;
      wsq += w_[j] * w_[j];
    }
    RunOnThreads(Job::kCertMargins);
    DualMarginSums sum;
    for (const DualMarginSums& part : cert_sums_) {
      sum.loss += part.loss;
      sum.gap += part.gap;
      sum.nc += part.nc;
      sum.shrunk_gap += part.shrunk_gap;
    }
    return DualExactFrom(sum, wsq, lambda_, x_.rows());
  }

  void CertW(std::size_t t) {
    SumAlphaRows(x_, coords_.data(), cert_rows_[t], cert_rows_[t + 1], cert_w_[t].data());
  }

  void CertMargins(std::size_t t) {
    cert_sums_[t] =
        SumDualMargins<Obj>(x_, coords_.data(), cert_rows_[t], cert_rows_[t + 1], w_.data());
  }


  void Stop() {
    if (workers_.empty()) return;
    exit_ = true;  // published by the barrier
    barrier_->Wait();
    for (std::thread& th : workers_) th.join();
    workers_.clear();
  }

  const CsrMatrix& x_;
  double lambda_;
  double inv_ln_;
  bool shrink_;  // options.shrinking, where the objective has bounds
  bool fit_threads_;
  bool replica_ = false;  // threads step on private copies of w
  int threads_ = 1;       // threads that run parallel epochs from here on
  int started_threads_ = 1;
  std::vector<DualCoord> coords_;
  std::vector<double> w_;
  std::vector<DualBlock> blocks_;  // one (sequential epochs) or threads_
  DualBlock rule_;  // the shrinking rule's state where several threads share it
  std::vector<Rng> rngs_;  // each thread's permutations, kept while merged
  Rng seq_rng_{0};         // the merged block's, kept while split
  std::vector<DualEpochSums> sums_;
  bool w_exact_ = false;  // w_ is PrimalFromDual's vector (the last certificate's, one thread)
  Job job_ = Job::kEpoch;  // written by the calling thread only before a barrier
  std::vector<int64_t> cert_rows_;              // the certificate's row ranges
  std::vector<std::vector<double>> cert_w_;     // each thread's share of A^T alpha
  std::vector<DualMarginSums> cert_sums_;       // each thread's loss, gap, NegConj
  int64_t replica_every_ = 0;
  double every_scale_ = 1.0;
  int dual_falls_ = 0;
  int fall_epoch_ = 0;  // the epoch of the last fall OnFall took
  // The dual as TrackDual follows it (its own sums: the driver keeps its own).
  double negconj_run_ = 0.0;
  double wsq_run_ = 0.0;
  double last_dual_ = 0.0;
  std::vector<std::vector<double>> local_, base_;  // replicas: w and its last sync
  std::unique_ptr<Barrier> barrier_;
  std::vector<std::thread> workers_;
  bool exit_ = false;  // written by the calling thread only before a barrier
  double negconj_sum_ = 0.0;
  double wsq_ = 0.0;
  int64_t wsq_work_ = 0;  // nonzeros read since ||w||^2 was measured
  int64_t next_nnz_ = 0;  // nonzeros of the rows the last epoch left active
  int epoch_ = 0;
  int parallel_epochs_ = 0;
  int short_epochs_ = 0;
  bool decided_ = false;  // the probe ran
  bool warmed_ = false;   // a parallel epoch ran (the probe's warm-up)
  bool probe_lost_ = false;
  int probe_epoch_ = 0;
  int fell_merge_ = 0;  // merged after this epoch because the dual fell
  int stalled_ = 0;     // merged after this epoch because the gap stalled
  int last_parallel_epoch_ = 0;
  double ns_per_nnz_[2] = {-1.0, -1.0};
};

}  // namespace

bool AsyncDualReplicas(const CsrMatrix& x) {
  return x.rows() > 0 && x.cols() <= kAsyncDualReplicaMaxCols &&
         x.nnz() >= kAsyncDualReplicaMinRowNnz * x.rows();
}

absl::StatusOr<TrainResult> TrainAsyncScdDual(const Dataset& data, const ModelSpec& model,
                                              const SolverOptions& options,
                                              const AsyncDualKnobs& knobs) {
  if (FormulationOf(model.kind) != Formulation::kDual) {
    return absl::InvalidArgumentError("TrainAsyncScdDual needs a dual model");
  }
  return VisitDualObjective(model.kind, [&](auto obj) -> absl::StatusOr<TrainResult> {
    using Obj = decltype(obj);
    StopChecker checker(options.stop, options.on_epoch);  // times include the setup
    AsyncEngine<Obj> engine(data, model, options, knobs);
    DML_RETURN_IF_ERROR(engine.Start());
    TrainResult r = DriveDualScd<Obj>(options, model.lambda, data.x.rows(), engine, checker);
    r.threads = engine.Threads();
    const int asked = options.threads;
    if (asked <= 1) return r;
    const int ran = engine.StartedThreads();
    if (ran == 1) {
      r.note = data.x.rows() == 1
                   ? absl::StrCat("ran 1 thread of ", asked, ": the data has one example")
                   : absl::StrCat("ran 1 thread of ", asked, ": ", data.x.nnz(),
                                  " nonzeros are too few for more to pay (< ", kMinParallelNnz,
                                  ")");
    } else if (engine.FellMerge() > 0) {
      r.note = absl::StrCat("ran 1 thread of ", asked, " after epoch ", engine.FellMerge(),
                            ": the exact dual fell between certificates (the threads' steps on a "
                            "stale w overshot)");
    } else if (engine.StalledAt() > 0) {
      r.note = absl::StrCat("ran 1 thread of ", asked, " after epoch ", engine.StalledAt(), ": ",
                            kStallCertificates,
                            " certificates in a row did not cut the gap by 10% on ", ran,
                            " threads");
    } else if (engine.ProbeLost()) {
      r.note = absl::StrFormat(
          "ran 1 thread of %d after epoch %d: %d threads took %.2f ns per nonzero, 1 took %.2f",
          asked, engine.ProbeEpoch(), ran, engine.NsPerNnz()[1], engine.NsPerNnz()[0]);
    } else if (engine.ParallelEpochs() == 0) {
      r.note = r.epochs <= 1
                   ? absl::StrCat("ran 1 thread of ", asked,
                                  ": the run ended after its first epoch (one thread's, timed "
                                  "before the threads run)")
                   : absl::StrCat("ran 1 thread of ", asked, ": no epoch after the first read ",
                                  kMinEpochNnz, " nonzeros or more (shrinking)");
    } else {
      if (ran < asked) {
        r.note = absl::StrCat("ran ", ran, " threads of ", asked, ": ", data.x.rows(), " examples");
      }
      if (engine.ShortEpochs() > 0) {
        absl::StrAppend(&r.note, r.note.empty() ? "" : "; ", "ran ", ran, " threads on ",
                        engine.ParallelEpochs(), " of ", r.epochs,
                        " epochs, 1 on the rest (epochs of fewer than ", kMinEpochNnz,
                        " nonzeros, or the first)");
      }
    }
    return r;
  });
}

}  // namespace dml::internal
