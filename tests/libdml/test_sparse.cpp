#define BOOST_TEST_MODULE sparse
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "dml/data/partition.hpp"
#include "dml/data/sparse.hpp"

namespace {

// A dense row-major matrix, the obviously-correct reference.
using Dense = std::vector<std::vector<float>>;

dml::CsrMatrix FromDense(const Dense& d, int64_t cols) {
  std::vector<int64_t> off{0};
  std::vector<uint32_t> idx;
  std::vector<float> val;
  for (const auto& row : d) {
    for (int64_t j = 0; j < cols; ++j) {
      if (row[j] != 0.0f) {
        idx.push_back(static_cast<uint32_t>(j));
        val.push_back(row[j]);
      }
    }
    off.push_back(static_cast<int64_t>(idx.size()));
  }
  auto m = dml::CsrMatrix::FromArrays(static_cast<int64_t>(d.size()), cols, off, idx, val);
  BOOST_REQUIRE(m.ok());
  return *std::move(m);
}

Dense RandomDense(int64_t rows, int64_t cols, double density, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  Dense d(rows, std::vector<float>(cols, 0.0f));
  for (auto& row : d)
    for (auto& v : row)
      if (u(rng) < density) v = u(rng) * 4.0f - 2.0f + 1e-3f;
  return d;
}

float At(const dml::CscMatrix& m, int64_t i, int64_t j) {
  auto col = m.outer(j);
  auto it = std::lower_bound(col.index, col.index + col.size, static_cast<uint32_t>(i));
  return (it != col.index + col.size && *it == i) ? col.value[it - col.index] : 0.0f;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(compressed_matrix)

BOOST_AUTO_TEST_CASE(from_arrays_rejects_broken_invariants) {
  auto bad_len = dml::CsrMatrix::FromArrays(2, 3, {0, 1}, {0}, {1.0f});
  BOOST_TEST(bad_len.status().message() == "offsets has 2 entries, expected 3");
  auto out_of_range = dml::CsrMatrix::FromArrays(2, 3, {0, 1, 2}, {0, 3}, {1.0f, 2.0f});
  BOOST_TEST(out_of_range.status().message() == "row 1, entry 0: index 3 out of range [0, 3)");
  auto unsorted = dml::CsrMatrix::FromArrays(1, 3, {0, 2}, {2, 1}, {1.0f, 2.0f});
  BOOST_TEST(unsorted.status().message() == "row 0, entry 1: index 1 not strictly increasing");
  auto decreasing = dml::CscMatrix::FromArrays(3, 2, {0, 2, 1}, {0}, {1.0f});
  BOOST_TEST(!decreasing.ok());
  auto nan = dml::CsrMatrix::FromArrays(1, 3, {0, 1}, {0}, {std::nanf("")});
  BOOST_TEST(nan.status().message() == "row 0, entry 0: non-finite value");
  BOOST_TEST(dml::CsrMatrix::FromArrays(1, 3, {0, 1}, {2}, {5.0f}).ok());
}

BOOST_AUTO_TEST_CASE(csr_csc_round_trip_matches_dense) {
  const int64_t rows = 57, cols = 23;
  Dense d = RandomDense(rows, cols, 0.2, 7);
  dml::CsrMatrix csr = FromDense(d, cols);
  dml::CscMatrix csc = csr.Convert();
  BOOST_TEST(csc.rows() == rows);
  BOOST_TEST(csc.cols() == cols);
  BOOST_TEST(csc.nnz() == csr.nnz());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) BOOST_TEST(At(csc, i, j) == d[i][j]);
  // The CSC must itself satisfy the invariants (sorted rows inside columns).
  BOOST_TEST(dml::CscMatrix::FromArrays(csc.rows(), csc.cols(), csc.offsets(), csc.indices(),
                                        csc.values()).ok());
  BOOST_TEST((csc.Convert() == csr));
}

// Threads share the scatter above 2^20 nonzeros: the same arrays as one
// thread, checked against the dense reference; uneven splits (3 threads)
// and small matrices (one thread, whatever is asked) included.
BOOST_AUTO_TEST_CASE(threaded_convert_gives_the_same_matrix) {
  const Dense d = RandomDense(7001, 300, 0.6, 17);  // ~1.26e6 nonzeros
  const dml::CsrMatrix csr = FromDense(d, 300);
  BOOST_REQUIRE(csr.nnz() >= (int64_t{1} << 20));
  const dml::CscMatrix one = csr.Convert();
  for (int64_t i = 0; i < 7001; i += 97) {
    for (int64_t j = 0; j < 300; j += 7) BOOST_TEST(At(one, i, j) == d[i][j]);
  }
  for (int threads : {2, 3, 8}) {
    const dml::CscMatrix many = csr.Convert(threads);
    BOOST_TEST((many == one), "threads " << threads);
  }
  const dml::CsrMatrix small = FromDense(RandomDense(40, 30, 0.3, 3), 30);
  BOOST_TEST((small.Convert(4) == small.Convert()));
  BOOST_TEST((small.Convert(4).Convert() == small));
}

BOOST_AUTO_TEST_CASE(a_constant_column_is_appended_or_replaces_the_tail) {
  const Dense d = {{1, 0, 2}, {0, 0, 0}, {0, 3, 4}};
  const dml::CsrMatrix x = FromDense(d, 3);
  const dml::CscMatrix all = dml::WithConstantColumn(x, 0.5f, 3).Convert();
  BOOST_TEST(all.rows() == 3);
  BOOST_TEST(all.cols() == 4);
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 3; ++j) BOOST_TEST(At(all, i, j) == d[i][j]);
    BOOST_TEST(At(all, i, 3) == 0.5f);
  }
  // A model with 2 features: column 2 is dropped, the constant takes its place.
  const dml::CscMatrix cut = dml::WithConstantColumn(x, 1.0f, 2).Convert();
  BOOST_TEST(cut.cols() == 3);
  BOOST_TEST(cut.nnz() == 2 + 3);
  BOOST_TEST(At(cut, 0, 2) == 1.0f);
  BOOST_TEST(At(cut, 2, 1) == 3.0f);
  // Zero: the column exists with no entries.
  const dml::CsrMatrix zero = dml::WithConstantColumn(x, 0.0f, 3);
  BOOST_TEST(zero.cols() == 4);
  BOOST_TEST(zero.nnz() == x.nnz());
}

BOOST_AUTO_TEST_CASE(slicing_rows_and_columns) {
  const int64_t rows = 30, cols = 12;
  Dense d = RandomDense(rows, cols, 0.3, 11);
  dml::CsrMatrix csr = FromDense(d, cols);

  dml::CsrMatrix mid = csr.SliceOuter(10, 20);
  BOOST_TEST(mid.rows() == 10);
  BOOST_TEST(mid.cols() == cols);
  Dense d_mid(d.begin() + 10, d.begin() + 20);
  BOOST_TEST((mid == FromDense(d_mid, cols)));

  dml::CsrMatrix right = csr.SliceInner(4, 9);
  Dense d_right;
  for (const auto& r : d) d_right.emplace_back(r.begin() + 4, r.begin() + 9);
  BOOST_TEST((right == FromDense(d_right, 5)));

  dml::CsrMatrix picked = csr.GatherOuter({29, 0, 5});
  BOOST_TEST((picked == FromDense(Dense{d[29], d[0], d[5]}, cols)));

  // Column slicing through the CSC agrees with inner slicing of the CSR.
  dml::CscMatrix cols_4_9 = csr.Convert().SliceOuter(4, 9);
  BOOST_TEST((cols_4_9.Convert() == right));
}

BOOST_AUTO_TEST_CASE(resize_inner_only_grows) {
  dml::CsrMatrix m = FromDense(Dense{{1, 0, 2}}, 3);
  BOOST_TEST(m.ResizeInner(10).ok());
  BOOST_TEST(m.cols() == 10);
  auto st = m.ResizeInner(2);
  BOOST_TEST(st.message() == "cannot shrink the inner dimension from 10 to 2");
}

BOOST_AUTO_TEST_CASE(row_norms) {
  dml::CsrMatrix m = FromDense(Dense{{3, 0, 4}, {0, 0, 0}, {1, 1, 1}}, 3);
  auto n = m.OuterSquaredNorms();
  BOOST_TEST(n == (std::vector<double>{25.0, 0.0, 3.0}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(partition)

BOOST_AUTO_TEST_CASE(balanced_by_nonzeros) {
  // Skewed rows: nnz per row grows linearly, so an equal-row split would be
  // badly unbalanced.
  std::vector<int64_t> off{0};
  for (int i = 0; i < 1000; ++i) off.push_back(off.back() + 1 + i / 10);
  const int64_t total = off.back();
  int64_t max_slot = 0;
  for (int i = 0; i < 1000; ++i) max_slot = std::max(max_slot, off[i + 1] - off[i]);
  for (int k : {1, 2, 3, 4, 7, 16}) {
    auto parts = dml::BalancedRanges(off, k);
    BOOST_REQUIRE(parts.ok());
    BOOST_TEST(parts->size() == static_cast<std::size_t>(k));
    BOOST_TEST(parts->front().begin == 0);
    BOOST_TEST(parts->back().end == 1000);
    for (int p = 0; p < k; ++p) {
      if (p > 0) BOOST_TEST((*parts)[p].begin == (*parts)[p - 1].end);
      const int64_t nnz = off[(*parts)[p].end] - off[(*parts)[p].begin];
      BOOST_TEST(std::abs(nnz - total / k) <= max_slot, "k=" << k << " part " << p << " nnz " << nnz);
    }
  }
}

BOOST_AUTO_TEST_CASE(more_parts_than_slots_and_bad_k) {
  std::vector<int64_t> off{0, 5, 6};
  auto parts = dml::BalancedRanges(off, 4);
  BOOST_REQUIRE(parts.ok());
  int64_t covered = 0;
  for (const auto& r : *parts) {
    BOOST_TEST(r.size() >= 0);
    covered += r.size();
  }
  BOOST_TEST(covered == 2);
  BOOST_TEST(dml::BalancedRanges(off, 0).status().message() == "number of parts must be >= 1, got 0");
}

BOOST_AUTO_TEST_CASE(partition_rows_and_cols_reassemble) {
  const int64_t rows = 101, cols = 37;
  Dense d = RandomDense(rows, cols, 0.15, 3);
  dml::CsrMatrix csr = FromDense(d, cols);
  auto row_parts = dml::PartitionRows(csr, 4);
  BOOST_REQUIRE(row_parts.ok());
  std::vector<int64_t> all_rows;
  int64_t r0 = 0, nnz = 0;
  for (const auto& p : *row_parts) {
    BOOST_TEST(p.cols() == cols);
    BOOST_TEST((p == csr.SliceOuter(r0, r0 + p.rows())));
    r0 += p.rows();
    nnz += p.nnz();
  }
  BOOST_TEST(r0 == rows);
  BOOST_TEST(nnz == csr.nnz());

  dml::CscMatrix csc = csr.Convert();
  auto col_parts = dml::PartitionCols(csc, 3);
  BOOST_REQUIRE(col_parts.ok());
  int64_t c0 = 0;
  for (const auto& p : *col_parts) {
    BOOST_TEST(p.rows() == rows);
    BOOST_TEST((p.Convert() == csr.SliceInner(c0, c0 + p.cols())));
    c0 += p.cols();
  }
  BOOST_TEST(c0 == cols);
}

BOOST_AUTO_TEST_SUITE_END()
