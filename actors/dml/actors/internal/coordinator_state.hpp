#pragma once
// The coordinator's state and the pieces its four parts share:
//   coordinator.cpp           the core: phases, start-up, progress, stopping,
//                             checkpoints to file, the actor's behavior
//   coordinator_rounds.cpp    the round driver (coordinator_rounds() modes)
//   coordinator_sgd.cpp       the free-running driver (SGD modes)
//   coordinator_recovery.cpp  node loss in every phase
// The core knows no mode: it asks the job's topology and calls the driver
// the topology chose. Included only by those files (CAF inside).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/error.hpp>
#include <caf/exit_reason.hpp>
#include <caf/sec.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dml/actors/coordinator.hpp"
#include "dml/actors/internal/bulk_resolve.hpp"
#include "dml/actors/internal/job_state.hpp"
#include "dml/actors/job_plan.hpp"
#include "dml/actors/node.hpp"
#include "dml/actors/parameter_shard.hpp"
#include "dml/actors/worker.hpp"
#include "dml/solver/local_epochs_tuner.hpp"
#include "dml/solver/sgd.hpp"

namespace dml::actors::internal {

using clock_type = std::chrono::steady_clock;

/// Last guard on requests to workers and shards on nodes (see reply_timeout).
inline constexpr auto kRequestTimeout = std::chrono::minutes(10);
/// A node answers a spawn request at once; only a dead or hung node is slower.
inline constexpr auto kSpawnTimeout = std::chrono::seconds(30);

/// Where a job is. One value; every change goes through enter() (the
/// transitions are listed there).
enum class job_phase {
  kConnecting,  ///< spawning the workers and shards (on nodes: remote spawns)
  kLoading,     ///< the workers load and partition their data
  kTraining,    ///< rounds or free-running workers (checkpoints are taken in here)
  kStopping,    ///< a stop rule held: collecting the final model
  kRecovering,  ///< a node was lost: replacing actors, restoring a checkpoint
  kFinished,    ///< the job's result (or error) is out
};
std::string_view PhaseName(job_phase p);

struct coord_state;
using self_ptr = coordinator_actor::stateful_pointer<coord_state>;

/// How training is driven: chosen once from the topology.
struct training_driver {
  /// Training starts (after start-up, from the zero state).
  void (*begin)(self_ptr);
  /// Training resumes from st.ckpt (after a restore on every actor).
  void (*resume)(self_ptr);
  /// A cancel or the wall-time budget, seen by the timer.
  void (*stop)(self_ptr, StopReason);
};
const training_driver& RoundDriver();
const training_driver& FreeRunningDriver();

struct coord_state {
  JobPlan plan;
  const JobSpec& spec() const { return plan.spec; }
  const topology& topo() const { return *plan.topo; }
  const training_driver* driver = nullptr;
  std::shared_ptr<detail::job_state> job;
  std::vector<node_actor> nodes;  // empty: everything runs in this process
  std::vector<worker_actor> workers;
  std::vector<parameter_shard> shards;
  std::vector<int64_t> bounds;
  std::shared_ptr<hogwild_model> hog;
  // hogwild on nodes: the nodes holding the key-value group's other members.
  std::vector<int> kv_hosts;
  // The job's interrupt flag (job_state): set on cancel by the host, and
  // here on other outside stops; in-process workers' cocoa solves end early.
  std::shared_ptr<std::atomic<bool>> interrupt;
  bool nodes_interrupted = false;  // the nodes were told (once)
  job_phase phase = job_phase::kConnecting;
  int64_t n = 0, d = 0, m = 0;
  clock_type::time_point start;
  // Progress.
  int round = 0;
  double epochs = 0.0;
  int64_t coordinator_bytes = 0;
  std::vector<int64_t> clocks, processed, worker_bytes, device_bytes, device_swaps;
  /// Rounds (cocoa, duhl) after a resume or restart from a checkpoint: what
  /// to add to worker k's own count so it goes on from the checkpoint's.
  /// Set from each worker's first round reply after it (which precedes its
  /// first resumed solve), whatever the worker counted before: a new one
  /// from 0, a survivor on. SGD workers take their count from their start
  /// clock instead. Empty: 0.
  std::vector<int64_t> processed_base;
  std::vector<bool> base_pending;      ///< worker k's base awaits its first reply
  std::vector<int64_t> resumed_counts;  ///< the checkpoint's counts resumed from
  std::vector<Progress> history;
  Progress last;
  StopReason reason = StopReason::kMaxEpochs;
  // Free-running driver.
  int running = 0;
  bool evaluating = false;  // an evaluation is in flight
  double next_eval = 0.0;
  IterateAverage average;  // SGD modes: of the evaluated models (SgdOptions::average)
  int64_t svrg_tag = 0;    // the last SVRG snapshot (JobSgd::svrg)
  int64_t newton_pass = 0;  // the last iterate pass whose rows the workers keep
  int refine_skip = 0;     // evaluations left before the next refined certificate
  double refine_seconds = 0.0;  // spent refining certificates so far
  int refine_backoff = 0;  // the skip after a refinement that did not halve the gap
  /// SGD modes: the iterate's best primal at an evaluation and the
  /// evaluations since (the plateau rule of coordinator_sgd.cpp).
  double best_iterate_primal = std::numeric_limits<double>::infinity();
  double window_best_primal = std::numeric_limits<double>::infinity();  // at the window's start
  int evaluations_since_best = 0;  // in the plateau window
  bool feature_steps_known = false;  // plan.feature_steps computed (SgdOptions::feature_steps)
  std::shared_ptr<std::vector<double>> target_model;  // the evaluation that met target_primal
  Progress target_progress;
  // Round driver.
  dvec shared;  // the shared vector of the current round (one buffer for all)
  struct round_pipe {
    int64_t round = -1;
    bool go_on = false;       // the round's certificate said continue
    std::size_t parts = 0;    // ranges of the next shared vector received
    std::shared_ptr<std::vector<double>> next;  // assembled from S > 1 ranges
    dvec single;              // S = 1: the one range, uncopied
  } pipe;
  // Automatic H (cocoa.auto_local_epochs): the tuner, the H each round was
  // sent with, each worker's steps at the spec's H (learnt from the first
  // round's reports), and the previous certificate's time, gap and counters.
  struct h_tuning {
    std::optional<LocalEpochsTuner> tuner;
    std::map<int64_t, double> sent_h;
    std::vector<int64_t> default_steps;
    double last_seconds = -1.0, last_gap = 0.0;
    double best_primal = std::numeric_limits<double>::infinity();
    double best_dual = -std::numeric_limits<double>::infinity();
    std::vector<int64_t> last_processed;
  } auto_h;
  // Recovery (jobs on nodes). Every reply handler checks the generation it
  // was sent in: after a recovery (or a start-up restart), answers to
  // older requests are dropped.
  uint64_t generation = 0;
  // Fan-outs to the workers (evaluations) check this too: a worker
  // replaced while the others keep running voids the fan-outs in flight
  // (the lost one would never answer), not the workers' runs.
  uint64_t fanouts = 0;
  std::vector<int> worker_node, shard_node;  // hosting node of each actor
  std::vector<bool> node_alive;
  std::vector<bool> worker_lost;
  std::vector<bool> being_replaced;
  bool recovery_scheduled = false;  // a recover message is on its way
  clock_type::time_point last_ping;
  std::vector<bool> ping_outstanding;
  int recoveries = 0;
  std::vector<ProgressEvent> events;  // recorded with the next progress entry
  std::set<std::string> worker_notes;  // workers' notes already made events
  caf::actor fetcher;  // fetches dvecs that arrive by reference (bulk_resolve.hpp)
  struct checkpoint {
    int round = 0;
    double epochs = 0.0;
    std::vector<int64_t> processed, clocks;
    std::vector<double> shared;               // the shared vector (w, or v = A w)
    std::vector<std::vector<double>> coords;  // cocoa: per worker; empty = zeros
    int64_t clock = 0;                        // SGD modes: clock to restart from
  } ckpt;
  static inline const char* name = "dml.coordinator";

  // A coordinator that stops without ending its job (an exception in a
  // handler, a kill) must not leave wait() blocked forever.
  ~coord_state() {
    if (job && phase != job_phase::kFinished) {
      job->finish(absl::InternalError("the job's coordinator stopped before the job ended"));
    }
  }

  bool finished() const { return phase == job_phase::kFinished; }
  double seconds() const {
    return std::chrono::duration<double>(clock_type::now() - start).count();
  }
  int64_t bytes() const {
    int64_t b = coordinator_bytes;
    for (int64_t x : worker_bytes) b += x;
    return b;
  }
  int64_t all_device_bytes() const {
    int64_t b = 0;
    for (int64_t x : device_bytes) b += x;
    return b;
  }
  int64_t all_device_swaps() const {
    int64_t s = 0;
    for (int64_t x : device_swaps) s += x;
    return s;
  }
};

/// An error that says the peer is gone rather than that it refused: on
/// nodes, the loss of the node, not the job's failure.
inline bool link_error(const caf::error& err) {
  if (err.category() != caf::atom("system")) return false;
  switch (static_cast<caf::sec>(err.code())) {
    case caf::sec::request_receiver_down:
    case caf::sec::request_timeout:
    case caf::sec::remote_linking_failed:
      return true;
    default:
      return false;
  }
}

/// The live nodes, in index order.
std::vector<int> alive_nodes(const coord_state& st);

/// Moves the job to phase `to`; false (and no change) for a transition
/// that is not in the table.
bool enter(coord_state& st, job_phase to);

// ---- core (coordinator.cpp)
caf::duration reply_timeout(const coord_state& st);
void fail_job(self_ptr self, absl::Status status);
void fail_job(self_ptr self, const caf::error& err);
void finish_job(self_ptr self, std::vector<double> w, int64_t max_granted_staleness);
void record(self_ptr self, double primal, double dual, double gap);
/// Adds an event (a ProgressEvent kind and its sentence) to the next progress entry.
inline void append_event(coord_state& st, std::string kind, std::string what) {
  st.events.push_back({std::move(kind), std::move(what)});
}
void absorb(coord_state& st, const worker_report& r);
bool external_stop(coord_state& st, StopReason* why);
void save_checkpoint(self_ptr self);
void interrupt_solves(self_ptr self);
absl::Status checked_part(const coord_state& st, std::size_t s, const dvec& part);
/// The shard handles as plain actors, and connect(shards, bounds) to every worker.
void connect_workers(self_ptr self);
void connect_worker(self_ptr self, std::size_t k);
/// (Re)starts the start-up: spawn every actor on the live nodes, load.
void start_up(self_ptr self);

// ---- round driver (coordinator_rounds.cpp)
/// A range of the next shared vector, from the shard at address `from`.
void cocoa_range(self_ptr self, const caf::actor_addr& from, int64_t begin, int64_t round,
                 const dvec& part);

// ---- free-running driver (coordinator_sgd.cpp)
void maybe_evaluate(self_ptr self);
void halt_workers(self_ptr self, StopReason why);
void sgd_run_worker(self_ptr self, std::size_t k, int64_t start_clock);
void sgd_all_stopped(self_ptr self);

// ---- recovery (coordinator_recovery.cpp)
void node_lost(self_ptr self, int n);
void recover(self_ptr self);
void ping_nodes(self_ptr self);
/// How long a node may take to answer a hello before it counts as lost
/// (JobRecovery::node_silence_seconds).
caf::timespan node_silence(const coord_state& st);
void init_shards_then_resume(self_ptr self);
/// Worker k went down, or its node is lost.
bool worker_gone(const coord_state& st, std::size_t k);
bool all_workers_reachable(const coord_state& st);

// Fans a request out to every worker and calls done(replies) with the
// replies in worker order; the first error fails the job.
template <class Reply, class... Ts, class Done>
void ask_workers(self_ptr self, Done done, Ts... xs) {
  auto& st = self->state;
  auto replies = std::make_shared<std::vector<Reply>>(st.workers.size());
  auto remaining = std::make_shared<std::size_t>(st.workers.size());
  const uint64_t gen = st.generation;
  const uint64_t fan = st.fanouts;
  for (std::size_t k = 0; k < st.workers.size(); ++k) {
    self->request(st.workers[k], reply_timeout(st), xs...)
        .then(
            [self, k, replies, remaining, done, gen, fan](Reply& reply) {
              auto take = [self, k, replies, remaining, done, gen, fan](Reply r) {
                auto& st = self->state;
                if (st.finished() || gen != st.generation || fan != st.fanouts) return;
                if (!r.wire_error.empty()) {
                  return fail_job(self, absl::DataLossError(absl::StrCat(
                                            "reply of worker ", k, ": ", r.wire_error)));
                }
                (*replies)[k] = std::move(r);
                if (--*remaining == 0) done(*replies);
              };
              if constexpr (std::is_same_v<Reply, dvec>) {
                with_values(self, self->state.fetcher, std::move(reply), take);
              } else {
                take(std::move(reply));
              }
            },
            [self, gen, fan](caf::error& err) {
              auto& st = self->state;
              if (gen == st.generation && fan == st.fanouts) fail_job(self, err);
            });
  }
}

// Reads the whole shared vector from the shards, in key order.
template <class Done>
void read_shards(self_ptr self, Done done) {
  auto& st = self->state;
  const uint64_t gen = st.generation;
  if (st.shards.size() == 1) {  // the shard's own snapshot, uncopied
    self->request(st.shards[0], reply_timeout(st), read_atom_v)
        .then(
            [self, done, gen](dvec& reply) {
              with_values(self, self->state.fetcher, std::move(reply), [self, done, gen](dvec part) {
                auto& st = self->state;
                if (st.finished() || gen != st.generation) return;
                if (auto s = checked_part(st, 0, part); !s.ok()) return fail_job(self, s);
                st.coordinator_bytes += part.bytes();
                done(part);
              });
            },
            [self, gen](caf::error& err) {
              if (gen == self->state.generation) fail_job(self, err);
            });
    return;
  }
  auto out = std::make_shared<std::vector<double>>(static_cast<std::size_t>(st.m));
  auto remaining = std::make_shared<std::size_t>(st.shards.size());
  for (std::size_t s = 0; s < st.shards.size(); ++s) {
    self->request(st.shards[s], reply_timeout(st), read_atom_v)
        .then(
            [self, s, out, remaining, done, gen](dvec& reply) {
              auto take = [self, s, out, remaining, done, gen](dvec part) {
                auto& st = self->state;
                if (st.finished() || gen != st.generation) return;
                if (auto bad = checked_part(st, s, part); !bad.ok()) return fail_job(self, bad);
                std::copy(part.view().begin(), part.view().end(), out->begin() + st.bounds[s]);
                st.coordinator_bytes += part.bytes();
                if (--*remaining == 0) done(dvec(std::move(*out)));
              };
              with_values(self, self->state.fetcher, std::move(reply), take);
            },
            [self, gen](caf::error& err) {
              if (gen == self->state.generation) fail_job(self, err);
            });
  }
}

/// Spawns one actor (spawn request `atom` with `spec`) on node n; ok(handle)
/// once it is there and monitored. An answer for a voided generation is
/// an actor nobody wants: it is stopped. A node that is gone meanwhile is
/// one more loss (node_lost); any other refusal fails the job, the error
/// prefixed with `what` ("node 1 (host:port): ...").
template <class Handle, class Atom, class Spec, class Ok>
void spawn_on(self_ptr self, int n, Atom atom, const Spec& spec, const char* what, Ok ok) {
  const uint64_t gen = self->state.generation;
  self->request(self->state.nodes[n], kSpawnTimeout, atom, spec, caf::actor_cast<caf::actor>(self))
      .then(
          [self, gen, ok](const caf::actor& a) mutable {
            auto h = caf::actor_cast<Handle>(a);
            if (self->state.finished() || gen != self->state.generation) {
              self->send_exit(h, caf::exit_reason::user_shutdown);
              return;
            }
            self->monitor(h);
            ok(h);
          },
          [self, gen, n, what](caf::error& err) {
            auto& st = self->state;
            if (st.finished() || gen != st.generation) return;
            if (link_error(err)) return node_lost(self, n);
            fail_job(self, absl::UnavailableError(absl::StrCat(
                               what, "node ", n, " (", st.spec().cluster.nodes[n],
                               "): ", self->system().render(err))));
          });
}

}  // namespace dml::actors::internal
