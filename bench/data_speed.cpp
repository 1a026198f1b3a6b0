// data_speed: throughput of the data layer's building blocks, as medians of
// repeated runs: the cache's Checksum64 (GB/s) and the synthetic generator
// (rows/s) on a benchmark-sized problem. (They were "reports" inside the
// unit tests; speed belongs here.)
//
//   build/bench/data_speed [--repeat N]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "dml/data/cache.hpp"
#include "dml/data/synthetic.hpp"

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--repeat") == 0) repeat = std::max(1, std::atoi(argv[i + 1]));
  }
  std::vector<uint64_t> buf(std::size_t{32} << 20 >> 3);  // 32 MiB
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = i * 0x9e3779b97f4a7c15ULL;
  uint64_t h = 0;
  std::vector<double> times;
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    h ^= dml::Checksum64(buf.data(), buf.size() * 8, h);
    times.push_back(Seconds(t0));
  }
  std::printf("Checksum64: %.2f GB/s (median of %d, 32 MiB; hash %016llx)\n",
              buf.size() * 8 / Median(times) / 1e9, repeat, static_cast<unsigned long long>(h));

  dml::SyntheticOptions o;
  o.rows = 100000;
  o.cols = 1000000;
  o.nnz_per_row = 100;
  times.clear();
  for (int r = 0; r < std::min(repeat, 3); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    auto d = dml::GenerateSynthetic(o);
    times.push_back(Seconds(t0));
    if (!d.ok() || d->data.x.nnz() != 100 * o.rows) {
      std::fprintf(stderr, "data_speed: generator failed or wrong size\n");
      return 1;
    }
  }
  std::printf("GenerateSynthetic: %.0f rows/s (100000 x 1e6, 100 nnz/row, median of %d)\n",
              o.rows / Median(times), std::min(repeat, 3));
  return 0;
}
