#pragma once
// How much memory libdml plans against, and the check that a model's
// vectors fit in it. Thread-safe (the limit is one atomic).

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"

namespace dml {

/// What sets the length of the vectors CheckModelMemory checks.
enum class VectorOrigin {
  kFeatures,   ///< the data's largest feature index + 1 (a model's weights)
  kModelFile,  ///< a model file's feature count
  kExamples,   ///< the number of examples (a vector of predictions)
  kKeys,       ///< a key-value store's keys (`vectors` = doubles per key)
};

/// Whether `vectors` vectors of `d` doubles, plus `extra_bytes`, fit in this
/// process's memory (MemoryLimit()). One stray feature index (a typo, an
/// unhashed id) would otherwise have a solver zero tens of GiB, swap, or be
/// killed by the kernel, long after the data loaded. `who` names what needs
/// them ("solver newton", "a job of 4 workers in one process"). Errors:
/// ResourceExhausted with the sizes (and, for features, what to do).
absl::Status CheckModelMemory(int64_t d, int64_t vectors, int64_t extra_bytes,
                              std::string_view who,
                              VectorOrigin origin = VectorOrigin::kFeatures);

/// The memory CheckModelMemory plans against: the process's limit if one was
/// set (SetMemoryLimit), else the lower of the machine's physical memory and
/// its cgroup's limit (v2 memory.max, v1 memory.limit_in_bytes).
int64_t MemoryLimit();
/// Sets the limit MemoryLimit returns (0: back to the machine's). For hosts
/// that give libdml a share of the machine, and tests. Process-wide.
void SetMemoryLimit(int64_t bytes);

/// SetMemoryLimit(bytes) for a scope; the machine's again at its end.
class ScopedMemoryLimit {
 public:
  explicit ScopedMemoryLimit(int64_t bytes) { SetMemoryLimit(bytes); }
  ~ScopedMemoryLimit() { SetMemoryLimit(0); }
  ScopedMemoryLimit(const ScopedMemoryLimit&) = delete;
  ScopedMemoryLimit& operator=(const ScopedMemoryLimit&) = delete;
};

}  // namespace dml
