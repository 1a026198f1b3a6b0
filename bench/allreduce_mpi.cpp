// The peer for net_bench --what=allreduce: MPI_Allreduce (sum) of a vector of
// --bytes bytes of doubles over all ranks, median seconds per call over
// --iters calls after 2 warm-up calls, printed by rank 0 (slowest rank).
//   mpirun --allow-run-as-root --oversubscribe -np 4 build/bench/allreduce_mpi [bytes] [iters]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const long bytes = argc > 1 ? std::atol(argv[1]) : 8388608;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 20;
  const long n = bytes / static_cast<long>(sizeof(double));
  std::vector<double> in(static_cast<size_t>(n), 1.0 + rank), out(static_cast<size_t>(n));
  std::vector<double> times;
  for (int it = 0; it < iters + 2; ++it) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t = MPI_Wtime();
    MPI_Allreduce(in.data(), out.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    const double dt = MPI_Wtime() - t;
    double worst = 0;
    MPI_Reduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (it >= 2) times.push_back(worst);
  }
  if (rank == 0) {
    std::sort(times.begin(), times.end());
    const double expect = size * (size + 1) / 2.0;
    std::printf("MPI_Allreduce: %d processes, %ld bytes each: median %.3f ms per allreduce "
                "(slowest rank)%s\n",
                size, bytes, times[times.size() / 2] * 1e3,
                out[0] == expect ? "" : "  WRONG RESULT");
  }
  MPI_Finalize();
  return 0;
}
