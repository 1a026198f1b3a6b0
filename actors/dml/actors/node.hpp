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
//  - admit(proof, endpoint): admits the asking process if proof answers
//    its latest nonce (any proof where this node admits everyone) and
//    records `endpoint` (net::BulkEndpoint::Encode) as the only place its
//    bulk references are fetched from; replies this process's own.
//    Errors: no challenge was asked, a wrong proof, a malformed endpoint.
//  - peers(table): the bulk endpoints of the other processes of a job
//    (BulkPeers::Table, entries joined by kPeerTableSeparator), from an
//    admitted process; replies true. Errors: not admitted, a malformed
//    table.
//  - worker(spec, coordinator): spawn a worker; replies its handle.
//    Errors: not admitted, a spec that does not validate (wire_error), or
//    a mode that needs an in-process model (hogwild).
//  - shard(config, coordinator): spawn a parameter shard; replies its
//    handle. Errors: not admitted, a bad config.
//  - halt(coordinator): that job is stopping: local solves of its workers
//    here end early (they check a flag every few hundred steps).
//  - kv(coordinator, keys, block, dynamic, rank, nodes, first_home,
//    local_workers): hogwild on nodes (JobSgd::Store::kKv): this node's
//    member of the job's key-value group (rank `rank` of `nodes`, keys
//    [0, keys) in blocks of `block` homed on ranks [first_home, nodes),
//    localize on where `dynamic`) starts listening on the node's host, any
//    free port, with the node's secret; replies the port. The job's
//    hogwild workers here share it; `local_workers` of them take steps
//    here (their step schedule's clock). Errors: not admitted, not from
//    that coordinator, bad options, a node that serves no groups (TLS), a
//    second member for the same job.
//  - connect(coordinator, peers): connects that member to the group's
//    `peers` ("host:port" per rank joined by kPeerTableSeparator); replies
//    true once the group is complete (a thread of its own blocks, not the
//    node). Errors: not from that coordinator, no kv first, a connect
//    already made, KvNode::Connect's (its code kept).
//  - stats(coordinator): that member's counters (PackKvStats); empty
//    where the job has none here. Only from that coordinator.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <caf/fwd.hpp>
#include <caf/timespan.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "absl/status/status.h"
#include "dml/actors/kv.hpp"
#include "dml/actors/messages.hpp"
#include "dml/actors/type_ids.hpp"

namespace dml::actors {

struct hogwild_model;

/// Message interface of a node: the messages listed in the file comment.
using node_actor = caf::typed_actor<
    caf::replies_to<hello_atom>::with<std::string, int64_t, int32_t>,
    caf::replies_to<challenge_atom>::with<std::string>,
    caf::replies_to<admit_atom, std::string, std::string>::with<std::string>,
    caf::replies_to<peers_atom, std::string>::with<bool>,
    caf::replies_to<worker_atom, worker_spec, caf::actor>::with<caf::actor>,
    caf::replies_to<shard_atom, shard_config, caf::actor>::with<caf::actor>,
    caf::reacts_to<halt_atom, caf::actor>,
    caf::replies_to<kv_atom, caf::actor, int64_t, int64_t, bool, int32_t, int32_t, int32_t,
                    int32_t>::with<int32_t>,
    caf::replies_to<connect_atom, caf::actor, std::string>::with<bool>,
    caf::replies_to<stats_atom, caf::actor>::with<int64_list>>;

/// Connects a key-value node made by KvNode::Listen, blocking its own
/// thread (a detached actor that quits after its one answer): connect(peers
/// table) -> true, or the error of KvNode::Connect. The node and the
/// coordinator delegate to it so that neither blocks while the group's
/// members dial each other.
using kv_connector = caf::typed_actor<caf::replies_to<connect_atom, std::string>::with<bool>>;

/// A member's counters as the stats message carries them (local_keys,
/// remote_keys, queued_keys, messages, bytes, blocks_in, in that order), and
/// back: nullopt for a list of another length (a node without a member
/// here answers an empty one).
int64_list PackKvStats(const KvStats& k);
std::optional<KvStats> UnpackKvStats(const int64_list& v);

/// Spawns a node actor named `name` (shown by hello and in errors); with a
/// non-empty `secret`, only admitted processes may use it. `kv_host`: where
/// hogwild jobs' key-value groups listen (the host the node listens on);
/// empty: this node refuses them (dml-node under TLS: the group's traffic
/// would travel in plaintext).
node_actor spawn_node(caf::actor_system& sys, std::string name, std::string secret = {},
                      std::string kv_host = {});

/// Spawns a kv_connector for model->kv[0] (made by KvNode::Listen); it
/// keeps the model alive until it has answered (the model, not the member:
/// a KvNode's last owner must not be an actor, as destroying one stops its
/// actor system, which hangs on another system's threads in CAF 0.17;
/// ~hogwild_model hands it to a thread of its own). KvNode::Connect's
/// error comes back with its text and its absl::StatusCode (an int32
/// beside the text).
kv_connector spawn_kv_connector(caf::actor_system& sys, std::shared_ptr<hogwild_model> model);

/// Proves `secret` to `node` for the process of `self` (any proof for a
/// node that admits everyone) and exchanges bulk endpoints with it: each
/// side then fetches the other's bulk references only from the endpoint
/// advertised here (BulkPeers). Errors: PermissionDenied when the node
/// wants a secret and none is given, or refuses the one given; Unavailable
/// when it does not answer within `timeout`; DataLoss for a malformed
/// endpoint in its answer.
absl::Status AdmitTo(caf::scoped_actor& self, const node_actor& node, const std::string& secret,
                     caf::timespan timeout);

/// Separates the entries of a peers message's table.
inline constexpr char kPeerTableSeparator = '\x1e';

/// Sends `node` this process's BulkPeers table and its own endpoint, so
/// that the node fetches the bulk references of every process of a job
/// (relayed through this one) from their advertised endpoints only.
/// Errors: those of the node's peers reply (Unavailable when it does not
/// answer within `timeout`).
absl::Status SendPeerTable(caf::scoped_actor& self, const node_actor& node,
                           caf::timespan timeout);

}  // namespace dml::actors
