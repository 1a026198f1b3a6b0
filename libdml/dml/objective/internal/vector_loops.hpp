#pragma once
// What the vectorised per-example loops (logistic_conj.cpp,
// logistic_rows.cpp) share: their two builds and the binary entropy's
// branch-free form. The solvers' blocked Cholesky (solver/cholesky.cpp)
// takes the same two builds.
//
// Internal: included by objective/*.cpp and solver/cholesky.cpp only.

#include "dml/objective/losses.hpp"

// A loop built twice, for AVX2 (without FMA: the same roundings) and for
// the baseline; the CPU picks one when the library loads.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DML_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DML_SIMD_CLONES
#endif

namespace dml::internal {

/// b log b + (1 - b) log(1 - b) for b in [DBL_MIN, 1), as logistic's
/// conjugate sums it (-NegConj, to the bit); branch-free.
inline double XLogXBinary(double b) {
  return b * loss::LogOfNormal(b) + (1.0 - b) * loss::Log1pOfNormal(-b);
}

}  // namespace dml::internal
