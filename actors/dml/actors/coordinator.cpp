#include "dml/actors/coordinator.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/system_messages.hpp>
#include <caf/exit_reason.hpp>
#include <caf/result.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "absl/strings/str_cat.h"
#include "dml/actors/internal/job_state.hpp"
#include "dml/actors/node.hpp"
#include "dml/actors/parameter_shard.hpp"
#include "dml/actors/wire.hpp"
#include "dml/actors/worker.hpp"
#include "dml/objective/evaluate.hpp"
#include "dml/util/status.hpp"

namespace dml::actors {
namespace {

constexpr auto kRequestTimeout = std::chrono::minutes(10);
// Polls the cancel flags and the wall-time budget. Every tick wakes CAF's
// clock thread and a scheduler thread; at 5 ms those wake-ups preempted the
// solving threads several times per 10 ms round (the actor-overhead bench
// measured ~5 involuntary context switches per round). 20 ms keeps cancel
// well inside its 200 ms.
constexpr auto kTick = std::chrono::milliseconds(20);
// A node answers a spawn request at once; only a dead or hung node is slower.
constexpr auto kSpawnTimeout = std::chrono::seconds(30);
constexpr double kInf = std::numeric_limits<double>::infinity();

using clock_type = std::chrono::steady_clock;

struct coord_state {
  job_spec spec;
  std::shared_ptr<detail::job_state> job;
  std::vector<node_actor> nodes;  // empty: everything runs in this process
  std::vector<worker_actor> workers;
  std::vector<parameter_shard> shards;
  std::vector<int64_t> bounds;
  std::shared_ptr<hogwild_model> hog;
  // The job's interrupt flag (job_state): set on cancel by the host, and
  // here on other outside stops; in-process workers' cocoa solves end early.
  std::shared_ptr<std::atomic<bool>> interrupt;
  bool nodes_interrupted = false;
  bool draining = false;  // cocoa: stopped from outside, collecting the cut round
  int64_t n = 0, d = 0, m = 0;
  bool primal_cocoa = false;
  clock_type::time_point start;
  bool finished = false;
  bool started_training = false;
  // Progress.
  int round = 0;
  double epochs = 0.0;
  int64_t coordinator_bytes = 0;
  std::vector<int64_t> clocks, processed, worker_bytes;
  std::vector<job_progress> history;
  job_progress last;
  // SGD modes.
  int running = 0;
  bool halting = false;
  bool evaluating = false;
  double next_eval = 0.0;
  StopReason reason = StopReason::kMaxEpochs;
  std::shared_ptr<std::vector<double>> target_model;  // the evaluation that met target_primal
  job_progress target_progress;
  // cocoa.
  dvec shared;  // the shared vector of the current round (one buffer for all)
  struct round_pipe {
    int64_t round = -1;
    bool go_on = false;       // the round's certificate said continue
    std::size_t parts = 0;    // ranges of the next shared vector received
    std::shared_ptr<std::vector<double>> next;  // assembled from S > 1 ranges
    dvec single;              // S = 1: the one range, uncopied
  } pipe;
  // Recovery (jobs on nodes). Every reply handler checks the generation it
  // was sent in: after a recovery, answers to older requests are dropped.
  uint64_t generation = 0;
  // Fan-outs to the workers (evaluations) check this too: a worker
  // replaced while the others keep running voids the fan-outs in flight
  // (the lost one would never answer), not the workers' runs.
  uint64_t fanouts = 0;
  bool full_recovery = false;  // a loss that needs the restart from a checkpoint
  std::vector<worker_config> worker_specs;  // to respawn a lost worker as it was
  std::vector<int> worker_node, shard_node;  // hosting node of each actor
  std::vector<bool> node_alive;
  std::vector<bool> worker_lost;
  std::vector<bool> being_replaced;
  bool recovery_scheduled = false;
  clock_type::time_point last_ping;
  std::vector<bool> ping_outstanding;
  int recoveries = 0;
  std::string event;  // recorded with the next progress entry
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
    if (job && !finished) {
      job->finish(absl::InternalError("the job's coordinator stopped before the job ended"));
    }
  }

  double seconds() const {
    return std::chrono::duration<double>(clock_type::now() - start).count();
  }
  int64_t bytes() const {
    int64_t b = coordinator_bytes;
    for (int64_t x : worker_bytes) b += x;
    return b;
  }
};

using self_ptr = coordinator_actor::stateful_pointer<coord_state>;

// Timeout of the requests a job makes to its workers and shards while it
// trains (every round, and on a restore). A finite one costs two events on
// CAF's clock thread (set, then cancel on the reply), and those wake-ups
// preempt the threads that solve. In a process none is needed: a
// worker or shard that dies is reported by its monitor and fails the job.
// On nodes the pings catch a hung node; the timeout stays as a last guard.
caf::duration reply_timeout(const coord_state& st) {
  return st.nodes.empty() ? caf::duration{caf::infinite} : caf::duration{kRequestTimeout};
}

void interrupt_solves(self_ptr self);

void stop_children(self_ptr self) {
  auto& st = self->state;
  // A cocoa job decides on the certificate at s_r while its workers already
  // solve from s_r (pipelined): once the job is over nobody reads that
  // solve, so it ends now instead of holding a scheduler thread (or a
  // node's) for up to a whole round.
  if (st.spec.mode == Mode::kCocoa && st.interrupt) interrupt_solves(self);
  for (auto& w : st.workers) self->send_exit(w, caf::exit_reason::user_shutdown);
  for (auto& s : st.shards) self->send_exit(s, caf::exit_reason::user_shutdown);
}

void fail_job(self_ptr self, absl::Status status) {
  auto& st = self->state;
  if (st.finished) return;
  st.finished = true;
  st.job->finish(std::move(status));
  stop_children(self);
  self->quit();
}

void fail_job(self_ptr self, const caf::error& err) {
  fail_job(self, absl::InternalError(self->system().render(err)));
}

void finish_job(self_ptr self, std::vector<double> w, int64_t max_granted_staleness) {
  auto& st = self->state;
  if (st.finished) return;
  st.finished = true;
  job_result r;
  r.model = st.spec.model;
  r.w = std::move(w);
  r.primal = st.last.primal;
  r.dual = st.last.dual;
  r.gap = st.last.gap;
  r.rounds = st.round;
  r.epochs = st.epochs;
  r.seconds = st.seconds();
  r.reason = st.reason;
  r.bytes_exchanged = st.bytes();
  r.history = st.history;
  r.max_granted_staleness = max_granted_staleness;
  st.job->finish(std::move(r));
  stop_children(self);
  self->quit();
}

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
            [self, k, replies, remaining, done, gen, fan](Reply& r) {
              auto& st = self->state;
              if (st.finished || gen != st.generation || fan != st.fanouts) return;
              if (!r.wire_error.empty()) {
                return fail_job(self, absl::DataLossError(absl::StrCat(
                                          "reply of worker ", k, ": ", r.wire_error)));
              }
              (*replies)[k] = std::move(r);
              if (--*remaining == 0) done(*replies);
            },
            [self, gen, fan](caf::error& err) {
              auto& st = self->state;
              if (gen == st.generation && fan == st.fanouts) fail_job(self, err);
            });
  }
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

// Reads the whole shared vector from the shards, in key order.
template <class Done>
void read_shards(self_ptr self, Done done) {
  auto& st = self->state;
  const uint64_t gen = st.generation;
  if (st.shards.size() == 1) {  // the shard's own snapshot, uncopied
    self->request(st.shards[0], reply_timeout(st), read_atom_v)
        .then(
            [self, done, gen](const dvec& part) {
              auto& st = self->state;
              if (st.finished || gen != st.generation) return;
              if (auto s = checked_part(st, 0, part); !s.ok()) return fail_job(self, s);
              st.coordinator_bytes += part.bytes();
              done(part);
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
            [self, s, out, remaining, done, gen](const dvec& part) {
              auto& st = self->state;
              if (st.finished || gen != st.generation) return;
              if (auto bad = checked_part(st, s, part); !bad.ok()) return fail_job(self, bad);
              std::copy(part.view().begin(), part.view().end(), out->begin() + st.bounds[s]);
              st.coordinator_bytes += part.bytes();
              if (--*remaining == 0) done(dvec(std::move(*out)));
            },
            [self, gen](caf::error& err) {
              if (gen == self->state.generation) fail_job(self, err);
            });
  }
}

// The ssp statistic: the largest lead any shard granted.
template <class Done>
void shard_staleness(self_ptr self, Done done) {
  auto& st = self->state;
  if (st.shards.empty()) return done(int64_t{0});
  auto best = std::make_shared<int64_t>(0);
  auto remaining = std::make_shared<std::size_t>(st.shards.size());
  const uint64_t gen = st.generation;
  for (auto& s : st.shards) {
    self->request(s, reply_timeout(st), stats_atom_v)
        .then(
            [self, best, remaining, done, gen](const shard_stats& stats) {
              if (self->state.finished || gen != self->state.generation) return;
              if (auto bad = WireErrorOf(stats); !bad.ok()) return fail_job(self, bad);
              *best = std::max(*best, stats.max_granted_staleness);
              if (--*remaining == 0) done(*best);
            },
            [self, gen](caf::error& err) {
              if (gen == self->state.generation) fail_job(self, err);
            });
  }
}

void record(self_ptr self, double primal, double dual, double gap) {
  auto& st = self->state;
  job_progress p;
  p.round = st.round;
  p.seconds = st.seconds();
  p.epochs = st.epochs;
  p.primal = primal;
  p.dual = dual;
  p.gap = gap;
  p.bytes_exchanged = st.bytes();
  p.staleness.assign(st.workers.size(), 0);
  if (!st.clocks.empty()) {
    const int64_t slowest = *std::min_element(st.clocks.begin(), st.clocks.end());
    for (std::size_t k = 0; k < st.clocks.size(); ++k) p.staleness[k] = st.clocks[k] - slowest;
  }
  p.event = std::move(st.event);
  st.event.clear();
  st.last = p;
  st.history.push_back(p);
  st.job->publish(p);
}

// Folds a worker's report into the job's progress (reports only grow; a
// late one never moves a worker back). An epoch is n examples, or d
// coordinates for primal cocoa.
void absorb(coord_state& st, const worker_report& r) {
  st.clocks[r.worker] = std::max(st.clocks[r.worker], r.clock);
  st.processed[r.worker] = std::max(st.processed[r.worker], r.processed);
  st.worker_bytes[r.worker] = std::max(st.worker_bytes[r.worker], r.bytes);
  int64_t total = 0;
  for (int64_t p : st.processed) total += p;
  st.epochs = static_cast<double>(total) / static_cast<double>(st.primal_cocoa ? st.d : st.n);
}

// Cancel flag and wall-time budget; the first rule that holds, if any.
bool external_stop(coord_state& st, StopReason* why) {
  if (st.job->cancel.load() ||
      (st.spec.stop.cancel != nullptr && st.spec.stop.cancel->load())) {
    *why = StopReason::kCancelled;
    return true;
  }
  if (st.seconds() >= st.spec.stop.max_seconds) {
    *why = StopReason::kTimeBudget;
    return true;
  }
  return false;
}

// Writes the current checkpoint to job_spec.checkpoint_path, if set. A
// failed write is reported in the metrics stream; training goes on.
void save_checkpoint(self_ptr self) {
  auto& st = self->state;
  if (st.spec.checkpoint_path.empty()) return;
  job_checkpoint c;
  c.mode = st.spec.mode;
  c.model = st.spec.model;
  c.round = st.ckpt.round;
  c.epochs = st.ckpt.epochs;
  c.seconds = st.seconds();
  c.clock = st.ckpt.clock;
  c.bytes = st.bytes();
  c.rows = st.n;
  c.cols = st.d;
  c.seed = st.spec.seed;
  c.workers = static_cast<int32_t>(st.workers.size());
  c.shared = st.ckpt.shared;
  c.coords = st.ckpt.coords;
  c.processed = st.ckpt.processed;
  c.history = st.history;
  if (auto s = WriteCheckpointFile(st.spec.checkpoint_path, c); !s.ok()) {
    st.event = absl::StrCat("checkpoint not written: ", s.message());
  }
}

// cocoa: ends the workers' local solves early (in-process through the
// shared flag, on nodes through each node's flag for this job). Once.
void interrupt_solves(self_ptr self) {
  auto& st = self->state;
  st.interrupt->store(true);
  if (st.nodes_interrupted) return;
  st.nodes_interrupted = true;
  const auto me = caf::actor_cast<caf::actor>(self);
  for (auto& n : st.nodes) self->send(n, halt_atom_v, me);
}

// ---------------------------------------------------------------- cocoa
// Round r, pipelined: the coordinator sends every worker round(r, s_r); each
// answers at once with its share of the certificate at s_r, then solves
// and pushes its delta; each shard, once all K deltas of round r are in,
// sends its range of s_{r+1}. The coordinator decides on the certificate
// while the workers solve: if it stops, the model is s_r (and, for primal
// models, the coordinates of round r, which workers keep); otherwise round
// r + 1 starts as soon as every range of s_{r+1} is in. Three message hops
// per round on the critical path (round, push, range).

void cocoa_round(self_ptr self);

void cocoa_finish(self_ptr self) {
  auto& st = self->state;
  if (!st.primal_cocoa) return finish_job(self, st.shared.to_vector(), 0);
  // Primal models: w is the workers' own coordinates of this round, in
  // column order. The workers are solving from the s_r just certified;
  // that solve is never read (they keep round r's starting coordinates
  // apart), so it ends now rather than delaying the coordinates (for
  // dual models, finish_job's stop_children ends it).
  interrupt_solves(self);
  ask_workers<dvec>(self, [self](std::vector<dvec>& parts) {
    std::vector<double> w;
    for (const auto& p : parts) w.insert(w.end(), p.view().begin(), p.view().end());
    finish_job(self, std::move(w), 0);
  }, coords_atom_v, int64_t{st.round});
}

bool checkpointing(const coord_state& st) {
  return st.spec.checkpoint_every > 0 && (!st.nodes.empty() || !st.spec.checkpoint_path.empty());
}

// Every checkpoint_every rounds (jobs on nodes, or with a checkpoint
// file): the shared vector of this round and every worker's coordinates,
// kept to restore from after a loss (and written to the file), then `then`.
template <class Then>
void cocoa_checkpoint(self_ptr self, Then then) {
  auto& st = self->state;
  if (!checkpointing(st) || st.round % st.spec.checkpoint_every != 0) return then();
  ask_workers<dvec>(self, [self, then](std::vector<dvec>& parts) {
    auto& st = self->state;
    auto& c = st.ckpt;
    c.round = st.round;
    c.epochs = st.epochs;
    c.processed = st.processed;
    c.clocks = st.clocks;
    c.shared = st.shared.to_vector();
    c.coords.clear();
    for (auto& p : parts) {
      st.coordinator_bytes += p.bytes();
      c.coords.push_back(p.to_vector());
    }
    c.clock = 0;
    save_checkpoint(self);
    then();
  }, coords_atom_v, int64_t{st.round});
}

// Starts round r + 1 once round r's certificate said go on and every range
// of s_{r+1} has arrived.
void cocoa_maybe_next(self_ptr self) {
  auto& st = self->state;
  auto& p = st.pipe;
  if (!p.go_on || p.parts < st.shards.size()) return;
  st.shared = st.shards.size() == 1 ? std::move(p.single) : dvec(std::move(*p.next));
  ++st.round;
  cocoa_round(self);
}

// A shard's range of the next shared vector (see parameter_shard).
void cocoa_range(self_ptr self, int64_t begin, int64_t round, const dvec& part) {
  auto& st = self->state;
  if (st.finished || st.spec.mode != Mode::kCocoa) return;
  // Only the current shards count: a replaced one may still be talking.
  const auto& sender = self->current_sender();
  std::size_t s = 0;
  while (s < st.shards.size() && (!sender || st.shards[s].address() != sender->address())) ++s;
  if (s == st.shards.size() || round != st.pipe.round) return;
  if (begin != st.bounds[s]) {
    return fail_job(self, absl::DataLossError(absl::StrCat(
                              "parameter shard ", s, " announced the range starting at ", begin,
                              "; it owns the one starting at ", st.bounds[s])));
  }
  if (auto bad = checked_part(st, s, part); !bad.ok()) return fail_job(self, bad);
  st.coordinator_bytes += part.bytes();
  if (st.shards.size() == 1) {
    st.pipe.single = part;
  } else {
    std::copy(part.view().begin(), part.view().end(), st.pipe.next->begin() + st.bounds[s]);
  }
  ++st.pipe.parts;
  cocoa_maybe_next(self);
}

// Round r's certificate from the workers' shares: record it, then stop or
// let the round go on.
void cocoa_decide(self_ptr self, const std::vector<block_sums>& sums) {
  auto& st = self->state;
  block_sums total;
  for (const auto& b : sums) {
    total.loss_sum += b.loss_sum;
    total.gap_sum += b.gap_sum;
    total.reg_sum += b.reg_sum;
  }
  const double inv_n = 1.0 / static_cast<double>(st.n);
  double primal, gap;
  if (st.primal_cocoa) {
    primal = total.loss_sum * inv_n + total.reg_sum;
    gap = std::max(0.0, total.gap_sum);
  } else {
    primal = total.loss_sum * inv_n + RegularizerValue(st.spec.model, *st.shared.as_vector());
    gap = std::max(0.0, total.gap_sum * inv_n);
  }
  record(self, primal, primal - gap, gap);
  const StopRule& stop = st.spec.stop;
  StopReason why;
  if (gap <= std::max(stop.gap_abs, stop.gap_rel * std::abs(primal))) {
    st.reason = StopReason::kConverged;
  } else if (stop.target_primal && primal <= *stop.target_primal) {
    st.reason = StopReason::kTargetReached;
  } else if (st.epochs >= stop.max_epochs) {
    st.reason = StopReason::kMaxEpochs;
  } else if (external_stop(st, &why)) {
    st.reason = why;
    if (!st.draining) {
      // The workers are already solving this round: cut it short and take
      // its result, certified, as the model (one more certificate).
      st.draining = true;
      interrupt_solves(self);
      st.pipe.go_on = true;
      return cocoa_maybe_next(self);
    }
  } else {
    st.pipe.go_on = true;
    return cocoa_maybe_next(self);
  }
  cocoa_finish(self);
}

void cocoa_send_round(self_ptr self) {
  auto& st = self->state;
  auto& p = st.pipe;
  p = coord_state::round_pipe{};
  p.round = st.round;
  if (st.shards.size() > 1) p.next = std::make_shared<std::vector<double>>(st.m);
  const dvec s = st.shared;
  st.coordinator_bytes += static_cast<int64_t>(st.workers.size()) * s.bytes();
  auto sums = std::make_shared<std::vector<block_sums>>(st.workers.size());
  auto remaining = std::make_shared<std::size_t>(st.workers.size());
  const uint64_t gen = st.generation;
  const int64_t r = st.round;
  for (std::size_t k = 0; k < st.workers.size(); ++k) {
    self->request(st.workers[k], reply_timeout(st), round_atom_v, r, s, int64_t{0})
        .then(
            [self, k, sums, remaining, gen, r](block_sums& b, worker_report& report) {
              auto& st = self->state;
              if (st.finished || gen != st.generation || r != st.pipe.round) return;
              if (!b.wire_error.empty() || !report.wire_error.empty()) {
                return fail_job(self, absl::DataLossError(absl::StrCat(
                                          "round reply of worker ", k, ": ",
                                          b.wire_error.empty() ? report.wire_error : b.wire_error)));
              }
              absorb(st, report);
              (*sums)[k] = b;
              if (--*remaining == 0) cocoa_decide(self, *sums);
            },
            [self, gen](caf::error& err) {
              if (gen == self->state.generation) fail_job(self, err);
            });
  }
}

// Round st.round with st.shared (s_r): checkpoint if due, then send it.
void cocoa_round(self_ptr self) {
  cocoa_checkpoint(self, [self] { cocoa_send_round(self); });
}

// ------------------------------------------------------------ SGD modes

template <class Done>
void read_model(self_ptr self, Done done) {
  auto& st = self->state;
  if (st.spec.mode == Mode::kHogwild) return done(dvec(st.hog->snapshot()));
  read_shards(self, std::move(done));
}

// Certifies the current model: P(w) from the workers' loss sums.
template <class Done>
void evaluate(self_ptr self, Done done) {
  read_model(self, [self, done](dvec wd) {
    auto& st = self->state;
    st.coordinator_bytes += static_cast<int64_t>(st.workers.size()) * wd.bytes();
    ask_workers<block_sums>(self, [self, wd, done](std::vector<block_sums>& sums) {
      auto& st = self->state;
      double loss = 0.0;
      for (const auto& b : sums) loss += b.loss_sum;
      // One vector for both (a shard's arena block is a view: copied once).
      const std::shared_ptr<const std::vector<double>> w = wd.as_vector();
      const double primal = loss / static_cast<double>(st.n) + RegularizerValue(st.spec.model, *w);
      record(self, primal, -kInf, kInf);
      done(*w);
    }, certify_atom_v, wd);
  });
}

void halt_workers(self_ptr self, StopReason why) {
  auto& st = self->state;
  if (st.halting) return;
  st.halting = true;
  st.reason = why;
  for (auto& w : st.workers) self->send(w, halt_atom_v);
  // Sync and model-averaging workers may be waiting at a barrier that a
  // halted peer never reaches: the shards release them.
  for (auto& s : st.shards) self->send(s, halt_atom_v);
}

// Worker k went down, or its node is lost (whether or not its own down
// message has arrived yet).
bool worker_gone(const coord_state& st, std::size_t k) {
  if (!st.worker_lost.empty() && st.worker_lost[k]) return true;
  return !st.worker_node.empty() && st.worker_node[k] >= 0 && !st.node_alive[st.worker_node[k]];
}

// The lost nodes, as "1, 2" (for the job's event).
std::string lost_node_list(const coord_state& st) {
  std::string out;
  for (std::size_t n = 0; n < st.node_alive.size(); ++n) {
    if (!st.node_alive[n]) absl::StrAppend(&out, out.empty() ? "" : ", ", n);
  }
  return out;
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

void maybe_evaluate(self_ptr self) {
  auto& st = self->state;
  if (st.evaluating || st.halting || st.running == 0 || !all_workers_reachable(st) ||
      st.epochs < st.next_eval) {
    return;
  }
  st.evaluating = true;
  st.next_eval = st.epochs + st.spec.eval_every_epochs;
  evaluate(self, [self](const std::vector<double>& w) {
    auto& st = self->state;
    st.evaluating = false;
    // The evaluated model is the restart point after a loss: every worker
    // resumes from the slowest clock seen (a multiple of tau for the
    // local-model modes, whose exchanges are counted in tau steps).
    auto& c = st.ckpt;
    c.round = st.round;
    c.epochs = st.epochs;
    c.processed = st.processed;
    c.clocks = st.clocks;
    c.shared = w;
    c.clock = *std::min_element(st.clocks.begin(), st.clocks.end());
    if (st.spec.mode == Mode::kModelAveraging || st.spec.mode == Mode::kEasgd) {
      c.clock -= c.clock % st.spec.tau;
    }
    save_checkpoint(self);
    ++st.round;
    const StopRule& stop = st.spec.stop;
    if (stop.target_primal && st.last.primal <= *stop.target_primal) {
      // The certified model that met the target: workers take a few more
      // steps before they see the halt, and those may move it back above.
      st.target_model = std::make_shared<std::vector<double>>(w);
      st.target_progress = st.last;
      halt_workers(self, StopReason::kTargetReached);
    }
  });
}

void sgd_all_stopped(self_ptr self) {
  // Final certificate of the final model, then the ssp statistic.
  evaluate(self, [self](const std::vector<double>& w) {
    auto& st = self->state;
    ++st.round;
    const StopRule& stop = st.spec.stop;
    if (!st.halting && stop.target_primal && st.last.primal <= *stop.target_primal) {
      st.reason = StopReason::kTargetReached;
    }
    auto model = std::make_shared<std::vector<double>>(w);
    if (st.target_model && st.target_progress.primal < st.last.primal) {
      // Stopped on the target: return the model certified to meet it, not
      // the one a few stale steps later.
      model = st.target_model;
      st.last = st.target_progress;
    }
    shard_staleness(self, [self, model](int64_t granted) {
      finish_job(self, std::move(*model), granted);
    });
  });
}

// The clock an SGD run stops at and how often it reports.
std::pair<int64_t, int64_t> sgd_run_limits(const coord_state& st) {
  const double per_clock = static_cast<double>(st.workers.size()) * st.spec.batch_size;
  const double clocks = std::ceil(st.spec.stop.max_epochs * static_cast<double>(st.n) / per_clock);
  const int64_t max_clock = static_cast<int64_t>(std::min(clocks, 1e15));
  // Reports a few times per evaluation interval: enough to evaluate on
  // time, few enough never to flood the coordinator's mailbox (the cancel
  // and budget timer queues behind them).
  const double clocks_per_eval = st.spec.eval_every_epochs * static_cast<double>(st.n) / per_clock;
  const int64_t report_every = std::max<int64_t>(1, static_cast<int64_t>(clocks_per_eval / 4));
  return {max_clock, report_every};
}

// Worker k's free-running loop from `start_clock`; its final report counts
// down st.running.
void sgd_run_worker(self_ptr self, std::size_t k, int64_t start_clock) {
  auto& st = self->state;
  const uint64_t gen = st.generation;
  const auto [max_clock, report_every] = sgd_run_limits(st);
  self->request(st.workers[k], caf::infinite, run_atom_v, max_clock, report_every, start_clock)
      .then(
          [self, gen](const worker_report& r) {
            auto& st = self->state;
            if (st.finished || gen != st.generation) return;
            if (auto bad = WireErrorOf(r); !bad.ok()) return fail_job(self, bad);
            absorb(st, r);
            if (--st.running == 0) sgd_all_stopped(self);
          },
          [self, gen](caf::error& err) {
            if (gen == self->state.generation) fail_job(self, err);
          });
}

void sgd_start(self_ptr self, int64_t start_clock) {
  auto& st = self->state;
  st.running = static_cast<int>(st.workers.size());
  st.next_eval = st.epochs + st.spec.eval_every_epochs;
  for (std::size_t k = 0; k < st.workers.size(); ++k) sgd_run_worker(self, k, start_clock);
}

// ------------------------------------------------------------- start-up

void recovery_resume(self_ptr self);
void init_shards_then_resume(self_ptr self);

// job_spec.resume: the checkpoint file, checked against this job.
absl::Status load_resume_checkpoint(coord_state& st) {
  auto c = ReadCheckpointFile(st.spec.checkpoint_path);
  if (!c.ok()) return c.status();
  const std::string& f = st.spec.checkpoint_path;
  auto mismatch = [&](const char* what, auto have, auto want) {
    return absl::FailedPreconditionError(absl::StrCat(f, ": checkpoint ", what, " is ", have,
                                                      " but the job's is ", want));
  };
  if (c->mode != st.spec.mode) {
    return mismatch("mode", AsAbsl(ModeName(c->mode)), AsAbsl(ModeName(st.spec.mode)));
  }
  if (c->model.kind != st.spec.model.kind) {
    return mismatch("model", AsAbsl(ModelName(c->model.kind)),
                    AsAbsl(ModelName(st.spec.model.kind)));
  }
  if (c->model.lambda != st.spec.model.lambda) {
    return mismatch("lambda", c->model.lambda, st.spec.model.lambda);
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
  st.event = absl::StrCat("resumed from ", f, " at round ", k.round);
  return absl::OkStatus();
}

void connect_and_train(self_ptr self) {
  auto& st = self->state;
  if (st.spec.mode != Mode::kHogwild) {
    std::vector<caf::actor> handles;
    for (auto& s : st.shards) handles.push_back(caf::actor_cast<caf::actor>(s));
    for (auto& w : st.workers) self->send(w, connect_atom_v, handles, int64_list{st.bounds, {}});
  }
  st.started_training = true;
  // The first restart point: the zero model before any step.
  st.ckpt = coord_state::checkpoint{};
  st.ckpt.processed = st.processed;
  st.ckpt.clocks = st.clocks;
  st.ckpt.shared.assign(static_cast<std::size_t>(st.m), 0.0);
  if (st.spec.resume) {
    if (auto s = load_resume_checkpoint(st); !s.ok()) return fail_job(self, s);
    return init_shards_then_resume(self);
  }
  if (st.spec.mode == Mode::kCocoa) {
    st.shared = dvec(st.ckpt.shared);  // zeros: shards start at zero too
    cocoa_round(self);
  } else {
    sgd_start(self, 0);
  }
}

// What crosses to a node: the spec without the in-process parts.
worker_spec wire_form(const worker_config& c) { return static_cast<const worker_spec&>(c); }
const shard_config& wire_form(const shard_config& c) { return c; }

// Spawns one actor of type Handle per spec, here or on the nodes (actor i on
// node (offset + i) mod N), monitors them, and calls done(handles).
template <class Handle, class Atom, class Spec, class LocalSpawn, class Done>
void spawn_all(self_ptr self, std::size_t offset, Atom atom, std::vector<Spec> specs,
               LocalSpawn local, Done done) {
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
  const auto me = caf::actor_cast<caf::actor>(self);
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t n = (offset + i) % st.nodes.size();
    self->request(st.nodes[n], kSpawnTimeout, atom, wire_form(specs[i]), me)
        .then(
            [self, i, out, remaining, done](const caf::actor& a) {
              if (self->state.finished) return;
              auto h = caf::actor_cast<Handle>(a);
              self->monitor(h);
              (*out)[i] = h;
              if (--*remaining == 0) done(std::move(*out));
            },
            [self, n](caf::error& err) {
              fail_job(self, absl::UnavailableError(absl::StrCat(
                                 "node ", n, " (", self->state.spec.nodes[n], "): ",
                                 self->system().render(err))));
            });
  }
}

void wire_and_train(self_ptr self) {
  auto& st = self->state;
  const int S = st.spec.shards;
  if (st.spec.mode == Mode::kHogwild) {
    st.hog->allocate(static_cast<std::size_t>(st.d));
    return connect_and_train(self);
  }
  if (S > st.m) {
    return fail_job(self, absl::InvalidArgumentError(absl::StrCat(
                              "job_spec.shards: ", S, " shards for a shared vector of ", st.m,
                              " entries")));
  }
  st.bounds.resize(S + 1);
  for (int s = 0; s <= S; ++s) st.bounds[s] = st.m * s / S;
  std::vector<shard_config> configs;
  for (int s = 0; s < S; ++s) {
    shard_config c;
    c.mode = st.spec.mode;
    c.workers = static_cast<int32_t>(st.workers.size());
    c.begin = st.bounds[s];
    c.end = st.bounds[s + 1];
    c.model = st.spec.model;
    c.step0 = st.spec.step0;
    c.step_decay = st.spec.step_decay;
    c.gamma = st.spec.gamma;
    c.easgd_alpha = st.spec.easgd_alpha > 0 ? st.spec.easgd_alpha
                                             : 0.9 / static_cast<double>(st.workers.size());
    c.staleness = st.spec.staleness;
    configs.push_back(c);
  }
  // Shards go to the nodes after the workers' (worker k on node k mod N).
  spawn_all<parameter_shard>(
      self, st.workers.size(), shard_atom_v, std::move(configs),
      [self](shard_config c) {
        return spawn_parameter_shard(self->system(), c, caf::actor_cast<caf::actor>(self));
      },
      [self](std::vector<parameter_shard> shards) {
        auto& st = self->state;
        st.shards = std::move(shards);
        st.shard_node.clear();
        for (std::size_t s = 0; s < st.shards.size(); ++s) {
          st.shard_node.push_back(
              st.nodes.empty() ? -1 : static_cast<int>((st.workers.size() + s) % st.nodes.size()));
        }
        connect_and_train(self);
      });
}

void init_workers(self_ptr self) {
  auto& st = self->state;
  const int K = st.spec.workers;
  using dims = std::pair<int64_t, int64_t>;
  auto replies = std::make_shared<std::vector<dims>>(K);
  auto remaining = std::make_shared<int>(K);
  for (int k = 0; k < K; ++k) {
    self->request(st.workers[k], kRequestTimeout, init_atom_v)
        .then(
            [self, k, replies, remaining](int64_t n, int64_t d) {
              auto& st = self->state;
              if (st.finished) return;
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
              st.m = st.primal_cocoa ? st.n : st.d;
              wire_and_train(self);
            },
            [self](caf::error& err) { fail_job(self, err); });
  }
}

void start(self_ptr self) {
  auto& st = self->state;
  st.start = clock_type::now();
  const int K = st.spec.workers;
  st.clocks.assign(K, 0);
  st.processed.assign(K, 0);
  st.worker_bytes.assign(K, 0);
  st.primal_cocoa =
      st.spec.mode == Mode::kCocoa && FormulationOf(st.spec.model.kind) == Formulation::kPrimal;
  if (st.spec.mode == Mode::kHogwild) st.hog = std::make_shared<hogwild_model>();
  const double gamma = st.spec.gamma;
  const double sigma = st.spec.sigma_prime > 0 ? st.spec.sigma_prime : gamma * K;
  std::vector<worker_config> configs;
  for (int k = 0; k < K; ++k) {
    worker_config c;
    c.mode = st.spec.mode;
    c.index = k;
    c.workers = K;
    c.model = st.spec.model;
    c.seed = st.spec.seed;
    c.data = st.spec.data;
    c.path = st.spec.data_path;
    c.load = st.spec.load_options;
    c.batch_size = st.spec.batch_size;
    c.step0 = st.spec.step0;
    c.step_decay = st.spec.step_decay;
    c.tau = st.spec.tau;
    c.coordinator = caf::actor_cast<caf::actor>(self);
    c.local_epochs = st.spec.local_epochs;
    c.gamma = gamma;
    c.sigma_prime = sigma;
    c.hogwild = st.hog;
    c.interrupt = st.interrupt;
    configs.push_back(std::move(c));
  }
  st.spec.data.reset();  // the workers hold what they need
  st.worker_specs = configs;
  st.node_alive.assign(st.nodes.size(), true);
  st.worker_lost.assign(K, false);
  st.being_replaced.assign(K, false);
  for (int k = 0; k < K; ++k) {
    st.worker_node.push_back(st.nodes.empty() ? -1 : k % static_cast<int>(st.nodes.size()));
  }
  spawn_all<worker_actor>(
      self, 0, worker_atom_v, std::move(configs),
      [self](worker_config c) { return spawn_worker(self->system(), std::move(c)); },
      [self](std::vector<worker_actor> workers) {
        self->state.workers = std::move(workers);
        init_workers(self);
      });
  self->send(self, tick_atom_v);
}


// ------------------------------------------------------------- recovery
// A job on nodes survives the loss of nodes (kill -9, a crash, a dropped
// link): every worker and shard of a lost node is replaced on a surviving
// node and the whole job restarts from its last checkpoint (cocoa: the
// shared vector and all coordinates of the last checkpointed round; SGD
// modes: the last evaluated model, from the slowest clock). Shards are
// always all replaced, so no push of the interrupted round can reach the
// restored state; survivors keep their data and are re-wired. Requests of
// the old generation are ignored when they answer.

constexpr int kMaxRecoveries = 8;

// Node n is gone (its actors went down, or it stopped answering): ignore
// the interrupted round and recover shortly (other actors of the same node
// go down within milliseconds: one recovery for all of them).
// Whether the job can go on through the loss of node n: async, ssp and
// easgd tolerate a missing worker for a while, so when no shard was on n
// the shards and the other workers keep running while n's workers are
// replaced. Everything else restarts from the last checkpoint.
bool continuable(const coord_state& st, int n) {
  if (!st.started_training || st.halting || st.full_recovery) return false;
  if (st.spec.mode != Mode::kAsync && st.spec.mode != Mode::kSsp &&
      st.spec.mode != Mode::kEasgd) {
    return false;
  }
  return std::find(st.shard_node.begin(), st.shard_node.end(), n) == st.shard_node.end();
}

void node_lost(self_ptr self, int n) {
  auto& st = self->state;
  if (n < 0 || !st.node_alive[n]) return;
  st.node_alive[n] = false;
  if (continuable(st, n)) {
    // An evaluation in flight may wait on a lost worker: drop it (the next
    // one runs once the replacements are in).
    ++st.fanouts;
    st.evaluating = false;
  } else {
    st.full_recovery = true;
    ++st.generation;
  }
  if (!st.recovery_scheduled) {
    st.recovery_scheduled = true;
    self->delayed_send(self, std::chrono::milliseconds(50), recover_atom_v);
  }
}

// Liveness of the nodes, once a second: a node that does not answer a
// hello within spec.node_silence_seconds is treated as lost. A killed node closes its
// sockets and is noticed at once; this catches a hung one (SIGSTOP, a
// stuck machine), which CAF 0.17 never reports without middleman
// heartbeats (off: they dropped healthy links, see network.cpp).
constexpr auto kPingEvery = std::chrono::seconds(1);

void ping_nodes(self_ptr self) {
  auto& st = self->state;
  if (st.nodes.empty() || !st.started_training) return;
  if (clock_type::now() - st.last_ping < kPingEvery) return;
  st.last_ping = clock_type::now();
  st.ping_outstanding.resize(st.nodes.size(), false);
  for (std::size_t n = 0; n < st.nodes.size(); ++n) {
    if (!st.node_alive[n] || st.ping_outstanding[n]) continue;
    st.ping_outstanding[n] = true;
    const auto silence = std::chrono::duration_cast<caf::timespan>(
        std::chrono::duration<double>(st.spec.node_silence_seconds));
    self->request(st.nodes[n], silence, hello_atom_v)
        .then(
            [self, n](const std::string&, int64_t, int32_t) {
              self->state.ping_outstanding[n] = false;
            },
            [self, n](caf::error&) {
              auto& st = self->state;
              st.ping_outstanding[n] = false;
              if (st.finished || !st.node_alive[n]) return;
              st.event = absl::StrCat("node ", n, " (", st.spec.nodes[n], ") silent for ",
                                      st.spec.node_silence_seconds, " s");
              node_lost(self, static_cast<int>(n));
            });
  }
}

// Spawns one actor on node n and hands its handle to ok.
template <class Handle, class Atom, class Spec, class Ok>
void spawn_on(self_ptr self, int n, Atom atom, const Spec& spec, Ok ok) {
  const uint64_t gen = self->state.generation;
  self->request(self->state.nodes[n], kSpawnTimeout, atom, wire_form(spec),
                caf::actor_cast<caf::actor>(self))
      .then(
          [self, gen, ok](const caf::actor& a) mutable {
            if (self->state.finished || gen != self->state.generation) return;
            auto h = caf::actor_cast<Handle>(a);
            self->monitor(h);
            ok(h);
          },
          [self, gen, n](caf::error& err) {
            if (self->state.finished || gen != self->state.generation) return;
            fail_job(self, absl::UnavailableError(absl::StrCat(
                               "recovery: node ", n, " (", self->state.spec.nodes[n],
                               "): ", self->system().render(err))));
          });
}

void recovery_resume(self_ptr self) {
  auto& st = self->state;
  const auto& c = st.ckpt;
  std::vector<caf::actor> handles;
  for (auto& s : st.shards) handles.push_back(caf::actor_cast<caf::actor>(s));
  for (auto& w : st.workers) self->send(w, connect_atom_v, handles, int64_list{st.bounds, {}});
  st.round = c.round;
  st.epochs = c.epochs;
  st.processed = c.processed;
  st.clocks.assign(st.workers.size(), c.clock);
  if (st.spec.mode != Mode::kCocoa) {
    st.halting = false;
    sgd_start(self, c.clock);
    return;
  }
  // cocoa: every worker's coordinates back to the checkpoint, and the
  // shared vector (the shards hold it again) with them.
  st.shared = dvec(c.shared);
  const uint64_t gen = st.generation;
  auto remaining = std::make_shared<std::size_t>(st.workers.size());
  for (std::size_t k = 0; k < st.workers.size(); ++k) {
    dvec coords = k < c.coords.size() ? dvec(c.coords[k]) : dvec();
    self->request(st.workers[k], reply_timeout(st), coords_atom_v, int64_t{c.round}, coords)
        .then(
            [self, gen, remaining](int64_t) {
              if (self->state.finished || gen != self->state.generation) return;
              if (--*remaining == 0) cocoa_round(self);
            },
            [self, gen](caf::error& err) {
              if (gen == self->state.generation) fail_job(self, err);
            });
  }
}

void recovery_shards(self_ptr self, std::vector<int> alive) {
  auto& st = self->state;
  const int S = static_cast<int>(st.bounds.size()) - 1;
  st.shards.assign(S, parameter_shard{});
  st.shard_node.assign(S, -1);
  auto remaining = std::make_shared<int>(S);
  const uint64_t gen = st.generation;
  for (int s = 0; s < S; ++s) {
    shard_config cfg;
    cfg.mode = st.spec.mode;
    cfg.workers = static_cast<int32_t>(st.workers.size());
    cfg.begin = st.bounds[s];
    cfg.end = st.bounds[s + 1];
    cfg.model = st.spec.model;
    cfg.step0 = st.spec.step0;
    cfg.step_decay = st.spec.step_decay;
    cfg.gamma = st.spec.gamma;
    cfg.easgd_alpha = st.spec.easgd_alpha > 0 ? st.spec.easgd_alpha
                                               : 0.9 / static_cast<double>(st.workers.size());
    cfg.staleness = st.spec.staleness;
    const int n = alive[(st.workers.size() + s) % alive.size()];
    spawn_on<parameter_shard>(self, n, shard_atom_v, cfg, [self, s, n, remaining](
                                                              parameter_shard h) {
      auto& st = self->state;
      st.shards[s] = h;
      st.shard_node[s] = n;
      if (--*remaining == 0) init_shards_then_resume(self);
    });
  }
  (void)gen;
}

// Loads every shard's range and clock from the checkpoint, then resumes.
void init_shards_then_resume(self_ptr self) {
  auto& st = self->state;
  const uint64_t gen = st.generation;
  auto remaining = std::make_shared<std::size_t>(st.shards.size());
  const auto& c = st.ckpt;
  for (std::size_t s = 0; s < st.shards.size(); ++s) {
    dvec range(std::vector<double>(c.shared.begin() + st.bounds[s],
                                   c.shared.begin() + st.bounds[s + 1]));
    // Model-averaging shards count exchanges (one per tau steps), cocoa
    // shards rounds.
    const int64_t shard_clock = st.spec.mode == Mode::kModelAveraging ? c.clock / st.spec.tau
                                : st.spec.mode == Mode::kCocoa        ? c.round
                                                                      : c.clock;
    self->request(st.shards[s], kRequestTimeout, init_atom_v, range, shard_clock)
        .then(
            [self, remaining, gen](int64_t) {
              if (self->state.finished || gen != self->state.generation) return;
              if (--*remaining == 0) recovery_resume(self);
            },
            [self, gen](caf::error& err) {
              if (gen == self->state.generation) fail_job(self, err);
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
  spawn_on<worker_actor>(self, n, worker_atom_v, st.worker_specs[k], [self, k, n, gen, then](
                                                                         worker_actor h) {
    auto& st = self->state;
    st.workers[k] = h;
    st.worker_node[k] = n;
    st.worker_lost[k] = false;
    self->request(h, kRequestTimeout, init_atom_v)
        .then(
            [self, k, gen, then](int64_t rows, int64_t cols) {
              auto& st = self->state;
              if (st.finished || gen != st.generation) return;
              if (rows != st.n || cols != st.d) {
                return fail_job(self, absl::DataLossError(absl::StrCat(
                                          "replacement of worker ", k, " read a ", rows, "x",
                                          cols, " dataset; the job's is ", st.n, "x", st.d)));
              }
              then();
            },
            [self, gen](caf::error& err) {
              if (gen == self->state.generation) fail_job(self, err);
            });
  });
}

// The continuing modes: every worker of a lost node is replaced on a
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
  st.event = absl::StrCat(st.event, st.event.empty() ? "" : "; ", "lost node(s) ",
                          lost_node_list(st), ": ", lost.empty() ? "no worker there" : moved,
                          "; the shards and the other workers ran on");
  for (int k : lost) {
    st.being_replaced[k] = true;
    replace_worker(self, k, alive[k % alive.size()], [self, k] {
      auto& st = self->state;
      std::vector<caf::actor> handles;
      for (auto& s : st.shards) handles.push_back(caf::actor_cast<caf::actor>(s));
      self->send(st.workers[k], connect_atom_v, handles, int64_list{st.bounds, {}});
      st.being_replaced[k] = false;
      // The lost worker's run never answers; its replacement's does.
      if (st.halting) {
        if (--st.running == 0) sgd_all_stopped(self);
        return;
      }
      sgd_run_worker(self, static_cast<std::size_t>(k), st.clocks[k]);
    });
  }
}

void recover(self_ptr self) {
  auto& st = self->state;
  st.recovery_scheduled = false;
  if (st.finished) return;
  std::vector<int> alive;
  for (std::size_t n = 0; n < st.node_alive.size(); ++n) {
    if (st.node_alive[n]) alive.push_back(static_cast<int>(n));
  }
  if (alive.empty()) return fail_job(self, absl::UnavailableError("every node of the job is lost"));
  if (++st.recoveries > kMaxRecoveries) {
    return fail_job(self, absl::UnavailableError(absl::StrCat(
                              "gave up after ", kMaxRecoveries, " recoveries from lost nodes")));
  }
  if (!st.full_recovery) return continue_after_loss(self, alive);
  st.full_recovery = false;
  std::fill(st.being_replaced.begin(), st.being_replaced.end(), false);
  ++st.generation;
  st.evaluating = false;
  std::vector<int> lost_workers;
  for (std::size_t k = 0; k < st.workers.size(); ++k) {
    if (worker_gone(st, k)) lost_workers.push_back(static_cast<int>(k));
  }
  // st.event may already say why (a silent node).
  st.event = absl::StrCat(st.event, st.event.empty() ? "" : "; ", "lost node(s) ",
                          lost_node_list(st), " (", lost_workers.size(),
                          " worker(s) replaced, all ", st.shards.size(),
                          " shards rebuilt); restarted from the checkpoint of round ",
                          st.ckpt.round, st.spec.mode == Mode::kCocoa ? "" : absl::StrCat(
                              " (clock ", st.ckpt.clock, ")"));
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

coordinator_actor::behavior_type coordinator_impl(self_ptr self, job_spec spec,
                                                  std::shared_ptr<detail::job_state> job,
                                                  std::vector<node_actor> nodes) {
  self->state.spec = std::move(spec);
  self->state.nodes = std::move(nodes);
  self->state.job = std::move(job);
  self->state.interrupt = self->state.job->interrupt;
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    if (st.finished) return;
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
    // In-process actors only stop on a bug, and before training there is
    // no state to restore: the job fails with what happened.
    if (node < 0 || !st.started_training) {
      return fail_job(self, absl::UnavailableError(absl::StrCat(
                                who, " stopped: ", self->system().render(dm.reason))));
    }
    node_lost(self, node);
  });
  return {
      [self](start_atom) { start(self); },
      [self](recover_atom) { recover(self); },
      [self](round_atom, int64_t begin, int64_t round, const dvec& part) {
        cocoa_range(self, begin, round, part);
      },
      [self](tick_atom) {
        auto& st = self->state;
        if (st.finished) return;
        StopReason why;
        if (external_stop(st, &why)) {
          if (!st.started_training) {
            return fail_job(self, absl::CancelledError(
                                      why == StopReason::kCancelled
                                          ? "job cancelled before training started"
                                          : "wall-time budget spent before training started"));
          }
          // SGD workers are told to halt. cocoa stops at the next
          // certificate; the local solves in progress end early.
          if (st.spec.mode != Mode::kCocoa) {
            halt_workers(self, why);
          } else {
            interrupt_solves(self);
          }
        }
        ping_nodes(self);
        self->delayed_send(self, kTick, tick_atom_v);
      },
      [self](const worker_report& r) {
        auto& st = self->state;
        if (st.finished) return;
        // A report carrying an error: a worker's failure after it replied
        // (a cocoa push), or bytes that did not decode.
        if (!r.wire_error.empty()) return fail_job(self, absl::InternalError(r.wire_error));
        if (r.worker < 0 || r.worker >= static_cast<int32_t>(st.workers.size())) {
          return fail_job(self, absl::DataLossError(
                                    absl::StrCat("bad worker report: worker ", r.worker)));
        }
        absorb(st, r);
        StopReason why;
        if (external_stop(st, &why)) return halt_workers(self, why);
        maybe_evaluate(self);
      },
  };
}

}  // namespace

coordinator_actor spawn_coordinator(caf::actor_system& sys, job_spec spec,
                                    std::shared_ptr<detail::job_state> job,
                                    std::vector<node_actor> nodes) {
  return sys.spawn(coordinator_impl, std::move(spec), std::move(job), std::move(nodes));
}

}  // namespace dml::actors
