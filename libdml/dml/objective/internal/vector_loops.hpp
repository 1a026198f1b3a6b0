#pragma once
// What the vectorised per-example loops (logistic_conj.cpp,
// logistic_rows.cpp) share: their two builds and the binary entropy's
// branch-free form. The solvers' blocked Cholesky (solver/cholesky.cpp)
// and dense-row loops (solver/dense_run.cpp) take the same two builds and
// vector type.
//
// Internal: included by objective/*.cpp, solver/cholesky.cpp and
// solver/dense_run.cpp only.

#include <cstring>

#include "dml/objective/losses.hpp"

// A loop built twice, for AVX2 (without FMA: the same roundings) and for
// the baseline; the CPU picks one when the library loads. Not under the
// sanitizers: the clones' ifunc resolver runs while the dynamic linker
// relocates, before their runtime is up, and an instrumented resolver
// crashed every ThreadSanitizer test binary that linked a cloned loop.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define DML_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DML_SIMD_CLONES
#endif

namespace dml::internal {

/// Four doubles on vector lanes (GCC's vector extension), for the cloned
/// loops that keep DotN's four sums lane by lane.
using V4d = double __attribute__((vector_size(32)));

/// v = p[0, 4), unaligned. Through a reference: a function returning a
/// 32-byte vector has another ABI in the baseline build (GCC warns).
inline void LoadD(V4d& v, const double* p) { std::memcpy(&v, p, sizeof v); }

/// b log b + (1 - b) log(1 - b) for b in [DBL_MIN, 1), as logistic's
/// conjugate sums it (-NegConj, to the bit); branch-free.
inline double XLogXBinary(double b) {
  return b * loss::LogOfNormal(b) + (1.0 - b) * loss::Log1pOfNormal(-b);
}

}  // namespace dml::internal
