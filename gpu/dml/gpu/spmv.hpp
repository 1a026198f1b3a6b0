#pragma once
// Sparse matrix-vector product z = A w for a CSR matrix, on the GPU and on
// the CPU. The two functions have the same signature so a caller can hold
// either; SpmvAuto picks the GPU and, if the caller allows it, falls back to
// the CPU twin with a logged message.
//
// This header mentions no CUDA type and compiles with or without CUDA.
//
// Numerics: the CPU twin accumulates each row in double and rounds once, so
// it is the reference. The GPU kernel accumulates in float (one warp per row,
// a tree reduction over the lanes), so for row i
//   |z_gpu[i] - z_cpu[i]| <= ~(nnz_i/32 + 5) * 2^-24 * sum_j |a_ij w_j|,
// and tests check a relative tolerance of 1e-5 on sum_j |a_ij w_j|.

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dml/data/sparse.hpp"

namespace dml::gpu {

/// True when libdml was built with its CUDA kernels (nvcc found at configure
/// time). Says nothing about whether a device is present.
bool CudaCompiled();

/// Number of CUDA devices usable by this process: 0 without CUDA compiled in,
/// without a driver, or without a device (cudaGetDeviceCount errors such as
/// "driver version is insufficient" count as zero). Thread-safe.
int CudaDeviceCount();

/// Receives one human-readable line; the library never prints on its own.
using LogFn = std::function<void(std::string_view)>;

/// z = A w on the CPU: z has a.rows() entries. Always built; thread-safe for
/// concurrent calls on the same matrix.
/// Errors: InvalidArgument if w.size() != a.cols().
absl::StatusOr<std::vector<float>> SpmvCpu(const CsrMatrix& a, absl::Span<const float> w);

/// z = A w on CUDA device 0 (the current device). Copies A and w to the
/// device, runs one warp per row, copies z back; blocking. Device memory is
/// freed before returning, on success and on error.
/// Errors, in the order checked: InvalidArgument if w.size() != a.cols()
/// (same on every host); Unavailable "libdml was built without CUDA" when not
/// compiled in;
/// Unavailable naming cudaGetDeviceCount's error when there is no device;
/// ResourceExhausted when device memory runs out; Internal (with file:line)
/// for any other CUDA failure.
absl::StatusOr<std::vector<float>> SpmvGpu(const CsrMatrix& a, absl::Span<const float> w);

/// SpmvGpu, or, when it is Unavailable or ResourceExhausted and
/// `allow_fallback` is true, SpmvCpu. A fallback sends exactly one line to
/// `log` (if set) saying why. Other errors (e.g. InvalidArgument) are
/// returned as they are, never masked by a fallback.
absl::StatusOr<std::vector<float>> SpmvAuto(const CsrMatrix& a, absl::Span<const float> w,
                                            bool allow_fallback, const LogFn& log = {});

}  // namespace dml::gpu
