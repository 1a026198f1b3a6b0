#include "dml/actors/worker.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/result.hpp>
#include <caf/send.hpp>
#include <caf/sec.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "dml/actors/internal/bulk_resolve.hpp"
#include "dml/actors/parameter_shard.hpp"
#include "dml/actors/topology/topology.hpp"
#include "dml/data/libsvm.hpp"
#include "dml/data/partition.hpp"
#include "dml/objective/evaluate.hpp"
#include "dml/solver/cocoa_local.hpp"
#include "dml/solver/sgd.hpp"
#include "dml/util/rng.hpp"
#include "dml/util/status.hpp"
#include "absl/strings/str_cat.h"

namespace dml::actors {
namespace {

// Worker requests carry no timeout. In CAF 0.17 every request timeout is an
// event in the actor clock that stays there until it expires, answered or
// not: at tens of thousands of pushes and pulls per second that grows the
// clock's queue without bound and starves the coordinators' timers (seen as
// jobs that could not be cancelled). Pulls in sync/ssp legitimately wait for
// the slowest worker anyway; lost peers are detected by the coordinator's
// monitors, which fail the job and stop every actor of it.
constexpr auto kRequestTimeout = caf::infinite;

caf::error fail(std::string what) {
  return caf::make_error(caf::sec::runtime_error, std::move(what));
}

struct worker_state {
  worker_config cfg;
  std::shared_ptr<const topology> topo;  // the job's mode
  std::string who;  // "worker k: " prefix of every error
  Dataset local;    // this worker's rows (all modes but primal cocoa)
  int64_t n_global = 0;
  int64_t d = 0;
  std::unique_ptr<LocalSolver> solver;  // cocoa
  std::vector<parameter_shard> shards;
  std::vector<int64_t> bounds;  // S+1 key boundaries
  std::vector<double> w;        // pulled model, or the local model (easgd, mavg)
  std::vector<double> inv_touch;  // hogwild: regulariser scaling per column
  std::shared_ptr<const Dataset> shared_data;  // hogwild: the whole dataset
  HogwildScratch hog_scratch;
  int64_t clock = 0;
  int64_t exchanges = 0;  // easgd / model-averaging
  int64_t max_clock = 0;
  int64_t report_every = 1;
  int64_t processed = 0;
  int64_t bytes = 0;
  int64_t default_steps = 1;  // cocoa: H = local_epochs * block size
  int64_t last_round = -1;      // cocoa: the last round started
  std::vector<double> round_start_coords;  // cocoa: coordinates before last_round's solve
  std::string connect_error;  // why the last connect was refused
  bool running = false;
  bool halted = false;
  bool trained = false;  // a run has started on this worker's local model
  uint64_t loop = 0;  // id of the current run; continuations of older runs are dropped
  caf::typed_response_promise<worker_report> run_promise;
  caf::actor fetcher;  // fetches dvecs that arrive by reference (bulk_resolve.hpp)
  static inline const char* name = "dml.worker";

  worker_report report() const { return {cfg.index, clock, processed, bytes, {}}; }
  double step_size() const {
    return cfg.step0 / (1.0 + cfg.step_decay * static_cast<double>(clock));
  }
};

using self_ptr = worker_actor::stateful_pointer<worker_state>;

// Why a connect(shards, bounds) cannot be used, or "".
std::string ConnectError(const worker_state& st, std::size_t shards, const int64_list& bounds) {
  if (!bounds.wire_error.empty()) return "connect: " + bounds.wire_error;
  const auto& b = bounds.values;
  if (shards == 0) return "connect: no shards";
  if (b.size() != shards + 1) {
    return "connect: " + std::to_string(b.size()) + " bounds for " + std::to_string(shards) +
           " shards (need shards + 1)";
  }
  if (b.front() != 0) return "connect: bounds start at " + std::to_string(b.front()) + ", not 0";
  for (std::size_t s = 1; s < b.size(); ++s) {
    if (b[s] <= b[s - 1]) {
      return "connect: bounds not increasing at position " + std::to_string(s);
    }
  }
  if (b.back() != static_cast<int64_t>(st.w.size())) {
    return "connect: bounds end at " + std::to_string(b.back()) + " but the shared vector has " +
           std::to_string(st.w.size()) + " entries";
  }
  return "";
}

absl::Status LoadAndPartition(worker_state& st) {
  const worker_config& cfg = st.cfg;
  std::shared_ptr<const Dataset> full = cfg.data;
  if (!full) {
    absl::StatusOr<Dataset> loaded = ReadLibsvm(cfg.path, cfg.load);
    if (!loaded.ok()) return loaded.status();
    full = std::make_shared<const Dataset>(*std::move(loaded));
  }
  const CsrMatrix& x = full->x;
  st.n_global = x.rows();
  st.d = x.cols();
  if (x.rows() < cfg.workers) {
    return absl::InvalidArgumentError(absl::StrCat("the data has ", x.rows(), " examples for ",
                                                   cfg.workers, " workers"));
  }
  const bool classification = TaskOf(cfg.model.kind) == Task::kClassification;
  if (st.topo->shares_predictions(cfg.model.kind)) {
    CscMatrix cols = x.Convert();
    auto ranges = BalancedRanges(cols.offsets(), cfg.workers);
    if (!ranges.ok()) return ranges.status();
    const Range r = (*ranges)[cfg.index];
    if (r.size() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("no features left for this worker (", x.cols(), " features)"));
    }
    LocalBlock block;
    block.cols = cols.SliceOuter(r.begin, r.end);
    block.y = full->y;
    block.n_global = x.rows();
    block.loss_row_begin = x.rows() * cfg.index / cfg.workers;
    block.loss_row_end = x.rows() * (cfg.index + 1) / cfg.workers;
    auto solver = MakeLocalSolver(std::move(block), cfg.model, cfg.seed * 1000003 + cfg.index);
    if (!solver.ok()) return solver.status();
    st.solver = *std::move(solver);
    st.default_steps = std::max<int64_t>(1, std::llround(cfg.local_epochs * r.size()));
    return absl::OkStatus();
  }
  auto ranges = BalancedRanges(x.offsets(), cfg.workers);
  if (!ranges.ok()) return ranges.status();
  const Range r = (*ranges)[cfg.index];
  st.local.x = x.SliceOuter(r.begin, r.end);
  st.local.y.assign(full->y.begin() + r.begin, full->y.begin() + r.end);
  st.local.task = full->task;
  for (std::size_t i = 0; i < st.local.y.size(); ++i) {
    const float y = st.local.y[i];
    if (!std::isfinite(y) || (classification && y != 1.0f && y != -1.0f)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "label of example ", r.begin + static_cast<int64_t>(i), " is ", y, "; model ",
          AsAbsl(ModelName(cfg.model.kind)),
          classification ? " needs labels in {-1,+1}" : " needs finite labels"));
    }
  }
  // Hogwild threads share memory, so each samples from the whole dataset
  // (Niu et al.): a worker that runs ahead must not fit only its own rows.
  if (st.topo->samples_whole_data()) st.shared_data = full;
  if (st.topo->solves_locally()) {
    LocalBlock block;
    block.rows = st.local.x;
    block.y = st.local.y;
    block.n_global = x.rows();
    auto solver = MakeLocalSolver(std::move(block), cfg.model, cfg.seed * 1000003 + cfg.index);
    if (!solver.ok()) return solver.status();
    st.solver = *std::move(solver);
    st.default_steps = std::max<int64_t>(1, std::llround(cfg.local_epochs * r.size()));
  }
  return absl::OkStatus();
}

// Counts replies of a fan-out; the first error wins, later replies are ignored.
struct fan_in {
  explicit fan_in(std::size_t n) : remaining(n) {}
  std::size_t remaining;
  bool failed = false;
};

// The error handler of a fan-out: passes the first error on, drops the rest.
template <class Fail>
auto first_error(std::shared_ptr<fan_in> counter, Fail on_error) {
  return [counter, on_error](caf::error err) {
    if (counter->failed) return;
    counter->failed = true;
    on_error(std::move(err));
  };
}

// Pulls every shard's range into st.w; with `keys` (one list per shard, null
// for the whole range) only those keys are fetched and written.
template <class Done, class Fail>
void pull_all(self_ptr self, int64_t clock, Done done, Fail on_error,
              std::vector<key_list> keys = {}) {
  auto& st = self->state;
  auto counter = std::make_shared<fan_in>(st.shards.size());
  for (std::size_t s = 0; s < st.shards.size(); ++s) {
    key_list k = s < keys.size() ? keys[s] : key_list{};
    auto on_err = first_error(counter, on_error);
    auto on_part = [self, s, k, counter, done, on_err](dvec part) mutable {
      auto& st = self->state;
      if (counter->failed) return;
      const int64_t b = st.bounds[s];
      // A reply is checked before it touches w: a peer's bad bytes or a
      // wrong length fail the step, never write out of range.
      const std::size_t want =
          k.keys ? k.size() : static_cast<std::size_t>(st.bounds[s + 1] - b);
      if (!part.wire_error.empty() || part.size() != want) {
        return on_err(fail(st.who + "pull reply from shard " + std::to_string(s) + ": " +
                           (part.wire_error.empty()
                                ? std::to_string(part.size()) + " values, expected " +
                                      std::to_string(want)
                                : part.wire_error)));
      }
      if (k.keys) {
        for (std::size_t i = 0; i < part.size(); ++i) {
          st.w[b + (*k.keys)[i]] = part.data()[i];
        }
        st.bytes += k.bytes();
      } else {
        std::copy(part.view().begin(), part.view().end(), st.w.begin() + b);
      }
      st.bytes += part.bytes();
      if (--counter->remaining == 0) done();
    };
    auto on_reply = [self, on_part](dvec& part) mutable {
      internal::with_values(self, self->state.fetcher, std::move(part), on_part);
    };
    if (k.keys) {
      self->request(st.shards[s], kRequestTimeout, pull_atom_v, st.cfg.index, clock, k)
          .then(on_reply, on_err);
    } else {
      self->request(st.shards[s], kRequestTimeout, pull_atom_v, st.cfg.index, clock)
          .then(on_reply, on_err);
    }
  }
}

// The keys a minibatch reads, per shard, where a key list is cheaper than the
// range (4 bytes out and 8 back per key against 8 per range entry).
std::vector<key_list> batch_keys(const worker_state& st, const std::vector<int64_t>& rows) {
  std::vector<uint32_t> cols;
  for (int64_t r : rows) {
    const SparseView v = st.local.x.outer(r);
    cols.insert(cols.end(), v.index, v.index + v.size);
  }
  std::sort(cols.begin(), cols.end());
  cols.erase(std::unique(cols.begin(), cols.end()), cols.end());
  std::vector<key_list> out(st.shards.size());
  auto it = cols.begin();
  for (std::size_t s = 0; s < st.shards.size(); ++s) {
    const int64_t b = st.bounds[s], e = st.bounds[s + 1];
    auto end = std::lower_bound(it, cols.end(), static_cast<uint32_t>(e));
    const int64_t count = end - it;
    if (count * 12 < (e - b) * 8) {
      auto keys = std::make_shared<std::vector<uint32_t>>();
      keys->reserve(count);
      for (auto j = it; j != end; ++j) keys->push_back(static_cast<uint32_t>(*j - b));
      out[s].keys = std::move(keys);
    }
    it = end;
  }
  return out;
}

// Pushes x (length = model dimension) split by shard, sparse where smaller.
// `movable`, when given, is x itself and may be moved into a message that
// covers all of it (one shard): no copy.
template <class Done, class Fail>
void push_all(self_ptr self, int64_t clock, const std::vector<double>& x, Done done, Fail on_error,
              std::vector<double>* movable = nullptr) {
  auto& st = self->state;
  auto counter = std::make_shared<fan_in>(st.shards.size());
  auto on_ack = [counter, done](int64_t) {
    if (counter->failed) return;
    if (--counter->remaining == 0) done();
  };
  auto on_err = first_error(counter, on_error);
  for (std::size_t s = 0; s < st.shards.size(); ++s) {
    const int64_t b = st.bounds[s], e = st.bounds[s + 1];
    int64_t nnz = 0;
    for (int64_t j = b; j < e; ++j) nnz += x[j] != 0.0;
    // A sparse entry costs 12 bytes, a dense one 8.
    if (nnz * 12 < (e - b) * 8) {
      auto index = std::make_shared<std::vector<uint32_t>>();
      auto value = std::make_shared<std::vector<double>>();
      index->reserve(nnz);
      value->reserve(nnz);
      for (int64_t j = b; j < e; ++j) {
        if (x[j] != 0.0) {
          index->push_back(static_cast<uint32_t>(j - b));
          value->push_back(x[j]);
        }
      }
      sparse_dvec msg{std::move(index), std::move(value), {}};
      st.bytes += msg.bytes();
      self->request(st.shards[s], kRequestTimeout, push_atom_v, st.cfg.index, clock, msg)
          .then(on_ack, on_err);
    } else {
      dvec msg = (b == 0 && e == static_cast<int64_t>(x.size()) && movable)
                     ? dvec(std::move(*movable))
                     : dvec(std::vector<double>(x.begin() + b, x.begin() + e));
      st.bytes += msg.bytes();
      self->request(st.shards[s], kRequestTimeout, push_atom_v, st.cfg.index, clock, msg)
          .then(on_ack, on_err);
    }
  }
}

void finish_run(self_ptr self, caf::error err, uint64_t loop) {
  auto& st = self->state;
  if (!st.running || loop != st.loop) return;
  st.running = false;
  if (err) {
    st.run_promise.deliver(std::move(err));
  } else {
    st.run_promise.deliver(st.report());
  }
}

// After a step: count it, report progress, schedule the next one. A
// continuation of a superseded loop (the coordinator restarted this worker
// after a recovery) is dropped.
void step_done(self_ptr self, uint64_t loop) {
  auto& st = self->state;
  if (loop != st.loop) return;
  ++st.clock;
  st.processed += st.cfg.batch_size;
  if (st.cfg.coordinator && st.clock % st.report_every == 0) {
    caf::anon_send(st.cfg.coordinator, st.report());
  }
  self->send(self, step_atom_v, st.loop);
}

caf::error as_error(const worker_state& st, const absl::Status& s) {
  return fail(st.who + std::string(s.message()));
}

// easgd and model averaging, every tau steps: each shard gets this
// worker's range of its local model (`send(s, x)` makes the request) and
// `fold(w + begin, reply)` takes the reply into that range; the step ends
// once every shard has answered. `what` names the exchange in errors.
template <class Send, class Fold, class Fail>
void exchange_with_shards(self_ptr self, uint64_t loop, const char* what, Send send, Fold fold,
                          Fail on_error) {
  auto& st = self->state;
  auto counter = std::make_shared<fan_in>(st.shards.size());
  for (std::size_t s = 0; s < st.shards.size(); ++s) {
    const int64_t b = st.bounds[s], e = st.bounds[s + 1];
    dvec x(std::vector<double>(st.w.begin() + b, st.w.begin() + e));
    st.bytes += 2 * x.bytes();
    auto on_values = [self, b, len = e - b, counter, loop, what, fold,
                      on_err = first_error(counter, on_error)](dvec reply) mutable {
          auto& st = self->state;
          if (counter->failed || loop != st.loop) return;
          if (!reply.wire_error.empty() || static_cast<int64_t>(reply.size()) != len) {
            return on_err(fail(st.who + what + " reply: " +
                               (reply.wire_error.empty()
                                    ? std::to_string(reply.size()) + " values, expected " +
                                          std::to_string(len)
                                    : reply.wire_error)));
          }
          fold(st.w.data() + b, reply);
          if (--counter->remaining == 0) {
            ++st.exchanges;
            step_done(self, loop);
          }
    };
    send(s, x).then(
        [self, on_values](dvec& reply) mutable {
          internal::with_values(self, self->state.fetcher, std::move(reply), on_values);
        },
        first_error(counter, on_error));
  }
}

// The operations a mode's SGD step is made of (topology.hpp), on this
// worker's state; one per step, `rows` its minibatch.
class step_ops final : public worker_ops {
 public:
  step_ops(self_ptr self, uint64_t loop, std::vector<int64_t> rows)
      : self_(self), loop_(loop), rows_(std::move(rows)) {}

  int64_t clock() const override { return self_->state.clock; }
  int32_t tau() const override { return self_->state.cfg.tau; }

  void gradient_exchange() override {
    // The loss gradient reads w only at the batch's columns: pull those.
    auto self = self_;
    const uint64_t loop = loop_;
    auto on_error = error_handler();
    auto& st = self->state;
    pull_all(self, st.clock, [self, rows = rows_, on_error, loop] {
      auto& st = self->state;
      if (loop != st.loop) return;  // superseded: never push to the new shards
      auto g = MinibatchGradient(st.local, st.cfg.model, rows, st.w, /*include_regularizer=*/false);
      if (!g.ok()) return on_error(as_error(st, g.status()));
      push_all(self, st.clock, *g, [self, loop] { dml::actors::step_done(self, loop); },
               on_error);
    }, on_error, batch_keys(st, rows_));
  }

  absl::Status local_step() override {
    auto& st = self_->state;
    return SgdStep(st.local, st.cfg.model, rows_, st.step_size(), st.w);
  }

  absl::Status shared_model_step() override {
    auto& st = self_->state;
    hogwild_model& m = *st.cfg.hogwild;
    const Dataset& data = *st.shared_data;
    if (st.inv_touch.empty()) st.inv_touch = InverseTouchProbabilities(data, st.cfg.batch_size);
    const double t = static_cast<double>(m.steps.fetch_add(1, std::memory_order_relaxed)) /
                     static_cast<double>(st.cfg.workers);
    const double step = st.cfg.step0 / (1.0 + st.cfg.step_decay * t);
    return HogwildStep(data, st.cfg.model, rows_, step, st.inv_touch, m.w.data(), m.w.size(),
                       st.hog_scratch);
  }

  void elastic_exchange() override {
    // The shard moves the center toward x and replies e; the local model
    // moves by -e.
    auto self = self_;
    exchange_with_shards(
        self, loop_, "elastic",
        [self](std::size_t s, const dvec& x) {
          auto& st = self->state;
          return self->request(st.shards[s], kRequestTimeout, elastic_atom_v, st.cfg.index, x);
        },
        [](double* w, const dvec& e) {
          for (std::size_t j = 0; j < e.size(); ++j) w[j] -= e.data()[j];
        },
        error_handler());
  }

  void average_exchange() override {
    // Push the local model and continue from the mean, one pushpull per shard.
    auto self = self_;
    exchange_with_shards(
        self, loop_, "model-averaging",
        [self](std::size_t s, const dvec& x) {
          auto& st = self->state;
          return self->request(st.shards[s], kRequestTimeout, pushpull_atom_v, st.cfg.index,
                               st.exchanges, x);
        },
        [](double* w, const dvec& mean) { std::copy(mean.view().begin(), mean.view().end(), w); },
        error_handler());
  }

  void step_done() override { dml::actors::step_done(self_, loop_); }
  void fail(absl::Status why) override { error_handler()(as_error(self_->state, why)); }

 private:
  std::function<void(caf::error)> error_handler() const {
    auto self = self_;
    const uint64_t loop = loop_;
    return [self, loop](caf::error err) { finish_run(self, std::move(err), loop); };
  }

  self_ptr self_;
  uint64_t loop_;
  std::vector<int64_t> rows_;
};

void sgd_step(self_ptr self) {
  auto& st = self->state;
  if (!st.running) return;
  const uint64_t loop = st.loop;
  if (st.halted || st.clock >= st.max_clock) {
    finish_run(self, caf::none, loop);
    return;
  }
  const Dataset& sample_from = st.shared_data ? *st.shared_data : st.local;
  step_ops ops(self, loop,
               SampleBatch(st.cfg.seed, st.cfg.index, st.clock, sample_from.x.rows(),
                           st.cfg.batch_size));
  st.topo->sgd_step(ops);
}

worker_actor::behavior_type worker_impl(self_ptr self, worker_config cfg) {
  self->state.topo = MakeTopology(cfg.mode);
  self->state.cfg = std::move(cfg);
  self->state.who = "worker " + std::to_string(self->state.cfg.index) + ": ";
  return {
      [self](init_atom) -> caf::result<int64_t, int64_t> {
        auto& st = self->state;
        absl::Status s = LoadAndPartition(st);
        st.cfg.data.reset();  // the partition is ours now; let the host's copy go
        if (!s.ok()) return as_error(st, s);
        const int64_t m = st.topo->shares_predictions(st.cfg.model.kind) ? st.n_global : st.d;
        st.w.assign(static_cast<std::size_t>(m), 0.0);
        return {st.n_global, st.d};
      },
      [self](connect_atom, const std::vector<caf::actor>& shards, const int64_list& bounds) {
        // One-way: a bad wiring is remembered and fails the next run/round.
        auto& st = self->state;
        st.shards.clear();
        st.bounds.clear();
        st.connect_error = ConnectError(st, shards.size(), bounds);
        if (!st.connect_error.empty()) return;
        for (const auto& s : shards) st.shards.push_back(caf::actor_cast<parameter_shard>(s));
        st.bounds = bounds.values;
      },
      [self](run_atom, int64_t max_clock, int64_t report_every,
             int64_t start_clock) -> caf::result<worker_report> {
        auto& st = self->state;
        if (!st.connect_error.empty()) return fail(st.who + st.connect_error);
        if (start_clock < 0) return fail(st.who + "run from a negative clock");
        if (st.topo->coordinator_rounds()) {
          return fail(st.who + "run is not part of mode " + std::string(ModeName(st.cfg.mode)));
        }
        if (st.topo->uses_shards() &&
            (st.shards.empty() || st.bounds.size() != st.shards.size() + 1 ||
             st.bounds.back() != static_cast<int64_t>(st.w.size()))) {
          return fail(st.who + "not connected to shards covering the model");
        }
        if (!st.topo->uses_shards() &&
            (!st.cfg.hogwild || static_cast<int64_t>(st.cfg.hogwild->w.size()) != st.d)) {
          return fail(st.who + "hogwild mode without a shared model of the data's dimension");
        }
        // A run while running supersedes the old one (recovery restarts
        // every worker from a checkpoint): the old one answers now with
        // where it got to, and its pending continuations are dropped.
        if (st.running) finish_run(self, caf::none, st.loop);
        ++st.loop;
        st.running = true;
        st.halted = false;
        st.clock = start_clock;
        st.processed = start_clock * st.cfg.batch_size;
        st.exchanges = start_clock / st.cfg.tau;
        st.max_clock = max_clock;
        st.report_every = std::max<int64_t>(1, report_every);
        st.run_promise = self->make_response_promise<worker_report>();
        // A local model that never trained (a replacement after a lost
        // node) joining a run past its start begins from the shards' model
        // (easgd: the center; model-averaging: the last mean), not from 0.
        if (st.topo->keeps_local_model() && start_clock > 0 && !st.trained) {
          const uint64_t loop = st.loop;
          pull_all(self, st.exchanges, [self, loop] { self->send(self, step_atom_v, loop); },
                   [self, loop](caf::error err) { finish_run(self, std::move(err), loop); });
        } else {
          self->send(self, step_atom_v, st.loop);
        }
        st.trained = true;
        return st.run_promise;
      },
      [self](step_atom, uint64_t loop) {
        if (loop == self->state.loop) sgd_step(self);
      },
      [self](halt_atom) { self->state.halted = true; },
      [self](round_atom, int64_t r, const dvec& shared,
             int64_t steps) -> caf::result<block_sums, worker_report> {
        auto& st = self->state;
        if (shared.ref) {
          return internal::fetch_and_redeliver<worker_actor>(
              self, st.fetcher, self->make_response_promise<block_sums, worker_report>(), shared,
              [r, steps](dvec v) { return std::make_tuple(round_atom_v, r, std::move(v), steps); });
        }
        if (steps <= 0) steps = st.default_steps;
        if (!shared.wire_error.empty()) return fail(st.who + "round: " + shared.wire_error);
        if (!st.connect_error.empty()) return fail(st.who + st.connect_error);
        if (!st.solver) return fail(st.who + "round is only part of mode cocoa");
        if (shared.size() != st.w.size()) {
          return fail(st.who + "round with a shared vector of " + std::to_string(shared.size()) +
                      " entries; expected " + std::to_string(st.w.size()));
        }
        if (r < 0) return fail(st.who + "round " + std::to_string(r));
        // One vector for both calls (a copy only where no vector owns the values).
        const std::shared_ptr<const std::vector<double>> s_r = shared.as_vector();
        auto cert = st.solver->Certify(*s_r);
        if (!cert.ok()) return as_error(st, cert.status());
        st.bytes += shared.bytes();
        // The certificate goes out now: the coordinator decides on it while
        // this round solves.
        auto promise = self->make_response_promise<block_sums, worker_report>();
        promise.deliver(block_sums{cert->loss_sum, cert->gap_sum, cert->reg_sum, {}}, st.report());
        st.last_round = r;
        st.round_start_coords = st.solver->coordinates();
        auto up = st.solver->Solve(*s_r, st.cfg.sigma_prime, st.cfg.gamma, steps,
                                   st.cfg.interrupt.get());
        auto report_failure = [self](const std::string& what) {
          auto& st = self->state;
          worker_report failed = st.report();
          failed.wire_error = what;
          if (st.cfg.coordinator) caf::anon_send(st.cfg.coordinator, failed);
        };
        if (!up.ok()) {
          report_failure(st.who + std::string(up.status().message()));
          return promise;
        }
        st.processed += up->steps;
        ++st.clock;
        push_all(self, r, up->delta_shared, [] {},
                 [self, report_failure](caf::error err) {
                   report_failure(self->system().render(err));
                 },
                 &up->delta_shared);
        return promise;
      },
      [self](certify_atom, const dvec& shared) -> caf::result<block_sums> {
        auto& st = self->state;
        if (shared.ref) {
          return internal::fetch_and_redeliver<worker_actor>(
              self, st.fetcher, self->make_response_promise<block_sums>(), shared,
              [](dvec v) { return std::make_tuple(certify_atom_v, std::move(v)); });
        }
        if (!shared.wire_error.empty()) return fail(st.who + "certify: " + shared.wire_error);
        if (!shared.has_values()) return fail(st.who + "certify without a shared vector");
        if (st.solver) {
          auto c = st.solver->Certify(*shared.as_vector());
          if (!c.ok()) return as_error(st, c.status());
          return block_sums{c->loss_sum, c->gap_sum, c->reg_sum, {}};
        }
        if (!shared.has_values() || static_cast<int64_t>(shared.size()) != st.d) {
          return fail(st.who + "certify with " + std::to_string(shared.size()) +
                      " weights; the model has " + std::to_string(st.d));
        }
        auto loss = LossSum(st.local, st.cfg.model, *shared.as_vector());
        if (!loss.ok()) return as_error(st, loss.status());
        return block_sums{*loss, 0.0, 0.0, {}};
      },
      [self](coords_atom, int64_t r) -> caf::result<dvec> {
        auto& st = self->state;
        if (!st.solver) return dvec(st.w);
        if (r == st.last_round) return dvec(st.round_start_coords);
        if (r == st.last_round + 1) return dvec(st.solver->coordinates());
        return fail(st.who + "coordinates of round " + std::to_string(r) +
                    " are not kept (last round " + std::to_string(st.last_round) + ")");
      },
      [self](coords_atom, int64_t r, const dvec& coords) -> caf::result<int64_t> {
        // Checkpoint restore (cocoa): this block's coordinates as of round r.
        auto& st = self->state;
        if (coords.ref) {
          return internal::fetch_and_redeliver<worker_actor>(
              self, st.fetcher, self->make_response_promise<int64_t>(), coords,
              [r](dvec v) { return std::make_tuple(coords_atom_v, r, std::move(v)); });
        }
        if (!coords.wire_error.empty()) return fail(st.who + "restore: " + coords.wire_error);
        if (!st.solver) return fail(st.who + "restore is only part of mode cocoa");
        if (r < 0) return fail(st.who + "restore at round " + std::to_string(r));
        st.last_round = r - 1;
        st.round_start_coords.clear();
        // Empty: the zero state (a checkpoint taken before the first round).
        std::vector<double> c = coords.size() > 0
                                    ? coords.to_vector()
                                    : std::vector<double>(st.solver->coordinates().size(), 0.0);
        if (auto s = st.solver->set_coordinates(std::move(c)); !s.ok()) {
          return as_error(st, s);
        }
        return static_cast<int64_t>(coords.size());
      },
  };
}

}  // namespace

std::vector<int64_t> SampleBatch(uint64_t seed, int32_t index, int64_t clock, int64_t rows,
                                 int32_t batch) {
  Rng rng(seed ^ (static_cast<uint64_t>(index) + 1) * 0x9E3779B97F4A7C15ull ^
          (static_cast<uint64_t>(clock) + 1) * 0xBF58476D1CE4E5B9ull);
  std::vector<int64_t> out(static_cast<std::size_t>(batch));
  for (auto& r : out) r = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(rows)));
  return out;
}

worker_actor spawn_worker(caf::actor_system& sys, worker_config config, bool detached) {
  if (detached) return sys.spawn<caf::detached>(worker_impl, std::move(config));
  return sys.spawn(worker_impl, std::move(config));
}

}  // namespace dml::actors
