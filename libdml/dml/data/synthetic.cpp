// Synthetic sparse data with a planted linear model.
//
// Every row i is generated from its own random stream, seeded from
// (seed, i + 1) (w* uses stream 0), and every row has exactly k nonzeros, so
// row i's slice of the CSR arrays is known in advance: threads fill disjoint
// row ranges of the final arrays directly, and the output is the same for
// any thread count.
//
// Columns: for k <= cols / 2, k uniform draws are sorted and deduplicated,
// and the missing ones redrawn until k are distinct (the distinct values of
// an i.i.d. uniform sequence form a uniform k-subset); for larger k,
// selection sampling (Knuth's Algorithm S) walks all columns and keeps
// column j with probability (still needed) / (columns left), which produces
// them sorted. Both cost O(k log k) per row at most.

#include "dml/data/synthetic.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dml/util/memory.hpp"
#include "absl/strings/string_view.h"

namespace dml {
namespace {

uint64_t SplitMix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The seed of stream `id` under the user's seed: two splitmix64 steps, so
// nearby seeds and nearby ids give unrelated streams.
uint64_t StreamSeed(uint64_t seed, uint64_t id) {
  uint64_t a = id;
  uint64_t b = seed ^ SplitMix64(a);
  return SplitMix64(b);
}

// xoshiro256** (Blackman and Vigna), seeded by splitmix64. Kept here rather
// than shared so that the generated data can never change under us.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (uint64_t& s : s_) s = SplitMix64(seed);
  }
  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }
  /// Uniform in [0, n) by Lemire's multiply-shift (bias below n / 2^64).
  uint64_t Below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }
  /// Uniform in [0, 1), a multiple of 2^-53.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  /// Uniform in (0, 1): never 0, so logs and divisions are safe.
  double UniformOpen() { return (static_cast<double>(Next() >> 11) + 0.5) * 0x1.0p-53; }

  /// Standard normal by Leva's ratio-of-uniforms method (ACM TOMS 18(4),
  /// 1992): the quadratic squeezes decide all but about 1% of the points, so
  /// the log (the only libm call) rarely runs and the result v/u is exact
  /// IEEE arithmetic.
  double Normal() {
    while (true) {
      const double u = UniformOpen();
      const double v = 1.7156 * (Uniform() - 0.5);
      const double x = u - 0.449871;
      const double y = std::fabs(v) + 0.386595;
      const double q = x * x + y * (0.19600 * y - 0.25472 * x);
      if (q < 0.27597) return v / u;
      if (q > 0.27846) continue;
      if (v * v <= -4.0 * std::log(u) * u * u) return v / u;
    }
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

// floor(r * n / 2^64): maps a uniform 64-bit word to [0, n), monotonically.
inline uint64_t Scale(uint64_t r, uint64_t n) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(r) * n) >> 64);
}

// Per-thread scratch for SampleColumns.
struct ColumnScratch {
  std::vector<uint32_t> count, value, bucket;
};

// k distinct sorted columns in [0, cols) into out[0..k).
void SampleColumns(Rng& rng, uint64_t cols, std::size_t k, uint32_t* out, ColumnScratch& s) {
  if (2 * static_cast<uint64_t>(k) <= cols) {
    // The first k draws are sorted in O(k): the same word that picks a
    // column in [0, cols) picks a bucket in [0, k) by the same monotone map,
    // so a counting sort by bucket leaves only the few draws that share a
    // bucket out of order, for an insertion sort to finish.
    s.count.assign(k + 1, 0);
    s.value.resize(k);
    s.bucket.resize(k);
    for (std::size_t j = 0; j < k; ++j) {
      const uint64_t r = rng.Next();  // what Below(cols) would consume
      s.value[j] = static_cast<uint32_t>(Scale(r, cols));
      s.bucket[j] = static_cast<uint32_t>(Scale(r, k));
      ++s.count[s.bucket[j] + 1];
    }
    for (std::size_t b = 1; b <= k; ++b) s.count[b] += s.count[b - 1];
    for (std::size_t j = 0; j < k; ++j) out[s.count[s.bucket[j]]++] = s.value[j];
    for (std::size_t j = 1; j < k; ++j) {
      const uint32_t v = out[j];
      std::size_t i = j;
      for (; i > 0 && out[i - 1] > v; --i) out[i] = out[i - 1];
      out[i] = v;
    }
    std::size_t have = static_cast<std::size_t>(std::unique(out, out + k) - out);
    // Duplicates are rare (about k^2 / (2 cols) per row): redraw them.
    while (have < k) {
      for (std::size_t j = have; j < k; ++j) out[j] = static_cast<uint32_t>(rng.Below(cols));
      std::sort(out + have, out + k);
      std::inplace_merge(out, out + have, out + k);
      have = static_cast<std::size_t>(std::unique(out, out + k) - out);
    }
    return;
  }
  std::size_t needed = k;
  for (uint64_t j = 0; needed > 0; ++j) {
    if (rng.Below(cols - j) < needed) {
      out[k - needed] = static_cast<uint32_t>(j);
      --needed;
    }
  }
}

inline void Prefetch(const void* p) {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(p);
#else
  (void)p;
#endif
}

absl::Status Invalid(const char* field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("SyntheticOptions.", field, ": ", why));
}

absl::Status Validate(const SyntheticOptions& o) {
  if (o.rows <= 0) return Invalid("rows", absl::StrCat("must be positive, got ", o.rows));
  if (o.cols <= 0) return Invalid("cols", absl::StrCat("must be positive, got ", o.cols));
  if (o.cols > int64_t{std::numeric_limits<uint32_t>::max()} + 1) {
    return Invalid("cols", absl::StrCat("must fit 32-bit indices (at most 2^32), got ", o.cols));
  }
  if (o.nnz_per_row < 1) {
    return Invalid("nnz_per_row", absl::StrCat("must be at least 1, got ", o.nnz_per_row));
  }
  if (!(o.model_density > 0.0 && o.model_density <= 1.0)) {
    return Invalid("model_density", absl::StrCat("must be in (0, 1], got ", o.model_density));
  }
  if (!(o.noise >= 0.0) || !std::isfinite(o.noise)) {
    return Invalid("noise", absl::StrCat("must be finite and >= 0, got ", o.noise));
  }
  if (o.task != Task::kRegression && o.task != Task::kClassification) {
    return Invalid("task", "unknown task");
  }
  if (!(o.scale_decades >= 0.0 && o.scale_decades <= 30.0)) {
    return Invalid("scale_decades", absl::StrCat("must be in [0, 30], got ", o.scale_decades));
  }
  if (o.threads < 0) return Invalid("threads", absl::StrCat("must be >= 0, got ", o.threads));
  const int64_t k = std::min(o.nnz_per_row, o.cols);
  if (o.rows > std::numeric_limits<int64_t>::max() / k - 1) {
    return Invalid("rows", absl::StrCat("rows x nnz_per_row = ", o.rows, " x ", k,
                                        " nonzeros overflow 64-bit offsets"));
  }
  // The arrays (a value and an index per nonzero, an offset and a label per
  // row) and the planted model must fit: else the draw would fill memory
  // until the kernel stopped it.
  const double bytes = 8.0 * static_cast<double>(o.rows) * static_cast<double>(k) +
                       12.0 * static_cast<double>(o.rows) + 8.0 * static_cast<double>(o.cols);
  if (bytes > static_cast<double>(MemoryLimit())) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "SyntheticOptions: %d rows x %d nonzeros (and %d columns) need about %.1f GiB, more than "
        "the %.1f GiB of memory here",
        o.rows, k, o.cols, bytes / (1024.0 * 1024 * 1024),
        static_cast<double>(MemoryLimit()) / (1024.0 * 1024 * 1024)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SyntheticData> GenerateSynthetic(const SyntheticOptions& options) {
  if (absl::Status s = Validate(options); !s.ok()) return s;
  const int64_t rows = options.rows;
  const int64_t cols = options.cols;
  const int64_t k = std::min(options.nnz_per_row, cols);
  const bool regression = options.task == Task::kRegression;

  // The planted model, from stream 0.
  std::vector<double> w(static_cast<std::size_t>(cols));
  {
    Rng rng(StreamSeed(options.seed, 0));
    bool any = false;
    for (double& wj : w) {
      const bool on = rng.Uniform() < options.model_density;
      const double z = rng.Normal();
      wj = on ? z : 0.0;
      any = any || wj != 0.0;
    }
    while (!any) {
      const std::size_t j = static_cast<std::size_t>(rng.Below(static_cast<uint64_t>(cols)));
      w[j] = rng.Normal();
      any = w[j] != 0.0;
    }
  }

  const std::size_t n = static_cast<std::size_t>(rows);
  const std::size_t kk = static_cast<std::size_t>(k);
  std::vector<int64_t> offsets(n + 1);
  std::vector<uint32_t> indices(n * kk);
  std::vector<float> values(n * kk);
  std::vector<float> y(n);
  const double scale = 1.0 / std::sqrt(static_cast<double>(k));
  // Column units, from their own stream (no row stream draws them).
  std::vector<double> col_scale;
  if (options.scale_decades != 0.0) {
    Rng rng(StreamSeed(options.seed, ~uint64_t{0}));
    col_scale.resize(static_cast<std::size_t>(cols));
    for (double& c : col_scale) c = std::pow(10.0, options.scale_decades * (rng.Uniform() - 0.5));
  }

  auto fill = [&](std::size_t begin, std::size_t end) {
    ColumnScratch scratch;
    for (std::size_t r = begin; r < end; ++r) {
      Rng rng(StreamSeed(options.seed, static_cast<uint64_t>(r) + 1));
      uint32_t* idx = indices.data() + r * kk;
      float* val = values.data() + r * kk;
      SampleColumns(rng, static_cast<uint64_t>(cols), kk, idx, scratch);
      // w* is gathered at random columns: with a million columns most reads
      // miss the caches, so start them all before drawing the values.
      for (std::size_t j = 0; j < kk; ++j) Prefetch(w.data() + idx[j]);
      double dot = 0.0;
      for (std::size_t j = 0; j < kk; ++j) {
        const float v = static_cast<float>(rng.Normal() * scale);
        val[j] = v;
        dot += static_cast<double>(v) * w[idx[j]];
      }
      if (options.scale_decades != 0.0) {
        for (std::size_t j = 0; j < kk; ++j) val[j] = static_cast<float>(val[j] * col_scale[idx[j]]);
      }
      // Drawn even when noise is 0, so X does not depend on noise.
      const double t = dot + options.noise * rng.Normal();
      y[r] = regression ? static_cast<float>(t) : (t >= 0.0 ? 1.0f : -1.0f);
      offsets[r + 1] = static_cast<int64_t>((r + 1) * kk);
    }
  };

  int threads = options.threads;
  if (threads == 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // At least 64K nonzeros per thread, or threads cost more than they save.
  const std::size_t min_rows = std::max<std::size_t>(1, (std::size_t{1} << 16) / kk);
  threads = static_cast<int>(std::min<std::size_t>(threads, (n + min_rows - 1) / min_rows));
  if (threads <= 1) {
    fill(0, n);
  } else {
    std::vector<std::thread> pool;
    pool.reserve(static_cast<std::size_t>(threads));
    for (int t = 0; t < threads; ++t) {
      const std::size_t b = n * static_cast<std::size_t>(t) / threads;
      const std::size_t e = n * static_cast<std::size_t>(t + 1) / threads;
      pool.emplace_back(fill, b, e);
    }
    for (std::thread& th : pool) th.join();
  }

  SyntheticData out;
  out.data.x = CsrMatrix::FromArraysUnchecked(rows, cols, std::move(offsets), std::move(indices),
                                              std::move(values));
  out.data.y = std::move(y);
  out.data.task = options.task;
  out.planted = std::move(w);
  return out;
}

}  // namespace dml
