#pragma once
// Entry points implemented in spmv_kernel.cu (built only with CUDA). Plain
// C++ types only, so spmv.cpp can call them without CUDA headers.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dml/data/sparse.hpp"

namespace dml::gpu::internal {

/// cudaGetDeviceCount, with its error turned into Unavailable.
absl::StatusOr<int> DeviceCount();

/// z = A w on the current device. Preconditions checked by the caller:
/// w.size() == a.cols(), a device is present.
absl::StatusOr<std::vector<float>> SpmvDevice(const CsrMatrix& a, absl::Span<const float> w);

}  // namespace dml::gpu::internal
