// SpMV: the CPU twin against a naive dense product, the GPU kernel against
// the CPU twin (skipped at run time without a device), and the error and
// fallback contract of SpmvGpu / SpmvAuto with and without CUDA.
#define BOOST_TEST_MODULE gpu_spmv
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "dml/data/sparse.hpp"
#include "dml/gpu/spmv.hpp"

namespace {

namespace utf = boost::unit_test;
using dml::CsrMatrix;

// Dense row-major matrix -> CSR, keeping only nonzeros.
CsrMatrix FromDense(int64_t rows, int64_t cols, const std::vector<float>& dense) {
  std::vector<int64_t> offsets{0};
  std::vector<uint32_t> indices;
  std::vector<float> values;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      const float v = dense[static_cast<std::size_t>(i * cols + j)];
      if (v != 0.0f) {
        indices.push_back(static_cast<uint32_t>(j));
        values.push_back(v);
      }
    }
    offsets.push_back(static_cast<int64_t>(indices.size()));
  }
  auto m = CsrMatrix::FromArrays(rows, cols, std::move(offsets), std::move(indices),
                                 std::move(values));
  BOOST_REQUIRE_MESSAGE(m.ok(), m.status().ToString());
  return *std::move(m);
}

// A reproducible random CSR: ~5% density, a few empty rows, and one full row
// so that rows both shorter and longer than a warp are exercised.
CsrMatrix RandomCsr(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::bernoulli_distribution keep(0.05);
  std::vector<int64_t> offsets{0};
  std::vector<uint32_t> indices;
  std::vector<float> values;
  for (int64_t i = 0; i < rows; ++i) {
    const bool empty = i % 97 == 3;
    const bool full = i == rows / 2;
    for (int64_t j = 0; j < cols && !empty; ++j) {
      if (full || keep(rng)) {
        indices.push_back(static_cast<uint32_t>(j));
        values.push_back(value(rng));
      }
    }
    offsets.push_back(static_cast<int64_t>(indices.size()));
  }
  auto m = CsrMatrix::FromArrays(rows, cols, std::move(offsets), std::move(indices),
                                 std::move(values));
  BOOST_REQUIRE_MESSAGE(m.ok(), m.status().ToString());
  return *std::move(m);
}

boost::test_tools::assertion_result HaveCudaDevice(utf::test_unit_id) {
  boost::test_tools::assertion_result r(dml::gpu::CudaDeviceCount() > 0);
  if (!r) {
    // Say why, in SpmvGpu's own words (e.g. cudaGetDeviceCount's error).
    const CsrMatrix one = FromDense(1, 1, {1.0f});
    const std::vector<float> w = {1.0f};
    r.message() << "skipped: no CUDA device ("
                << std::string(dml::gpu::SpmvGpu(one, w).status().message()) << ")";
  }
  return r;
}

}  // namespace

BOOST_AUTO_TEST_CASE(cpu_twin_matches_dense_product) {
  // 3 x 4, exactly representable products and sums.
  const std::vector<float> dense = {
      1.0f,  0.0f, -2.0f, 0.0f,   //
      0.0f,  0.0f, 0.0f,  0.0f,   //
      0.5f,  3.0f, 0.0f,  -1.0f,  //
  };
  const std::vector<float> w = {2.0f, -1.0f, 0.25f, 4.0f};
  const CsrMatrix a = FromDense(3, 4, dense);
  BOOST_REQUIRE_EQUAL(a.nnz(), 5);

  std::vector<float> naive(3, 0.0f);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) naive[i] += dense[i * 4 + j] * w[j];
  const std::vector<float> expected = {1.5f, 0.0f, -6.0f};
  BOOST_TEST(naive == expected, boost::test_tools::per_element());

  auto z = dml::gpu::SpmvCpu(a, w);
  BOOST_REQUIRE_MESSAGE(z.ok(), z.status().ToString());
  BOOST_TEST(*z == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(cpu_twin_rejects_wrong_length) {
  const CsrMatrix a = FromDense(2, 3, {1, 0, 2, 0, 3, 0});
  const std::vector<float> w = {1.0f, 2.0f};
  auto z = dml::gpu::SpmvCpu(a, w);
  BOOST_REQUIRE(!z.ok());
  BOOST_TEST(z.status().code() == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(std::string(z.status().message()) ==
             "SpmvCpu: w has 2 entries but the matrix has 3 columns");
}

BOOST_AUTO_TEST_CASE(gpu_matches_cpu_on_random_matrix, *utf::precondition(HaveCudaDevice)) {
  const CsrMatrix a = RandomCsr(1000, 200, 20240611u);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  std::vector<float> w(200);
  for (float& x : w) x = value(rng);

  auto cpu = dml::gpu::SpmvCpu(a, w);
  auto gpu = dml::gpu::SpmvGpu(a, w);
  BOOST_REQUIRE_MESSAGE(cpu.ok(), cpu.status().ToString());
  BOOST_REQUIRE_MESSAGE(gpu.ok(), gpu.status().ToString());
  BOOST_REQUIRE_EQUAL(gpu->size(), 1000u);
  // Tolerance from the header: float accumulation against a double reference.
  for (int64_t i = 0; i < a.rows(); ++i) {
    const dml::SparseView row = a.outer(i);
    double scale = 0.0;
    for (std::size_t k = 0; k < row.size; ++k) scale += std::fabs(row.value[k] * w[row.index[k]]);
    const double diff = std::fabs(double((*gpu)[i]) - double((*cpu)[i]));
    BOOST_TEST(diff <= 1e-5 * scale + 1e-7, "row " << i << ": gpu " << (*gpu)[i] << " cpu "
                                                    << (*cpu)[i] << " scale " << scale);
  }
}

BOOST_AUTO_TEST_CASE(gpu_unavailable_error_names_the_cause) {
  const CsrMatrix a = FromDense(2, 2, {1, 0, 0, 1});
  const std::vector<float> w = {1.0f, 2.0f};
  auto z = dml::gpu::SpmvGpu(a, w);
  if (!dml::gpu::CudaCompiled()) {
    BOOST_TEST(dml::gpu::CudaDeviceCount() == 0);
    BOOST_REQUIRE(!z.ok());
    BOOST_TEST(z.status().code() == absl::StatusCode::kUnavailable);
    BOOST_TEST(std::string(z.status().message()) == "libdml was built without CUDA");
  } else if (dml::gpu::CudaDeviceCount() == 0) {
    BOOST_REQUIRE(!z.ok());
    BOOST_TEST(z.status().code() == absl::StatusCode::kUnavailable);
    const std::string msg(z.status().message());
    BOOST_TEST_MESSAGE("CUDA built, no device: " << msg);
    BOOST_TEST(msg.find("SpmvGpu: no usable CUDA device: cudaGetDeviceCount") == 0, msg);
  } else {
    BOOST_REQUIRE_MESSAGE(z.ok(), z.status().ToString());
    BOOST_TEST(*z == std::vector<float>({1.0f, 2.0f}), boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(auto_falls_back_with_exactly_one_log_line) {
  const CsrMatrix a = FromDense(2, 3, {1, 0, 2, 0, -3, 0});
  const std::vector<float> w = {1.0f, 2.0f, 3.0f};
  const std::vector<float> expected = {7.0f, -6.0f};
  std::vector<std::string> lines;
  auto log = [&lines](std::string_view line) { lines.emplace_back(line); };

  auto z = dml::gpu::SpmvAuto(a, w, /*allow_fallback=*/true, log);
  BOOST_REQUIRE_MESSAGE(z.ok(), z.status().ToString());
  BOOST_TEST(*z == expected, boost::test_tools::per_element());
  if (dml::gpu::CudaDeviceCount() > 0) {
    BOOST_TEST(lines.empty());
  } else {
    BOOST_REQUIRE_EQUAL(lines.size(), 1u);
    BOOST_TEST(lines[0].find("SpmvAuto: falling back to the CPU twin: UNAVAILABLE: ") == 0,
               lines[0]);
  }

  // Fallback not allowed: the GPU's own error, nothing logged.
  lines.clear();
  auto strict = dml::gpu::SpmvAuto(a, w, /*allow_fallback=*/false, log);
  BOOST_TEST(lines.empty());
  if (dml::gpu::CudaDeviceCount() == 0) {
    BOOST_REQUIRE(!strict.ok());
    BOOST_TEST(strict.status().code() == absl::StatusCode::kUnavailable);
  }

  // No logger: the fallback still happens, silently.
  auto quiet = dml::gpu::SpmvAuto(a, w, /*allow_fallback=*/true);
  BOOST_REQUIRE_MESSAGE(quiet.ok(), quiet.status().ToString());
  BOOST_TEST(*quiet == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(auto_never_masks_invalid_arguments) {
  const CsrMatrix a = FromDense(2, 3, {1, 0, 2, 0, -3, 0});
  const std::vector<float> w = {1.0f};
  int calls = 0;
  auto z = dml::gpu::SpmvAuto(a, w, /*allow_fallback=*/true,
                              [&calls](std::string_view) { ++calls; });
  BOOST_REQUIRE(!z.ok());
  BOOST_TEST(z.status().code() == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(std::string(z.status().message()) ==
             "SpmvGpu: w has 1 entries but the matrix has 3 columns");
  BOOST_TEST(calls == 0);
}
