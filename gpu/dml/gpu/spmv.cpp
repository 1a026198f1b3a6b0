// Host side of the SpMV: the CPU twin (always built) and the dispatch to the
// CUDA kernel in internal/spmv_kernel.cu (only with DML_HAVE_CUDA).

#include "dml/gpu/spmv.hpp"

#include <cstddef>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#if defined(DML_HAVE_CUDA)
#include "dml/gpu/internal/spmv_device.hpp"
#endif

namespace dml::gpu {
namespace {

absl::Status CheckShapes(const CsrMatrix& a, absl::Span<const float> w, const char* who) {
  if (static_cast<int64_t>(w.size()) != a.cols()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: w has %d entries but the matrix has %d columns", who, w.size(), a.cols()));
  }
  return absl::OkStatus();
}

}  // namespace

bool CudaCompiled() {
#if defined(DML_HAVE_CUDA)
  return true;
#else
  return false;
#endif
}

int CudaDeviceCount() {
#if defined(DML_HAVE_CUDA)
  absl::StatusOr<int> n = internal::DeviceCount();
  return n.ok() ? *n : 0;
#else
  return 0;
#endif
}

absl::StatusOr<std::vector<float>> SpmvCpu(const CsrMatrix& a, absl::Span<const float> w) {
  if (auto s = CheckShapes(a, w, "SpmvCpu"); !s.ok()) return s;
  std::vector<float> z(static_cast<std::size_t>(a.rows()));
  for (int64_t i = 0; i < a.rows(); ++i) {
    const SparseView row = a.outer(i);
    double sum = 0.0;
    for (std::size_t k = 0; k < row.size; ++k) {
      sum += static_cast<double>(row.value[k]) * static_cast<double>(w[row.index[k]]);
    }
    z[static_cast<std::size_t>(i)] = static_cast<float>(sum);
  }
  return z;
}

absl::StatusOr<std::vector<float>> SpmvGpu(const CsrMatrix& a, absl::Span<const float> w) {
  // Argument errors first, so the same call fails the same way on every host.
  if (auto s = CheckShapes(a, w, "SpmvGpu"); !s.ok()) return s;
#if defined(DML_HAVE_CUDA)
  absl::StatusOr<int> devices = internal::DeviceCount();
  if (!devices.ok()) {
    return absl::UnavailableError(
        absl::StrCat("SpmvGpu: no usable CUDA device: ", devices.status().message()));
  }
  if (*devices == 0) {
    return absl::UnavailableError("SpmvGpu: no usable CUDA device: cudaGetDeviceCount returned 0");
  }
  return internal::SpmvDevice(a, w);
#else
  return absl::UnavailableError("libdml was built without CUDA");
#endif
}

absl::StatusOr<std::vector<float>> SpmvAuto(const CsrMatrix& a, absl::Span<const float> w,
                                            bool allow_fallback, const LogFn& log) {
  absl::StatusOr<std::vector<float>> z = SpmvGpu(a, w);
  if (z.ok() || !allow_fallback) return z;
  const absl::StatusCode code = z.status().code();
  if (code != absl::StatusCode::kUnavailable && code != absl::StatusCode::kResourceExhausted) {
    return z;
  }
  if (log) {
    log(absl::StrCat("SpmvAuto: falling back to the CPU twin: ", z.status().ToString()));
  }
  return SpmvCpu(a, w);
}

}  // namespace dml::gpu
