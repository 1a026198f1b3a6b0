#pragma once
// Dot and axpy over a row whose features form one contiguous run of indices
// (a dense row: 0..d-1). No index is read and w is read in order, so the
// loops run on SIMD lanes (AVX2 where the CPU has it, picked once at load
// time; SSE2 otherwise). Both builds sum in the same order: results are
// bitwise the same on either.
//
// Internal: included by solver/*.cpp only. Thread-safety: none needed (pure
// functions of their arguments); the caller owns w.

#include <cstddef>
#include <cstdint>

namespace dml::internal {

/// Rows shorter than this keep the indexed loops: a call through the
/// dispatcher costs more than a short row's work.
constexpr uint32_t kDenseRunMinLen = 32;

/// sum_k v[k] w[k], k < len.
double DenseRunDot(const float* v, uint32_t len, const double* w);

/// w[k] += c v[k], k < len.
void DenseRunAxpy(const float* v, uint32_t len, double c, double* w);

/// sum_k a[k] b[k] over [0, n) with four independent sums: the Cholesky
/// factors' inner products (newton.cpp, glmnet_l1.cpp) were one chain of
/// dependent adds (d^3 / 6 of them at the add's latency: 6 ms a factor for
/// w8a's 300 features, a third of its Newton run).
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

/// True where a row's strictly increasing indices form one run.
inline bool IsDenseRun(const uint32_t* ix, uint32_t len) {
  return len >= kDenseRunMinLen && ix[len - 1] - ix[0] == len - 1;
}

}  // namespace dml::internal
