#pragma once
// Dense Cholesky factor and solve for the small explicit Hessians of the
// Newton solver (newton.cpp) and newGLMNET's support step (glmnet_l1.cpp):
// m x m row-major, lower triangle used; and a row's share of forming them.
//
// Internal: included by solver/*.cpp only. Thread-safety: none needed (pure
// functions of their arguments; the caller owns the arrays).

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace dml::internal {

/// sum_k a[k] b[k] over [0, n) with four independent sums: the factors'
/// inner products were one chain of dependent adds (d^3 / 6 of them at the
/// add's latency: 6 ms a factor for w8a's 300 features, a third of its
/// Newton run).
inline double DotN(const double* a, const double* b, std::size_t n) {
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  std::size_t k = 0;
  for (; k + 4 <= n; k += 4) {
    s0 += a[k] * b[k];
    s1 += a[k + 1] * b[k + 1];
    s2 += a[k + 2] * b[k + 2];
    s3 += a[k + 3] * b[k + 3];
  }
  for (; k < n; ++k) s0 += a[k] * b[k];
  return (s0 + s1) + (s2 + s3);
}

/// A = L L^T in place over A's lower triangle. False where a pivot is not
/// finite or not above `min_pivot` (A numerically singular there); A is
/// then partly overwritten. Every entry is rounded as the column-by-column
/// form with DotN rounds it (the same bits), computed in blocks of four
/// columns (cholesky.cpp).
bool CholeskyInPlace(double* a, std::size_t m, double min_pivot);

/// Adds v x x^T's lower triangle to h (row-major, `stride` columns) for a
/// row x with n nonzeros `val` at increasing positions pos[0, n): 0/1 rows
/// by one add of v an entry (one-hot rows, a9a and w8a: a third less
/// time), a row of consecutive positions (a dense run: tabular rows) by
/// contiguous loops on vector lanes, others by index. Every entry gets the
/// same sums in the same order whichever way (the same bits). Newton's
/// explicit Hessian and newGLMNET's FormHessian; cholesky.cpp, AVX2 where
/// the CPU has it.
void AddRowProducts(double* h, std::size_t stride, const uint32_t* pos, const float* val,
                    std::size_t n, double v);

/// x = (L L^T)^-1 x in place, L from CholeskyInPlace.
inline void CholeskySolveInPlace(const double* l, std::size_t m, double* x) {
  for (std::size_t i = 0; i < m; ++i) {  // L y = x
    double v = x[i];
    for (std::size_t k = 0; k < i; ++k) v -= l[i * m + k] * x[k];
    x[i] = v / l[i * m + i];
  }
  for (std::size_t i = m; i-- > 0;) {  // L^T x = y
    double v = x[i];
    for (std::size_t k = i + 1; k < m; ++k) v -= l[k * m + i] * x[k];
    x[i] = v / l[i * m + i];
  }
}

}  // namespace dml::internal
