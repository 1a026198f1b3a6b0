#pragma once
// coordinator: owns one job. It spawns and wires the job's workers and
// parameter shards for the mode's topology, runs the rounds and barriers the
// mode has (cocoa), certifies the global objective from the workers' partial
// sums (never pulling their data), applies the stopping rule, streams
// progress into the job's state, collects the final model, and turns any
// actor's failure (an error reply, or an actor going down) into the job's
// error. It monitors every actor it spawned and stops them when the job ends.

#include <memory>

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <vector>

#include "dml/actors/messages.hpp"
#include "dml/actors/node.hpp"
#include "dml/actors/runtime.hpp"
#include "dml/actors/type_ids.hpp"

namespace dml::detail {
struct job_state;
}

namespace dml::actors {

/// Message interface of a coordinator.
///  - start: spawn the topology and train.
///  - tick: internal timer (cancellation, wall-time budget).
///  - worker_report: a worker's progress (SGD modes), or its failure.
///  - recover: internal, after a node loss (see "recovery" in the .cpp).
///  - round(begin, r, range): cocoa, a shard's range of round r + 1's
///    shared vector (all K deltas of round r are in).
using coordinator_actor =
    caf::typed_actor<caf::reacts_to<start_atom>, caf::reacts_to<tick_atom>,
                     caf::reacts_to<worker_report>, caf::reacts_to<recover_atom>,
                     caf::reacts_to<round_atom, int64_t, int64_t, dvec>>;

/// Spawns the coordinator of `spec` (already validated); it reports into
/// `job` and quits when the job has ended. With `nodes`, worker k runs on
/// node k mod N and shard s on node (K + s) mod N; otherwise all in-process.
coordinator_actor spawn_coordinator(caf::actor_system& sys, JobSpec spec,
                                    std::shared_ptr<detail::job_state> job,
                                    std::vector<node_actor> nodes = {});

}  // namespace dml::actors
