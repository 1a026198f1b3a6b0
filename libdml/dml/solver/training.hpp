#pragma once
// The names every layer shares for distributed training: the training mode
// (a topology of actors; see ARCHITECTURE.md) and the CoCoA+ options. They
// live here, below the runtime (actors/) and its wire format (net/), so
// the runtime, the wire codec and the CLI use one definition. Plain values;
// thread-compatible.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "dml/solver/duhl_config.hpp"
#include "dml/solver/solver.hpp"

namespace dml {

/// Training modes; each is a topology of workers, parameter shards and a
/// coordinator.
enum class Mode {
  kSync,            ///< BSP: every clock, shards average all K gradients, then all pull
  kAsync,           ///< Downpour: push/pull whenever, shards apply on arrival
  kSsp,             ///< async with a staleness bound s (s = 0 behaves like BSP)
  kEasgd,           ///< elastic averaging with the center on the shards
  kHogwild,         ///< workers share one in-process model, lock-free
  kModelAveraging,  ///< local SGD, models averaged every tau steps
  kCocoa,           ///< CoCoA+: H local SCD steps, shared-vector deltas added with gamma
  /// DuHL: a device worker solving gap-selected blocks that fit its memory
  /// (its gap memory an actor beside it), plus CPU workers, under cocoa's rounds
  kDuhl,
};
/// The largest Mode value (the wire decoder refuses larger ones).
inline constexpr Mode kLastMode = Mode::kDuhl;
/// "sync", "async", "ssp", "easgd", "hogwild", "model-averaging", "cocoa",
/// "duhl".
std::string_view ModeName(Mode mode);
/// "sync"|"bsp", "async"|"downpour", "ssp", "easgd", "hogwild",
/// "model-averaging"|"mavg", "cocoa", "duhl". Errors: InvalidArgument listing them.
absl::StatusOr<Mode> ParseMode(std::string_view name);

/// CoCoA+ (Smith, Forte, Ma, Takac, Jordan, Jaggi, JMLR 2018): each round a
/// worker takes H local coordinate steps on its block, and the shared-vector
/// deltas are added with weight gamma.
struct CocoaOptions {
  /// H = local_epochs * the worker's block size.
  double local_epochs = 1.0;
  double gamma = 1.0;        ///< in (0, 1]; 1 = adding (CoCoA+), 1/K = averaging
  double sigma_prime = 0.0;  ///< the local subproblem's sigma'; 0 = gamma K (always safe)
  /// Choose H while the job runs (dml/solver/local_epochs_tuner.hpp),
  /// starting from local_epochs; every change is a "local_epochs" event.
  bool auto_local_epochs = false;
  /// The workers' local solver: kScd (the CPU SCD of cocoa_local.hpp),
  /// kTpaScd (TPA-SCD on a GPU of the worker's process, dual models:
  /// dml/gpu/tpa_scd.hpp MakeTpaScdLocalSolver; worker k of a process
  /// with G CUDA devices uses device + k mod (G - device): the devices from
  /// `device` on, in turn) or kDuhl (DuHL over the worker's block with the
  /// `duhl` options: dml/solver/duhl.hpp MakeDuhlLocalSolver, its device
  /// the CPU twin).
  SolverKind local_solver = SolverKind::kScd;
  DuhlConfig duhl;
  int device = 0;
  /// kTpaScd where a worker's process cannot run it (no CUDA, device or
  /// memory; a primal model): that worker runs the CPU local solver and
  /// the job goes on, instead of failing.
  bool gpu_fallback = false;
};

}  // namespace dml
