#pragma once
// gap_memory: DuHL's gap memory as an actor (dml/solver/gap_memory.hpp):
// a duality-gap value for every coordinate of its data (examples of dual
// models, features of primal ones), refreshed by its own CPU threads
// against the last published state while a device solves; what the
// device side asks for its next block.
//
// Message interface:
//  - publish(shared, coords): the state to measure against (w and alpha
//    for dual models, v = A w and w for primal ones); replies its version.
//  - refresh(all, ids): recomputes every value (all) or those of `ids`
//    against the last published state, in the actor's thread (the device
//    side refreshes the block it just solved); replies the values
//    computed so far by all means.
//  - top(m): the m coordinates with the largest gaps (nth_element; in
//    ascending order of index); m larger than the coordinates: all.
//  - gaps: every value and its age (the last version minus the version it
//    was computed against; the last version + 1 for a value never
//    measured).
// Errors: a state of the wrong lengths or without values, m < 0, an id
// out of range (InvalidArgument's message as a caf runtime_error).
// The actor is detached (refresh(all) is a pass over its data).

#include <cstdint>
#include <memory>

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "absl/status/statusor.h"
#include "dml/actors/messages.hpp"
#include "dml/actors/type_ids.hpp"
#include "dml/data/sparse.hpp"
#include "dml/objective/model.hpp"
#include "dml/solver/gap_memory.hpp"

namespace dml::actors {

using gap_memory_actor = caf::typed_actor<
    caf::replies_to<publish_atom, dvec, dvec>::with<int64_t>,
    caf::replies_to<refresh_atom, bool, int64_list>::with<int64_t>,
    caf::replies_to<top_atom, int64_t>::with<int64_list>,
    caf::replies_to<gaps_atom>::with<dvec, int64_list>>;

/// Spawns the gap memory of `data` (shared: it outlives the actor's
/// threads) under `model` with `threads` refresh threads. Errors: those of
/// dml::GapMemory::Make.
absl::StatusOr<gap_memory_actor> SpawnGapMemory(caf::actor_system& sys,
                                                std::shared_ptr<const Dataset> data,
                                                const ModelSpec& model, int threads);

/// A dml::GapMemory whose every call is a blocking request to `actor`
/// (which has `size` coordinates): what DuhlOptions::make_gap_memory
/// returns in the runtime's workers, so that DuHL's device side asks the
/// gap_memory actor. Call it from a thread that is not the actor's; the
/// actor is shut down when the client is destroyed. An error reply (a
/// publish of the wrong lengths) is returned by Publish; the other calls
/// cannot fail on a live actor, and after its exit return what they last
/// had (Values: +infinity).
std::unique_ptr<GapMemory> MakeGapMemoryClient(caf::actor_system& sys, gap_memory_actor actor,
                                               int64_t size);

/// SpawnGapMemory + MakeGapMemoryClient: DuhlOptions::make_gap_memory for
/// the runtime. `cols` (primal models, may be null): data.x as CSC, shared
/// with the caller (GapMemory::Make's overload), else converted here.
absl::StatusOr<std::unique_ptr<GapMemory>> MakeGapMemoryOnActor(
    caf::actor_system& sys, std::shared_ptr<const Dataset> data, const ModelSpec& model,
    int threads, std::shared_ptr<const CscMatrix> cols = nullptr);

}  // namespace dml::actors
