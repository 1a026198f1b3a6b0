#pragma once
// node: the actor a dml-node process publishes. A job's coordinator (in
// another process) asks it to spawn workers and parameter shards here; the
// worker then loads its own partition from this machine's disk (the spec
// carries a path, never data). The node watches each job's coordinator and
// stops that job's actors when the coordinator goes away (finished, killed
// or unreachable), so a lost coordinator leaves no orphans behind.
//
// Admission: a node started with a secret (dml-node --secret-file) runs
// workers and shards only for processes that proved they know it
// (dml/net/admission.hpp): challenge, then admit(proof); until then every
// spawn request is refused with an error that says so. hello and challenge
// are open to all (liveness, and how a peer learns what is asked of it).
//
// Messages:
//  - hello: (name, pid, actors hosted now).
//  - challenge: a fresh nonce for the asking process, or "" when this node
//    admits everyone.
//  - admit(proof): admits the asking process if proof answers its latest
//    nonce. Errors: no challenge was asked, or a wrong proof.
//  - worker(spec, coordinator): spawn a worker; replies its handle.
//    Errors: not admitted, a spec that does not validate (wire_error), or
//    a mode that needs an in-process model (hogwild).
//  - shard(config, coordinator): spawn a parameter shard; replies its
//    handle. Errors: not admitted, a bad config.
//  - halt(coordinator): that job is stopping: local solves of its workers
//    here end early (they check a flag every few hundred steps).

#include <cstdint>
#include <string>

#include <caf/fwd.hpp>
#include <caf/timespan.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "absl/status/status.h"
#include "dml/actors/messages.hpp"
#include "dml/actors/type_ids.hpp"

namespace dml::actors {

/// Message interface of a node: the messages listed in the file comment.
using node_actor = caf::typed_actor<
    caf::replies_to<hello_atom>::with<std::string, int64_t, int32_t>,
    caf::replies_to<challenge_atom>::with<std::string>,
    caf::replies_to<admit_atom, std::string>::with<bool>,
    caf::replies_to<worker_atom, worker_spec, caf::actor>::with<caf::actor>,
    caf::replies_to<shard_atom, shard_config, caf::actor>::with<caf::actor>,
    caf::reacts_to<halt_atom, caf::actor>>;

/// Spawns a node actor named `name` (shown by hello and in errors); with a
/// non-empty `secret`, only admitted processes may use it.
node_actor spawn_node(caf::actor_system& sys, std::string name, std::string secret = {});

/// Proves `secret` to `node` for the process of `self` (a no-op for a node
/// that admits everyone). Errors: PermissionDenied when the node wants a
/// secret and none is given, or refuses the one given; Unavailable when it
/// does not answer within `timeout`.
absl::Status AdmitTo(caf::scoped_actor& self, const node_actor& node, const std::string& secret,
                     caf::timespan timeout);

}  // namespace dml::actors
