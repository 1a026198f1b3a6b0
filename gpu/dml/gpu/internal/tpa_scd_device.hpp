#pragma once
// Entry points implemented in tpa_scd_kernels.cu (built only with CUDA).
// Plain C++ types only, so tpa_scd.cpp compiles without CUDA headers.

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "dml/data/sparse.hpp"
#include "dml/gpu/tpa_scd.hpp"
#include "dml/objective/model.hpp"
#include "dml/solver/cocoa_local.hpp"
#include "dml/solver/solver.hpp"

namespace dml::gpu::internal {

/// QueryDevice on a CUDA build; `index` is checked against the count here.
absl::StatusOr<DeviceInfo> QueryDeviceCuda(int index);

/// TPA-SCD on device gpu.device. Preconditions checked by the caller: a
/// valid model, options and data, and a device of that index. Errors:
/// ResourceExhausted when the data and state exceed the budget (before any
/// training), Internal with file:line for a failed CUDA call.
absl::StatusOr<TrainResult> TrainOnDevice(const Dataset& data, const ModelSpec& model,
                                          const SolverOptions& options, const TpaScdOptions& gpu);

/// MakeTpaScdLocalSolver's device part: the block resident on gpu.device.
/// Preconditions: a valid model and block. Errors: Unavailable (no such
/// device), ResourceExhausted (over the budget), Internal with file:line.
absl::StatusOr<std::unique_ptr<LocalSolver>> MakeDeviceLocalSolver(LocalBlock block,
                                                                    const ModelSpec& model,
                                                                    uint64_t seed,
                                                                    const TpaScdOptions& gpu);

/// TpaScdScratchBytes on a CUDA build (inputs checked by the caller).
absl::StatusOr<int64_t> ScratchBytesCuda(const Dataset& data, const ModelSpec& model,
                                         const TpaScdOptions& gpu);

/// MeasureHostToDeviceBandwidth on a CUDA build.
absl::StatusOr<double> HostToDeviceBandwidthCuda(int index, int64_t bytes);

/// MeasureCopyBandwidth on a CUDA build.
absl::StatusOr<double> CopyBandwidthCuda(int index, int64_t bytes);

}  // namespace dml::gpu::internal
