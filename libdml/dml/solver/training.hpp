#pragma once
// The names every layer shares for distributed training: the training mode
// (a topology of actors; see ARCHITECTURE.md) and one progress record. They
// live here, below the runtime (actors/) and its wire format (net/), so
// the runtime, the wire codec and the CLI use one definition. Plain values;
// thread-compatible.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

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
};
/// The largest Mode value (the wire decoder refuses larger ones).
inline constexpr Mode kLastMode = Mode::kCocoa;
std::string_view ModeName(Mode mode);
/// "sync"|"bsp", "async"|"downpour", "ssp", "easgd", "hogwild",
/// "model-averaging"|"mavg", "cocoa". Errors: InvalidArgument listing them.
absl::StatusOr<Mode> ParseMode(std::string_view name);

/// One entry of a job's metrics stream.
struct job_progress {
  int round = 0;         ///< coordinator rounds (cocoa) or evaluations (SGD modes)
  double seconds = 0.0;  ///< since the job started
  double epochs = 0.0;   ///< examples (coordinates) processed / n
  double primal = 0.0;
  double dual = 0.0;  ///< -inf for SGD modes
  double gap = 0.0;   ///< +inf for SGD modes
  int64_t bytes_exchanged = 0;  ///< payload bytes of pushes, pulls and exchanges so far
  /// Per worker: its clock minus the slowest worker's (SGD modes), else 0.
  std::vector<int64_t> staleness;
  /// What happened besides training (a lost node, a restored shard), or empty.
  std::string event;
};

}  // namespace dml
