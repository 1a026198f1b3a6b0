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
/// dispatcher costs about a short row's work. From 8 on the SIMD loops won
/// where measured (hinge, whole runs at the same bits: 30 features 0.76 of
/// the time, 16 features 0.55-0.81, 12 0.85, 8 0.84-0.95); at 32, where it
/// was, tabular sets of 16-30 features kept the indexed loops.
constexpr uint32_t kDenseRunMinLen = 8;

/// sum_k v[k] w[k], k < len.
double DenseRunDot(const float* v, uint32_t len, const double* w);

/// w[k] += c v[k], k < len.
void DenseRunAxpy(const float* v, uint32_t len, double c, double* w);

/// True where len > 0 strictly increasing indices form one run.
inline bool IsOneRun(const uint32_t* ix, std::size_t len) {
  return len != 0 && ix[len - 1] - ix[0] == len - 1;
}

/// True where a row's strictly increasing indices form one run long enough
/// for the SIMD loops.
inline bool IsDenseRun(const uint32_t* ix, uint32_t len) {
  return len >= kDenseRunMinLen && IsOneRun(ix, len);
}

}  // namespace dml::internal
