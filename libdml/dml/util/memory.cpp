#include "dml/util/memory.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dml/util/status.hpp"

namespace dml {
namespace {

std::atomic<int64_t> g_memory_limit{0};

// Physical memory, or the cgroup's limit where lower (containers): v2's
// memory.max ("max": none), or v1's memory.limit_in_bytes (a huge number:
// none). Read at the mount point, which is the process's own cgroup inside
// a container.
int64_t MachineMemory() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  int64_t bytes = pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page
                                        : std::numeric_limits<int64_t>::max();
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    if (std::FILE* f = std::fopen(path, "r")) {
      long long limit = 0;
      if (std::fscanf(f, "%lld", &limit) == 1 && limit > 0) bytes = std::min<int64_t>(bytes, limit);
      std::fclose(f);
    }
  }
  return bytes;
}

std::string GiB(double bytes) { return absl::StrFormat("%.1f GiB", bytes / (1024.0 * 1024 * 1024)); }

}  // namespace

int64_t MemoryLimit() {
  const int64_t set = g_memory_limit.load(std::memory_order_relaxed);
  return set > 0 ? set : MachineMemory();
}

void SetMemoryLimit(int64_t bytes) { g_memory_limit.store(std::max<int64_t>(bytes, 0)); }

absl::Status CheckModelMemory(int64_t d, int64_t vectors, int64_t extra_bytes,
                              std::string_view who, VectorOrigin origin) {
  const double need = static_cast<double>(d) * 8.0 * static_cast<double>(vectors) +
                      static_cast<double>(extra_bytes);
  const int64_t limit = MemoryLimit();
  if (need <= static_cast<double>(limit)) return absl::OkStatus();
  const bool features = origin == VectorOrigin::kFeatures;
  if (origin == VectorOrigin::kKeys) {
    return absl::ResourceExhaustedError(absl::StrCat(
        AsAbsl(who), ": ", d, " keys of ", vectors, " doubles need about ", GiB(need),
        ", more than the ", GiB(static_cast<double>(limit)), " of memory here"));
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      origin == VectorOrigin::kExamples ? "the shared vector has " : "the model has ", d,
      origin == VectorOrigin::kExamples ? " entries (one per example)" : " weights",
      features ? " (the data's largest feature index + 1)" : "", ": ", AsAbsl(who),
      " needs about ", GiB(need), " for its vectors, more than the ",
      GiB(static_cast<double>(limit)), " of memory here",
      features ? "; renumber the features (or hash them into fewer), or drop the examples with "
                 "stray indices"
               : ""));
}

}  // namespace dml
