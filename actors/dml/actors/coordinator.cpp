#include "dml/actors/coordinator.hpp"

#include <algorithm>
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
constexpr auto kTick = std::chrono::milliseconds(5);
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
  // cocoa.
  dvec shared;  // the shared vector of the current round (one buffer for all)
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

void stop_children(self_ptr self) {
  auto& st = self->state;
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
  for (std::size_t k = 0; k < st.workers.size(); ++k) {
    self->request(st.workers[k], kRequestTimeout, xs...)
        .then(
            [self, k, replies, remaining, done](Reply& r) {
              if (self->state.finished) return;
              if (!r.wire_error.empty()) {
                return fail_job(self, absl::DataLossError(absl::StrCat(
                                          "reply of worker ", k, ": ", r.wire_error)));
              }
              (*replies)[k] = std::move(r);
              if (--*remaining == 0) done(*replies);
            },
            [self](caf::error& err) { fail_job(self, err); });
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
  if (st.shards.size() == 1) {  // the shard's own snapshot, uncopied
    self->request(st.shards[0], kRequestTimeout, read_atom_v)
        .then(
            [self, done](const dvec& part) {
              auto& st = self->state;
              if (st.finished) return;
              if (auto s = checked_part(st, 0, part); !s.ok()) return fail_job(self, s);
              st.coordinator_bytes += part.bytes();
              done(part);
            },
            [self](caf::error& err) { fail_job(self, err); });
    return;
  }
  auto out = std::make_shared<std::vector<double>>(static_cast<std::size_t>(st.m));
  auto remaining = std::make_shared<std::size_t>(st.shards.size());
  for (std::size_t s = 0; s < st.shards.size(); ++s) {
    self->request(st.shards[s], kRequestTimeout, read_atom_v)
        .then(
            [self, s, out, remaining, done](const dvec& part) {
              auto& st = self->state;
              if (st.finished) return;
              if (auto bad = checked_part(st, s, part); !bad.ok()) return fail_job(self, bad);
              std::copy(part.view().begin(), part.view().end(), out->begin() + st.bounds[s]);
              st.coordinator_bytes += part.bytes();
              if (--*remaining == 0) done(dvec(std::move(*out)));
            },
            [self](caf::error& err) { fail_job(self, err); });
  }
}

// The ssp statistic: the largest lead any shard granted.
template <class Done>
void shard_staleness(self_ptr self, Done done) {
  auto& st = self->state;
  if (st.shards.empty()) return done(int64_t{0});
  auto best = std::make_shared<int64_t>(0);
  auto remaining = std::make_shared<std::size_t>(st.shards.size());
  for (auto& s : st.shards) {
    self->request(s, kRequestTimeout, stats_atom_v)
        .then(
            [self, best, remaining, done](const shard_stats& stats) {
              if (self->state.finished) return;
              if (auto bad = WireErrorOf(stats); !bad.ok()) return fail_job(self, bad);
              *best = std::max(*best, stats.max_granted_staleness);
              if (--*remaining == 0) done(*best);
            },
            [self](caf::error& err) { fail_job(self, err); });
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

// ---------------------------------------------------------------- cocoa

void cocoa_round(self_ptr self);

void cocoa_finish(self_ptr self) {
  auto& st = self->state;
  if (!st.primal_cocoa) return finish_job(self, *st.shared.data, 0);
  // Primal models: w is the workers' own coordinates, in column order.
  ask_workers<dvec>(self, [self](std::vector<dvec>& parts) {
    std::vector<double> w;
    for (const auto& p : parts) w.insert(w.end(), p.view().begin(), p.view().end());
    finish_job(self, std::move(w), 0);
  }, coords_atom_v);
}

void cocoa_round(self_ptr self) {
  read_shards(self, [self](dvec shared) {
    auto& st = self->state;
    st.shared = std::move(shared);
    dvec s = st.shared;
    st.coordinator_bytes += static_cast<int64_t>(st.workers.size()) * s.bytes();
    ask_workers<block_sums>(self, [self, s](std::vector<block_sums>& sums) {
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
        primal = total.loss_sum * inv_n + RegularizerValue(st.spec.model, *st.shared.data);
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
      } else {
        st.coordinator_bytes += static_cast<int64_t>(st.workers.size()) * s.bytes();
        ask_workers<worker_report>(self, [self](std::vector<worker_report>& reports) {
          auto& st = self->state;
          for (const auto& r : reports) absorb(st, r);
          ++st.round;
          cocoa_round(self);
        }, round_atom_v, int64_t{st.round}, s, int64_t{0});
        return;
      }
      cocoa_finish(self);
    }, certify_atom_v, s);
  });
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
      const double primal =
          loss / static_cast<double>(st.n) + RegularizerValue(st.spec.model, *wd.data);
      record(self, primal, -kInf, kInf);
      done(*wd.data);
    }, certify_atom_v, wd);
  });
}

void halt_workers(self_ptr self, StopReason why) {
  auto& st = self->state;
  if (st.halting) return;
  st.halting = true;
  st.reason = why;
  for (auto& w : st.workers) self->send(w, halt_atom_v);
}

void maybe_evaluate(self_ptr self) {
  auto& st = self->state;
  if (st.evaluating || st.halting || st.running == 0 || st.epochs < st.next_eval) return;
  st.evaluating = true;
  st.next_eval = st.epochs + st.spec.eval_every_epochs;
  evaluate(self, [self](const std::vector<double>&) {
    auto& st = self->state;
    st.evaluating = false;
    ++st.round;
    const StopRule& stop = st.spec.stop;
    if (stop.target_primal && st.last.primal <= *stop.target_primal) {
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
    shard_staleness(self, [self, model](int64_t granted) {
      finish_job(self, std::move(*model), granted);
    });
  });
}

void sgd_start(self_ptr self) {
  auto& st = self->state;
  const double per_clock = static_cast<double>(st.workers.size()) * st.spec.batch_size;
  const double clocks = std::ceil(st.spec.stop.max_epochs * static_cast<double>(st.n) / per_clock);
  const int64_t max_clock = static_cast<int64_t>(std::min(clocks, 1e15));
  // Reports a few times per evaluation interval: enough to evaluate on
  // time, few enough never to flood the coordinator's mailbox (the cancel
  // and budget timer queues behind them).
  const double clocks_per_eval = st.spec.eval_every_epochs * static_cast<double>(st.n) / per_clock;
  const int64_t report_every = std::max<int64_t>(1, static_cast<int64_t>(clocks_per_eval / 4));
  st.running = static_cast<int>(st.workers.size());
  st.next_eval = st.spec.eval_every_epochs;
  for (std::size_t k = 0; k < st.workers.size(); ++k) {
    self->request(st.workers[k], caf::infinite, run_atom_v, max_clock, report_every)
        .then(
            [self](const worker_report& r) {
              auto& st = self->state;
              if (st.finished) return;
              if (auto bad = WireErrorOf(r); !bad.ok()) return fail_job(self, bad);
              absorb(st, r);
              if (--st.running == 0) sgd_all_stopped(self);
            },
            [self](caf::error& err) { fail_job(self, err); });
  }
}

// ------------------------------------------------------------- start-up

void connect_and_train(self_ptr self) {
  auto& st = self->state;
  if (st.spec.mode != Mode::kHogwild) {
    std::vector<caf::actor> handles;
    for (auto& s : st.shards) handles.push_back(caf::actor_cast<caf::actor>(s));
    for (auto& w : st.workers) self->send(w, connect_atom_v, handles, int64_list{st.bounds, {}});
  }
  st.started_training = true;
  if (st.spec.mode == Mode::kCocoa) {
    cocoa_round(self);
  } else {
    sgd_start(self);
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
      [self](shard_config c) { return spawn_parameter_shard(self->system(), c); },
      [self](std::vector<parameter_shard> shards) {
        self->state.shards = std::move(shards);
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
    configs.push_back(std::move(c));
  }
  st.spec.data.reset();  // the workers hold what they need
  spawn_all<worker_actor>(
      self, 0, worker_atom_v, std::move(configs),
      [self](worker_config c) { return spawn_worker(self->system(), std::move(c)); },
      [self](std::vector<worker_actor> workers) {
        self->state.workers = std::move(workers);
        init_workers(self);
      });
  self->send(self, tick_atom_v);
}

coordinator_actor::behavior_type coordinator_impl(self_ptr self, job_spec spec,
                                                  std::shared_ptr<detail::job_state> job,
                                                  std::vector<node_actor> nodes) {
  self->state.spec = std::move(spec);
  self->state.nodes = std::move(nodes);
  self->state.job = std::move(job);
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    if (st.finished) return;
    std::string who = "an actor of the job";
    for (std::size_t k = 0; k < st.workers.size(); ++k) {
      if (dm.source == st.workers[k].address()) who = "worker " + std::to_string(k);
    }
    for (std::size_t s = 0; s < st.shards.size(); ++s) {
      if (dm.source == st.shards[s].address()) who = "parameter shard " + std::to_string(s);
    }
    fail_job(self, absl::UnavailableError(
                       absl::StrCat(who, " stopped: ", self->system().render(dm.reason))));
  });
  return {
      [self](start_atom) { start(self); },
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
          // cocoa checks between rounds; SGD workers are told to halt.
          if (st.spec.mode != Mode::kCocoa) halt_workers(self, why);
        }
        self->delayed_send(self, kTick, tick_atom_v);
      },
      [self](const worker_report& r) {
        auto& st = self->state;
        if (st.finished) return;
        if (!r.wire_error.empty() || r.worker < 0 ||
            r.worker >= static_cast<int32_t>(st.workers.size())) {
          return fail_job(self, absl::DataLossError(absl::StrCat(
                                    "bad worker report: ",
                                    r.wire_error.empty() ? absl::StrCat("worker ", r.worker)
                                                         : r.wire_error)));
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
