#pragma once
// Training entry point and the options every solver shares.
//
// Thread-safety: Train is reentrant; the data is only read. The callback runs
// on the calling thread (sequential solvers) or on the thread that finished
// the epoch (the async solver's coordinator thread), never concurrently.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "dml/data/sparse.hpp"
#include "dml/objective/model.hpp"
#include "dml/util/memory.hpp"  // CheckModelMemory, MemoryLimit

namespace dml {

/// The library's single-process solvers.
enum class SolverKind {
  kScd,       ///< sequential stochastic coordinate descent (dual or primal by model)
  kAsyncScd,  ///< T threads, lock-free shared vector (PASSCoDe-wild)
  kSgd,       ///< minibatch SGD on the primal (subgradient for hinge)
  /// truncated Newton on the primal (ridge, logistic, squared hinge; hinge
  /// through a smoothing cut in stages; T threads share its passes);
  /// logistic-l1: newGLMNET. Unaffected by the features' scales, where
  /// SCD's rate is not.
  kNewton,
  /// the solver that suits the model: kNewton (all `threads`) for ridge,
  /// logistic and squared hinge, and for hinge on features whose units
  /// differ by orders of magnitude (no more of them than examples); kScd
  /// for the others (logistic-l1: its newGLMNET; the asynchronous SCD
  /// rarely beats it on two cores). Hinge by dual CD that ends its epochs
  /// short of the gap rule on no more features than examples goes on with
  /// the smoothed-hinge Newton from its w. TrainResult::note says what ran.
  kAuto,
  /// TPA-SCD on a GPU (dml/gpu/tpa_scd.hpp): run through dml::gpu::Train,
  /// which links the GPU library; dml::Train refuses it.
  kTpaScd,
  /// DuHL (dml/solver/duhl.hpp): TrainDuhl, or cocoa's local solver;
  /// dml::Train refuses it.
  kDuhl,
};
/// "scd", "async-scd", "sgd", "newton", "auto", "tpa-scd", "duhl".
std::string_view SolverName(SolverKind kind);
/// What kAuto runs for `model` on `data` with `threads` threads: newton for
/// L2-logistic; for ridge and squared hinge, sequential dual coordinate
/// descent where there are more features than examples (unless the
/// features' units differ by orders of magnitude: FeatureStepFactors),
/// newton otherwise; newton for hinge where the units differ so and there
/// are no more features than examples;
/// sequential coordinate descent for the others, except
/// L1-logistic on threads > 1 with at least as many examples as features
/// or columns long enough for two threads to share newGLMNET's inner CD
/// (kAsyncScd). O(nnz) for ridge, squared hinge and hinge, O(1) for the others.
SolverKind AutoSolver(const ModelSpec& model, const Dataset& data, int threads);
/// Inverse of SolverName (also accepts "async"). Errors: InvalidArgument
/// listing the valid names.
absl::StatusOr<SolverKind> ParseSolverKind(std::string_view name);

/// When to stop. The first rule that holds wins; the result says which.
struct StopRule {
  /// Stop when gap <= max(gap_abs, gap_rel * |primal|).
  double gap_rel = 1e-6;
  double gap_abs = 0.0;
  int max_epochs = 1000;  ///< an epoch: one pass over the coordinates (or n examples for SGD)
  /// Wall-clock budget since training started.
  double max_seconds = std::numeric_limits<double>::infinity();
  /// Benchmarks: stop once the exact primal is <= this.
  std::optional<double> target_primal;
  /// Polled at least once per epoch; set by another thread to cancel.
  const std::atomic<bool>* cancel = nullptr;
};

/// The gap the rule accepts at `primal`: max(gap_abs, gap_rel * |primal|).
inline double GapTarget(const StopRule& rule, double primal) {
  return std::max(rule.gap_abs, rule.gap_rel * std::abs(primal));
}

/// Which StopRule ended training (kConverged: the gap rule).
enum class StopReason { kConverged, kTargetReached, kMaxEpochs, kTimeBudget, kCancelled };
/// "converged", "target reached", "max epochs", "time budget", "cancelled".
std::string_view StopReasonName(StopReason r);

/// Something that happened to a job besides training. Kinds:
/// "node_silent" (a node missed its liveness pings), "node_lost" (the job
/// went on: async-type modes), "restarted" (actors replaced, restarted
/// from a checkpoint), "start_up_restarted" (lost while connecting or
/// loading), "checkpoint_written", "checkpoint_failed", "resumed" (from a
/// checkpoint file), "local_epochs" (automatic H changed H),
/// "step_calibrated" (SGD modes: the step0 the workers found), "kv_store"
/// (hogwild on the key-value store, last entry: where its keys were served),
/// "worker_note" (a worker's line, once: the GPU its local solver is on, or
/// its fallback to the CPU and why).
struct ProgressEvent {
  std::string kind;
  std::string what;  ///< one sentence for people
};

/// One entry of a training run's progress, from a library solver (one per
/// evaluated epoch) or a distributed job (one per coordinator round or SGD
/// evaluation). Plain value.
struct Progress {
  int round = 0;         ///< solvers: the epoch; jobs: cocoa rounds or SGD evaluations
  double epochs = 0.0;   ///< examples (coordinates) processed / n
  double seconds = 0.0;  ///< since training started
  double primal = 0.0;  ///< P(w)
  double dual = 0.0;  ///< a lower bound on the optimum (SGD: from the iterate, evaluate.hpp)
  double gap = 0.0;   ///< primal - dual >= 0
  int64_t nnz_touched = 0;      ///< solvers: nonzeros processed in this epoch
  int64_t bytes_exchanged = 0;  ///< jobs: payload bytes of pushes, pulls and exchanges so far
  /// DuHL (TrainDuhl, cocoa with DuHL workers) and tpa-scd: bytes of data
  /// moved to the device(s) so far.
  int64_t device_bytes = 0;
  /// DuHL: coordinates copied to the device(s) so far (the swaps).
  int64_t device_swaps = 0;
  /// Jobs, per worker: its clock minus the slowest worker's (SGD modes), else 0.
  std::vector<int64_t> staleness;
  /// Jobs: what happened since the previous entry, in order; `event` is
  /// their sentences joined by "; " (what the wire and checkpoint files
  /// carry: `events` is local to the process that runs the coordinator).
  std::vector<ProgressEvent> events;
  std::string event;
};

/// Minibatch SGD: the one set of defaults, for the library's kSgd solver and
/// the runtime's SGD modes (dml/actors/runtime.hpp JobSgd) alike. With the
/// defaults nothing is hand-set: step0 is calibrated on a sample of the data
/// (CalibrateStep, sgd.hpp), the step then falls as 1 / (lambda t), and the
/// average of the evaluated iterates is certified beside the iterate.
struct SgdOptions {
  /// Rows per minibatch; 0: AutoBatch (sgd.hpp) of the rows and workers.
  int batch_size = 0;
  /// step_t = step0 / (1 + step_decay * t), t counted in minibatches (the
  /// SGD modes: in clocks). step0 = 0: calibrated on a sample of the data
  /// (Bottou's: the step that lowers a sample's objective most).
  double step0 = 0.0;
  /// < 0: lambda * step0, so step_t -> 1 / (lambda t), the rate of SGD on a
  /// lambda-strongly convex objective (Bottou 2012).
  double step_decay = -1.0;
  double momentum = 0.0;  ///< library kSgd only; in [0, 1)
  /// Polyak-Ruppert: at every evaluation also certify the average of the
  /// evaluated iterates (restarted whenever their count doubles, so it
  /// covers at least the last half of them), and stop on and return
  /// whichever of the two certifies the lower primal. L2 models only: for
  /// the L1 ones the iterate is kept (an average fills its zeros in).
  bool average = true;
  /// The certificate of ridge, L2-logistic and squared hinge at every
  /// evaluation: the dual point of the margins refined by a Newton step
  /// whose direction takes at most this many conjugate-gradient steps
  /// (newton_certificate.hpp; each a pass over the data, plus one pass and,
  /// in the SGD modes, one d-vector from every worker per pass). Where
  /// features are unscaled or lambda small the plain certificate overstates
  /// the suboptimality 50 to 5000 times. -1: the plain certificate only.
  int certificate_cg_steps = 16;
  /// Per-feature steps: feature j steps by step_t * f_j (FeatureStepFactors,
  /// sgd.hpp: about 1 / (its mean square + lambda), rounded to a power of
  /// two), a diagonal preconditioner computed from the data before
  /// training. Unscaled features (units over 4 decades) otherwise leave
  /// SGD orders of magnitude short of a relative 1e-3. false: one step.
  bool feature_steps = true;
};

/// SgdOptions::batch_size 0 resolved for `rows` split over `workers`: rows
/// / (32 workers) within [1, kMaxAutoBatch], so that a worker steps at
/// least 32 times an epoch where data is small. Why: on 569 rows and 4
/// workers a batch of 64 gave sync 2 steps an epoch, 11% above the optimum
/// after 1000 epochs; a batch of 4 came within 2.8e-4. Elsewhere 64.
inline constexpr int kMaxAutoBatch = 64;
int AutoBatch(int64_t rows, int workers);
/// `batch_size` itself when positive, else AutoBatch(rows, workers).
inline int ResolveBatch(int batch_size, int64_t rows, int workers) {
  return batch_size > 0 ? batch_size : AutoBatch(rows, workers);
}

/// Whether SGD with `o` certifies the average of its evaluated iterates
/// beside the iterate (SgdOptions::average: L2 models only).
inline bool AveragesIterates(const SgdOptions& o, const ModelSpec& model) {
  return o.average && FormulationOf(model.kind) == Formulation::kDual;
}

/// How Train runs; checked by Train (InvalidArgument naming the field).
struct SolverOptions {
  SolverKind kind = SolverKind::kScd;
  /// For kAsyncScd, kNewton and kAuto; kScd: its column copy's conversion,
  /// and for the dual models > 1 runs the exact certificates on a second
  /// thread beside the epochs (then not bitwise reproducible; eval_every
  /// counts from the last certificate started there). kNewton (fitting
  /// the threads): 1 and 2 give the same bits.
  int threads = 1;
  /// kAsyncScd: run fewer threads where they cannot pay (data too small for
  /// a second thread, epochs shrunk to a few coordinates); TrainResult says
  /// what ran. false: always `threads` (tests of the concurrent paths).
  bool fit_threads = true;
  uint64_t seed = 1;  ///< coordinate order / minibatch draws
  bool shrinking = true;  ///< SCD: skip coordinates at a bound (LIBLINEAR-style)
  /// An exact certificate (full pass) every N epochs, and always before
  /// stopping on the gap or target rule. 0 = only when the solver's running
  /// estimate says the rule holds (fastest; the callback then sees only the
  /// certified epochs). SCD with shrinking counts epochs in work: a
  /// certificate is due once N passes' worth of nonzeros were read since
  /// the last one (an epoch over a shrunk active set reads a fraction of
  /// the data; a certificate reads all of it).
  int eval_every = 1;
  /// SCD (dual, primal) and newGLMNET: a periodic certificate also waits
  /// until the work read since the last one is this share of all the work
  /// so far, so on long runs certificates (one or two passes each) stay a
  /// small part of the time; the running estimate still triggers one as
  /// soon as it says the rule holds, so no stop waits for it (the async
  /// engine's fall and stall guards, counted in certificates, then rely on
  /// those too). In [0, 1); 0: exactly every eval_every (tests, progress
  /// plots wanting every pass).
  double eval_pacing = 0.25;
  StopRule stop;
  SgdOptions sgd;  ///< for kSgd
  /// Called after every epoch whose objective was computed.
  std::function<void(const Progress&)> on_epoch;
};

/// What training returns: the library's Train and a distributed job
/// (dml::Job::Wait) alike.
struct TrainResult {
  ModelSpec model;            ///< the model trained
  std::vector<double> w;      ///< the model, length d
  std::vector<double> alpha;  ///< dual variables (library dual solvers), length n; else empty
  double primal = 0.0;        ///< recomputed exactly from the final iterate
  double dual = 0.0;          ///< a lower bound on the optimum
  double gap = 0.0;           ///< primal - dual >= 0: bounds the suboptimality
  double epochs = 0.0;        ///< examples (coordinates) processed / n
  int rounds = 0;             ///< jobs: coordinator rounds (cocoa) or evaluations; solvers: epochs
  double seconds = 0.0;       ///< wall-clock time of training
  StopReason reason = StopReason::kMaxEpochs;
  int64_t bytes_exchanged = 0;  ///< jobs: payload bytes moved between actors
  int64_t device_bytes = 0;     ///< DuHL, tpa-scd: bytes of data moved to the device(s)
  /// Jobs in ssp only: the largest clock lead over the slowest worker that
  /// any shard granted to a pull (never more than s).
  int64_t max_granted_staleness = 0;
  std::vector<Progress> history;  ///< every reported Progress, in order
  int threads = 1;  ///< solvers: threads that ran (kAsyncScd may run fewer than asked)
  /// Solvers: a choice the solver made that the caller should know of (fewer
  /// threads than asked, and why), empty if none.
  std::string note;
};

/// The checks Train makes before it trains, for other entry points
/// (dml::gpu::Train): the model, the options and the data with their labels,
/// and that the model's vectors fit in memory (CheckModelMemory, three
/// vectors: what any solver holds). Errors: InvalidArgument naming the field
/// or the example; ResourceExhausted.
/// FailedPrecondition where a run's certificate (primal or gap) is not
/// finite: a result that would say "converged" on inf or NaN (a lambda too
/// small for the data's scale) is an error instead. Train and the runtime
/// check every result with it.
absl::Status CheckCertificateFinite(const TrainResult& r, const ModelSpec& model);

absl::Status CheckTrainInputs(const Dataset& data, const ModelSpec& model,
                              const SolverOptions& options);


/// Trains `model` on `data` with the chosen solver. Errors: invalid model or
/// options (InvalidArgument naming the field), labels not in {-1,+1} for a
/// classification model, SGD asked for a dual-only quantity, etc.
/// Features no example uses (at least 4096 of them, and an eighth of the
/// nonzeros) are left out of the solve, on a renumbered copy of the data;
/// their weights are 0 in the result (as at any optimum), and the note says so.
absl::StatusOr<TrainResult> Train(const Dataset& data, const ModelSpec& model,
                                  const SolverOptions& options);

}  // namespace dml
