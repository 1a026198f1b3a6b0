// Node loss, in every phase of a job on nodes (kill -9, a crash, a dropped
// link, or a node silent for node_silence_seconds):
//   connecting, loading  the start-up begins again on the nodes left: every
//                        actor spawned so far is stopped, and workers and
//                        shards are dealt over the live nodes anew
//   training             a topology that continues_after_worker_loss() and
//                        had no shard on the node replaces the node's
//                        workers (they reload their partitions) while the
//                        shards and the other workers run on; otherwise
//                        every worker of the node is replaced, every shard
//                        rebuilt, and the job restarts from its last
//                        checkpoint (the zero state when there is none)
//   stopping, recovering the restart from the last checkpoint (the stop
//                        rule is met again from there)
// Requests of an older generation are ignored when they answer. After
// kMaxRecoveries losses, or with no node left, the job fails.
#include <algorithm>

#include <caf/exit_reason.hpp>
#include <caf/sec.hpp>

#include "dml/actors/internal/coordinator_state.hpp"
#include "dml/actors/wire.hpp"
#include "dml/util/status.hpp"

namespace dml::actors::internal {
namespace {

constexpr int kMaxRecoveries = 8;
// Liveness of the nodes, once a second: a node that does not answer a
// hello within spec.recovery.node_silence_seconds is treated as lost. A killed node
// closes its sockets and is noticed at once; this catches a hung one
// (SIGSTOP, a stuck machine), which CAF 0.17 never reports without
// middleman heartbeats (off: they dropped healthy links, see network.cpp).
constexpr auto kPingEvery = std::chrono::seconds(1);

bool starting(const coord_state& st) {
  return st.phase == job_phase::kConnecting || st.phase == job_phase::kLoading;
}

// Whether the job can go on through the loss of node n without a restart.
bool continuable(const coord_state& st, int n) {
  // SAGA: a replacement's memories are gone while the shards' mean still
  // holds them, so the job restarts with every memory empty.
  if (st.phase != job_phase::kTraining || !st.topo().continues_after_worker_loss() ||
      st.spec().sgd.saga) {
    return false;
  }
  return std::find(st.shard_node.begin(), st.shard_node.end(), n) == st.shard_node.end();
}

// The lost nodes, as "1, 2" (for the job's event).
std::string lost_node_list(const coord_state& st) {
  std::string out;
  for (std::size_t n = 0; n < st.node_alive.size(); ++n) {
    if (!st.node_alive[n]) absl::StrAppend(&out, out.empty() ? "" : ", ", n);
  }
  return out;
}

void recovery_resume(self_ptr self) {
  auto& st = self->state;
  const auto& c = st.ckpt;
  connect_workers(self);
  st.round = c.round;
  // A rounds worker counts its own steps (a new one from 0, a survivor on):
  // its first reply after this sets what is added to its count (without it a
  // resumed job's epochs stood still, then counted the resumed rounds alone).
  if (st.topo().coordinator_rounds()) {
    st.resumed_counts = c.processed;
    st.processed_base.assign(c.processed.size(), 0);
    st.base_pending.assign(c.processed.size(), true);
  }
  st.epochs = c.epochs;
  st.processed = c.processed;
  st.clocks.assign(st.workers.size(), c.clock);
  if (st.phase == job_phase::kRecovering) enter(st, job_phase::kTraining);
  st.driver->resume(self);
}

void recovery_shards(self_ptr self, std::vector<int> alive) {
  auto& st = self->state;
  const int S = static_cast<int>(st.bounds.size()) - 1;
  st.shards.assign(S, parameter_shard{});
  st.shard_node.assign(S, -1);
  auto remaining = std::make_shared<int>(S);
  for (int s = 0; s < S; ++s) {
    const int n = alive[(st.workers.size() + s) % alive.size()];
    spawn_on<parameter_shard>(self, n, shard_atom_v, st.plan.shard(s, st.bounds), "recovery: ",
                              [self, s, n, remaining](parameter_shard h) {
                                auto& st = self->state;
                                st.shards[s] = h;
                                st.shard_node[s] = n;
                                if (--*remaining == 0) init_shards_then_resume(self);
                              });
  }
}

// Replaces worker k (lost) by a new one on node n: the old one is killed
// (a hung node may come back, and it must not train on), the new one loads
// the same partition there; `then()` runs once it has, with the data's
// shape checked.
template <class Then>
void replace_worker(self_ptr self, int k, int n, Then then) {
  auto& st = self->state;
  self->demonitor(st.workers[k].address());
  self->send_exit(st.workers[k], caf::exit_reason::kill);
  const uint64_t gen = st.generation;
  const worker_spec spec = st.plan.worker(k);  // what crosses: no in-process parts
  spawn_on<worker_actor>(self, n, worker_atom_v, spec, "recovery: ",
                         [self, k, n, gen, then](worker_actor h) {
    auto& st = self->state;
    st.workers[k] = h;
    st.worker_node[k] = n;
    st.worker_lost[k] = false;
    self->request(h, kRequestTimeout, init_atom_v)
        .then(
            [self, k, gen, then](int64_t rows, int64_t cols) {
              auto& st = self->state;
              if (st.finished() || gen != st.generation) return;
              if (rows != st.n || cols != st.d) {
                return fail_job(self, absl::DataLossError(absl::StrCat(
                                          "replacement of worker ", k, " read a ", rows, "x",
                                          cols, " dataset; the job's is ", st.n, "x", st.d)));
              }
              then();
            },
            [self, gen, n](caf::error& err) {
              if (gen != self->state.generation) return;
              if (link_error(err)) return node_lost(self, n);
              fail_job(self, err);
            });
  });
}

// The continuing topologies: every worker of a lost node is replaced on a
// surviving node (it reloads that partition from the node's disk) and
// runs on from its last reported clock; the shards and the other workers
// never stop.
void continue_after_loss(self_ptr self, const std::vector<int>& alive) {
  auto& st = self->state;
  std::vector<int> lost;
  for (std::size_t k = 0; k < st.workers.size(); ++k) {
    if (worker_gone(st, k) && !st.being_replaced[k]) lost.push_back(static_cast<int>(k));
  }
  std::string moved;
  for (int k : lost) {
    absl::StrAppend(&moved, moved.empty() ? "" : ", ", "worker ", k, " to node ",
                    alive[k % alive.size()], " from clock ", st.clocks[k]);
  }
  append_event(st, "node_lost", absl::StrCat("lost node(s) ", lost_node_list(st), ": ",
                                lost.empty() ? "no worker there" : moved,
                                "; the shards and the other workers ran on"));
  for (int k : lost) {
    st.being_replaced[k] = true;
    replace_worker(self, k, alive[k % alive.size()], [self, k] {
      auto& st = self->state;
      connect_worker(self, static_cast<std::size_t>(k));
      st.being_replaced[k] = false;
      // The lost worker's run never answers; its replacement's does.
      if (st.phase == job_phase::kStopping) {
        if (--st.running == 0) sgd_all_stopped(self);
        return;
      }
      sgd_run_worker(self, static_cast<std::size_t>(k), st.clocks[k]);
    });
  }
}

// A loss before training: everything spawned so far goes, and the
// start-up runs again on the nodes left (workers then reload their
// partitions there).
void restart_start_up(self_ptr self, const std::vector<int>& alive) {
  auto& st = self->state;
  append_event(st, "start_up_restarted", absl::StrCat("lost node(s) ", lost_node_list(st), " while ",
                                AsAbsl(PhaseName(st.phase)), "; the start-up began again on ",
                                alive.size(), " node(s)"));
  for (auto& w : st.workers) {
    self->demonitor(w.address());
    self->send_exit(w, caf::exit_reason::kill);
  }
  for (auto& s : st.shards) {
    self->demonitor(s.address());
    self->send_exit(s, caf::exit_reason::kill);
  }
  st.workers.clear();
  st.shards.clear();
  st.shard_node.clear();
  start_up(self);
}

}  // namespace

// Worker k went down, or its node is lost (whether or not its own down
// message has arrived yet).
bool worker_gone(const coord_state& st, std::size_t k) {
  if (!st.worker_lost.empty() && st.worker_lost[k]) return true;
  return !st.worker_node.empty() && st.worker_node[k] >= 0 && !st.node_alive[st.worker_node[k]];
}

// False while a worker is lost and not yet replaced (an evaluation would
// wait for its answer forever).
bool all_workers_reachable(const coord_state& st) {
  for (std::size_t k = 0; k < st.workers.size(); ++k) {
    if (!st.being_replaced.empty() && st.being_replaced[k]) return false;
    if (worker_gone(st, k)) return false;
  }
  return true;
}

// Node n is gone (its actors went down, or it stopped answering): what is
// in flight of the interrupted phase is voided, and the recovery runs
// shortly (other actors of the same node go down within milliseconds: one
// recovery for all of them).
void node_lost(self_ptr self, int n) {
  auto& st = self->state;
  if (st.finished() || n < 0 || !st.node_alive[n]) return;
  st.node_alive[n] = false;
  if (!st.topo().uses_shards()) {
    // hogwild's model lives in a key-value group whose members (one per
    // node with workers) hold the only copy of their keys: nothing to
    // restart from. A node without workers of this job held nothing of it.
    if (std::find(st.worker_node.begin(), st.worker_node.end(), n) == st.worker_node.end()) return;
    return fail_job(self, absl::UnavailableError(absl::StrCat(
                              "lost node ", n, " (", st.spec().cluster.nodes[static_cast<std::size_t>(n)],
                              "): hogwild on nodes does not survive a node loss (its workers ",
                              st.kv_hosts.empty() ? "were there"
                                                  : "and their key-value member, with part of "
                                                    "the model, were there",
                              ")")));
  }
  if (starting(st)) {
    ++st.generation;
  } else if (continuable(st, n)) {
    // An evaluation in flight may wait on a lost worker: drop it (the next
    // one runs once the replacements are in).
    ++st.fanouts;
    st.evaluating = false;
  } else {
    enter(st, job_phase::kRecovering);
    ++st.generation;
  }
  if (!st.recovery_scheduled) {
    st.recovery_scheduled = true;
    self->delayed_send(self, std::chrono::milliseconds(50), recover_atom_v);
  }
}

caf::timespan node_silence(const coord_state& st) {
  return std::chrono::duration_cast<caf::timespan>(
      std::chrono::duration<double>(st.spec().recovery.node_silence_seconds));
}

void ping_nodes(self_ptr self) {
  auto& st = self->state;
  if (st.nodes.empty() || st.finished()) return;
  if (clock_type::now() - st.last_ping < kPingEvery) return;
  st.last_ping = clock_type::now();
  st.ping_outstanding.resize(st.nodes.size(), false);
  for (std::size_t n = 0; n < st.nodes.size(); ++n) {
    if (!st.node_alive[n] || st.ping_outstanding[n]) continue;
    st.ping_outstanding[n] = true;
    self->request(st.nodes[n], node_silence(st), hello_atom_v)
        .then(
            [self, n](const std::string&, int64_t, int32_t) {
              self->state.ping_outstanding[n] = false;
            },
            [self, n](caf::error&) {
              auto& st = self->state;
              st.ping_outstanding[n] = false;
              if (st.finished() || !st.node_alive[n]) return;
              append_event(st, "node_silent", absl::StrCat("node ", n, " (", st.spec().cluster.nodes[n],
                                            ") silent for ", st.spec().recovery.node_silence_seconds,
                                            " s"));
              node_lost(self, static_cast<int>(n));
            });
  }
}

// Loads every shard's range and clock from the checkpoint, then resumes.
void init_shards_then_resume(self_ptr self) {
  auto& st = self->state;
  const uint64_t gen = st.generation;
  auto remaining = std::make_shared<std::size_t>(st.shards.size());
  const auto& c = st.ckpt;
  const int64_t shard_clock = st.topo().shard_restore_clock(c.clock, c.round, st.spec().sgd.tau);
  for (std::size_t s = 0; s < st.shards.size(); ++s) {
    dvec range(std::vector<double>(c.shared.begin() + st.bounds[s],
                                   c.shared.begin() + st.bounds[s + 1]));
    self->request(st.shards[s], kRequestTimeout, init_atom_v, range, shard_clock)
        .then(
            [self, remaining, gen](int64_t) {
              if (self->state.finished() || gen != self->state.generation) return;
              if (--*remaining == 0) recovery_resume(self);
            },
            [self, gen](caf::error& err) {
              if (gen == self->state.generation) fail_job(self, err);
            });
  }
}

void recover(self_ptr self) {
  auto& st = self->state;
  st.recovery_scheduled = false;
  if (st.finished()) return;
  const std::vector<int> alive = alive_nodes(st);
  if (alive.empty()) return fail_job(self, absl::UnavailableError("every node of the job is lost"));
  if (++st.recoveries > kMaxRecoveries) {
    return fail_job(self, absl::UnavailableError(absl::StrCat(
                              "gave up after ", kMaxRecoveries, " recoveries from lost nodes")));
  }
  if (starting(st)) return restart_start_up(self, alive);
  if (st.phase != job_phase::kRecovering) return continue_after_loss(self, alive);
  std::fill(st.being_replaced.begin(), st.being_replaced.end(), false);
  ++st.generation;
  st.evaluations_since_best = 0;  // the restart's evaluations start the window again
  st.window_best_primal = std::numeric_limits<double>::infinity();
  st.evaluating = false;
  std::vector<int> lost_workers;
  for (std::size_t k = 0; k < st.workers.size(); ++k) {
    if (worker_gone(st, k)) lost_workers.push_back(static_cast<int>(k));
  }
  // st.events may already say why (a silent node).
  append_event(st, "restarted", absl::StrCat("lost node(s) ", lost_node_list(st), " (", lost_workers.size(),
                                " worker(s) replaced, all ", st.shards.size(),
                                " shards rebuilt); restarted from the checkpoint of round ",
                                st.ckpt.round,
                                st.topo().coordinator_rounds()
                                    ? ""
                                    : absl::StrCat(" (clock ", st.ckpt.clock, ")")));
  for (auto& s : st.shards) {
    self->demonitor(s.address());
    self->send_exit(s, caf::exit_reason::user_shutdown);
  }
  st.shards.clear();
  if (lost_workers.empty()) return recovery_shards(self, alive);
  auto remaining = std::make_shared<std::size_t>(lost_workers.size());
  for (int k : lost_workers) {
    replace_worker(self, k, alive[k % alive.size()], [self, remaining, alive] {
      if (--*remaining == 0) recovery_shards(self, alive);
    });
  }
}

}  // namespace dml::actors::internal
