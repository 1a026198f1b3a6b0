// Host side of TPA-SCD: the checks, the CPU twin (always built), the
// fallback, and the dispatch to the kernels in internal/tpa_scd_kernels.cu
// (only with DML_HAVE_CUDA).

#include "dml/gpu/tpa_scd.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#if defined(DML_HAVE_CUDA)
#include "dml/gpu/internal/tpa_scd_device.hpp"
#endif

namespace dml::gpu {

absl::StatusOr<DeviceInfo> QueryDevice(int index) {
#if defined(DML_HAVE_CUDA)
  return internal::QueryDeviceCuda(index);
#else
  (void)index;
  return absl::UnavailableError("libdml was built without CUDA");
#endif
}

std::string DescribeDevice(const DeviceInfo& info) {
  return absl::StrFormat("%s (device %d, %.1f GiB, %d multiprocessors)", info.name, info.index,
                         static_cast<double>(info.memory_bytes) / (1024.0 * 1024.0 * 1024.0),
                         info.multiprocessors);
}

namespace {

absl::Status CheckOptions(const TpaScdOptions& gpu) {
  if (gpu.memory_budget_bytes < 0 || gpu.max_blocks < 0 || gpu.twin_threads < 0 ||
      gpu.scratch_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tpa-scd options must be >= 0: memory_budget_bytes ", gpu.memory_budget_bytes,
        ", max_blocks ", gpu.max_blocks, ", twin_threads ", gpu.twin_threads, ", scratch_bytes ",
        gpu.scratch_bytes));
  }
  if ((gpu.scratch == nullptr) != (gpu.scratch_bytes == 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tpa-scd: scratch and scratch_bytes go together: scratch is ",
        gpu.scratch == nullptr ? "null" : "set", ", scratch_bytes ", gpu.scratch_bytes));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TrainResult> TrainTpaScdTwin(const Dataset& data, const ModelSpec& model,
                                            const SolverOptions& options,
                                            const TpaScdOptions& gpu) {
  if (gpu.twin_threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("twin_threads must be >= 0 (0: all cores), got ", gpu.twin_threads));
  }
  SolverOptions twin = options;
  twin.kind = SolverKind::kAsyncScd;
  twin.threads = gpu.twin_threads > 0
                     ? gpu.twin_threads
                     : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  absl::StatusOr<TrainResult> r = dml::Train(data, model, twin);
  if (r.ok()) {
    const std::string what =
        absl::StrCat("tpa-scd ran its CPU twin (asynchronous SCD, ", r->threads, " threads)");
    r->note = r->note.empty() ? what : absl::StrCat(what, "; ", r->note);
  }
  return r;
}

absl::StatusOr<TrainResult> TrainTpaScd(const Dataset& data, const ModelSpec& model,
                                        const SolverOptions& options, const TpaScdOptions& gpu) {
  // Argument errors first, so the same call fails the same way on every host.
  if (auto s = CheckTrainInputs(data, model, options); !s.ok()) return s;
  if (auto s = CheckOptions(gpu); !s.ok()) return s;
#if defined(DML_HAVE_CUDA)
  absl::StatusOr<TrainResult> r = internal::TrainOnDevice(data, model, options, gpu);
#else
  absl::StatusOr<TrainResult> r = absl::UnavailableError("libdml was built without CUDA");
#endif
  if (r.ok() || !gpu.allow_fallback) return r;
  const absl::StatusCode code = r.status().code();
  if (code != absl::StatusCode::kUnavailable && code != absl::StatusCode::kResourceExhausted) {
    return r;
  }
  const std::string why = absl::StrCat("tpa-scd: running the CPU twin: ", r.status().message());
  if (gpu.log) gpu.log(why);
  absl::StatusOr<TrainResult> twin = TrainTpaScdTwin(data, model, options, gpu);
  if (twin.ok()) twin->note = absl::StrCat(twin->note, " (", r.status().message(), ")");
  return twin;
}

absl::StatusOr<int64_t> TpaScdScratchBytes(const Dataset& data, const ModelSpec& model,
                                           const TpaScdOptions& gpu) {
  SolverOptions options;
  options.kind = SolverKind::kTpaScd;
  if (auto s = CheckTrainInputs(data, model, options); !s.ok()) return s;
  if (auto s = CheckOptions(gpu); !s.ok()) return s;
#if defined(DML_HAVE_CUDA)
  return internal::ScratchBytesCuda(data, model, gpu);
#else
  return absl::UnavailableError("libdml was built without CUDA");
#endif
}

absl::StatusOr<TrainResult> Train(const Dataset& data, const ModelSpec& model,
                                  const SolverOptions& options, const TpaScdOptions& gpu) {
  if (options.kind == SolverKind::kTpaScd) return TrainTpaScd(data, model, options, gpu);
  return dml::Train(data, model, options);
}

absl::StatusOr<std::unique_ptr<LocalSolver>> MakeTpaScdLocalSolver(LocalBlock block,
                                                                   const ModelSpec& model,
                                                                   uint64_t seed,
                                                                   const TpaScdOptions& gpu) {
  if (FormulationOf(model.kind) == Formulation::kDual) {
    if (auto s = dml::CheckDualBlock(block, model); !s.ok()) return s;
  } else {
    if (auto s = dml::CheckPrimalBlock(block, model); !s.ok()) return s;
  }
  if (auto s = CheckOptions(gpu); !s.ok()) return s;
  if (gpu.stream != nullptr || gpu.scratch != nullptr) {
    return absl::InvalidArgumentError(
        "tpa-scd: a local solver keeps its block in device memory of its own on the default "
        "stream; stream and scratch are TrainTpaScd's");
  }
#if defined(DML_HAVE_CUDA)
  // The block is needed again if the device refuses it.
  absl::StatusOr<std::unique_ptr<LocalSolver>> r =
      internal::MakeDeviceLocalSolver(gpu.allow_fallback ? block : std::move(block), model, seed,
                                      gpu);
#else
  absl::StatusOr<std::unique_ptr<LocalSolver>> r =
      absl::UnavailableError("libdml was built without CUDA");
#endif
  if (r.ok()) {
    absl::StatusOr<DeviceInfo> info = QueryDevice(gpu.device);
    if (gpu.log && info.ok()) {
      gpu.log(absl::StrCat("tpa-scd: cocoa's local solver on ", DescribeDevice(*info)));
    }
    return r;
  }
  return LocalSolverFallback(r.status(), std::move(block), model, seed, gpu);
}

absl::StatusOr<std::unique_ptr<LocalSolver>> LocalSolverFallback(absl::Status why, LocalBlock block,
                                                                 const ModelSpec& model,
                                                                 uint64_t seed,
                                                                 const TpaScdOptions& gpu) {
  const absl::StatusCode code = why.code();
  if (why.ok() || !gpu.allow_fallback ||
      (code != absl::StatusCode::kUnavailable && code != absl::StatusCode::kResourceExhausted &&
       code != absl::StatusCode::kUnimplemented)) {
    return why.ok() ? absl::InternalError("LocalSolverFallback: no error to fall back from") : why;
  }
  if (gpu.log) gpu.log(absl::StrCat("tpa-scd: cocoa's CPU local solver instead: ", why.message()));
  return MakeLocalSolver(std::move(block), model, seed);
}

absl::StatusOr<double> MeasureCopyBandwidth(int index, int64_t bytes) {
  if (bytes < 16) {
    return absl::InvalidArgumentError(absl::StrCat("copy of ", bytes, " bytes: at least 16"));
  }
#if defined(DML_HAVE_CUDA)
  return internal::CopyBandwidthCuda(index, bytes);
#else
  (void)index;
  return absl::UnavailableError("libdml was built without CUDA");
#endif
}

absl::StatusOr<double> MeasureHostToDeviceBandwidth(int index, int64_t bytes) {
  if (bytes < 16) {
    return absl::InvalidArgumentError(absl::StrCat("copy of ", bytes, " bytes: at least 16"));
  }
#if defined(DML_HAVE_CUDA)
  return internal::HostToDeviceBandwidthCuda(index, bytes);
#else
  (void)index;
  return absl::UnavailableError("libdml was built without CUDA");
#endif
}

}  // namespace dml::gpu
