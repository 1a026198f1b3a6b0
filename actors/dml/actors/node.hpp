#pragma once
// node: the actor a dml-node process publishes. A job's coordinator (in
// another process) asks it to spawn workers and parameter shards here; the
// worker then loads its own partition from this machine's disk (the spec
// carries a path, never data). The node watches each job's coordinator and
// stops that job's actors when the coordinator goes away (finished, killed
// or unreachable), so a lost coordinator leaves no orphans behind.
//
// Messages:
//  - hello: (name, pid, actors hosted now).
//  - worker(spec, coordinator): spawn a worker; replies its handle.
//    Errors: a spec that does not validate (wire_error), or a mode that
//    needs an in-process model (hogwild).
//  - shard(config, coordinator): spawn a parameter shard; replies its handle.

#include <cstdint>
#include <string>

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "dml/actors/messages.hpp"
#include "dml/actors/type_ids.hpp"

namespace dml::actors {

using node_actor = caf::typed_actor<
    caf::replies_to<hello_atom>::with<std::string, int64_t, int32_t>,
    caf::replies_to<worker_atom, worker_spec, caf::actor>::with<caf::actor>,
    caf::replies_to<shard_atom, shard_config, caf::actor>::with<caf::actor>>;

/// Spawns a node actor named `name` (shown by hello and in errors).
node_actor spawn_node(caf::actor_system& sys, std::string name);

}  // namespace dml::actors
