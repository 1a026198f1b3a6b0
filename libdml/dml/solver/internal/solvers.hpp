#pragma once
// The solvers behind Train() and MakeLocalSolver(); one per file. Train()
// (solver/train.cpp) validates the inputs and dispatches here, so these may
// assume a valid model, options and labels.

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "dml/data/sparse.hpp"
#include "dml/solver/cocoa_local.hpp"
#include "dml/solver/solver.hpp"

namespace dml::internal {

absl::StatusOr<TrainResult> TrainScdDual(const Dataset& data, const ModelSpec& model,
                                         const SolverOptions& options);
inline constexpr int64_t kAsyncDualReplicaMaxCols = 4096;
inline constexpr int64_t kAsyncDualReplicaMinRowNnz = 128;
/// Whether the asynchronous dual engine's threads keep per-thread replicas
/// of w (synced about every 32 rows, within [2 d, max(8192, 8 d)]
/// nonzeros) rather than one w shared by atomic adds: where w has at most
/// 4096 features (a sync reads all of it; on the real-sim-shaped set,
/// 20958 features, the replicas' syncs made shrunk epochs 2x slower than
/// one thread) and rows average at least 128 nonzeros. On shorter rows the
/// syncs either bounce w's cache lines between the cores (a9a, syncing
/// every 32 rows: 2 threads 2.6 ms an epoch against one's 1.8) or leave
/// the steps hundreds of rows stale (every 8192 nonzeros: squared hinge on
/// a9a took 3x one thread's epochs); there the atomic path runs, and its
/// probe usually finds one thread faster.
bool AsyncDualReplicas(const CsrMatrix& x);
/// Choices of the asynchronous dual engine that tests force.
struct AsyncDualKnobs {
  enum class Share { kAuto, kAtomic, kReplicas };
  Share share = Share::kAuto;
  Share* ran = nullptr;  ///< where set: the way the run shared w
};
absl::StatusOr<TrainResult> TrainAsyncScdDual(const Dataset& data, const ModelSpec& model,
                                              const SolverOptions& options,
                                              const AsyncDualKnobs& knobs = {});
absl::StatusOr<TrainResult> TrainScdPrimal(const Dataset& data, const ModelSpec& model,
                                           const SolverOptions& options);
/// newGLMNET's inner CD is shared by two threads where the columns it
/// visits average this many nonzeros or more (glmnet_l1.cpp); below it a
/// second thread only shares the passes, which did not pay where measured.
inline constexpr std::size_t kGlmnetSplitColumnNnz = 4096;

/// newGLMNET for kLogisticL1 (glmnet_l1.cpp); uses options.threads for its
/// per-example and gradient passes (and, on long columns, its inner CD).
absl::StatusOr<TrainResult> TrainGlmnetL1(const Dataset& data, const ModelSpec& model,
                                          const SolverOptions& options);
/// Truncated Newton on the primal of ridge, L2-logistic and squared hinge
/// (newton.cpp); logistic-l1 goes to TrainGlmnetL1, the others are refused.
absl::StatusOr<TrainResult> TrainNewton(const Dataset& data, const ModelSpec& model,
                                        const SolverOptions& options);
/// The smoothed-hinge Newton of TrainNewton from w on the smoothing mu (a
/// hand-over from dual CD). Errors: another model, w of the wrong length.
absl::StatusOr<TrainResult> TrainSmoothedHinge(const Dataset& data, const ModelSpec& model,
                                               const SolverOptions& options,
                                               const std::vector<double>& w, double mu);
absl::StatusOr<TrainResult> TrainAsyncScdPrimal(const Dataset& data, const ModelSpec& model,
                                                const SolverOptions& options);
absl::StatusOr<TrainResult> TrainSgd(const Dataset& data, const ModelSpec& model,
                                     const SolverOptions& options);

absl::StatusOr<std::unique_ptr<LocalSolver>> MakeDualLocalSolver(LocalBlock block,
                                                                 const ModelSpec& model,
                                                                 uint64_t seed);
absl::StatusOr<std::unique_ptr<LocalSolver>> MakePrimalLocalSolver(LocalBlock block,
                                                                   const ModelSpec& model,
                                                                   uint64_t seed);

}  // namespace dml::internal
