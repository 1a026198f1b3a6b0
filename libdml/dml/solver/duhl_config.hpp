#pragma once
// DuHL's selection rules and the options that travel with a job (a cocoa
// worker's DuHL local solver): plain values; dml/solver/duhl.hpp has the
// solver.

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace dml {

enum class DuhlSelection { kGap, kGapGreedy, kRandom, kSequential, kResident };

/// "gap", "gap-greedy", "random", "sequential", "resident".
std::string_view DuhlSelectionName(DuhlSelection s);
/// Errors: InvalidArgument listing the names.
absl::StatusOr<DuhlSelection> ParseDuhlSelection(std::string_view name);

struct DuhlConfig {
  /// The device's budget for the block in bytes; 0: device_fraction of the
  /// data's bytes (DuhlCoordinateBytes summed over all coordinates).
  int64_t device_bytes = 0;
  double device_fraction = 0.1;  ///< in (0, 1]
  DuhlSelection selection = DuhlSelection::kGap;
  /// Threads refreshing the gap memory while the block is solved; 0: every
  /// gap recomputed in the solving thread before each selection (fresh).
  int gap_threads = 1;
  /// Passes over the block per round (steps = passes * |P|).
  double passes = 5.0;
  /// As cocoa's local solver: the block on a GPU of the worker's process
  /// (TPA-SCD, dual models; CocoaOptions::device and gpu_fallback apply)
  /// instead of the CPU twin.
  bool gpu = false;
};

}  // namespace dml
