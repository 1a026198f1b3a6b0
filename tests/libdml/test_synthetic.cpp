#define BOOST_TEST_MODULE synthetic
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dml/data/synthetic.hpp"
#include "dml/util/memory.hpp"

namespace dml {
namespace {

SyntheticData Generate(const SyntheticOptions& o) {
  auto r = GenerateSynthetic(o);
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  return std::move(r).value();
}

// x_i . w* in double, summed in column order (as the generator does).
double Margin(const CsrMatrix& x, const std::vector<double>& w, int64_t i) {
  const SparseView row = x.outer(i);
  double s = 0;
  for (std::size_t k = 0; k < row.size; ++k) s += static_cast<double>(row.value[k]) * w[row.index[k]];
  return s;
}

// Fraction of rows with y_i == sign(x_i . w*).
double SignAgreement(const SyntheticData& d) {
  int64_t agree = 0;
  for (int64_t i = 0; i < d.data.x.rows(); ++i) {
    const float s = Margin(d.data.x, d.planted, i) >= 0 ? 1.0f : -1.0f;
    agree += d.data.y[i] == s;
  }
  return static_cast<double>(agree) / d.data.x.rows();
}

void ExpectInvalid(const SyntheticOptions& o, const std::string& field) {
  auto r = GenerateSynthetic(o);
  BOOST_REQUIRE(!r.ok());
  BOOST_CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  BOOST_CHECK_MESSAGE(std::string(r.status().message()).find(field) != std::string::npos,
                      "\"" << r.status().message() << "\" should name " << field);
}

}  // namespace

BOOST_AUTO_TEST_CASE(same_seed_same_data_different_seed_different) {
  SyntheticOptions o;
  o.rows = 300;
  o.cols = 50;
  o.nnz_per_row = 7;
  o.noise = 0.3;
  o.seed = 42;
  const SyntheticData a = Generate(o);
  const SyntheticData b = Generate(o);
  BOOST_CHECK(a.data.x == b.data.x);
  BOOST_CHECK(a.data.y == b.data.y);
  BOOST_CHECK(a.planted == b.planted);
  o.seed = 43;
  const SyntheticData c = Generate(o);
  BOOST_CHECK(!(a.data.x == c.data.x));
  BOOST_CHECK(a.data.y != c.data.y);
  BOOST_CHECK(a.planted != c.planted);
}

BOOST_AUTO_TEST_CASE(thread_count_does_not_change_output) {
  SyntheticOptions o;
  o.rows = 20000;  // enough rows for several threads
  o.cols = 1000;
  o.nnz_per_row = 20;
  o.noise = 0.1;
  o.threads = 1;
  const SyntheticData one = Generate(o);
  o.threads = 3;
  const SyntheticData three = Generate(o);
  BOOST_CHECK(one.data.x == three.data.x);
  BOOST_CHECK(one.data.y == three.data.y);
}

BOOST_AUTO_TEST_CASE(x_does_not_depend_on_noise_or_task) {
  SyntheticOptions o;
  o.rows = 200;
  o.cols = 30;
  o.nnz_per_row = 5;
  const SyntheticData a = Generate(o);
  o.noise = 2.0;
  o.task = Task::kClassification;
  const SyntheticData b = Generate(o);
  BOOST_CHECK(a.data.x == b.data.x);
  BOOST_CHECK(a.planted == b.planted);
}

BOOST_AUTO_TEST_CASE(shape_and_distinct_sorted_columns) {
  // Sparse rows (rejection path), dense-ish rows (selection path), full rows
  // and nnz_per_row clamped to cols.
  for (const auto& [cols, nnz] : std::vector<std::pair<int64_t, int64_t>>{
           {1000, 13}, {40, 20}, {40, 30}, {12, 12}, {9, 50}, {1, 1}}) {
    SyntheticOptions o;
    o.rows = 500;
    o.cols = cols;
    o.nnz_per_row = nnz;
    const SyntheticData d = Generate(o);
    const CsrMatrix& x = d.data.x;
    const int64_t k = std::min(nnz, cols);
    BOOST_TEST_CONTEXT("cols " << cols << ", nnz_per_row " << nnz) {
      BOOST_CHECK_EQUAL(x.rows(), 500);
      BOOST_CHECK_EQUAL(x.cols(), cols);
      BOOST_CHECK_EQUAL(x.nnz(), 500 * k);
      BOOST_CHECK_EQUAL(d.data.y.size(), 500u);
      BOOST_CHECK_EQUAL(d.planted.size(), static_cast<std::size_t>(cols));
      BOOST_CHECK(d.data.task == Task::kRegression);
      bool ok = true;
      for (int64_t i = 0; i < x.rows() && ok; ++i) {
        const SparseView row = x.outer(i);
        ok = row.size == static_cast<std::size_t>(k);
        for (std::size_t j = 0; j < row.size && ok; ++j) {
          ok = row.index[j] < cols && (j == 0 || row.index[j] > row.index[j - 1]) &&
               std::isfinite(row.value[j]);
        }
        BOOST_CHECK_MESSAGE(ok, "row " << i);
      }
      // The checked constructor agrees.
      auto checked = CsrMatrix::FromArrays(x.rows(), x.cols(), x.offsets(), x.indices(), x.values());
      BOOST_CHECK_MESSAGE(checked.ok(), checked.status().ToString());
    }
  }
}

BOOST_AUTO_TEST_CASE(columns_and_values_have_the_intended_distribution) {
  SyntheticOptions o;
  o.rows = 20000;
  o.cols = 100;
  o.nnz_per_row = 25;
  const SyntheticData d = Generate(o);
  const CsrMatrix& x = d.data.x;
  std::vector<int64_t> count(100, 0);
  double sum = 0, sum2 = 0;
  for (int64_t z = 0; z < x.nnz(); ++z) {
    ++count[x.indices()[z]];
    sum += x.values()[z];
    sum2 += static_cast<double>(x.values()[z]) * x.values()[z];
  }
  // Each column appears in a row with probability 1/4: 5000 +- 61 (sd).
  for (int64_t c : count) BOOST_CHECK(std::abs(c - 5000) < 400);
  // Values are N(0, 1/25): mean 0, variance 0.04.
  const double n = static_cast<double>(x.nnz());
  BOOST_CHECK_SMALL(sum / n, 0.003);
  BOOST_CHECK_CLOSE(sum2 / n, 0.04, 2.0);
}

BOOST_AUTO_TEST_CASE(regression_without_noise_is_exact) {
  SyntheticOptions o;
  o.rows = 2000;
  o.cols = 300;
  o.nnz_per_row = 17;
  o.model_density = 0.5;
  const SyntheticData d = Generate(o);
  double var = 0;
  for (int64_t i = 0; i < o.rows; ++i) {
    const double m = Margin(d.data.x, d.planted, i);
    var += m * m;
    BOOST_CHECK_MESSAGE(d.data.y[i] == static_cast<float>(m),
                        "row " << i << ": y " << d.data.y[i] << ", x.w* " << m);
  }
  // O(1) scale: about |w*|^2 / cols ~ model_density.
  var /= o.rows;
  BOOST_CHECK(var > 0.2 && var < 1.0);
}

BOOST_AUTO_TEST_CASE(classification_without_noise_is_separable) {
  SyntheticOptions o;
  o.rows = 3000;
  o.cols = 200;
  o.nnz_per_row = 10;
  o.task = Task::kClassification;
  const SyntheticData d = Generate(o);
  BOOST_CHECK(d.data.task == Task::kClassification);
  int64_t pos = 0, neg = 0;
  for (int64_t i = 0; i < o.rows; ++i) {
    const double m = Margin(d.data.x, d.planted, i);
    BOOST_CHECK(m != 0.0);  // dense w*: no row on the boundary
    BOOST_CHECK_EQUAL(d.data.y[i], m > 0 ? 1.0f : -1.0f);
    pos += d.data.y[i] == 1.0f;
    neg += d.data.y[i] == -1.0f;
  }
  BOOST_CHECK_EQUAL(pos + neg, o.rows);
  BOOST_CHECK(pos > 500 && neg > 500);
}

BOOST_AUTO_TEST_CASE(classification_noise_flips_some_labels) {
  SyntheticOptions o;
  o.rows = 5000;
  o.cols = 100;
  o.nnz_per_row = 10;
  o.task = Task::kClassification;
  o.noise = 0.1;  // margins have sd ~1
  const double small = SignAgreement(Generate(o));
  BOOST_TEST_MESSAGE("agreement at noise 0.1: " << small);
  BOOST_CHECK(small > 0.9 && small < 1.0);
  o.noise = 1.0;
  const double large = SignAgreement(Generate(o));
  BOOST_TEST_MESSAGE("agreement at noise 1: " << large);
  BOOST_CHECK(large > 0.6 && large < 0.9);
  BOOST_CHECK(large < small);
}

BOOST_AUTO_TEST_CASE(regression_noise_has_the_requested_scale) {
  SyntheticOptions o;
  o.rows = 20000;
  o.cols = 50;
  o.nnz_per_row = 5;
  o.noise = 0.5;
  const SyntheticData d = Generate(o);
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < o.rows; ++i) {
    const double e = d.data.y[i] - Margin(d.data.x, d.planted, i);
    s += e;
    s2 += e * e;
  }
  BOOST_CHECK_SMALL(s / o.rows, 0.02);
  BOOST_CHECK_CLOSE(std::sqrt(s2 / o.rows), 0.5, 2.0);
}

BOOST_AUTO_TEST_CASE(model_density_sets_the_fraction_of_nonzero_weights) {
  SyntheticOptions o;
  o.rows = 1;
  o.cols = 10000;
  o.nnz_per_row = 1;
  o.model_density = 0.1;
  const SyntheticData d = Generate(o);
  int64_t nz = 0;
  double s2 = 0;
  for (double w : d.planted) {
    nz += w != 0.0;
    s2 += w * w;
  }
  BOOST_TEST_MESSAGE("nonzeros at density 0.1: " << nz << " / 10000");
  BOOST_CHECK(nz > 880 && nz < 1120);  // 1000 +- 30 (sd)
  BOOST_CHECK_CLOSE(s2 / nz, 1.0, 15.0);  // nonzeros are N(0, 1)
  o.model_density = 1.0;
  const SyntheticData dense = Generate(o);
  for (double w : dense.planted) BOOST_CHECK(w != 0.0);
  // A tiny density still plants at least one weight.
  o.cols = 5;
  o.model_density = 1e-12;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    o.seed = seed;
    const SyntheticData t = Generate(o);
    int64_t n = 0;
    for (double w : t.planted) n += w != 0.0;
    BOOST_CHECK_GE(n, 1);
  }
}

// An independent check that w* is what generated y: least squares by the
// normal equations (Gaussian elimination with partial pivoting, in double).
BOOST_AUTO_TEST_CASE(planted_model_is_recoverable_by_least_squares) {
  SyntheticOptions o;
  o.rows = 400;
  o.cols = 10;
  o.nnz_per_row = 10;
  o.noise = 0.01;
  o.seed = 7;
  const SyntheticData d = Generate(o);
  const int n = 10;
  std::vector<std::vector<double>> a(n, std::vector<double>(n + 1, 0.0));  // [X'X | X'y]
  for (int64_t i = 0; i < o.rows; ++i) {
    const SparseView row = d.data.x.outer(i);
    for (std::size_t p = 0; p < row.size; ++p) {
      for (std::size_t q = 0; q < row.size; ++q) {
        a[row.index[p]][row.index[q]] += static_cast<double>(row.value[p]) * row.value[q];
      }
      a[row.index[p]][n] += static_cast<double>(row.value[p]) * d.data.y[i];
    }
  }
  for (int c = 0; c < n; ++c) {
    int pivot = c;
    for (int r = c + 1; r < n; ++r) {
      if (std::fabs(a[r][c]) > std::fabs(a[pivot][c])) pivot = r;
    }
    std::swap(a[c], a[pivot]);
    BOOST_REQUIRE(std::fabs(a[c][c]) > 1e-9);
    for (int r = c + 1; r < n; ++r) {
      const double f = a[r][c] / a[c][c];
      for (int k = c; k <= n; ++k) a[r][k] -= f * a[c][k];
    }
  }
  std::vector<double> w(n);
  for (int c = n - 1; c >= 0; --c) {
    double s = a[c][n];
    for (int k = c + 1; k < n; ++k) s -= a[c][k] * w[k];
    w[c] = s / a[c][c];
  }
  double err = 0, norm = 0;
  for (int j = 0; j < n; ++j) {
    err += (w[j] - d.planted[j]) * (w[j] - d.planted[j]);
    norm += d.planted[j] * d.planted[j];
  }
  const double rel = std::sqrt(err / norm);
  BOOST_TEST_MESSAGE("relative error of the least-squares estimate: " << rel);
  BOOST_CHECK_LT(rel, 0.05);
}

BOOST_AUTO_TEST_CASE(invalid_options_name_the_field) {
  SyntheticOptions good;
  {
    auto o = good;
    o.rows = 0;
    ExpectInvalid(o, "rows");
  }
  {
    auto o = good;
    o.rows = -3;
    ExpectInvalid(o, "rows");
  }
  {
    auto o = good;
    o.cols = 0;
    ExpectInvalid(o, "cols");
  }
  {
    auto o = good;
    o.cols = (int64_t{1} << 32) + 1;
    ExpectInvalid(o, "cols");
  }
  {
    auto o = good;
    o.nnz_per_row = 0;
    ExpectInvalid(o, "nnz_per_row");
  }
  for (double density : {0.0, -0.5, 1.5, std::nan("")}) {
    auto o = good;
    o.model_density = density;
    ExpectInvalid(o, "model_density");
  }
  for (double noise : {-1e-9, std::nan(""), HUGE_VAL}) {
    auto o = good;
    o.noise = noise;
    ExpectInvalid(o, "noise");
  }
  {
    auto o = good;
    o.threads = -1;
    ExpectInvalid(o, "threads");
  }
  for (double decades : {-1.0, 31.0, std::nan("")}) {
    auto o = good;
    o.scale_decades = decades;
    ExpectInvalid(o, "scale_decades");
  }
  {
    auto o = good;  // 2^62 rows x 10 nonzeros: refused before allocating
    o.rows = int64_t{1} << 62;
    ExpectInvalid(o, "rows");
  }
}

// Data larger than the memory is refused before it is drawn (it filled the
// memory until the kernel stopped the process).
BOOST_AUTO_TEST_CASE(data_over_the_memory_is_refused_before_any_draw) {
  const dml::ScopedMemoryLimit limit(int64_t{1} << 30);  // 1 GiB
  SyntheticOptions o;
  o.rows = int64_t{1} << 24;  // x 10 nonzeros x 8 bytes: 1.25 GiB, + 12 bytes a row
  o.cols = 1000;
  auto r = GenerateSynthetic(o);
  BOOST_TEST((r.status().code() == absl::StatusCode::kResourceExhausted));
  BOOST_TEST(r.status().message() ==
             "SyntheticOptions: 16777216 rows x 10 nonzeros (and 1000 columns) need about 1.4 GiB, "
             "more than the 1.0 GiB of memory here");
  o.rows = 1000;
  BOOST_TEST(GenerateSynthetic(o).ok());
}

// scale_decades: the same rows and labels, each column multiplied by one
// factor, the factors spread over the decades asked for.
BOOST_AUTO_TEST_CASE(scaled_columns_keep_rows_and_labels) {
  SyntheticOptions o;
  o.rows = 3000;
  o.cols = 50;
  o.nnz_per_row = 7;
  o.task = Task::kClassification;
  o.noise = 0.2;
  auto plain = GenerateSynthetic(o);
  o.scale_decades = 4.0;
  auto scaled = GenerateSynthetic(o);
  BOOST_REQUIRE(plain.ok() && scaled.ok());
  BOOST_TEST(plain->data.y == scaled->data.y);
  BOOST_TEST(plain->data.x.indices() == scaled->data.x.indices());
  BOOST_TEST(plain->planted == scaled->planted);
  std::vector<double> factor(50, 0.0);
  const auto& a = plain->data.x.values();
  const auto& b = scaled->data.x.values();
  const auto& idx = plain->data.x.indices();
  for (std::size_t k = 0; k < a.size(); ++k) {
    if (a[k] == 0.0f) continue;
    const double f = double(b[k]) / a[k];
    if (factor[idx[k]] == 0.0) factor[idx[k]] = f;
    BOOST_TEST(std::abs(f / factor[idx[k]] - 1.0) < 1e-6);  // float rounding only
  }
  double lo = 1e300, hi = 0.0;
  for (double f : factor) {
    BOOST_REQUIRE(f > 0.0);
    lo = std::min(lo, f);
    hi = std::max(hi, f);
  }
  BOOST_TEST(lo >= 1e-2 * (1 - 1e-6));
  BOOST_TEST(hi <= 1e2 * (1 + 1e-6));
  BOOST_TEST(hi / lo > 1e3);  // 50 uniform draws cover most of the 4 decades
}

}  // namespace dml
