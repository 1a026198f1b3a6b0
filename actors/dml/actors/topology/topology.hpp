#pragma once
// A training mode is a topology: a policy object that the coordinator, the
// workers and the parameter shards ask what the mode does. One file per
// mode in this folder, chosen by one explicit factory (MakeTopology, in
// factory.cpp); the actors compare no Mode values. Adding a mode is a new
// file here plus one line in that factory.
//
// The questions, by actor:
//   coordinator  what drives training (coordinator-led rounds, or workers
//                running free between evaluations), whether there are
//                shards, what losing a node means (continue, or restart
//                from the last checkpoint), and which clock a restart
//                resumes from
//   worker       how the data is partitioned, whether it keeps a local
//                solver or a local model, and what one SGD step does (by
//                the operations of worker_ops)
//   shard        a shard_rule: how a push is folded in, when a pull may be
//                answered, what a restore resets, what a reply carries
//
// No CAF type appears here: rules are plain state machines over the
// shard's core (internal/shard_core.hpp) and the worker's operations, and
// are tested without an actor system. Topologies are immutable and
// stateless; a shard_rule holds one shard's mode state and is used on that
// shard's thread only.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dml/actors/runtime.hpp"
#include "dml/objective/model.hpp"

namespace dml::net {
struct shard_config;
}  // namespace dml::net

namespace dml::actors {

/// net's payload under the actors' name.
using net::shard_config;

namespace internal {
struct shard_core;
struct held_push;
}  // namespace internal

/// A push a shard refused after it had accepted it (a gathering round
/// found a non-finite value while summing): the worker whose pull must
/// fail, and why.
struct refused_push {
  int32_t worker = 0;  ///< the worker whose pull fails
  absl::Status why;    ///< InvalidArgument naming the key and the worker
};

/// How one parameter shard folds what arrives, for one mode. Errors are
/// InvalidArgument with the text the requester sees.
class shard_rule {
 public:
  virtual ~shard_rule() = default;
  /// Applies `worker`'s push for `clock` (already checked: index, length,
  /// finiteness unless checks_while_folding()). `others` collects refusals
  /// of other workers' earlier pushes. The arrival bookkeeping (clocks,
  /// counters) is done by the caller before.
  virtual absl::Status apply(internal::shard_core& core, int32_t worker, int64_t clock,
                             internal::held_push push, std::vector<refused_push>* others) = 0;
  /// Whether a pull for `clock` may be answered now (not halted).
  virtual bool pull_ready(const internal::shard_core&, int64_t /*clock*/) const { return true; }
  /// Called when a pull for `clock` is answered (statistics).
  virtual void granted(internal::shard_core&, int64_t /*clock*/) {}
  /// What a push replies: rounds completed (gathering modes) or updates
  /// applied.
  virtual int64_t push_reply(const internal::shard_core& core) const;
  /// Gathering modes check a pushpull's values while they sum the round
  /// (one pass over the push, not two); the others check on arrival.
  virtual bool checks_while_folding() const { return false; }
  /// A restore (checkpoint) to `clock`, as if every worker had pushed
  /// `clock` times. The caller has replaced the values and the clocks.
  virtual void restore(internal::shard_core& core, int64_t clock);
  /// easgd's elastic exchange; other modes refuse it.
  virtual absl::StatusOr<std::vector<double>> elastic(internal::shard_core& core, int32_t worker,
                                                      absl::Span<const double> x);
  /// cocoa: tell the coordinator when every worker's delta of a round is in.
  virtual bool announces_rounds() const { return false; }
  /// Pure-L2 models keep w = scale * v, so the prox is one multiplication.
  virtual bool lazy_l2() const { return false; }
};

/// The operations an SGD worker's step is made of; the worker actor
/// implements them. Every step ends with exactly one of step_done(),
/// fail(), or an exchange (which ends the step when its replies are in).
class worker_ops {
 public:
  virtual ~worker_ops() = default;
  /// The worker's clock: SGD steps completed.
  virtual int64_t clock() const = 0;
  /// Local steps between exchanges (easgd, model averaging).
  virtual int32_t tau() const = 0;
  /// Pull the batch's keys from the shards, one loss gradient on them,
  /// push it; the step ends when the push is acknowledged.
  virtual void gradient_exchange() = 0;
  /// One proximal SGD step on the worker's local model.
  virtual absl::Status local_step() = 0;
  /// One proximal SGD step straight on the process-wide model (hogwild).
  virtual absl::Status shared_model_step() = 0;
  /// EASGD: send the local model, subtract the elastic difference replied.
  virtual void elastic_exchange() = 0;
  /// Model averaging: push the local model, continue from the shards' mean.
  virtual void average_exchange() = 0;
  /// Ends the step: counts it and schedules the next.
  virtual void step_done() = 0;
  /// Ends the step and the worker's run with `why`.
  virtual void fail(absl::Status why) = 0;
};

/// The local solvers a worker can keep (worker_config::local_solver).
inline constexpr int32_t kScdLocal = 0;     ///< the CPU SCD (cocoa_local.hpp)
inline constexpr int32_t kTpaScdLocal = 1;  ///< TPA-SCD on a GPU of its process
inline constexpr int32_t kDuhlLocal = 2;    ///< DuHL over its block (duhl.hpp)

/// A mode's policy. Immutable; shared by every actor of a job.
class topology {
 public:
  virtual ~topology() = default;
  /// The mode this is the policy of.
  virtual Mode mode() const = 0;

  // ---- coordinator
  /// True: the coordinator drives rounds and certifies the duality gap
  /// (cocoa). False: workers run free SGD loops and the coordinator
  /// evaluates the primal every eval_every_epochs.
  virtual bool coordinator_rounds() const { return false; }
  /// False: the workers share one in-process model (no shards, no nodes,
  /// no checkpoint files).
  virtual bool uses_shards() const { return true; }
  /// True: a lost node without shards is survived by replacing its
  /// workers while the others run on; false: the job restarts from its
  /// last checkpoint.
  virtual bool continues_after_worker_loss() const { return false; }
  /// The clock every worker restarts from, given the slowest one seen.
  virtual int64_t restart_clock(int64_t slowest, int32_t /*tau*/) const { return slowest; }
  /// The clock a restored shard starts from (worker clock, or cocoa round).
  virtual int64_t shard_restore_clock(int64_t clock, int64_t /*round*/, int32_t /*tau*/) const {
    return clock;
  }
  /// Stale gradients give the step a noise floor: the coordinator halves
  /// step0 where the primal stops improving on unscaled data
  /// (coordinator_sgd.cpp).
  virtual bool reduces_step_on_plateau() const { return false; }

  // ---- worker
  /// The shared vector is v = A w (one entry per example) and workers own
  /// feature columns: primal models under cocoa.
  virtual bool shares_predictions(ModelKind) const { return false; }
  /// The worker keeps a libdml LocalSolver (cocoa's subproblem).
  virtual bool solves_locally() const { return false; }
  /// Which local solver worker `index` keeps (kScdLocal, kTpaScdLocal,
  /// kDuhlLocal), given the job's (cocoa.local_solver).
  virtual int32_t local_solver(int32_t /*index*/, int32_t configured) const { return configured; }
  /// Every worker samples the whole dataset (hogwild: shared memory).
  virtual bool samples_whole_data() const { return false; }
  /// The worker trains a local model that exchanges with the shards; a
  /// replacement joining late starts from the shards' model.
  virtual bool keeps_local_model() const { return false; }
  /// One SGD step (modes without coordinator_rounds()); by default fails
  /// the step with FailedPrecondition.
  virtual void sgd_step(worker_ops& ops) const;

  // ---- shard
  /// A new rule for one shard of this mode, owned by that shard.
  virtual std::unique_ptr<shard_rule> make_shard_rule(const shard_config& cfg) const = 0;
};

/// The one factory: the policy of `mode`.
std::shared_ptr<const topology> MakeTopology(Mode mode);

}  // namespace dml::actors
