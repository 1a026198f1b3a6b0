#pragma once
// TPA-SCD: asynchronous stochastic coordinate descent on a GPU (Parnell,
// Duenner, Atasu, Sifalakis, Pozidis, "Large-scale stochastic learning using
// GPUs", IPDPSW 2017), and its CPU twin.
//
//  - Dual models (ridge, L2-logistic, hinge, squared hinge): a coordinate per
//    example over CSR rows, the shared vector w = A^T alpha / (lambda n).
//  - Primal models (lasso, elastic net, L1-logistic): a coordinate per
//    feature over CSC columns, the shared vector v = A w.
// One thread block per coordinate, coordinates taken in a fresh random
// permutation each epoch; the block reduces the inner product, one thread
// takes the exact coordinate step with the objective's own step code
// (dml/objective/*.hpp, compiled for host and device), and the block adds the
// change to the shared vector with atomic adds while other blocks read it.
//
// Numerics: the data are float32 on the device; the shared vector, the dual
// variables, the inner products and every sum of a certificate are double:
// a float shared vector written by millions of atomic adds drifts from
// A^T alpha by more than the 1e-6 relative gaps the solvers stop at, and a
// float inner product of a long row loses the coordinate step's accuracy.
// Asynchrony only makes steps use slightly stale values; every step's change
// is applied in full, so the shared vector stays A^T alpha / (lambda n)
// (or A w) to rounding. The gap checked each evaluation is computed on the
// device from its state (per-coordinate gaps kept on the device, what DuHL
// reads). Only an exact certificate, of alpha (or w) alone, may say
// "converged": for dual models it is EvaluateDual's computation done on the
// device (w rebuilt as A^T alpha / (lambda n) into a vector of its own, not
// the shared vector the steps wrote, then the loss and gaps against it, in
// double; the same result up to the order of the sums), for primal models
// EvaluatePrimal on the host. If an evaluation finds the objective worse than at the one
// before (too many stale steps in flight, e.g. a dense column), the number
// of blocks in flight is halved and the shared vector rebuilt.
//
// This header mentions no CUDA type and compiles with or without CUDA.
// Thread-safety: the functions are reentrant; one device may be used by
// several callers at once (each call allocates its own device memory). A
// streamed training page-locks its dataset's arrays while it runs: two
// streamed trainings on the same Dataset object at once are not supported.

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "dml/data/sparse.hpp"
#include "dml/gpu/spmv.hpp"
#include "dml/objective/model.hpp"
#include "dml/solver/cocoa_local.hpp"
#include "dml/solver/solver.hpp"

namespace dml::gpu {

/// Where and how TPA-SCD runs. Plain value.
struct TpaScdOptions {
  int device = 0;  ///< CUDA device index
  /// When the GPU cannot run the job (no CUDA compiled in, no driver or
  /// device, no such index, the data over the memory budget): run the CPU
  /// twin and send one line to `log` saying why. false: return the error.
  bool allow_fallback = false;
  /// Device memory the solver may take, in bytes; 0: 90% of what is free
  /// when training starts. Where the rows (dual models) or columns (primal
  /// models) do not fit beside the per-coordinate and per-example state,
  /// TrainTpaScd streams them in chunks through two buffers (the next
  /// chunk's copy overlapping this chunk's compute); where not even the
  /// state and two buffers fit: ResourceExhausted. A local solver's block
  /// (cocoa, DuHL) stays resident: over the budget, ResourceExhausted.
  int64_t memory_budget_bytes = 0;
  /// Blocks in flight at the start (0: as many as the device holds at
  /// once, at most n/4). Tests use small values to exercise the halving.
  int max_blocks = 0;
  /// Threads of the CPU twin; 0: all cores.
  int twin_threads = 0;
  /// The caller's CUDA stream on `device` (a cudaStream_t; this header
  /// names no CUDA type), or null. TrainTpaScd then puts every copy and
  /// kernel on it, in its order, and waits for it alone; a streamed run
  /// adds one non-blocking copy stream of its own, ordered against it by
  /// events. Only with `scratch` too is no device memory allocated or freed
  /// (cudaFree synchronizes the whole device). On an error return, work may
  /// still be queued on the stream: synchronize it before reusing the
  /// scratch. null: the legacy default stream. TrainTpaScd only.
  void* stream = nullptr;
  /// Device memory on `device` that the caller owns (CUB's habit), or null.
  /// TrainTpaScd then carves all its device buffers from it (no allocation
  /// of its own) and, unless memory_budget_bytes is set, takes its size as
  /// the budget; it must hold TpaScdScratchBytes(...) for the same options,
  /// else InvalidArgument naming both sizes. The caller must not touch it
  /// while training runs. TrainTpaScd only: a local solver's options with
  /// a stream or scratch are refused (InvalidArgument).
  void* scratch = nullptr;
  int64_t scratch_bytes = 0;  ///< the size of `scratch`
  LogFn log;  ///< receives the fallback line; may be empty
};

/// A CUDA device as dml-train reports it.
struct DeviceInfo {
  int index = 0;
  std::string name;
  int64_t memory_bytes = 0;   ///< total global memory
  int multiprocessors = 0;
};

/// The device `index`. Errors: Unavailable "libdml was built without CUDA",
/// or naming the CUDA error / the number of devices present.
absl::StatusOr<DeviceInfo> QueryDevice(int index);

/// "NVIDIA H200 (device 0, 139.8 GiB, 132 multiprocessors)".
std::string DescribeDevice(const DeviceInfo& info);

/// TPA-SCD on the GPU (see the file comment), stopping by options.stop
/// (gap checked every max(1, eval_every) epochs on the device). `options`
/// other than stop, seed, eval_every and on_epoch are ignored. The result's
/// note names the device, or the twin and why it ran.
/// Errors: those of dml::Train for the model, data and options; Unavailable
/// (no CUDA, no device, bad index) or ResourceExhausted (over the budget)
/// unless allow_fallback; Internal with file:line for other CUDA failures.
absl::StatusOr<TrainResult> TrainTpaScd(const Dataset& data, const ModelSpec& model,
                                        const SolverOptions& options,
                                        const TpaScdOptions& gpu = {});

/// The device memory TrainTpaScd(data, model, ..., gpu) takes on gpu.device
/// (resident, or streamed under the budget: memory_budget_bytes, else 90%
/// of what is free now), exactly: a scratch of this many bytes, with the
/// same budget, holds the run. Errors: those of TrainTpaScd's checks,
/// Unavailable (no CUDA, no device), ResourceExhausted (not even the state
/// and two streaming buffers fit the budget).
absl::StatusOr<int64_t> TpaScdScratchBytes(const Dataset& data, const ModelSpec& model,
                                           const TpaScdOptions& gpu = {});

/// The CPU twin: the same asynchronous SCD (dml::Train with
/// SolverKind::kAsyncScd) on gpu.twin_threads threads (0: all cores).
absl::StatusOr<TrainResult> TrainTpaScdTwin(const Dataset& data, const ModelSpec& model,
                                            const SolverOptions& options,
                                            const TpaScdOptions& gpu = {});

/// dml::Train, with SolverKind::kTpaScd going to TrainTpaScd: the entry
/// point for callers that may ask for the GPU solver.
absl::StatusOr<TrainResult> Train(const Dataset& data, const ModelSpec& model,
                                  const SolverOptions& options, const TpaScdOptions& gpu = {});

/// CoCoA+'s local solver (dml/solver/cocoa_local.hpp) on a GPU: the
/// block's rows (dual models) or columns over all rows (primal models) stay
/// on device gpu.device; each Solve runs TPA-SCD on the local subproblem
/// (the step of the CPU local solver with its curvature times sigma',
/// against the local vector shared + sigma' times the block's change, a
/// fresh permutation per pass) and commits gamma times the change of the
/// coordinates; where stale steps made the subproblem worse than no step,
/// the passes run again with half the blocks in flight. The interrupt flag
/// is read once per pass over the block. Certify runs on the device.
/// coordinates() copies alpha (or the block's w) back. Reload (DuHL's next
/// block) copies in only the rows or columns new to the device.
/// With gpu.allow_fallback, where the device cannot run it (Unavailable,
/// ResourceExhausted) the CPU local solver (MakeLocalSolver) is returned
/// and one line goes to gpu.log; on the device, one line names it.
/// Errors: InvalidArgument for the model or block (as MakeLocalSolver);
/// the device errors above without fallback.
absl::StatusOr<std::unique_ptr<LocalSolver>> MakeTpaScdLocalSolver(LocalBlock block,
                                                                   const ModelSpec& model,
                                                                   uint64_t seed,
                                                                   const TpaScdOptions& gpu = {});

/// What MakeTpaScdLocalSolver does where the device refused a block with
/// `why`: with gpu.allow_fallback and `why` Unavailable, ResourceExhausted
/// or Unimplemented (a device solver the caller has none of), one line to gpu.log and the CPU local solver
/// (MakeLocalSolver) of `block`; else `why` itself. For callers that place
/// the device solver elsewhere (the gpu_solver actor).
absl::StatusOr<std::unique_ptr<LocalSolver>> LocalSolverFallback(absl::Status why, LocalBlock block,
                                                                 const ModelSpec& model,
                                                                 uint64_t seed,
                                                                 const TpaScdOptions& gpu);

/// Device-to-device copy bandwidth of device `index` in bytes per second
/// (bytes read plus bytes written over a copy of `bytes`, median of 5):
/// the ceiling the benchmark compares TPA-SCD's streaming rate with.
absl::StatusOr<double> MeasureCopyBandwidth(int index, int64_t bytes);

/// Host-to-device copy bandwidth of device `index` in bytes per second,
/// from page-locked memory (median of 5 copies of `bytes`): what bounds an
/// epoch of streamed rows.
absl::StatusOr<double> MeasureHostToDeviceBandwidth(int index, int64_t bytes);

}  // namespace dml::gpu
