// copy_paths: how fast same-host processes can move the allreduce's bytes,
// with no runtime around them. P processes (fork) each own an 8 MiB vector.
//   copy_paths [procs=4] [iters=100]          the bytes alone
//   copy_paths [procs=4] [iters=100] reduce   the whole allreduce, four designs
// The bytes alone: per iteration each process reads the 2 * (P - 1) ranges
// of 8/P MiB that an allreduce through shards moves (its range from every
// other member, then every other range's result), in 64 KiB pieces, and all
// meet at a barrier. Two paths, alternated 3 times: process_vm_readv from
// the owner's private memory (what the bulk channel's direct reads do) and
// memcpy from a shared mapping (what a shared-memory arena would allow).
// The whole allreduce (member r owns range r and keeps the mean of the P
// vectors there; barrier; every member gathers the P means into one
// vector; barrier), every received value checked finite as the runtime
// does, result checked after the last iteration:
//   cma, then mean   what the runtime does: fetch the other members' pushes
//                    with process_vm_readv into own buffers (256 KiB
//                    pieces), then the mean over them (2048-value blocks);
//                    the gather fetches the same way;
//   cma, fused       each push read in 32 KiB blocks into a scratch buffer
//                    and added while it is in L1;
//   shared, in place vectors and means live in a shared mapping from the
//                    start: the mean reads the pushes where they are, the
//                    gather is memcpy;
//   shared, copy-in  as above, but each member first copies its vector into
//                    the mapping (an arena that Offer copies into).
// Barriers spin with sched_yield, as MPI's shared-memory transport does.
// Prints each run's median milliseconds per iteration, of rank 0.
#include <sched.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "dml/util/finite.hpp"

namespace {

constexpr std::size_t kBytes = 8 << 20;
constexpr std::size_t kPiece = 64 << 10;

// Every process spins (yielding) until `count` processes have arrived.
void Barrier(std::atomic<int>* arrived, int count) {
  arrived->fetch_add(1);
  while (arrived->load() < count) sched_yield();
}

// Reaps `procs` children; nonzero if any failed.
int WaitForChildren(int procs) {
  int failed = 0;
  for (int r = 0; r < procs; ++r) {
    int status = 0;
    wait(&status);
    failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  return failed;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// n bytes at `src` in process pid into dst; exits the child on failure.
void ReadFrom(pid_t pid, void* dst, uintptr_t src, std::size_t n) {
  iovec local{dst, n};
  iovec remote{reinterpret_cast<void*>(src), n};
  if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(n)) {
    std::perror("process_vm_readv");
    _exit(1);
  }
}

// A received block that is not finite ends the child (it never happens
// here: the check is there for its cost).
void CheckFinite(const double* x, std::size_t n) {
  if (!dml::AllFinite(x, n)) _exit(3);
}

// `count` values into dst in the bulk channel's 256 KiB pieces, each checked
// finite as it lands (what a direct read does): from address `src` in
// process pid, or by memcpy from `mapped` where the designs share memory.
void Receive(pid_t pid, uintptr_t src, const double* mapped, double* dst, std::size_t count) {
  constexpr std::size_t kPieceValues = std::size_t{1} << 15;
  for (std::size_t at = 0; at < count; at += kPieceValues) {
    const std::size_t m = std::min(kPieceValues, count - at);
    if (mapped != nullptr) {
      std::memcpy(dst + at, mapped + at, m * sizeof(double));
    } else {
      ReadFrom(pid, dst + at, src + at * sizeof(double), m * sizeof(double));
    }
    CheckFinite(dst + at, m);
  }
}

int Run(bool shared_mapping, int procs, int iters) {
  const std::size_t range = kBytes / static_cast<std::size_t>(procs);
  // Shared: the P vectors (used by the mapping path), then the barrier and
  // every process's pid and vector address (used by process_vm_readv).
  const std::size_t meta = 4096;
  char* shm = static_cast<char*>(mmap(nullptr, procs * kBytes + meta, PROT_READ | PROT_WRITE,
                                      MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (shm == MAP_FAILED) return 1;
  auto* arrived = new (shm + procs * kBytes) std::atomic<int>(0);
  auto* pids = reinterpret_cast<pid_t*>(shm + procs * kBytes + 64);
  auto* addrs = reinterpret_cast<uintptr_t*>(shm + procs * kBytes + 64 + 64 * sizeof(pid_t));
  for (int r = 0; r < procs; ++r) {
    if (fork() != 0) continue;
    char* own = shared_mapping ? shm + r * kBytes : static_cast<char*>(aligned_alloc(4096, kBytes));
    std::memset(own, r + 1, kBytes);
    std::vector<char> dst(kBytes, 0);
    pids[r] = getpid();
    addrs[r] = reinterpret_cast<uintptr_t>(own);
    Barrier(arrived, procs);
    std::vector<double> ms;
    for (int it = 0; it < iters; ++it) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int q = 1; q < procs; ++q) {
        const int s = (r + q) % procs;
        for (std::size_t off : {r * range, s * range}) {
          for (std::size_t c = 0; c < range; c += kPiece) {
            // The last piece of a range that P does not divide is shorter.
            const std::size_t m = std::min(kPiece, range - c);
            char* d = dst.data() + off + c;
            if (shared_mapping) {
              std::memcpy(d, shm + s * kBytes + off + c, m);
            } else {
              ReadFrom(pids[s], d, addrs[s] + off + c, m);
            }
          }
        }
      }
      Barrier(arrived, procs * (it + 2));
      ms.push_back(1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    if (r == 0) {
      std::printf("%-18s %d processes: median %.3f ms per iteration (%.1f MiB read per process)\n",
                  shared_mapping ? "shared mapping" : "process_vm_readv", procs, Median(ms),
                  2.0 * (procs - 1) * static_cast<double>(range) / (1 << 20));
      std::fflush(stdout);
    }
    _exit(0);
  }
  const int failed = WaitForChildren(procs);
  munmap(shm, procs * kBytes + meta);
  return failed;
}

enum class Design { kCmaThenMean, kCmaFused, kSharedInPlace, kSharedCopyIn };

const char* Name(Design d) {
  switch (d) {
    case Design::kCmaThenMean: return "cma, then mean";
    case Design::kCmaFused: return "cma, fused";
    case Design::kSharedInPlace: return "shared, in place";
    case Design::kSharedCopyIn: return "shared, copy-in";
  }
  return "?";
}

// One allreduce design (see the header); returns nonzero if a member failed
// or got a wrong sum.
int RunReduce(Design design, int procs, int iters) {
  // Values per member, and in all (8 MiB rounded down to a multiple of P).
  const std::size_t range = kBytes / sizeof(double) / static_cast<std::size_t>(procs);
  const std::size_t n = range * static_cast<std::size_t>(procs);
  const bool shared = design == Design::kSharedInPlace || design == Design::kSharedCopyIn;
  // Shared: the P vectors, the P means, then the barrier, pids and addresses.
  const std::size_t meta = 4096;
  const std::size_t means_at = procs * kBytes;
  const std::size_t meta_at = means_at + procs * range * sizeof(double);
  char* shm = static_cast<char*>(mmap(nullptr, meta_at + meta, PROT_READ | PROT_WRITE,
                                      MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (shm == MAP_FAILED) return 1;
  auto* arrived = new (shm + meta_at) std::atomic<int>(0);
  auto* pids = reinterpret_cast<pid_t*>(shm + meta_at + 64);
  auto* addrs = reinterpret_cast<uintptr_t*>(shm + meta_at + 64 + 16 * sizeof(pid_t));
  auto* mean_addrs = addrs + 16;
  for (int r = 0; r < procs; ++r) {
    if (fork() != 0) continue;
    auto in_shm = [shm](std::size_t at) { return reinterpret_cast<double*>(shm + at); };
    // The member's own vector: private, or where the shared designs keep it.
    double* own = design == Design::kSharedInPlace
                      ? in_shm(r * kBytes)
                      : static_cast<double*>(aligned_alloc(4096, kBytes));
    double* mean = shared ? in_shm(means_at + r * range * sizeof(double))
                          : static_cast<double*>(aligned_alloc(4096, range * sizeof(double)));
    std::fill(own, own + n, 1.0 + r);
    std::vector<std::vector<double>> pushes(procs, std::vector<double>(range));
    std::vector<double> scratch(4096);
    std::vector<double> out(n);
    pids[r] = getpid();
    addrs[r] = reinterpret_cast<uintptr_t>(own);
    mean_addrs[r] = reinterpret_cast<uintptr_t>(mean);
    int phase = 1;
    Barrier(arrived, procs * phase++);
    const std::size_t first = r * range;  // this member's range
    // The vector member q contributes to this range, as a pointer this
    // process can read (shared designs) or nullptr (fetch it).
    auto push_of = [&](int q) -> const double* {
      if (q == r) return own + first;
      if (shared) return in_shm(q * kBytes) + first;
      return nullptr;
    };
    std::vector<double> ms;
    for (int it = 0; it < iters; ++it) {
      const auto t0 = std::chrono::steady_clock::now();
      if (design == Design::kSharedCopyIn) {
        std::memcpy(in_shm(r * kBytes), own, kBytes);
        Barrier(arrived, procs * phase++);
      }
      if (design == Design::kCmaThenMean) {
        for (int q = 0; q < procs; ++q) {
          if (q != r) {
            Receive(pids[q], addrs[q] + first * sizeof(double), nullptr, pushes[q].data(), range);
          }
        }
      }
      // The mean, in blocks; pushes that are not readable in place are
      // read into `scratch` block by block (cma, fused) or were fetched.
      const std::size_t block = design == Design::kCmaThenMean ? 2048 : 4096;
      for (std::size_t b = 0; b < range; b += block) {
        const std::size_t m = std::min(block, range - b);
        double* o = mean + b;
        for (int q = 0; q < procs; ++q) {
          const double* x = push_of(q);
          if (x != nullptr) {
            x += b;
            if (q != r) CheckFinite(x, m);
          } else if (design == Design::kCmaFused) {
            ReadFrom(pids[q], scratch.data(), addrs[q] + (first + b) * sizeof(double),
                     m * sizeof(double));
            CheckFinite(scratch.data(), m);
            x = scratch.data();
          } else {
            x = pushes[q].data() + b;  // fetched and checked above
          }
          if (q == 0) {
            std::copy(x, x + m, o);
          } else {
            for (std::size_t j = 0; j < m; ++j) o[j] += x[j];
          }
        }
        for (std::size_t j = 0; j < m; ++j) o[j] *= 1.0 / procs;
      }
      Barrier(arrived, procs * phase++);
      for (int q = 0; q < procs; ++q) {
        double* dst = out.data() + q * range;
        if (q == r) {
          std::memcpy(dst, mean, range * sizeof(double));
          continue;
        }
        Receive(pids[q], mean_addrs[q],
                shared ? reinterpret_cast<const double*>(mean_addrs[q]) : nullptr, dst, range);
      }
      // The means are read: the next iteration may overwrite them.
      Barrier(arrived, procs * phase++);
      ms.push_back(1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    // The mean of 1..P as the members compute it: an exact integer sum
    // times 1/P, the same bits for any P.
    const double expect = static_cast<double>(procs * (procs + 1) / 2) * (1.0 / procs);
    for (double v : out) {
      if (v != expect) _exit(4);
    }
    if (r == 0) {
      std::printf("%-18s %d processes: median %.3f ms per allreduce\n", Name(design), procs,
                  Median(ms));
      std::fflush(stdout);
    }
    _exit(0);
  }
  const int failed = WaitForChildren(procs);
  munmap(shm, meta_at + meta);
  if (failed != 0) std::fprintf(stderr, "copy_paths: %s failed\n", Name(design));
  return failed;
}

}  // namespace

int main(int argc, char** argv) {
  const int procs = argc > 1 ? std::atoi(argv[1]) : 4;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 100;
  const bool reduce = argc > 3 && std::strcmp(argv[3], "reduce") == 0;
  if (procs < 2 || procs > 16 || iters < 1 || (argc > 3 && !reduce)) {
    std::fprintf(stderr, "usage: copy_paths [procs 2..16] [iters >= 1] [reduce]\n");
    return 2;
  }
  for (int round = 0; round < 3; ++round) {
    if (reduce) {
      for (Design d : {Design::kCmaThenMean, Design::kCmaFused, Design::kSharedInPlace,
                       Design::kSharedCopyIn}) {
        if (RunReduce(d, procs, iters) != 0) return 1;
      }
    } else if (Run(false, procs, iters) != 0 || Run(true, procs, iters) != 0) {
      return 1;
    }
  }
  return 0;
}
