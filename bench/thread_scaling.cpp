// What a second thread buys on this machine, independent of libdml: the
// same work on 1 and on 2 threads, each thread on its own data.
//  - compute: a dependent floating-point chain (no memory traffic);
//  - gather-scatter: random read-modify-writes over an 8 MiB array per
//    thread, the memory pattern of a coordinate-descent step on a long w.
// Prints throughput(2 threads) / throughput(1 thread) for each, medians of 5
// alternating runs. 2.0 is a perfect second core; near 1.0 the two threads
// share what limits the work (SMT siblings, a shared memory path).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

namespace {

double Compute(uint64_t seed) {
  double a = 1.0 + static_cast<double>(seed % 7) * 1e-12;
  for (long i = 0; i < 100'000'000; ++i) a = a * 1.0000001 + 1e-9;
  return a;
}

double GatherScatter(uint64_t seed) {
  constexpr uint32_t kSize = 1u << 20;  // doubles: 8 MiB
  std::vector<double> w(kSize, 1.0);
  uint64_t x = seed | 1;
  double s = 0.0;
  for (int k = 0; k < 20 * static_cast<int>(kSize); ++k) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const uint32_t j = static_cast<uint32_t>(x) & (kSize - 1);
    s += w[j];
    w[j] += 1e-9;
  }
  return s;
}

// Seconds for `threads` threads each running f once.
double Time(double (*f)(uint64_t), int threads) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  std::vector<double> sink(static_cast<std::size_t>(threads));
  for (int i = 0; i < threads; ++i) pool.emplace_back([&, i] { sink[i] = f(88172645463325252ull + i); });
  for (std::thread& t : pool) t.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  std::printf("hardware threads: %u\n", std::thread::hardware_concurrency());
  const struct {
    const char* name;
    double (*f)(uint64_t);
  } kinds[] = {{"compute", Compute}, {"gather-scatter", GatherScatter}};
  for (const auto& k : kinds) {
    std::vector<double> one, two;
    for (int r = 0; r < 5; ++r) {
      one.push_back(Time(k.f, 1));
      two.push_back(Time(k.f, 2));
    }
    // Two threads do twice the work.
    std::printf("%-15s 1 thread %.3f s, 2 threads %.3f s: throughput x%.2f\n", k.name,
                Median(one), Median(two), 2.0 * Median(one) / Median(two));
  }
  return 0;
}
