#include "dml/solver/internal/dense_run.hpp"

#include <cstring>

#include "dml/objective/internal/vector_loops.hpp"

namespace dml::internal {

// Widen passes a 32-byte vector by value inside this file only; GCC's note
// that the SSE2 clone's ABI for it differs does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace {
typedef float V4f __attribute__((vector_size(16)));

inline V4d Widen(const float* p) {
  V4f f;
  std::memcpy(&f, p, sizeof f);
  return __builtin_convertvector(f, V4d);
}
}  // namespace

// Lane j sums the terms k = j mod 4, the tail goes to lane 0, and the lanes
// combine as (0 + 1) + (2 + 3): SparseDot's order, so a dense row's margin
// is bitwise the indexed loop's. Products and sums stay separate operations
// (no contraction under -std=c++17): every clone rounds alike.
DML_SIMD_CLONES
double DenseRunDot(const float* v, uint32_t len, const double* w) {
  V4d s = {0.0, 0.0, 0.0, 0.0};
  uint32_t k = 0;
  for (; k + 4 <= len; k += 4) {
    V4d wk;
    LoadD(wk, w + k);
    s += Widen(v + k) * wk;
  }
  double s0 = s[0];
  for (; k < len; ++k) s0 += static_cast<double>(v[k]) * w[k];
  return (s0 + s[1]) + (s[2] + s[3]);
}

// Elementwise as SparseAxpy: bitwise its result.
DML_SIMD_CLONES
void DenseRunAxpy(const float* v, uint32_t len, double c, double* w) {
  const V4d cc = {c, c, c, c};
  uint32_t k = 0;
  for (; k + 4 <= len; k += 4) {
    V4d wk;
    LoadD(wk, w + k);
    const V4d r = wk + cc * Widen(v + k);
    std::memcpy(w + k, &r, sizeof r);
  }
  for (; k < len; ++k) w[k] += c * static_cast<double>(v[k]);
}

}  // namespace dml::internal
