// Asynchronous parallel coordinate descent for the primal models
// (PASSCoDe-wild / Hogwild-style: Hsieh, Yu, Dhillon, "PASSCoDe: parallel
// asynchronous stochastic dual co-ordinate descent", ICML 2015; Niu, Recht,
// Re, Wright, "Hogwild!", NIPS 2011), on the primal side.
//
// Problem:   min_w f(A w) + sum_j lambda R_j(w_j) (lasso, elastic net), as
//            in scd_primal.cpp. L1-logistic goes to newGLMNET with its row
//            passes on the threads (glmnet_l1.cpp): the CDN engine here lost
//            to one thread on every set measured (issue 20).
// Variables: w, one coordinate per feature. The features are split once
//            across T threads (balanced by nonzeros); w_j is written only by
//            its owner. The shared vector (residual r = A w - y, or
//            e = exp(A w) for the logistic loss) is updated lock-free: each
//            thread adds to it (multiplies, for e) with a relaxed
//            compare-and-swap loop on the double, and reads it with relaxed
//            atomic loads, possibly stale. Increments commute, so no update
//            is lost.
// Epochs:    each thread takes its own active features in a fresh random
//            order; a barrier ends the epoch. Between epochs the calling
//            thread (the coordinator) alone does what scd_primal.cpp does:
//            the running estimate, LIBLINEAR-style shrinking bookkeeping and
//            the exact certificate.
// Stopping:  StopChecker, as in scd_primal.cpp: an exact certificate every
//            options.eval_every epochs or when the running estimate says the
//            gap or target rule holds; those rules stop only on an exact
//            certificate. The certificate (EvaluatePrimal) is computed from w
//            alone, recomputing v = A w from scratch, never from the shared
//            vector; the shared vector is then rebuilt from that exact v
//            while every worker waits at the barrier. threads = 1 runs the
//            same code on the calling thread only.

#include <algorithm>
#include <cmath>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <mutex>
#include <numeric>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dml/objective/elastic_net.hpp"
#include "dml/objective/evaluate.hpp"
#include "dml/objective/lasso.hpp"
#include "dml/solver/internal/primal_cd.hpp"
#include "dml/solver/internal/solvers.hpp"
#include "dml/solver/internal/stopping.hpp"
#include "dml/util/rng.hpp"
#include "dml/util/status.hpp"

namespace dml::internal {
namespace {

/// The shared vector under concurrent writers: relaxed atomic loads and
/// compare-and-swap read-modify-writes on doubles (GCC/Clang builtins, which
/// are lock-free for 8-byte types on every 64-bit target we build for).
struct AtomicAccess {
  static constexpr bool kPlain = false;
  static double Load(const double* p) {
    double v;
    __atomic_load(p, &v, __ATOMIC_RELAXED);
    return v;
  }
  static void Add(double* p, double x) {
    double old = Load(p);
    double next = old + x;
    while (!__atomic_compare_exchange(p, &old, &next, /*weak=*/true, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)) {
      next = old + x;
    }
  }
  static void Mul(double* p, double x) {
    double old = Load(p);
    double next = old * x;
    while (!__atomic_compare_exchange(p, &old, &next, /*weak=*/true, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)) {
      next = old * x;
    }
  }
};

/// A reusable barrier for a fixed number of threads (C++17 has none).
class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t generation = generation_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != generation; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const int count_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
};


/// One thread's share of the features and its per-epoch results.
struct Worker {
  std::vector<uint32_t> features;  // active ones first
  std::size_t active_size = 0;
  std::vector<double> scratch;
  Rng rng{0};
  double max_violation = 0.0;
  int64_t nnz = 0;   // nonzeros touched (read and written)
  int64_t read = 0;  // the visited columns' nonzeros
};

template <typename Obj>
class AsyncRun {
 public:
  AsyncRun(const Dataset& data, const ModelSpec& model, const SolverOptions& options)
      : data_(data), model_(model), options_(options), stop_(options.stop, options.on_epoch) {}

  absl::StatusOr<TrainResult> Run();

 private:
  enum class Gate { kWait, kGo, kAbort };

  // The columns, the objective and the zero model with its shared vector.
  void Setup();
  // Splits the features: largest first onto the least loaded thread.
  void SplitFeatures();
  // Makes every feature active again and drops the shrinking margin.
  void Unshrink();
  // Starts threads 1..T-1; ResourceExhausted (and no thread left) if one
  // cannot be started.
  absl::Status StartThreads();
  // The coordinator's epochs, until a stop rule holds (reason_) or a
  // certificate fails (the error).
  absl::Status Coordinate();
  // Whether this epoch ends with an exact certificate: every eval_every
  // epochs, or when the running estimate says a stop rule holds
  // (*estimated).
  bool WantCertificate(std::size_t active, bool* estimated);
  // Certifies w, reports the epoch and reactivates the features with a
  // positive gap; true when a stop rule holds.
  absl::StatusOr<bool> Certify(int64_t nnz, bool estimated);
  // The result: w and the last certificate (computed now if there is none).
  absl::StatusOr<TrainResult> Finish();
  // Runs worker t's epoch: its active features in a fresh random order.
  void Epoch(Worker& wk);
  // The body of threads 1..T-1.
  void ThreadMain(int t);

  const Dataset& data_;
  const ModelSpec& model_;
  const SolverOptions& options_;
  StopChecker stop_;

  CscMatrix a_;
  int64_t n_ = 0;
  std::size_t d_ = 0;
  double inv_n_ = 0.0;
  std::optional<Obj> obj_;
  std::vector<typename Obj::Column> cols_;
  std::vector<double> w_;
  std::vector<double> state_;
  std::vector<double> gap_est_;
  std::vector<Worker> workers_;
  double margin_ = std::numeric_limits<double>::infinity();
  double unshrink_below_ = -1.0;  // set from epoch 1's largest violation
  bool done_ = false;  // written by the coordinator before a barrier
  // A step left the multiplicative state's range (Obj::StepResult::resync):
  // every thread ends its epoch, and the coordinator rebuilds the state.
  std::atomic<bool> resync_{false};
  std::optional<Barrier> barrier_;
  // Threads 1..T-1, held at the gate until all of them have started.
  std::vector<std::thread> pool_;
  std::mutex gate_mu_;
  std::condition_variable gate_cv_;
  Gate gate_ = Gate::kWait;

  // The coordinator's progress.
  std::optional<Certificate> cert_;
  StopReason reason_ = StopReason::kMaxEpochs;
  int epoch_ = 0;
  double work_since_cert_ = 0.0;  // nonzeros read since the last certificate
  double work_total_ = 0.0;       // by all epochs (eval_pacing)
  int refuted_ = 0;
  int next_estimate_ = 0;
};

template <typename Obj>
void AsyncRun<Obj>::Epoch(Worker& wk) {
  const Obj& obj = *obj_;
  ShufflePrefix(wk.features, wk.active_size, wk.rng);
  wk.max_violation = 0.0;
  wk.nnz = 0;
  wk.read = 0;
  const double l1 = obj.L1();
  for (std::size_t s = 0; s < wk.active_size; ++s) {
    const uint32_t j = wk.features[s];
    const double wj = w_[j];
    const auto step = obj.template Step<AtomicAccess>(a_.outer(j), cols_[j], state_.data(),
                                                      wk.scratch.data(), wj, 1.0);
    wk.nnz += step.nnz;
    wk.read += static_cast<int64_t>(a_.outer(j).size);
    w_[j] = step.w;
    if (step.resync) resync_.store(true, std::memory_order_relaxed);
    if (resync_.load(std::memory_order_relaxed)) return;
    gap_est_[j] = obj.CoordinateGap(wj, step.grad);
    wk.max_violation = std::max(wk.max_violation, obj.Violation(wj, step.grad));
    if (options_.shrinking && wj == 0.0 && step.w == 0.0 && std::abs(step.grad) < l1 - margin_) {
      std::swap(wk.features[s], wk.features[--wk.active_size]);
      --s;
    }
  }
}

template <typename Obj>
void AsyncRun<Obj>::ThreadMain(int t) {
  for (;;) {
    barrier_->Wait();  // start of an epoch, or the end
    if (done_) return;
    Epoch(workers_[t]);
    barrier_->Wait();  // end of the epoch
  }
}

template <typename Obj>
absl::StatusOr<TrainResult> AsyncRun<Obj>::Run() {
  Setup();
  SplitFeatures();
  barrier_.emplace(static_cast<int>(workers_.size()));
  DML_RETURN_IF_ERROR(StartThreads());
  const absl::Status error = Coordinate();
  done_ = true;
  barrier_->Wait();  // releases the workers, which see done_
  for (std::thread& th : pool_) th.join();
  DML_RETURN_IF_ERROR(error);
  return Finish();
}

template <typename Obj>
void AsyncRun<Obj>::Setup() {
  a_ = data_.x.Convert(options_.threads);
  n_ = a_.rows();
  d_ = static_cast<std::size_t>(a_.cols());
  obj_ = Obj::Make(model_, data_.y);
  cols_ = Obj::PrepareColumns(a_, data_.y);
  w_.assign(d_, 0.0);
  state_.resize(static_cast<std::size_t>(n_));
  Obj::InitState(std::vector<double>(state_.size(), 0.0), data_.y, state_.data());
  gap_est_.assign(d_, 0.0);
  inv_n_ = 1.0 / static_cast<double>(n_);
}

template <typename Obj>
void AsyncRun<Obj>::SplitFeatures() {
  const std::size_t d = d_;
  const int threads = static_cast<int>(
      std::max<std::size_t>(1, std::min<std::size_t>(options_.threads, std::max<std::size_t>(d, 1))));
  workers_.resize(threads);
  std::vector<uint32_t> order(d);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
    return a_.outer_nnz(x) > a_.outer_nnz(y);
  });
  std::vector<int64_t> load(threads, 0);
  for (uint32_t j : order) {
    const int t = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    workers_[t].features.push_back(j);
    load[t] += a_.outer_nnz(j) + 1;
  }
  for (int t = 0; t < threads; ++t) {
    Worker& wk = workers_[t];
    wk.active_size = wk.features.size();
    std::size_t max_col = 1;
    for (uint32_t j : wk.features) max_col = std::max(max_col, a_.outer(j).size);
    wk.scratch.resize(max_col);
    wk.rng = Rng(options_.seed + 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(t));
  }
}

template <typename Obj>
void AsyncRun<Obj>::Unshrink() {
  for (Worker& wk : workers_) wk.active_size = wk.features.size();
  margin_ = std::numeric_limits<double>::infinity();
}

template <typename Obj>
absl::Status AsyncRun<Obj>::StartThreads() {
  const int threads = static_cast<int>(workers_.size());
  // A thread that cannot be started leaves the barrier one short: start
  // them all first, behind a gate, and give up cleanly if one fails.
  try {
    for (int t = 1; t < threads; ++t) {
      pool_.emplace_back([this, t] {
        {
          std::unique_lock<std::mutex> lock(gate_mu_);
          gate_cv_.wait(lock, [&] { return gate_ != Gate::kWait; });
          if (gate_ == Gate::kAbort) return;
        }
        ThreadMain(t);
      });
    }
  } catch (const std::system_error& e) {
    {
      std::lock_guard<std::mutex> lock(gate_mu_);
      gate_ = Gate::kAbort;
    }
    gate_cv_.notify_all();
    for (std::thread& th : pool_) th.join();
    return absl::ResourceExhaustedError(
        absl::StrCat("async primal SCD: cannot start ", threads, " threads: ", e.what()));
  }
  {
    std::lock_guard<std::mutex> lock(gate_mu_);
    gate_ = Gate::kGo;
  }
  gate_cv_.notify_all();
  return absl::OkStatus();
}

template <typename Obj>
absl::Status AsyncRun<Obj>::Coordinate() {
  for (;;) {
    if (auto r = stop_.BeforeEpoch(epoch_ + 1)) {
      reason_ = *r;
      return absl::OkStatus();
    }
    ++epoch_;
    cert_.reset();
    barrier_->Wait();
    Epoch(workers_[0]);
    barrier_->Wait();
    if (resync_.exchange(false)) Obj::InitState(ColumnTimes(a_, w_), data_.y, state_.data());

    // Coordinator: every worker is parked at the next barrier.
    double max_violation = 0.0;
    int64_t nnz = 0;
    int64_t read = 0;
    std::size_t active = 0;
    for (const Worker& wk : workers_) {
      max_violation = std::max(max_violation, wk.max_violation);
      nnz += wk.nnz;
      read += wk.read;
      active += wk.active_size;
    }
    margin_ = max_violation * inv_n_;
    // LIBLINEAR's CDN unshrinking, as scd_primal.cpp: every shrunk feature
    // comes back once the active set's largest violation is below a tenth
    // of epoch 1's (tightened x0.1 whenever the whole set gets there).
    if (unshrink_below_ < 0.0) unshrink_below_ = 0.1 * max_violation;
    if (options_.shrinking && max_violation <= unshrink_below_) {
      if (active < d_) {
        Unshrink();
        active = d_;
      } else {
        unshrink_below_ *= 0.1;
      }
    }

    work_since_cert_ += static_cast<double>(read);
    work_total_ += static_cast<double>(read);
    bool estimated = false;
    if (!WantCertificate(active, &estimated)) continue;
    DML_ASSIGN_OR_RETURN(const bool stop, Certify(nnz, estimated));
    if (stop) return absl::OkStatus();
  }
}

template <typename Obj>
bool AsyncRun<Obj>::WantCertificate(std::size_t active, bool* estimated) {
  if (PeriodicCertificateDue(options_.eval_every, work_since_cert_, a_.nnz(), options_.eval_pacing,
                             work_total_)) {
    return true;
  }
  const Obj& obj = *obj_;
  double gap_sum = 0.0;
  double penalty = 0.0;
  for (std::size_t j = 0; j < d_; ++j) {
    gap_sum += gap_est_[j];
    penalty += obj.Regularizer(w_[j]);
  }
  const double primal_est = obj.LossFromState(state_.data(), n_, cols_, w_) + penalty;
  std::optional<StopReason> est = stop_.Satisfied(primal_est, gap_sum);
  if (est == StopReason::kConverged && active < d_) {
    Unshrink();
    est.reset();
  }
  if (est && epoch_ >= next_estimate_) *estimated = true;
  return *estimated;
}

template <typename Obj>
absl::StatusOr<bool> AsyncRun<Obj>::Certify(int64_t nnz, bool estimated) {
  auto c = EvaluatePrimal(data_, model_, w_, /*per_coordinate=*/true);
  if (!c.ok()) return c.status();
  work_since_cert_ = 0.0;
  for (std::size_t j = 0; j < d_; ++j) gap_est_[j] = c->coordinate_gaps[j];
  for (Worker& wk : workers_) {
    for (std::size_t s = wk.active_size; s < wk.features.size(); ++s) {
      if (c->coordinate_gaps[wk.features[s]] > 0.0) {
        std::swap(wk.features[s], wk.features[wk.active_size++]);
      }
    }
  }
  c->coordinate_gaps.clear();
  const Progress report = CertifiedProgress(epoch_, c->primal, c->dual, c->gap, nnz);
  cert_ = std::move(*c);
  if (auto r = stop_.AfterEpoch(report)) {
    reason_ = *r;
    return true;
  }
  if (estimated) {
    ++refuted_;
    next_estimate_ = epoch_ + (1 << std::min(refuted_, 4));
  }
  // The shared vector drifts (rounding in a different order on every
  // thread); rebuild it from the exact v = A w.
  Obj::InitState(ColumnTimes(a_, w_), data_.y, state_.data());
  return false;
}

template <typename Obj>
absl::StatusOr<TrainResult> AsyncRun<Obj>::Finish() {
  TrainResult result;
  if (!cert_) {
    DML_ASSIGN_OR_RETURN(cert_, EvaluatePrimal(data_, model_, w_));
    if (epoch_ > 0) {  // the result's certificate is the last progress entry too
      stop_.AfterEpoch(CertifiedProgress(epoch_, cert_->primal, cert_->dual, cert_->gap));
    }
  }
  result.w = std::move(w_);
  result.primal = cert_->primal;
  result.dual = cert_->dual;
  result.gap = cert_->gap;
  result.epochs = epoch_;
  result.rounds = epoch_;
  result.seconds = stop_.Elapsed();
  result.reason = reason_;
  result.history = stop_.TakeHistory();
  result.threads = static_cast<int>(workers_.size());
  return result;
}

}  // namespace

absl::StatusOr<TrainResult> TrainAsyncScdPrimal(const Dataset& data, const ModelSpec& model,
                                                const SolverOptions& options) {
  switch (model.kind) {
    case ModelKind::kLasso: return AsyncRun<LassoObjective>(data, model, options).Run();
    case ModelKind::kElasticNet: return AsyncRun<ElasticNetObjective>(data, model, options).Run();
    // newGLMNET, its row passes on the threads (glmnet_l1.cpp).
    case ModelKind::kLogisticL1: return TrainGlmnetL1(data, model, options);
    default: break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "async primal SCD: model ", AsAbsl(ModelName(model.kind)), " is solved in the dual"));
}

}  // namespace dml::internal
