#pragma once
// The solvers behind Train() and MakeLocalSolver(); one per file. Train()
// (solver/train.cpp) validates the inputs and dispatches here, so these may
// assume a valid model, options and labels.

#include <memory>

#include "absl/status/statusor.h"
#include "dml/solver/cocoa_local.hpp"
#include "dml/solver/solver.hpp"

namespace dml::internal {

absl::StatusOr<TrainResult> TrainScdDual(const Dataset& data, const ModelSpec& model,
                                         const SolverOptions& options);
/// The asynchronous dual engine keeps per-thread replicas of w up to this
/// many features, beyond it one w shared by atomic adds.
constexpr int64_t kAsyncDualReplicaMaxCols = 4096;
/// Choices of the asynchronous dual engine that tests force.
struct AsyncDualKnobs {
  /// Several threads share w by atomic adds even where it is short enough
  /// for per-thread replicas.
  bool atomic_w = false;
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
