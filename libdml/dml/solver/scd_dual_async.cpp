// Parallel asynchronous stochastic dual coordinate ascent (PASSCoDe-wild:
// Hsieh, Yu, Dhillon, "PASSCoDe: Parallel ASynchronous Stochastic dual
// Co-ordinate Descent", ICML 2015) for ridge, logistic, hinge and
// squared-hinge SVM. Same problem, variables and step as scd_dual.cpp.
//
// T = options.threads threads; the examples are split into T contiguous
// blocks of about equal nonzeros, one per thread, and each thread visits its
// own block in a fresh random permutation every epoch (with its own
// LIBLINEAR-style shrinking state). alpha_i is owned by the thread of its
// block. The shared w is read without synchronisation ("wild") and updated by
// lock-free atomic adds (relaxed compare-exchange on each double), so updates
// are never lost but a step may see a w that other threads are changing.
// Threads meet at a barrier after every epoch; the calling thread (which
// also runs block 0) then rebuilds w from alpha before any certificate, which
// is what makes the reported gap exact (and removes the drift of w).
// Stopping: StopRule, as DriveDualScd in scd_dual_kernel.hpp.
// With T = 1 no thread is started and the plain (non-atomic) kernel runs:
// the iterates are those of the sequential solver with the same seed.
#include <condition_variable>
#include <memory>
#include <mutex>
#include <numeric>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
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

template <typename Obj>
class AsyncEngine {
 public:
  AsyncEngine(const Dataset& data, const ModelSpec& model, const SolverOptions& opt)
      : x_(data.x),
        lambda_(model.lambda),
        inv_ln_(1.0 / (model.lambda * static_cast<double>(data.x.rows()))),
        shrink_(opt.shrinking),
        coords_(MakeDualCoords<Obj>(data, model.lambda)),
        w_(static_cast<std::size_t>(data.x.cols()), 0.0) {
    const int64_t n = data.x.rows();
    const int threads = static_cast<int>(std::min<int64_t>(opt.threads, n));
    // Split by nonzeros: block t ends at the first row whose offset reaches
    // t/T of nnz (every block keeps at least one row).
    const std::vector<int64_t>& off = data.x.offsets();
    const int64_t nnz = data.x.nnz();
    blocks_.resize(static_cast<std::size_t>(threads));
    sums_.resize(blocks_.size());
    int64_t begin = 0;
    for (int t = 0; t < threads; ++t) {
      int64_t end = n;
      if (t + 1 < threads) {
        const int64_t target = nnz / threads * (t + 1) + nnz % threads * (t + 1) / threads;
        end = std::lower_bound(off.begin() + begin + 1, off.end(), target) - off.begin();
        end = std::max(end, begin + 1);
        end = std::min(end, n - (threads - 1 - t));
      }
      DualBlock& b = blocks_[t];
      b.order.resize(static_cast<std::size_t>(end - begin));
      std::iota(b.order.begin(), b.order.end(), begin);
      b.active = b.size();
      // Thread 0 draws the sequential solver's stream.
      b.rng = Rng(opt.seed ^ (0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(t)));
      begin = end;
    }
    const DualExact e = DualStartState(x_, coords_.data(), lambda_, w_.data());
    negconj_sum_ = e.negconj_sum;
    wsq_ = e.wsq;
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
    if (blocks_.size() == 1) {
      return RunBlock<false>(0);
    }
    barrier_->Wait();  // start
    sums_[0] = RunBlock<true>(0);
    barrier_->Wait();  // end: every block's writes are visible here
    DualEpochSums s;
    for (const DualEpochSums& b : sums_) s.Merge(b);
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
  std::vector<DualCoord> coords_;
  std::vector<double> w_;
  std::vector<DualBlock> blocks_;
  std::vector<DualEpochSums> sums_;
  std::unique_ptr<Barrier> barrier_;
  std::vector<std::thread> workers_;
  bool exit_ = false;  // written by the calling thread only before a barrier
  double negconj_sum_ = 0.0;
  double wsq_ = 0.0;
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
    return DriveDualScd<Obj>(options, model.lambda, data.x.rows(), engine, checker);
  });
}

}  // namespace dml::internal
