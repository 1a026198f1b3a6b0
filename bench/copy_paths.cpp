// copy_paths: how fast same-host processes can move the allreduce's bytes,
// with no runtime around them. P processes (fork) each own an 8 MiB vector;
// per iteration each reads the 2 * (P - 1) ranges of 8/P MiB that an
// allreduce through shards moves (its range from every other member, then
// every other range's result), in 64 KiB pieces, and all meet at a barrier.
//   copy_paths [procs=4] [iters=100]
// Two paths, alternated 3 times: process_vm_readv from the owner's private
// memory (what the bulk channel's direct reads do) and memcpy from a shared
// mapping (what a shared-memory arena would allow). Prints each run's median
// milliseconds per iteration, of rank 0.
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

namespace {

constexpr std::size_t kBytes = 8 << 20;
constexpr std::size_t kPiece = 64 << 10;

// Every process spins (yielding) until `count` processes have arrived.
void Barrier(std::atomic<int>* arrived, int count) {
  arrived->fetch_add(1);
  while (arrived->load() < count) sched_yield();
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
            char* d = dst.data() + off + c;
            if (shared_mapping) {
              std::memcpy(d, shm + s * kBytes + off + c, kPiece);
            } else {
              iovec local{d, kPiece};
              iovec remote{reinterpret_cast<void*>(addrs[s] + off + c), kPiece};
              if (process_vm_readv(pids[s], &local, 1, &remote, 1, 0) != static_cast<ssize_t>(kPiece)) {
                std::perror("process_vm_readv");
                _exit(1);
              }
            }
          }
        }
      }
      Barrier(arrived, procs * (it + 2));
      ms.push_back(1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    if (r == 0) {
      std::printf("%-18s %d processes: median %.3f ms per iteration (%.1f MiB read per process)\n",
                  shared_mapping ? "shared mapping" : "process_vm_readv", procs, ms[ms.size() / 2],
                  2.0 * (procs - 1) * static_cast<double>(range) / (1 << 20));
      std::fflush(stdout);
    }
    _exit(0);
  }
  int failed = 0;
  for (int r = 0; r < procs; ++r) {
    int status = 0;
    wait(&status);
    failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  munmap(shm, procs * kBytes + meta);
  return failed;
}

}  // namespace

int main(int argc, char** argv) {
  const int procs = argc > 1 ? std::atoi(argv[1]) : 4;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 100;
  if (procs < 2 || procs > 16 || iters < 1) {
    std::fprintf(stderr, "usage: copy_paths [procs 2..16] [iters >= 1]\n");
    return 2;
  }
  for (int round = 0; round < 3; ++round) {
    if (Run(false, procs, iters) != 0 || Run(true, procs, iters) != 0) return 1;
  }
  return 0;
}
