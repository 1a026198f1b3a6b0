// The coordinator's core: the job's phase, start-up (spawn, load, wire),
// progress, stopping, checkpoint files and the actor's behavior. What a
// round or an evaluation is belongs to the driver the job's topology chose
// (coordinator_rounds.cpp, coordinator_sgd.cpp); node loss to
// coordinator_recovery.cpp.
#include "dml/actors/coordinator.hpp"

#include <algorithm>
#include <map>

#include <caf/exit_reason.hpp>
#include <caf/result.hpp>
#include <caf/sec.hpp>
#include <caf/system_messages.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dml/actors/internal/coordinator_state.hpp"
#include "dml/actors/kv.hpp"
#include "dml/actors/network.hpp"
#include "dml/actors/node.hpp"
#include "dml/actors/wire.hpp"
#include "dml/solver/sgd.hpp"
#include "dml/solver/solver.hpp"
#include "dml/util/status.hpp"

namespace dml::actors {
namespace internal {
namespace {

// Polls the cancel flags and the wall-time budget. Every tick wakes CAF's
// clock thread and a scheduler thread; at 5 ms those wake-ups preempted the
// solving threads several times per 10 ms round (the actor-overhead bench
// measured ~5 involuntary context switches per round). 20 ms keeps cancel
// well inside its 200 ms.
constexpr auto kTick = std::chrono::milliseconds(20);

}  // namespace

std::vector<int> alive_nodes(const coord_state& st) {
  std::vector<int> alive;
  for (std::size_t n = 0; n < st.node_alive.size(); ++n) {
    if (st.node_alive[n]) alive.push_back(static_cast<int>(n));
  }
  return alive;
}

std::string_view PhaseName(job_phase p) {
  switch (p) {
    case job_phase::kConnecting: return "connecting";
    case job_phase::kLoading: return "loading";
    case job_phase::kTraining: return "training";
    case job_phase::kStopping: return "stopping";
    case job_phase::kRecovering: return "recovering";
    case job_phase::kFinished: return "finished";
  }
  return "?";
}

// The transitions. A start-up that loses a node starts over
// (connecting again); training, stopping and recovering can each lose a
// node and recover; a recovery ends in training; anything can finish.
bool enter(coord_state& st, job_phase to) {
  using P = job_phase;
  const P from = st.phase;
  bool ok = false;
  switch (to) {
    case P::kConnecting: ok = from == P::kConnecting || from == P::kLoading; break;
    case P::kLoading: ok = from == P::kConnecting; break;
    case P::kTraining: ok = from == P::kLoading || from == P::kRecovering; break;
    case P::kStopping: ok = from == P::kTraining; break;
    case P::kRecovering:
      ok = from == P::kTraining || from == P::kStopping || from == P::kRecovering;
      break;
    case P::kFinished: ok = from != P::kFinished; break;
  }
  if (ok) st.phase = to;
  return ok;
}

// Timeout of the requests a job makes to its workers and shards while it
// trains (every round, and on a restore). A finite one costs two events on
// CAF's clock thread (set, then cancel on the reply), and those wake-ups
// preempt the threads that solve. In a process none is needed: a
// worker or shard that dies is reported by its monitor and fails the job.
// On nodes the pings catch a hung node; the timeout stays as a last guard.
caf::duration reply_timeout(const coord_state& st) {
  return st.nodes.empty() ? caf::duration{caf::infinite} : caf::duration{kRequestTimeout};
}

namespace {

void stop_children(self_ptr self) {
  auto& st = self->state;
  // A rounds job decides on the certificate at s_r while its workers
  // already solve from s_r (pipelined): once the job is over nobody reads
  // that solve, so it ends now instead of holding a scheduler thread (or a
  // node's) for up to a whole round.
  if (st.topo().coordinator_rounds() && st.interrupt) interrupt_solves(self);
  for (auto& w : st.workers) self->send_exit(w, caf::exit_reason::user_shutdown);
  for (auto& s : st.shards) self->send_exit(s, caf::exit_reason::user_shutdown);
}

}  // namespace

void fail_job(self_ptr self, absl::Status status) {
  auto& st = self->state;
  if (!enter(st, job_phase::kFinished)) return;
  st.job->finish(std::move(status));
  stop_children(self);
  self->quit();
}

absl::Status StatusOf(self_ptr self, const caf::error& err) {
  // A worker's or shard's own words (caf::make_error(sec, text), or a
  // worker's status: text and code, as_error) as they are, not inside CAF's
  // rendering of the whole error.
  const caf::message& ctx = err.context();
  const bool words = err.category() == caf::atom("system") && ctx.size() >= 1 &&
                     ctx.match_element<std::string>(0);
  const bool with_code = words && ctx.size() == 2 && ctx.match_element<int32_t>(1);
  if (!words || (ctx.size() > 1 && !with_code)) {
    return absl::InternalError(self->system().render(err));
  }
  auto code = absl::StatusCode::kInternal;
  if (with_code) {
    const int32_t c = ctx.get_as<int32_t>(1);
    if (c > 0 && c <= static_cast<int32_t>(absl::StatusCode::kUnauthenticated)) {
      code = static_cast<absl::StatusCode>(c);
    }
  }
  return absl::Status(code, ctx.get_as<std::string>(0));
}

void fail_job(self_ptr self, const caf::error& err) { fail_job(self, StatusOf(self, err)); }

void finish_job(self_ptr self, std::vector<double> w, int64_t max_granted_staleness) {
  auto& st = self->state;
  {
    // An infinite or NaN certificate is no result (it could read "converged").
    TrainResult check;
    check.primal = st.last.primal;
    check.gap = st.last.gap;
    if (absl::Status s = CheckCertificateFinite(check, st.spec().model); !s.ok()) {
      return fail_job(self, s);
    }
  }
  if (!enter(st, job_phase::kFinished)) return;
  TrainResult r;
  r.model = st.spec().model;
  r.w = std::move(w);
  r.primal = st.last.primal;
  r.dual = st.last.dual;
  r.gap = st.last.gap;
  r.rounds = st.round;
  r.epochs = st.epochs;
  r.seconds = st.seconds();
  r.reason = st.reason;
  r.bytes_exchanged = st.bytes();
  r.device_bytes = st.all_device_bytes();
  r.history = st.history;
  r.max_granted_staleness = max_granted_staleness;
  st.job->finish(std::move(r));
  stop_children(self);
  self->quit();
}

// A shard's read reply, checked before it is used.
absl::Status checked_part(const coord_state& st, std::size_t s, const dvec& part) {
  if (!part.wire_error.empty()) {
    return absl::DataLossError(absl::StrCat("read reply of shard ", s, ": ", part.wire_error));
  }
  const int64_t want = st.bounds[s + 1] - st.bounds[s];
  if (static_cast<int64_t>(part.size()) != want) {
    return absl::DataLossError(absl::StrCat("read reply of shard ", s, ": ", part.size(),
                                            " values, expected ", want));
  }
  return absl::OkStatus();
}

void record(self_ptr self, double primal, double dual, double gap) {
  auto& st = self->state;
  Progress p;
  p.round = st.round;
  p.seconds = st.seconds();
  p.epochs = st.epochs;
  p.primal = primal;
  p.dual = dual;
  p.gap = gap;
  p.bytes_exchanged = st.bytes();
  p.device_bytes = st.all_device_bytes();
  p.device_swaps = st.all_device_swaps();
  p.staleness.assign(st.workers.size(), 0);
  if (!st.clocks.empty()) {
    const int64_t slowest = *std::min_element(st.clocks.begin(), st.clocks.end());
    for (std::size_t k = 0; k < st.clocks.size(); ++k) p.staleness[k] = st.clocks[k] - slowest;
  }
  for (const auto& e : st.events) absl::StrAppend(&p.event, p.event.empty() ? "" : "; ", e.what);
  p.events = std::move(st.events);
  st.events.clear();
  st.last = p;
  st.history.push_back(p);
  st.job->publish(p);
}

// Folds a worker's report into the job's progress (reports only grow; a
// late one never moves a worker back). An epoch is n examples, or d
// coordinates where the workers own columns.
void absorb(coord_state& st, const worker_report& r) {
  // A worker's note (a GPU's fallback) becomes an event once.
  if (!r.note.empty() && st.worker_notes.insert(r.note).second) {
    append_event(st, "worker_note", r.note);
  }
  st.clocks[r.worker] = std::max(st.clocks[r.worker], r.clock);
  const int64_t base = static_cast<std::size_t>(r.worker) < st.processed_base.size()
                           ? st.processed_base[r.worker]
                           : 0;
  st.processed[r.worker] = std::max(st.processed[r.worker], base + r.processed);
  st.worker_bytes[r.worker] = std::max(st.worker_bytes[r.worker], r.bytes);
  st.device_bytes[r.worker] = std::max(st.device_bytes[r.worker], r.device_bytes);
  st.device_swaps[r.worker] = std::max(st.device_swaps[r.worker], r.device_swaps);
  int64_t total = 0;
  for (int64_t p : st.processed) total += p;
  const int64_t per_epoch = st.plan.shares_predictions() ? st.d : st.n;
  st.epochs = static_cast<double>(total) / static_cast<double>(per_epoch);
}

// Cancel flag and wall-time budget; the first rule that holds, if any.
bool external_stop(coord_state& st, StopReason* why) {
  if (st.job->cancel.load() ||
      (st.spec().stop.cancel != nullptr && st.spec().stop.cancel->load())) {
    *why = StopReason::kCancelled;
    return true;
  }
  if (st.seconds() >= st.spec().stop.max_seconds) {
    *why = StopReason::kTimeBudget;
    return true;
  }
  return false;
}

// Writes the current checkpoint to JobSpec.checkpoint_path, if set. A
// failed write is reported in the metrics stream; training goes on.
void save_checkpoint(self_ptr self) {
  auto& st = self->state;
  if (st.spec().recovery.path.empty()) return;
  job_checkpoint c;
  c.mode = st.spec().mode.kind;
  c.model = st.spec().model;
  c.round = st.ckpt.round;
  c.epochs = st.ckpt.epochs;
  c.seconds = st.seconds();
  c.clock = st.ckpt.clock;
  c.bytes = st.bytes();
  c.rows = st.n;
  c.cols = st.d;
  c.seed = st.spec().mode.seed;
  c.workers = static_cast<int32_t>(st.workers.size());
  c.shared = st.ckpt.shared;
  c.coords = st.ckpt.coords;
  c.processed = st.ckpt.processed;
  c.history = st.history;
  if (auto s = WriteCheckpointFile(st.spec().recovery.path, c); !s.ok()) {
    append_event(st, "checkpoint_failed", absl::StrCat("checkpoint not written: ", s.message()));
  } else {
    append_event(st, "checkpoint_written",
                 absl::StrCat("checkpoint of round ", c.round, " written to ", st.spec().recovery.path));
  }
}

// Ends the workers' local solves early (in-process through the shared
// flag, on nodes through each node's flag for this job). Once.
void interrupt_solves(self_ptr self) {
  auto& st = self->state;
  st.interrupt->store(true);
  if (st.nodes_interrupted) return;
  st.nodes_interrupted = true;
  const auto me = caf::actor_cast<caf::actor>(self);
  for (auto& n : st.nodes) self->send(n, halt_atom_v, me);
}

void connect_worker(self_ptr self, std::size_t k) {
  auto& st = self->state;
  std::vector<caf::actor> handles;
  for (auto& s : st.shards) handles.push_back(caf::actor_cast<caf::actor>(s));
  self->send(st.workers[k], connect_atom_v, handles, int64_list{st.bounds, {}});
}

void connect_workers(self_ptr self) {
  for (std::size_t k = 0; k < self->state.workers.size(); ++k) connect_worker(self, k);
}

// ------------------------------------------------------------- start-up
// connecting (spawn the workers), loading (they read their partitions;
// then the shards are spawned for the data's shape), then training. A
// node lost before training starts the start-up over on the nodes left
// (coordinator_recovery.cpp).

namespace {

// JobSpec.resume: the checkpoint file, checked against this job.
absl::Status load_resume_checkpoint(coord_state& st) {
  auto c = ReadCheckpointFile(st.spec().recovery.path);
  if (!c.ok()) return c.status();
  const std::string& f = st.spec().recovery.path;
  auto mismatch = [&](const char* what, auto have, auto want) {
    return absl::FailedPreconditionError(absl::StrCat(f, ": checkpoint ", what, " is ", have,
                                                      " but the job's is ", want));
  };
  if (c->mode != st.spec().mode.kind) {
    return mismatch("mode", AsAbsl(ModeName(c->mode)), AsAbsl(ModeName(st.spec().mode.kind)));
  }
  if (c->model.kind != st.spec().model.kind) {
    return mismatch("model", AsAbsl(ModelName(c->model.kind)),
                    AsAbsl(ModelName(st.spec().model.kind)));
  }
  if (c->model.lambda != st.spec().model.lambda) {
    return mismatch("lambda", c->model.lambda, st.spec().model.lambda);
  }
  if (c->rows != st.n || c->cols != st.d) {
    return mismatch("data shape", absl::StrCat(c->rows, "x", c->cols),
                    absl::StrCat(st.n, "x", st.d));
  }
  if (c->workers != static_cast<int32_t>(st.workers.size())) {
    return mismatch("worker count", c->workers, st.workers.size());
  }
  if (static_cast<int64_t>(c->shared.size()) != st.m) {
    return mismatch("shared vector length", c->shared.size(), st.m);
  }
  auto& k = st.ckpt;
  k.round = c->round;
  k.epochs = c->epochs;
  k.processed = c->processed;
  k.clocks.assign(st.workers.size(), c->clock);
  k.shared = std::move(c->shared);
  k.coords = std::move(c->coords);
  k.clock = c->clock;
  st.history = std::move(c->history);
  st.coordinator_bytes = c->bytes;
  append_event(st, "resumed", absl::StrCat("resumed from ", f, " at round ", k.round));
  return absl::OkStatus();
}

void connect_and_train(self_ptr self) {
  auto& st = self->state;
  if (st.topo().uses_shards()) connect_workers(self);
  enter(st, job_phase::kTraining);
  // The first restart point: the zero model before any step.
  st.ckpt = coord_state::checkpoint{};
  st.ckpt.processed = st.processed;
  st.ckpt.clocks = st.clocks;
  st.ckpt.shared.assign(static_cast<std::size_t>(st.m), 0.0);
  if (st.spec().recovery.resume) {
    if (auto s = load_resume_checkpoint(st); !s.ok()) return fail_job(self, s);
    return init_shards_then_resume(self);
  }
  st.driver->begin(self);
}

// What crosses to a node: the spec without the in-process parts.
worker_spec wire_form(const worker_config& c) { return static_cast<const worker_spec&>(c); }
const shard_config& wire_form(const shard_config& c) { return c; }

// Spawns one actor of type Handle per spec, here or on its node
// (placement[i]), monitors them, and calls done(handles).
template <class Handle, class Atom, class Spec, class LocalSpawn, class Done>
void spawn_all(self_ptr self, const std::vector<int>& placement, Atom atom,
               std::vector<Spec> specs, LocalSpawn local, Done done) {
  auto& st = self->state;
  const std::size_t count = specs.size();
  if (st.nodes.empty()) {
    std::vector<Handle> out;
    for (auto& spec : specs) {
      auto h = local(std::move(spec));
      self->monitor(h);
      out.push_back(h);
    }
    return done(std::move(out));
  }
  auto out = std::make_shared<std::vector<Handle>>(count);
  auto remaining = std::make_shared<std::size_t>(count);
  for (std::size_t i = 0; i < count; ++i) {
    spawn_on<Handle>(self, placement[i], atom, wire_form(specs[i]), "",
                     [out, remaining, done, i](Handle h) {
                       (*out)[i] = h;
                       if (--*remaining == 0) done(std::move(*out));
                     });
  }
}

// Node of actor i when actors are dealt round-robin over the live nodes
// from `offset` (worker k: offset 0; shard s: offset K).
int place(const coord_state& st, std::size_t offset, std::size_t i) {
  const std::vector<int> alive = alive_nodes(st);
  return alive.empty() ? -1 : alive[(offset + i) % alive.size()];
}

// A member's refusal speaks of ranks ("kv node 1: peers[2] ..."): say which
// node each rank is.
void kv_setup_failed(self_ptr self, const caf::error& err) {
  auto& st = self->state;
  const absl::Status why = StatusOf(self, err);
  std::string ranks = "rank 0 this process";
  for (std::size_t r = 0; r < st.kv_hosts.size(); ++r) {
    const auto n = static_cast<std::size_t>(st.kv_hosts[r]);
    absl::StrAppend(&ranks, ", ", r + 1, " node ", n, " (", st.spec().cluster.nodes[n], ")");
  }
  fail_job(self, absl::Status(why.code(), absl::StrCat("hogwild's key-value group on the nodes (",
                                                       ranks, "): ", why.message())));
}

// hogwild on nodes, step 2: every member of the key-value group listens;
// now each dials the others (on threads of their own: kv_connector), and
// the workers run once all answered.
void kv_connect_and_train(self_ptr self, const std::vector<int>& hosts,
                          const std::vector<std::string>& peers) {
  auto& st = self->state;
  const std::string table = absl::StrJoin(peers, std::string(1, kPeerTableSeparator));
  auto remaining = std::make_shared<std::size_t>(hosts.size() + 1);
  const uint64_t gen = st.generation;
  auto connected = [self, remaining, gen](bool) {
    auto& st = self->state;
    if (st.finished() || gen != st.generation) return;
    if (--*remaining == 0) connect_and_train(self);
  };
  auto failed = [self, gen](caf::error& err) {
    if (gen == self->state.generation) kv_setup_failed(self, err);
  };
  // KvNode::Connect gives up after 30 s; the answer comes before this.
  const auto limit = std::chrono::seconds(45);
  for (int n : hosts) {
    self->request(st.nodes[static_cast<std::size_t>(n)], limit, connect_atom_v,
                  caf::actor_cast<caf::actor>(self), table)
        .then(connected, failed);
  }
  self->request(spawn_kv_connector(self->system(), st.hog), limit, connect_atom_v, table)
      .then(connected, failed);
}

// hogwild on nodes, step 1: a key-value group of one member per node with
// workers (ranks 1.., sharing it there) and one here (rank 0: it dials
// every other member and is dialled by none, so it listens on loopback;
// the model is read through it for evaluations; it is home to no keys,
// which live where the workers are).
void kv_on_nodes(self_ptr self) {
  auto& st = self->state;
  const JobSgd& sgd = st.spec().sgd;
  std::vector<int> hosts;
  std::map<int, int32_t> local;
  for (int n : st.worker_node) {
    if (local[n]++ == 0) hosts.push_back(n);
  }
  st.kv_hosts = hosts;
  const auto members = static_cast<int32_t>(hosts.size() + 1);
  KvOptions o;
  o.keys = st.d;
  o.block = sgd.kv_block;
  o.dynamic = sgd.localize;
  o.first_home_rank = 1;
  o.secret = st.job->cluster_secret;
  // Evaluations read through this member: a node silent for longer is
  // lost anyway, and a read must not hold the job's end for the default
  // minute.
  o.op_timeout_seconds = std::max(10.0, 3.0 * st.spec().recovery.node_silence_seconds);
  auto own = KvNode::Listen(o, 0, members, "127.0.0.1", 0, 1);
  if (!own.ok()) return fail_job(self, own.status());
  auto peers = std::make_shared<std::vector<std::string>>(hosts.size() + 1);
  (*peers)[0] = absl::StrCat("127.0.0.1:", (*own)->port());
  st.hog->kv.clear();
  st.hog->kv.push_back(*std::move(own));
  auto remaining = std::make_shared<std::size_t>(hosts.size());
  const uint64_t gen = st.generation;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const int n = hosts[i];
    self->request(st.nodes[static_cast<std::size_t>(n)], reply_timeout(st), kv_atom_v,
                  caf::actor_cast<caf::actor>(self), o.keys, o.block, o.dynamic,
                  static_cast<int32_t>(i + 1), members, o.first_home_rank, local[n])
        .then(
            [self, peers, remaining, hosts, gen, n, i](int32_t port) {
              auto& st = self->state;
              if (st.finished() || gen != st.generation) return;
              // The node is dialled where this process reaches it.
              auto hp = ParseHostPort(st.spec().cluster.nodes[static_cast<std::size_t>(n)]);
              if (!hp.ok()) return fail_job(self, hp.status());
              const bool v6 = hp->first.find(':') != std::string::npos;
              (*peers)[i + 1] = v6 ? absl::StrCat("[", hp->first, "]:", port)
                                   : absl::StrCat(hp->first, ":", port);
              if (--*remaining == 0) kv_connect_and_train(self, hosts, *peers);
            },
            [self, gen](caf::error& err) {
              if (gen == self->state.generation) kv_setup_failed(self, err);
            });
  }
}

void wire_and_train(self_ptr self) {
  auto& st = self->state;
  if (!st.topo().uses_shards()) {
    const JobSgd& sgd = st.spec().sgd;
    if (sgd.store == JobSgd::Store::kKv && !st.nodes.empty()) return kv_on_nodes(self);
    if (sgd.store == JobSgd::Store::kKv) {
      if (auto s = st.hog->allocate_kv(static_cast<std::size_t>(st.d), st.spec().mode.workers,
                                       sgd.kv_block, sgd.localize);
          !s.ok()) {
        return fail_job(self, s);
      }
    } else {
      st.hog->allocate(static_cast<std::size_t>(st.d));
    }
    return connect_and_train(self);
  }
  const int S = st.spec().mode.shards;
  if (S > st.m) {
    return fail_job(self, absl::InvalidArgumentError(absl::StrCat(
                              "JobSpec.mode.shards: ", S, " shards for a shared vector of ", st.m,
                              " entries")));
  }
  st.bounds = ShardBounds(st.m, S);
  std::vector<shard_config> configs;
  for (int s = 0; s < S; ++s) configs.push_back(st.plan.shard(s, st.bounds));
  // Shards go to the nodes after the workers' (worker k on node k mod N).
  st.shard_node.clear();
  for (int s = 0; s < S; ++s) {
    st.shard_node.push_back(st.nodes.empty() ? -1 : place(st, st.workers.size(), s));
  }
  spawn_all<parameter_shard>(
      self, st.shard_node, shard_atom_v, std::move(configs),
      [self](shard_config c) {
        return spawn_parameter_shard(self->system(), c, caf::actor_cast<caf::actor>(self));
      },
      [self](std::vector<parameter_shard> shards) {
        self->state.shards = std::move(shards);
        connect_and_train(self);
      });
}

// A start-up request to worker k failed. On nodes, a worker that is gone is
// its node's loss (the start-up begins again without it); anything else,
// the job's.
auto start_up_error(self_ptr self, std::size_t k, uint64_t gen) {
  return [self, k, gen](caf::error& err) {
    auto& st = self->state;
    if (st.finished() || gen != st.generation) return;
    const int node = st.worker_node[k];
    if (node >= 0 && link_error(err)) return node_lost(self, node);
    fail_job(self, err);
  };
}

// SGD modes without a step0: every worker calibrates on a sample of its own
// partition (at once), the smallest is the job's step0, sent to the workers
// before the shards are made with it. A restart keeps the calibrated step.
void calibrate_and_wire(self_ptr self);

// SGD modes with sgd.feature_steps, once per job: the workers' column sums
// add up to the job's per-feature step factors (FeatureStepFactors), which
// every worker steps with (and calibrates with) and every shard gets for
// its range (JobPlan). A restart keeps them.
void feature_steps_then_calibrate(self_ptr self) {
  auto& st = self->state;
  const std::size_t K = st.workers.size();
  auto sums = std::make_shared<std::vector<double>>(2 * static_cast<std::size_t>(st.d), 0.0);
  auto remaining = std::make_shared<std::size_t>(K);
  const uint64_t gen = st.generation;
  for (std::size_t k = 0; k < K; ++k) {
    self->request(st.workers[k], kRequestTimeout, features_atom_v)
        .then(
            [self, k, sums, remaining, gen](const dvec& got) {
              auto& st = self->state;
              if (st.finished() || gen != st.generation) return;
              internal::with_values(self, st.fetcher, got, [self, k, sums, remaining, gen](dvec one) {
                auto& st = self->state;
                if (st.finished() || gen != st.generation) return;
                if (!one.has_values() || one.size() != sums->size()) {
                  return fail_job(self, absl::DataLossError(absl::StrCat(
                                            "column sums of worker ", k, ": ", one.size(),
                                            " values; expected ", sums->size())));
                }
                const auto v = one.view();
                for (std::size_t j = 0; j < v.size(); ++j) (*sums)[j] += v[j];
                if (--*remaining > 0) return;
                st.plan.feature_steps = FeatureStepFactors(*sums, st.n, st.spec().model);
                st.feature_steps_known = true;
                if (st.plan.feature_steps.empty()) return calibrate_and_wire(self);
                auto acks = std::make_shared<std::size_t>(st.workers.size());
                dvec f(st.plan.feature_steps);
                for (std::size_t w = 0; w < st.workers.size(); ++w) {
                  st.coordinator_bytes += f.bytes();
                  self->request(st.workers[w], kRequestTimeout, features_atom_v, f)
                      .then(
                          [self, acks, gen](int64_t) {
                            if (self->state.finished() || gen != self->state.generation) return;
                            if (--*acks == 0) calibrate_and_wire(self);
                          },
                          start_up_error(self, w, gen));
                }
              }, 2 * static_cast<std::size_t>(st.d));
            },
            start_up_error(self, k, gen));
  }
}

void calibrate_and_wire(self_ptr self) {
  auto& st = self->state;
  if (st.topo().coordinator_rounds()) return wire_and_train(self);
  if (st.spec().sgd.feature_steps && !st.feature_steps_known) {
    return feature_steps_then_calibrate(self);
  }
  if (st.spec().sgd.step0 > 0) return wire_and_train(self);
  const std::size_t K = st.workers.size();
  auto etas = std::make_shared<std::vector<double>>();
  const uint64_t gen = st.generation;
  for (std::size_t k = 0; k < K; ++k) {
    self->request(st.workers[k], kRequestTimeout, calibrate_atom_v)
        .then(
            [self, etas, gen, K](double eta) {
              auto& st = self->state;
              if (st.finished() || gen != st.generation) return;
              if (!(eta > 0) || !std::isfinite(eta)) {
                return fail_job(self, absl::DataLossError(
                                          absl::StrCat("a worker calibrated step0 = ", eta)));
              }
              etas->push_back(eta);
              if (etas->size() < K) return;
              std::sort(etas->begin(), etas->end());
              auto& sgd = st.plan.spec.sgd;
              // The smallest: a partition whose sample misleads its
              // calibration (heavy-tailed unscaled features, a few hundred
              // rows) finds steps that diverge on the whole data (569x30
              // tabular, K=4: 1e-6 to 2, the median 0.06 diverged).
              sgd.step0 = etas->front();
              sgd.step_decay = ResolveStepDecay(st.spec().model, sgd.step0, sgd.step_decay);
              for (auto& w : st.workers) self->send(w, calibrate_atom_v, sgd.step0, sgd.step_decay);
              append_event(st, "step_calibrated",
                           absl::StrCat("step0 = ", sgd.step0, " (calibrated: workers found ",
                                        etas->front(), " to ", etas->back(), ")"));
              wire_and_train(self);
            },
            start_up_error(self, k, gen));
  }
}

void init_workers(self_ptr self) {
  auto& st = self->state;
  enter(st, job_phase::kLoading);
  const int K = st.spec().mode.workers;
  using dims = std::pair<int64_t, int64_t>;
  auto replies = std::make_shared<std::vector<dims>>(K);
  auto remaining = std::make_shared<int>(K);
  const uint64_t gen = st.generation;
  for (int k = 0; k < K; ++k) {
    self->request(st.workers[k], kRequestTimeout, init_atom_v)
        .then(
            [self, k, replies, remaining, gen](int64_t n, int64_t d) {
              auto& st = self->state;
              if (st.finished() || gen != st.generation) return;
              (*replies)[k] = {n, d};
              if (--*remaining > 0) return;
              for (const auto& r : *replies) {
                if (r != replies->front()) {
                  return fail_job(self, absl::InvalidArgumentError(absl::StrCat(
                                            "workers disagree on the data's shape: ", r.first,
                                            "x", r.second, " vs ", replies->front().first, "x",
                                            replies->front().second)));
                }
              }
              st.n = replies->front().first;
              st.d = replies->front().second;
              st.plan.rows = st.n;
              st.m = st.plan.shared_length(st.n, st.d);
              if (st.m == 0) {  // (the shards' count would be blamed instead)
                return fail_job(self, absl::InvalidArgumentError(absl::StrCat(
                                          "the data has no features (every one of its ", st.n,
                                          " examples is empty): nothing to train")));
              }
              calibrate_and_wire(self);
            },
            start_up_error(self, k, gen));
  }
}

}  // namespace

void start_up(self_ptr self) {
  auto& st = self->state;
  enter(st, job_phase::kConnecting);
  const int K = st.spec().mode.workers;
  std::vector<worker_config> configs;
  for (int k = 0; k < K; ++k) {
    worker_config c = st.plan.worker(k);
    c.coordinator = caf::actor_cast<caf::actor>(self);
    c.hogwild = st.hog;
    c.interrupt = st.interrupt;
    configs.push_back(std::move(c));
  }
  st.worker_node.clear();
  for (int k = 0; k < K; ++k) st.worker_node.push_back(st.nodes.empty() ? -1 : place(st, 0, k));
  st.worker_lost.assign(K, false);
  st.being_replaced.assign(K, false);
  spawn_all<worker_actor>(
      self, st.worker_node, worker_atom_v, std::move(configs),
      [self](worker_config c) { return spawn_worker(self->system(), std::move(c)); },
      [self](std::vector<worker_actor> workers) {
        self->state.workers = std::move(workers);
        init_workers(self);
      });
}

namespace {

void start(self_ptr self) {
  auto& st = self->state;
  st.start = clock_type::now();
  const int K = st.spec().mode.workers;
  st.clocks.assign(K, 0);
  st.processed.assign(K, 0);
  st.worker_bytes.assign(K, 0);
  st.device_bytes.assign(K, 0);
  st.device_swaps.assign(K, 0);
  st.driver = st.topo().coordinator_rounds() ? &RoundDriver() : &FreeRunningDriver();
  if (!st.topo().uses_shards()) st.hog = std::make_shared<hogwild_model>();
  st.node_alive.assign(st.nodes.size(), true);
  start_up(self);
  // The workers hold what they need: let the host's in-memory dataset go
  // (a start-up on nodes, which may run again, never has one).
  st.plan.spec.data.dataset.reset();
  self->send(self, tick_atom_v);
}

void on_down(self_ptr self, const caf::down_msg& dm) {
  auto& st = self->state;
  if (st.finished()) return;
  std::string who;
  int node = -1;
  for (std::size_t k = 0; k < st.workers.size(); ++k) {
    if (dm.source == st.workers[k].address()) {
      who = "worker " + std::to_string(k);
      node = st.worker_node.empty() ? -1 : st.worker_node[k];
      if (!st.worker_lost.empty()) st.worker_lost[k] = true;
    }
  }
  for (std::size_t s = 0; s < st.shards.size(); ++s) {
    if (dm.source == st.shards[s].address()) {
      who = "parameter shard " + std::to_string(s);
      node = s < st.shard_node.size() ? st.shard_node[s] : -1;
    }
  }
  if (who.empty()) return;  // an actor already replaced by a recovery
  // In-process actors only stop on a bug: the job fails with what
  // happened. On nodes, whatever the phase, it is the node's loss.
  if (node < 0) {
    return fail_job(self, absl::UnavailableError(absl::StrCat(
                              who, " stopped: ", self->system().render(dm.reason))));
  }
  node_lost(self, node);
}

void on_tick(self_ptr self) {
  auto& st = self->state;
  if (st.finished()) return;
  StopReason why;
  if (external_stop(st, &why)) {
    if (st.phase == job_phase::kConnecting || st.phase == job_phase::kLoading) {
      return fail_job(self, absl::CancelledError(
                                why == StopReason::kCancelled
                                    ? "job cancelled before training started"
                                    : "wall-time budget spent before training started"));
    }
    st.driver->stop(self, why);
  }
  ping_nodes(self);
  self->delayed_send(self, kTick, tick_atom_v);
}

void on_report(self_ptr self, const worker_report& r) {
  auto& st = self->state;
  if (st.finished()) return;
  // A report carrying an error: a worker's failure after it replied (a
  // pushed delta refused), or bytes that did not decode.
  if (!r.wire_error.empty()) return fail_job(self, absl::InternalError(r.wire_error));
  if (r.worker < 0 || r.worker >= static_cast<int32_t>(st.workers.size())) {
    return fail_job(self, absl::DataLossError(
                              absl::StrCat("bad worker report: worker ", r.worker)));
  }
  absorb(st, r);
  StopReason why;
  if (external_stop(st, &why)) return st.driver->stop(self, why);
  maybe_evaluate(self);
}

coordinator_actor::behavior_type coordinator_impl(self_ptr self, JobSpec spec,
                                                  std::shared_ptr<detail::job_state> job,
                                                  std::vector<node_actor> nodes) {
  auto& st = self->state;
  st.plan = ResolvePlan(std::move(spec));
  if (st.spec().cocoa.auto_local_epochs && st.topo().coordinator_rounds()) {
    st.auto_h.tuner.emplace(st.spec().cocoa.local_epochs);
  }
  st.nodes = std::move(nodes);
  st.job = std::move(job);
  st.interrupt = st.job->interrupt;
  self->set_down_handler([self](caf::down_msg& dm) { on_down(self, dm); });
  return {
      [self](start_atom) { start(self); },
      [self](recover_atom) { recover(self); },
      [self](round_atom, int64_t begin, int64_t round, const dvec& part) {
        // The shard that sent it (a fetch's answer comes from the fetcher).
        caf::actor_addr from = caf::actor_cast<caf::actor_addr>(self->current_sender());
        // Fetch only from a current shard, and only as many values as its
        // range holds (anything else is dropped by cocoa_range anyway).
        const auto& st = self->state;
        std::size_t s = 0;
        while (s < st.shards.size() && (!from || st.shards[s].address() != from)) ++s;
        if (s == st.shards.size() && part.ref) return;
        const std::size_t want = s < st.shards.size()
                                     ? static_cast<std::size_t>(st.bounds[s + 1] - st.bounds[s])
                                     : internal::kAnyCount;
        with_values(
            self, self->state.fetcher, part,
            [self, from, begin, round](dvec v) { cocoa_range(self, from, begin, round, v); },
            want);
      },
      [self](tick_atom) { on_tick(self); },
      [self](const worker_report& r) { on_report(self, r); },
  };
}

}  // namespace
}  // namespace internal

coordinator_actor spawn_coordinator(caf::actor_system& sys, JobSpec spec,
                                    std::shared_ptr<detail::job_state> job,
                                    std::vector<node_actor> nodes) {
  return sys.spawn(internal::coordinator_impl, std::move(spec), std::move(job), std::move(nodes));
}

}  // namespace dml::actors
