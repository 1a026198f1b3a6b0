#pragma once
// gpu_solver: the CoCoA+ local solvers of the blocks that one CUDA device
// holds, one actor per device of a process (Snap ML's hierarchy: CoCoA+
// across nodes and across the devices of a node, TPA-SCD inside a device).
// A cocoa worker whose local solver is tpa-scd hands its block to the
// gpu_solver of its device and sends it each round's work; the actor runs
// on a thread of its own (device calls block) and serves its blocks one
// message at a time, so workers sharing a device never run kernels over each
// other and the device's memory is held in one place.
//
// Message interface:
//  - init(block): runs the block's factory on the actor's thread (for a
//    device: dml::gpu::MakeTpaScdLocalSolver, which uploads the rows) and
//    keeps the local solver; replies its id.
//  - solve(id, shared, sigma', gamma, steps): `steps` coordinate steps of
//    the local subproblem against shared + sigma' A_k dalpha (the block's
//    interrupt flag read as the solver does); replies the change of the
//    shared vector, the steps run and the nonzeros touched.
//  - certify(id, shared): the block's share of the certificate at `shared`
//    (its loss and gap sums).
//  - coords(id): the block's coordinates; coords(id, c): replaces them.
//  - init(id, reload): LocalSolver::Reload of the block (DuHL's next
//    block); replies the bytes copied in.
//  - halt(id): drops the block; the actor ends with its last block, or
//    when its first init fails.
// Errors travel as caf errors whose context is (absl status code as
// int32, message); an unknown id is InvalidArgument. The client below turns
// them back into absl::Status.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "absl/status/statusor.h"
#include "dml/actors/messages.hpp"
#include "dml/actors/type_ids.hpp"
#include "dml/gpu/tpa_scd.hpp"
#include "dml/solver/cocoa_local.hpp"

namespace dml::actors {

/// What init hands a gpu_solver: how to build the block's local solver (run
/// on the actor's thread, so device memory and calls stay there) and the
/// flag that interrupts its solves.
struct gpu_block {
  std::function<absl::StatusOr<std::unique_ptr<LocalSolver>>()> make;
  std::shared_ptr<std::atomic<bool>> interrupt;
};
using gpu_block_ptr = std::shared_ptr<gpu_block>;

/// What reload hands a gpu_solver: LocalSolver::Reload's arguments.
struct gpu_reload {
  LocalBlock block;
  std::vector<int64_t> kept;
};
using gpu_reload_ptr = std::shared_ptr<gpu_reload>;

}  // namespace dml::actors

// Local only: a gpu_solver lives in the process of the workers it serves.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dml::actors::gpu_block_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(dml::actors::gpu_reload_ptr)

namespace dml::actors {

using gpu_solver_actor = caf::typed_actor<
    caf::replies_to<init_atom, gpu_block_ptr>::with<int32_t>,
    caf::replies_to<solve_atom, int32_t, dvec, double, double, int64_t>::with<dvec, int64_t,
                                                                               int64_t>,
    caf::replies_to<certify_atom, int32_t, dvec>::with<block_sums>,
    caf::replies_to<coords_atom, int32_t>::with<dvec>,
    caf::replies_to<coords_atom, int32_t, dvec>::with<bool>,
    caf::replies_to<init_atom, int32_t, gpu_reload_ptr>::with<int64_t>,
    caf::reacts_to<halt_atom, int32_t>>;

/// The gpu_solver of `device` in `sys`, spawned (detached) where none is
/// running. Thread-safe.
gpu_solver_actor GpuSolverOf(caf::actor_system& sys, int device);

/// A LocalSolver whose block lives in the gpu_solver of `device`: `make`
/// runs there; each call is a blocking request to it (the worker blocked on
/// its solve before, too). Dropping it drops the block. Errors: `make`'s.
absl::StatusOr<std::unique_ptr<LocalSolver>> MakeRemoteLocalSolver(
    caf::actor_system& sys, int device, gpu_block block);

/// A cocoa worker's tpa-scd local solver: on device gpu.device through its
/// gpu_solver (dual and primal models), or, where there is no usable device
/// or the device refuses the block, what dml::gpu::MakeTpaScdLocalSolver does
/// there (an error, or the logged fallback to the CPU local solver in the
/// worker's own thread). Errors: those of MakeTpaScdLocalSolver.
absl::StatusOr<std::unique_ptr<LocalSolver>> MakeGpuLocalSolver(
    caf::actor_system& sys, LocalBlock block, const ModelSpec& model, uint64_t seed,
    const gpu::TpaScdOptions& gpu, std::shared_ptr<std::atomic<bool>> interrupt);

}  // namespace dml::actors
