// CholeskyInPlace (internal/cholesky.hpp) in blocks of four columns.
//
// The column-by-column form computes L[i][j] from DotN(row i, row j, j):
// for every column it streams all the rows below through the cache, one
// multiply-add per load (w8a's 300 features: 1.3 ms a factor, 13% of a
// squared-hinge Newton run). Here the rows below a block of four columns
// are read once for all four, two rows at a time, on vector lanes: eight
// sums of products per six loads.
//
// Same bits as DotN: lane l of a sum holds the products k = l mod 4 below
// the block (the block starts at a multiple of 4, where DotN's four-way
// loop stops), the few products inside the block go to lane 0 in order, as
// DotN's tail loop adds them, and the lanes are added as (0 + 1) + (2 + 3).
// No FMA in either build, so no product is fused into its sum.

#include "dml/solver/internal/cholesky.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "dml/objective/internal/vector_loops.hpp"
#include "dml/solver/internal/dense_run.hpp"

namespace dml::internal {
namespace {

/// acc[r][c] lane l = sum over k < len, k = l mod 4, of rows[r][k] cols[c][k];
/// len a multiple of 4.
template <int NR, int NC>
inline void Lanes(const double* const* rows, const double* const* cols, std::size_t len,
                  V4d (&out)[2][4]) {
  // Sums in locals (registers once the loops unroll), stored at the end.
  V4d acc[NR][NC];
#pragma GCC unroll 2
  for (int r = 0; r < NR; ++r) {
#pragma GCC unroll 4
    for (int c = 0; c < NC; ++c) acc[r][c] = V4d{0.0, 0.0, 0.0, 0.0};
  }
  for (std::size_t k = 0; k < len; k += 4) {
    V4d cv[NC];
#pragma GCC unroll 4
    for (int c = 0; c < NC; ++c) LoadD(cv[c], cols[c] + k);
#pragma GCC unroll 2
    for (int r = 0; r < NR; ++r) {
      V4d rv;
      LoadD(rv, rows[r] + k);
#pragma GCC unroll 4
      for (int c = 0; c < NC; ++c) acc[r][c] += rv * cv[c];
    }
  }
#pragma GCC unroll 2
  for (int r = 0; r < NR; ++r) {
#pragma GCC unroll 4
    for (int c = 0; c < NC; ++c) out[r][c] = acc[r][c];
  }
}

template <int NR>
inline void LanesFor(int nc, const double* const* rows, const double* const* cols, std::size_t len,
                     V4d (&acc)[2][4]) {
  switch (nc) {
    case 1:
      Lanes<NR, 1>(rows, cols, len, acc);
      break;
    case 2:
      Lanes<NR, 2>(rows, cols, len, acc);
      break;
    case 3:
      Lanes<NR, 3>(rows, cols, len, acc);
      break;
    default:
      Lanes<NR, 4>(rows, cols, len, acc);
      break;
  }
}

/// DotN(li, lc, jb + c) from the lanes over [0, jb) and the products in
/// [jb, jb + c), in DotN's order.
inline double Finish(const V4d& lanes, const double* li, const double* lc, std::size_t jb,
                     std::size_t c) {
  // At most three products, spelled out (as a loop GCC put them on lanes
  // and took them apart again).
  double s0 = lanes[0];
  if (c > 0) s0 += li[jb] * lc[jb];
  if (c > 1) s0 += li[jb + 1] * lc[jb + 1];
  if (c > 2) s0 += li[jb + 2] * lc[jb + 2];
  return (s0 + lanes[1]) + (lanes[2] + lanes[3]);
}

/// Adds v x x^T's lower triangle to h (row-major, `stride` columns) for a
/// row x whose n nonzeros are all 1, at increasing positions pos[0, n):
/// one add of v an entry. The same sums as the products v * 1 * 1 would
/// give (one-hot and other 0/1 rows, a9a and w8a: a third less time).
void AddBinaryRowPairs(double* h, std::size_t stride, const uint32_t* pos, std::size_t n,
                       double v) {
  for (std::size_t a = 0; a < n; ++a) {
    double* row = h + static_cast<std::size_t>(pos[a]) * stride;
    std::size_t k = 0;
    for (; k + 4 <= a + 1; k += 4) {
      row[pos[k]] += v;
      row[pos[k + 1]] += v;
      row[pos[k + 2]] += v;
      row[pos[k + 3]] += v;
    }
    for (; k <= a; ++k) row[pos[k]] += v;
  }
}

}  // namespace

DML_SIMD_CLONES
bool CholeskyInPlace(double* a, std::size_t m, double min_pivot) {
  V4d acc[2][4];
  for (std::size_t jb = 0; jb < m; jb += 4) {
    const int nc = static_cast<int>(std::min<std::size_t>(4, m - jb));
    const double* cols[4] = {};
    for (int c = 0; c < nc; ++c) cols[c] = a + (jb + static_cast<std::size_t>(c)) * m;
    // The block's own rows, in order: row jb + r needs the pivots of the
    // rows above it in the block.
    for (int r = 0; r < nc; ++r) {
      const std::size_t i = jb + static_cast<std::size_t>(r);
      double* li = a + i * m;
      const double* rows[1] = {li};
      LanesFor<1>(r + 1, rows, cols, jb, acc);
      for (int c = 0; c < r; ++c) {
        const std::size_t j = jb + static_cast<std::size_t>(c);
        li[j] =
            (li[j] - Finish(acc[0][c], li, cols[c], jb, static_cast<std::size_t>(c))) / cols[c][j];
      }
      const double diag = li[i] - Finish(acc[0][r], li, li, jb, static_cast<std::size_t>(r));
      if (!(diag > min_pivot) || !std::isfinite(diag)) return false;
      li[i] = std::sqrt(diag);
    }
    // The rows below, two at a time.
    for (std::size_t i = jb + static_cast<std::size_t>(nc); i < m; i += 2) {
      const int nr = i + 1 < m ? 2 : 1;
      double* li[2] = {a + i * m, nr == 2 ? a + (i + 1) * m : nullptr};
      const double* rows[2] = {li[0], li[1]};
      if (nr == 2) {
        LanesFor<2>(nc, rows, cols, jb, acc);
      } else {
        LanesFor<1>(nc, rows, cols, jb, acc);
      }
      for (int r = 0; r < nr; ++r) {
        for (int c = 0; c < nc; ++c) {
          const std::size_t j = jb + static_cast<std::size_t>(c);
          li[r][j] =
              (li[r][j] - Finish(acc[r][c], li[r], cols[c], jb, static_cast<std::size_t>(c))) /
              cols[c][j];
        }
      }
    }
  }
  return true;
}

DML_SIMD_CLONES
void AddRowProducts(double* h, std::size_t stride, const uint32_t* pos, const float* val,
                    std::size_t n, double v) {
  bool binary = true;
  for (std::size_t k = 0; k < n; ++k) binary = binary && val[k] == 1.0f;
  if (binary) {
    AddBinaryRowPairs(h, stride, pos, n, v);
    return;
  }
  if (IsOneRun(pos, n)) {
    // Positions pos[0] + 0..n-1 (they increase): no index reads.
    double* const base = h + static_cast<std::size_t>(pos[0]) * stride + pos[0];
    for (std::size_t a = 0; a < n; ++a) {
      double* const row = base + a * stride;
      const double va = v * val[a];
      for (std::size_t k = 0; k <= a; ++k) row[k] += va * val[k];
    }
    return;
  }
  for (std::size_t a = 0; a < n; ++a) {
    double* const row = h + static_cast<std::size_t>(pos[a]) * stride;
    const double va = v * val[a];
    for (std::size_t k = 0; k <= a; ++k) row[pos[k]] += va * val[k];
  }
}

}  // namespace dml::internal
