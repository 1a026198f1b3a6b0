#define BOOST_TEST_MODULE cholesky
// The blocked Cholesky factor (solver/cholesky.cpp) against the
// column-by-column form it replaced, written out here: the same bits on
// every entry of the lower triangle for sizes around its blocks of four
// and its pairs of rows, the factor reproducing A, and the same refusal of
// a singular or non-finite matrix at the same pivot.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "dml/solver/internal/cholesky.hpp"

namespace {

using dml::internal::CholeskyInPlace;
using dml::internal::DotN;

// The previous CholeskyInPlace; also reports the column it stopped at.
bool ColumnCholesky(double* a, std::size_t m, double min_pivot, std::size_t* failed_at) {
  for (std::size_t j = 0; j < m; ++j) {
    const double* lj = a + j * m;
    const double diag = a[j * m + j] - DotN(lj, lj, j);
    if (!(diag > min_pivot) || !std::isfinite(diag)) {
      *failed_at = j;
      return false;
    }
    const double ljj = std::sqrt(diag);
    a[j * m + j] = ljj;
    for (std::size_t i = j + 1; i < m; ++i) {
      a[i * m + j] = (a[i * m + j] - DotN(a + i * m, lj, j)) / ljj;
    }
  }
  return true;
}

// B B^T / k + shift I, B m x k with entries in [-1, 1]: symmetric positive
// definite for shift > 0 (rank k where shift = 0).
std::vector<double> Gram(std::size_t m, std::size_t k, double shift, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> b(m * k);
  for (double& v : b) v = u(rng);
  std::vector<double> a(m * m);
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j <= i; ++j) {
      double s = 0.0;
      for (std::size_t t = 0; t < k; ++t) s += b[i * k + t] * b[j * k + t];
      a[i * m + j] = a[j * m + i] = s / static_cast<double>(k) + (i == j ? shift : 0.0);
    }
  }
  return a;
}

bool SameBits(double x, double y) { return std::memcmp(&x, &y, sizeof x) == 0; }

}  // namespace

BOOST_AUTO_TEST_CASE(same_bits_as_the_column_form) {
  for (std::size_t m :
       {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u, 9u, 11u, 12u, 13u, 17u, 31u, 64u, 101u, 300u}) {
    const std::vector<double> a = Gram(m, m + 3, 1e-3, static_cast<uint32_t>(m));
    std::vector<double> blocked = a, column = a;
    std::size_t failed_at = 0;
    BOOST_REQUIRE(ColumnCholesky(column.data(), m, 1e-13, &failed_at));
    BOOST_REQUIRE_MESSAGE(CholeskyInPlace(blocked.data(), m, 1e-13), "m = " << m);
    std::size_t differ = 0;
    for (std::size_t i = 0; i < m; ++i) {
      for (std::size_t j = 0; j <= i; ++j)
        differ += SameBits(blocked[i * m + j], column[i * m + j]) ? 0 : 1;
    }
    BOOST_TEST(differ == 0u, "m = " << m << ": " << differ << " entries differ");
    // And it is a factor: (L L^T)_ij = A_ij to rounding.
    double worst = 0.0;
    for (std::size_t i = 0; i < m; ++i) {
      for (std::size_t j = 0; j <= i; ++j) {
        const double llt = DotN(blocked.data() + i * m, blocked.data() + j * m, j + 1);
        worst = std::max(worst, std::abs(llt - a[i * m + j]));
      }
    }
    BOOST_TEST(worst < 1e-12, "m = " << m << ": |L L^T - A| up to " << worst);
  }
}

BOOST_AUTO_TEST_CASE(solve_inverts_the_matrix) {
  const std::size_t m = 45;
  const std::vector<double> a = Gram(m, 60, 0.1, 7);
  std::vector<double> l = a;
  BOOST_REQUIRE(CholeskyInPlace(l.data(), m, 1e-13));
  std::vector<double> x(m);
  for (std::size_t i = 0; i < m; ++i) x[i] = 1.0 + static_cast<double>(i % 5);
  const std::vector<double> b = x;
  dml::internal::CholeskySolveInPlace(l.data(), m, x.data());
  for (std::size_t i = 0; i < m; ++i) {
    double ax = 0.0;
    for (std::size_t j = 0; j < m; ++j) ax += a[i * m + j] * x[j];
    BOOST_TEST(std::abs(ax - b[i]) < 1e-10, "row " << i << ": " << ax << " vs " << b[i]);
  }
}

BOOST_AUTO_TEST_CASE(refuses_where_the_column_form_does) {
  // Rank 9 of 23 (pivot 9 is rounding, far below 1e-9), then a NaN on the
  // diagonal at 14 of a definite one, then a negative diagonal at 6.
  struct Case {
    std::vector<double> a;
    std::size_t m;
    double min_pivot;
    std::size_t fails_at;
  };
  std::vector<Case> cases;
  cases.push_back({Gram(23, 9, 0.0, 3), 23, 1e-9, 9});
  std::vector<double> nan = Gram(23, 30, 0.5, 4);
  nan[14 * 23 + 14] = std::numeric_limits<double>::quiet_NaN();
  cases.push_back({nan, 23, 1e-13, 14});
  std::vector<double> neg = Gram(10, 12, 0.5, 5);
  neg[6 * 10 + 6] = -1.0;
  cases.push_back({neg, 10, 1e-13, 6});
  for (Case& c : cases) {
    std::vector<double> column = c.a, blocked = c.a;
    std::size_t failed_at = c.m;
    BOOST_TEST(!ColumnCholesky(column.data(), c.m, c.min_pivot, &failed_at));
    BOOST_TEST(failed_at == c.fails_at);
    BOOST_TEST(!CholeskyInPlace(blocked.data(), c.m, c.min_pivot));
    // Every column left of the failed pivot was finished the same way.
    for (std::size_t i = 0; i < c.m; ++i) {
      for (std::size_t j = 0; j < failed_at && j <= i; ++j) {
        const bool below_done = j / 4 < failed_at / 4 || i < failed_at;
        if (!below_done) continue;
        BOOST_TEST(SameBits(blocked[i * c.m + j], column[i * c.m + j]),
                   "entry (" << i << ", " << j << ") before pivot " << failed_at);
      }
    }
  }
}

// A row's products by AddRowProducts against the indexed loop, entry by
// entry: dense runs at 0 and further in (where the contiguous loops take
// them), rows with gaps, 0/1 rows, rows summed onto each other.
BOOST_AUTO_TEST_CASE(row_products_give_the_indexed_loops_bits) {
  const std::size_t d = 40;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  struct Row {
    std::vector<uint32_t> pos;
    std::vector<float> val;
  };
  std::vector<Row> rows;
  for (uint32_t start : {0u, 5u, 33u}) {  // dense runs of lengths 7, 19, 1
    const uint32_t len = start == 0 ? 7 : start == 5 ? 19 : 1;
    Row r;
    for (uint32_t k = 0; k < len; ++k) {
      r.pos.push_back(start + k);
      r.val.push_back(u(rng));
    }
    rows.push_back(r);
  }
  rows.push_back({{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19,
                   20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39},
                  std::vector<float>(40)});
  for (float& v : rows.back().val) v = u(rng);
  rows.push_back({{1, 2, 4, 9, 10, 11, 30}, {0.5f, -2.0f, 1.5f, 3.0f, -0.25f, 1.0f, 2.5f}});
  rows.push_back({{3, 4, 5, 6, 20}, {1.0f, 1.0f, 1.0f, 1.0f, 1.0f}});
  rows.push_back({{8, 9, 10}, {1.0f, 1.0f, 1.0f}});
  std::vector<double> fast(d * d, 0.0), indexed(d * d, 0.0);
  double v = 0.37;
  for (const Row& r : rows) {
    dml::internal::AddRowProducts(fast.data(), d, r.pos.data(), r.val.data(), r.pos.size(), v);
    for (std::size_t a = 0; a < r.pos.size(); ++a) {
      const double va = v * r.val[a];
      for (std::size_t k = 0; k <= a; ++k) indexed[r.pos[a] * d + r.pos[k]] += va * r.val[k];
    }
    v *= 1.7;
  }
  std::size_t touched = 0;
  for (std::size_t i = 0; i < d * d; ++i) {
    BOOST_TEST(SameBits(fast[i], indexed[i]), "entry (" << i / d << ", " << i % d << ")");
    touched += indexed[i] != 0.0;
  }
  BOOST_TEST(touched == 820u);  // the dense 40-feature row fills the lower triangle
  // Nothing above the diagonal.
  for (std::size_t i = 0; i < d; ++i) {
    for (std::size_t j = i + 1; j < d; ++j) BOOST_TEST(fast[i * d + j] == 0.0);
  }
}
