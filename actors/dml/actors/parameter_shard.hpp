#pragma once
// parameter_shard: owns one key range [begin, end) of the shared vector (the
// model w, or v = A w for primal CoCoA) and applies what workers push by the
// rule of the job's mode:
//   sync            gather the K loss gradients of a clock, average them (in
//                   worker order: deterministic), one proximal step; pulls
//                   for the next clock wait for it (the BSP barrier)
//   async           one proximal step per gradient, on arrival
//   ssp             as async, but a pull at clock c waits until every worker
//                   has pushed c - s clocks (s = staleness)
//   model-averaging gather the K local models of a round, keep their mean
//   cocoa           add gamma * delta on arrival; when every worker's delta
//                   of round r is in, send the range to the coordinator
//   easgd           elastic exchange: e = alpha (x - center), center += e,
//                   reply e (the worker subtracts it)
// Steps use step_t = step0 / (1 + decay * t), t the clock (sync) or the
// number of gradients applied / K (async, ssp), then the regulariser's prox.
// For pure-L2 models the shard stores w = scale * v, so the prox is one
// multiplication of `scale` and a sparse gradient costs its nonzeros, not
// the range (other regularisers apply their prox to the whole range).
//
// Errors (caf::error, sec::invalid_argument, text naming the field): a
// worker index outside [0, K), a payload of the wrong length, a sparse index
// outside the range or not increasing, a non-finite value, a sync push for a
// clock other than the current one or twice from one worker.

#include <cstdint>

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "dml/actors/messages.hpp"
#include "dml/actors/runtime.hpp"
#include "dml/actors/type_ids.hpp"
#include "dml/objective/model.hpp"

namespace dml::actors {

/// Message interface of a parameter shard.
///  - push(worker, clock, delta): apply by the mode's rule; replies the
///    shard's clock (rounds completed, or updates applied).
///  - pull(worker, clock[, keys]): the range (or the listed keys, in order),
///    once the mode allows that clock.
///  - pushpull(worker, clock, x): push x, then pull clock + 1, in one
///    exchange (model averaging's step, an allreduce through shards): half
///    the messages of a push and a pull. In sync and model averaging its
///    values are checked while the round's mean sums them: a non-finite
///    one fails that exchange once the round's last push is in (the
///    round then waits for that worker again; w is left as it was).
///  - elastic(worker, x): EASGD exchange; replies e.
///  - read: the range now, no clock (coordinator, final model).
///  - halt: the job is stopping: answer every waiting pull now and every
///    later one at once (a worker blocked at a barrier whose peers already
///    stopped must not wait forever); pushes still apply.
///  - init(values, clock): restore the range and the clocks from a
///    checkpoint before any push (recovery, resume); replies the length.
///  - calibrate(step0, step_decay): the step schedule from now on (the
///    coordinator halves step0 where the objective rose between two
///    evaluations).
///  - stats: counters.
using parameter_shard = caf::typed_actor<
    caf::replies_to<push_atom, int32_t, int64_t, dvec>::with<int64_t>,
    caf::replies_to<push_atom, int32_t, int64_t, sparse_dvec>::with<int64_t>,
    caf::replies_to<pull_atom, int32_t, int64_t>::with<dvec>,
    caf::replies_to<pushpull_atom, int32_t, int64_t, dvec>::with<dvec>,
    caf::replies_to<pull_atom, int32_t, int64_t, key_list>::with<dvec>,
    caf::replies_to<elastic_atom, int32_t, dvec>::with<dvec>,
    caf::replies_to<read_atom>::with<dvec>,
    caf::replies_to<init_atom, dvec, int64_t>::with<int64_t>,
    caf::reacts_to<halt_atom>,
    caf::reacts_to<calibrate_atom, double, double>,
    caf::replies_to<stats_atom>::with<shard_stats>>;


/// Spawns a shard with a zero range. It lives until it gets an exit message
/// (the coordinator sends one when the job ends). cocoa: once all K workers
/// pushed their delta of round r (clock r), it sends `coordinator`
/// (begin, r, its range), the range of the next round's shared vector.
parameter_shard spawn_parameter_shard(caf::actor_system& sys, shard_config config,
                                      caf::actor coordinator = {});

}  // namespace dml::actors
