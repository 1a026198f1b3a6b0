#pragma once
// worker: owns one partition of the data and a local solver from libdml, and
// trains by the job's mode:
//   sync, async, ssp   pull the model from every shard, one minibatch loss
//                      gradient on its rows, push it (sparse when that is
//                      smaller); on its own clock until told to halt
//   easgd              local proximal SGD; every tau steps an elastic
//                      exchange with the center on the shards
//   model-averaging    local proximal SGD; every tau steps push the local
//                      model, pull the shards' mean
//   hogwild            proximal SGD steps straight on the process-wide
//                      model, lock-free (relaxed atomics, Hogwild)
//   cocoa              when told: H coordinate steps of the CoCoA+ local
//                      subproblem against the shared vector it is sent, then
//                      push the delta to the shards and report
// Partitions: rows (balanced by nonzeros) for dual and SGD modes; columns for
// primal models under cocoa.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "absl/status/statusor.h"
#include "dml/actors/kv.hpp"
#include "dml/actors/messages.hpp"
#include "dml/actors/runtime.hpp"
#include "dml/actors/type_ids.hpp"
#include "dml/data/libsvm.hpp"
#include "dml/data/sparse.hpp"
#include "dml/objective/model.hpp"

namespace dml::actors {

/// Message interface of a worker.
///  - init: load (if given a path) and partition the data, build the local
///    solver; replies the global (n, d). Errors: the load or solver error.
///  - connect(shards, bounds): the S shards and their key boundaries (S+1).
///  - run(max_clock, report_every, start_clock): the free-running loop of
///    the SGD modes from clock start_clock, sending the coordinator a
///    worker_report every `report_every` clocks; replies when it reaches
///    max_clock or is halted. A run while running supersedes the old one.
///  - step(loop): internal, the next step of run `loop`. halt: stop it.
///  - permit(clock): the run steps on to `clock` at most, then waits for a
///    later permit (or a halt): the coordinator keeps workers within a few
///    evaluation intervals of its last certificate, so that on small data
///    they do not run to max_clock between two evaluations. A run starts
///    unbounded.
///  - round(r, shared, steps): cocoa round r. Replies at once with this
///    block's certificate at `shared` (and its progress before the round),
///    then solves H local steps and pushes the delta to the shards with
///    clock r (they tell the coordinator when all K are in). Solving is
///    speculative: the coordinator may stop at this certificate, so the
///    coordinates it certifies are kept (coords(r)). A push that fails
///    later reaches the coordinator as a worker_report carrying the error.
///  - calibrate: SGD modes, the step0 that Bottou's calibration finds on a
///    sample of this partition (dml::CalibrateStep). calibrate(step0,
///    decay): the schedule to run with (the coordinator's choice).
///  - features: SGD modes, sum_i x_ij^2 and the nonzeros per column over
///    this partition (dml::ColumnSquareSums, 2 d values). features(f): the per-feature
///    step factors to step with from now on (d positive values; replies
///    d). Errors: another length, a factor not positive and finite.
///  - iterate(w, tag, pass): the SGD modes' certificate share of this
///    partition at w (dml::IterateShare, packed by PackIterateShare: a
///    d-vector and a few sums, which the coordinator adds up into P, D and
///    the gap). tag > 0: w also becomes SVRG snapshot `tag` (its rows' loss
///    derivatives are kept). pass > 0: the share carries its curvature and
///    the rows' loss' and loss'' are kept for refine under that id (the
///    last 4 passes are kept). svrg(tag, mu): snapshot `tag`'s full loss
///    gradient; from the next step on pushes are SVRG estimates (a tag
///    other than the kept one is ignored: a replaced worker pushes plain
///    gradients until the next snapshot).
///  - refine(pass, last, v): the Newton-refined certificate's next share
///    (dml/objective/newton_certificate.hpp) from the rows kept by iterate
///    pass `pass`: not last, the Hessian product at v; last, the dual share
///    at the direction v (PackNewtonDualShare). Errors: no rows kept for
///    that pass, v not a d-vector.
///  - coords(r): the local coordinates that go with round r's shared vector
///    (dual cocoa: alpha of its rows; primal cocoa: w of its columns): those
///    before round r's solve if it started, else the current ones. Errors:
///    rounds other than the last two. coords(r, c): replace them with c,
///    as of round r (checkpoint restore; empty = zeros).
using worker_actor = caf::typed_actor<
    caf::replies_to<init_atom>::with<int64_t, int64_t>,
    caf::reacts_to<connect_atom, std::vector<caf::actor>, int64_list>,
    caf::replies_to<run_atom, int64_t, int64_t, int64_t>::with<worker_report>,
    caf::reacts_to<step_atom, uint64_t>,
    caf::reacts_to<halt_atom>,
    caf::reacts_to<permit_atom, int64_t>,
    caf::replies_to<round_atom, int64_t, dvec, int64_t>::with<block_sums, worker_report>,
    caf::replies_to<iterate_atom, dvec, int64_t, int64_t>::with<dvec>,
    caf::replies_to<refine_atom, int64_t, bool, dvec>::with<dvec>,
    caf::reacts_to<svrg_atom, int64_t, dvec>,
    caf::replies_to<calibrate_atom>::with<double>,
    caf::replies_to<features_atom>::with<dvec>,
    caf::replies_to<features_atom, dvec>::with<int64_t>,
    caf::reacts_to<calibrate_atom, double, double>,
    caf::replies_to<coords_atom, int64_t>::with<dvec>,
    caf::replies_to<coords_atom, int64_t, dvec>::with<int64_t>>;

/// The in-process model of hogwild mode: one array of relaxed atomics that
/// every worker of the process reads and writes without locks, or a
/// key-value group (JobSgd::Store::kKv) whose nodes the workers share.
struct hogwild_model {
  /// Allocates d zeros. Called once by the coordinator before any worker
  /// runs (the dimension is known only after the workers loaded the data).
  void allocate(std::size_t d) {
    w = std::vector<std::atomic<double>>(d);
    for (auto& x : w) x.store(0.0, std::memory_order_relaxed);
  }
  /// The model, d entries; read and written with relaxed atomics.
  std::vector<std::atomic<double>> w;
  /// Steps taken by all workers together: the step schedule's clock is
  /// steps / K, as on an async shard, so a worker that starts late does not
  /// take the large early steps at the end of training.
  std::atomic<int64_t> steps{0};
  /// How many workers' steps `steps` counts: 0 = all K (one process); on a
  /// dml-node, the job's workers there.
  int32_t step_sharers = 0;
  hogwild_model() = default;
  hogwild_model(const hogwild_model&) = delete;
  hogwild_model& operator=(const hogwild_model&) = delete;
  /// Stops the key-value group (if any) on a thread of its own, not
  /// joined: the last owner is usually an actor exiting, and stopping an
  /// actor system from (or while blocking) another's scheduler threads
  /// hangs in CAF 0.17. AwaitKvShutdowns waits for those threads.
  ~hogwild_model();
  /// JobSgd::Store::kKv: the model lives in a key-value group instead
  /// (w stays empty). In one process kv[k] is worker k's node (allocate_kv);
  /// on a dml-node (or the coordinator of a job on nodes) kv holds this
  /// process's one member, which its workers share.
  std::vector<std::shared_ptr<KvNode>> kv;
  /// Worker k's key-value node (kv non-empty).
  KvNode& kv_of(int32_t k) const {
    return *kv[kv.size() == 1 ? 0 : static_cast<std::size_t>(k)];
  }
  /// Starts a group of `workers` nodes over keys [0, d), all zero; with
  /// `localize` (KvOptions::dynamic) workers localize their next
  /// minibatch's columns. Errors: InvalidArgument for bad options (block < 1).
  absl::Status allocate_kv(std::size_t d, int workers, int64_t block, bool localize);
  /// The model: a copy of w by relaxed loads, or (kv) every key pulled
  /// through node 0. Not a consistent cut while workers run. Errors (kv
  /// only): the group's (a lost node, a timeout).
  absl::StatusOr<std::vector<double>> read() const;
  /// The model's dimension, wherever it lives.
  std::size_t size() const {
    return kv.empty() ? w.size() : static_cast<std::size_t>(kv[0]->options().keys);
  }
  /// K_j: how many of the `workers` balanced row ranges of `full` touch
  /// column j (empty where the ranges cannot be formed). Computed once, by
  /// the first worker that asks (O(nnz)); every worker gets the same.
  const std::vector<int32_t>& PartitionsTouching(const Dataset& full, int workers);

 private:
  std::once_flag touching_once_;
  std::vector<int32_t> touching_;
};

/// Waits until every key-value group a hogwild_model handed to a thread of
/// its own has stopped (false: `timeout` passed first). The runtime calls it
/// after its actor system is gone, so that none outlives it.
bool AwaitKvShutdowns(std::chrono::duration<double> timeout);

/// A worker's configuration: the wire-portable spec plus what only exists
/// inside one process.
struct worker_config : worker_spec {
  /// A shared in-memory dataset (in-process only); else spec.path is loaded.
  std::shared_ptr<const Dataset> data;
  /// Where progress reports go (SGD modes).
  caf::actor coordinator;
  /// hogwild: the process-wide model (in-process only).
  std::shared_ptr<hogwild_model> hogwild;
  /// Set (by the coordinator, or by the node for a remote coordinator)
  /// when the job is being stopped: a cocoa solve in progress ends early.
  std::shared_ptr<std::atomic<bool>> interrupt;
};

/// Spawns a worker. `detached`: on a thread of its own instead of the
/// scheduler's. Nodes detach their workers: a worker computes for long
/// stretches (a cocoa round, an SGD loop), and the node process must keep
/// receiving meanwhile (CAF deserialises remote messages on the scheduler:
/// pings, halts, pushes to its shards). In-process jobs keep workers on the
/// scheduler, where hand-offs between actors are cheaper.
worker_actor spawn_worker(caf::actor_system& sys, worker_config config, bool detached = false);

/// The rows worker `index` samples at `clock` (indices into its own
/// partition of `rows` examples): `batch` draws with replacement from a
/// stream seeded by (seed, index, clock). Exposed so tests can replay a run.
std::vector<int64_t> SampleBatch(uint64_t seed, int32_t index, int64_t clock, int64_t rows,
                                 int32_t batch);

}  // namespace dml::actors
