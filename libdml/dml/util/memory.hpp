#pragma once
// How much memory libdml plans against, and the check that a model's
// vectors fit in it. Thread-safe (the limit is one atomic).

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"

namespace dml {

/// Whether `vectors` vectors of `d` doubles, plus `extra_bytes`, fit in this
/// process's memory (MemoryLimit()). A model's size comes from its input:
/// the data's largest feature index + 1 (`from_data`), or a model file's
/// feature count; one stray index (a typo, an unhashed id) would otherwise
/// have a solver zero tens of GiB, swap, or be killed by the kernel, long
/// after the data loaded. `who` names what needs them ("solver newton", "a
/// job of 4 workers in one process"). Errors: ResourceExhausted with the
/// sizes (and, from data, what to do).
absl::Status CheckModelMemory(int64_t d, int64_t vectors, int64_t extra_bytes,
                              std::string_view who, bool from_data = true);

/// The memory CheckModelMemory plans against: the process's limit if one was
/// set (SetMemoryLimit), else the lower of the machine's physical memory and
/// its cgroup's memory.max.
int64_t MemoryLimit();
/// Sets the limit MemoryLimit returns (0: back to the machine's). For hosts
/// that give libdml a share of the machine, and tests. Process-wide.
void SetMemoryLimit(int64_t bytes);

}  // namespace dml
