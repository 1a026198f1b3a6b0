#pragma once
// Checked CUDA calls and RAII device memory for libdml's .cu files. Internal:
// never included by a host header.

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace dml::gpu::internal {

/// Turns a CUDA status into an absl::Status naming the call and where it was
/// made. Out-of-memory becomes ResourceExhausted, a missing driver or device
/// Unavailable, everything else Internal.
inline absl::Status CudaStatus(cudaError_t err, const char* what, const char* file, int line) {
  if (err == cudaSuccess) return absl::OkStatus();
  std::string msg = absl::StrFormat("%s:%d: %s failed: %s (%s)", file, line, what,
                                    cudaGetErrorString(err), cudaGetErrorName(err));
  switch (err) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(msg);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
      return absl::UnavailableError(msg);
    default:
      return absl::InternalError(msg);
  }
}

}  // namespace dml::gpu::internal

/// Evaluates a CUDA runtime call once; if it fails, returns from the enclosing
/// function (which returns absl::Status or absl::StatusOr) with an error that
/// carries file:line, the call's text and CUDA's message.
#define DML_CUDA_RETURN_IF_ERROR(call)                                                    \
  do {                                                                                    \
    const cudaError_t dml_cuda_err_ = (call);                                             \
    if (dml_cuda_err_ != cudaSuccess)                                                     \
      return ::dml::gpu::internal::CudaStatus(dml_cuda_err_, #call, __FILE__, __LINE__);  \
  } while (false)

namespace dml::gpu::internal {

/// Bytes a buffer of `bytes` takes from an Arena (256-byte aligned pieces,
/// as cudaMalloc's).
constexpr std::size_t ArenaBytes(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

/// Device memory the caller owns (CUB's habit), handed out in pieces that
/// are never freed one by one: the caller frees it after the run. Not
/// thread-safe: one per run.
class Arena {
 public:
  Arena(void* base, std::size_t bytes) : base_(static_cast<char*>(base)), size_(bytes) {}
  /// A piece of ArenaBytes(bytes), or ResourceExhausted once it is used up.
  absl::Status Take(std::size_t bytes, void** out) {
    const std::size_t need = ArenaBytes(bytes);
    if (used_ + need > size_) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "tpa-scd: the caller's scratch of %d bytes is used up (%d taken, %d more asked)", size_,
          used_, need));
    }
    *out = base_ + used_;
    used_ += need;
    return absl::OkStatus();
  }
  std::size_t used() const { return used_; }

 private:
  char* base_;
  std::size_t size_;
  std::size_t used_ = 0;
};

/// Owns `size` elements of device memory, from cudaMalloc (freed in the
/// destructor; the free's own status is ignored there: nothing useful can
/// be done with it) or from an Arena (left to the arena's owner).
/// Move-only. Allocation goes through Allocate so its error is returned.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : d_ptr_(std::exchange(o.d_ptr_, nullptr)),
        size_(std::exchange(o.size_, 0)),
        owned_(std::exchange(o.owned_, false)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      Reset();
      d_ptr_ = std::exchange(o.d_ptr_, nullptr);
      size_ = std::exchange(o.size_, 0);
      owned_ = std::exchange(o.owned_, false);
    }
    return *this;
  }
  ~DeviceBuffer() { Reset(); }

  /// Frees what is held and allocates `n` elements (none when n == 0), from
  /// `arena` where one is given.
  absl::Status Allocate(std::size_t n, Arena* arena = nullptr) {
    Reset();
    if (n == 0) return absl::OkStatus();
    void* d_raw = nullptr;
    if (arena != nullptr) {
      if (auto s = arena->Take(n * sizeof(T), &d_raw); !s.ok()) return s;
    } else {
      DML_CUDA_RETURN_IF_ERROR(cudaMalloc(&d_raw, n * sizeof(T)));
      owned_ = true;
    }
    d_ptr_ = static_cast<T*>(d_raw);
    size_ = n;
    return absl::OkStatus();
  }

  T* get() const { return d_ptr_; }
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return size_ * sizeof(T); }

 private:
  void Reset() {
    if (d_ptr_ != nullptr && owned_) (void)cudaFree(d_ptr_);
    d_ptr_ = nullptr;
    size_ = 0;
    owned_ = false;
  }

  T* d_ptr_ = nullptr;
  std::size_t size_ = 0;
  bool owned_ = false;
};

}  // namespace dml::gpu::internal
