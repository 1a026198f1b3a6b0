#include "dml/actors/parameter_shard.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/result.hpp>
#include <caf/sec.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "dml/actors/coordinator.hpp"
#include "dml/actors/internal/bulk_resolve.hpp"
#include "dml/actors/internal/shard_core.hpp"
#include "dml/actors/network.hpp"
#include "dml/actors/topology/topology.hpp"
#include "dml/util/finite.hpp"

namespace dml::actors {
namespace {

// A refusal (internal::ShardError's "parameter shard: ..."), as the
// requester sees it.
caf::error as_error(const absl::Status& s) {
  if (s.ok()) return caf::none;
  return caf::make_error(caf::sec::invalid_argument, std::string(s.message()));
}

caf::error bad(const std::string& what) { return as_error(internal::ShardError(what)); }

struct pending_pull {
  int64_t clock;
  int32_t worker;
  key_list keys;  // empty: the whole range
  caf::typed_response_promise<dvec> promise;
};

// The actor's state: the mode-free core, the mode's rule, and the pulls
// waiting for the rule to allow their clock.
struct shard_state {
  internal::shard_core core;
  std::unique_ptr<shard_rule> rule;
  caf::actor coordinator;  // cocoa: told when all K deltas of a round are in
  std::vector<pending_pull> waiting;
  caf::actor fetcher;  // fetches dvecs that arrive by reference (bulk_resolve.hpp)
  static inline const char* name = "dml.parameter_shard";

  bool pull_ready(int64_t clock) const { return core.halted || rule->pull_ready(core, clock); }

  // The reply to a pull that the mode now allows.
  dvec serve(int32_t worker, int64_t clock, const key_list& keys) {
    rule->granted(core, clock);
    core.pulled_at[worker] = core.applied;
    auto& stats = core.stats;
    ++stats.pulls;
    stats.bytes_in += keys.bytes();
    if (!keys.keys) {
      stats.bytes_out += static_cast<int64_t>(core.w.size() * sizeof(double));
      return core.snapshot();
    }
    std::vector<double> out(keys.size());
    for (std::size_t k = 0; k < out.size(); ++k) out[k] = core.value((*keys.keys)[k]);
    stats.bytes_out += static_cast<int64_t>(out.size() * sizeof(double));
    return dvec(std::move(out));
  }

  void flush_waiting() {
    if (waiting.empty()) return;
    std::vector<pending_pull> still;
    for (auto& p : waiting) {
      if (pull_ready(p.clock)) {
        p.promise.deliver(serve(p.worker, p.clock, p.keys));
      } else {
        still.push_back(std::move(p));
      }
    }
    waiting = std::move(still);
  }

  caf::error check_worker(int32_t worker) const {
    if (worker < 0 || worker >= core.cfg.workers) {
      return bad("worker index " + std::to_string(worker) + " outside [0, " +
                 std::to_string(core.cfg.workers) + ")");
    }
    return caf::none;
  }

  // Applies one checked update by the mode's rule (its nonzeros: idx null
  // for dense; `held` owns them), then answers the pulls it released.
  // Other workers' pushes that the rule refused late fail their pulls.
  caf::error apply(int32_t worker, int64_t clock, const uint32_t* idx, const double* x,
                   std::size_t nnz, internal::held_push held) {
    held.prev_clock = core.clocks[worker];
    core.clocks[worker] = std::max(core.clocks[worker], clock + 1);
    ++core.stats.updates;
    held.idx = idx;
    held.x = x;
    held.nnz = nnz;
    std::vector<refused_push> others;
    absl::Status st = rule->apply(core, worker, clock, std::move(held), &others);
    for (auto& r : others) {
      // Their pushpull's pull waits for the next round (gone only if a
      // halt answered it already).
      auto it = std::find_if(waiting.begin(), waiting.end(), [&](const pending_pull& p) {
        return p.worker == r.worker && p.clock == core.round + 1 && !p.keys.keys;
      });
      if (it != waiting.end()) {
        it->promise.deliver(as_error(r.why));
        waiting.erase(it);
      }
    }
    flush_waiting();
    return as_error(st);
  }
};

using shard_ptr = parameter_shard::stateful_pointer<shard_state>;

// Rounds: once every worker's delta of round r is in (each pushes once per
// round, with clock r), the range is the shared vector of round r + 1; the
// coordinator gets it at once (it starts the next round with it).
void announce_rounds(shard_ptr self) {
  auto& st = self->state;
  if (!st.rule->announces_rounds() || !st.coordinator) return;
  const int64_t done = st.core.min_clock();
  if (done <= st.core.round) return;
  st.core.round = done;
  const dvec range = st.core.snapshot();
  st.core.stats.bytes_out += range.bytes();
  self->send(caf::actor_cast<coordinator_actor>(st.coordinator), round_atom_v, st.core.cfg.begin,
             done - 1, range);
}

// A checked pull: answered now if the mode allows `clock`, else once it
// does (flush_waiting).
caf::result<dvec> pull_or_wait(shard_ptr self, int32_t worker, int64_t clock, key_list keys) {
  auto& st = self->state;
  if (st.pull_ready(clock)) return st.serve(worker, clock, keys);
  auto promise = self->make_response_promise<dvec>();
  st.waiting.push_back(pending_pull{clock, worker, std::move(keys), promise});
  return promise;
}

// A dense push, checked, then applied by the mode's rule. defer_finite: a
// gathering round's pushpull, whose reply waits for the round anyway, has
// its values checked while the round's mean sums them.
caf::error push_dense(shard_ptr self, int32_t worker, int64_t clock, const dvec& x,
                      bool defer_finite = false) {
  auto& st = self->state;
  if (!x.wire_error.empty()) return bad("dense push: " + x.wire_error);
  if (auto err = st.check_worker(worker)) return err;
  if (static_cast<int64_t>(x.size()) != st.core.size()) {
    return bad("dense push of " + std::to_string(x.size()) + " values to a range of " +
               std::to_string(st.core.size()));
  }
  // A decoder that checked the values as they arrived said so; otherwise
  // one fast pass, and the slow one only to name the bad key.
  if (!(x.finite || defer_finite || AllFinite(x.data(), x.size()))) {
    return as_error(st.core.nonfinite_push(worker, x.data(), x.size()));
  }
  st.core.stats.bytes_in += x.bytes();
  internal::held_push held{x.owner, nullptr};
  held.checked = x.finite || !defer_finite;
  held.bytes = x.bytes();
  if (auto err = st.apply(worker, clock, nullptr, x.data(), x.size(), std::move(held))) {
    return err;
  }
  announce_rounds(self);
  return caf::none;
}

caf::result<int64_t> push_sparse(shard_ptr self, int32_t worker, int64_t clock,
                                 const sparse_dvec& x) {
  auto& st = self->state;
  if (!x.wire_error.empty()) return bad("sparse push: " + x.wire_error);
  if (auto err = st.check_worker(worker)) return err;
  if (!x.index || !x.value || x.index->size() != x.value->size()) {
    return bad("sparse push with mismatched index and value lengths");
  }
  const int64_t size = st.core.size();
  int64_t previous = -1;
  for (std::size_t k = 0; k < x.size(); ++k) {
    const int64_t j = (*x.index)[k];
    const double v = (*x.value)[k];
    if (j <= previous || j >= size) {
      return bad("sparse push from worker " + std::to_string(worker) + ": entry " +
                 std::to_string(k) + " has offset " + std::to_string(j) +
                 (j >= size ? " outside the range of " + std::to_string(size)
                            : std::string(" not above the previous one")));
    }
    if (!std::isfinite(v)) {
      return bad("sparse push from worker " + std::to_string(worker) + ": value at key " +
                 std::to_string(st.core.cfg.begin + j) + " is not finite");
    }
    previous = j;
  }
  st.core.stats.bytes_in += x.bytes();
  if (auto err = st.apply(worker, clock, x.index->data(), x.value->data(), x.size(),
                          internal::held_push{x.index, x.value})) {
    return err;
  }
  announce_rounds(self);
  return st.rule->push_reply(st.core);
}

caf::result<dvec> pull_keys(shard_ptr self, int32_t worker, int64_t clock, const key_list& keys) {
  if (!keys.wire_error.empty()) return bad("pull: " + keys.wire_error);
  auto& st = self->state;
  if (auto err = st.check_worker(worker)) return err;
  if (!keys.keys) return bad("pull with a null key list");
  const int64_t size = st.core.size();
  int64_t previous = -1;
  for (std::size_t k = 0; k < keys.size(); ++k) {
    const int64_t j = (*keys.keys)[k];
    if (j <= previous || j >= size) {
      return bad("pull from worker " + std::to_string(worker) + ": key " + std::to_string(k) +
                 " has offset " + std::to_string(j) +
                 (j >= size ? " outside the range of " + std::to_string(size)
                            : std::string(" not above the previous one")));
    }
    previous = j;
  }
  return pull_or_wait(self, worker, clock, keys);
}

// A checkpoint restore: this range's values as of `clock`.
caf::result<int64_t> restore(shard_ptr self, const dvec& values, int64_t clock) {
  auto& st = self->state;
  if (values.ref) {
    return internal::fetch_and_redeliver<parameter_shard>(
        self, st.fetcher, self->make_response_promise<int64_t>(), values,
        [clock](dvec v) { return std::make_tuple(init_atom_v, std::move(v), clock); },
        static_cast<std::size_t>(st.core.size()));
  }
  auto& core = st.core;
  if (!values.wire_error.empty()) return bad("restore: " + values.wire_error);
  if (static_cast<int64_t>(values.size()) != core.size()) {
    return bad("restore of " + std::to_string(values.size()) + " values to a range of " +
               std::to_string(core.size()));
  }
  if (clock < 0) return bad("restore at negative clock " + std::to_string(clock));
  for (std::size_t j = 0; j < values.size(); ++j) {
    if (!std::isfinite(values.data()[j])) {
      return bad("restore: value at key " +
                 std::to_string(core.cfg.begin + static_cast<int64_t>(j)) + " is not finite");
    }
  }
  core.w.replace(values.to_vector());
  std::fill(core.scales.begin(), core.scales.end(), 1.0);
  // Clocks as if every worker had pushed `clock` times: gathering
  // modes wait for that round next, ssp grants from there, and the
  // step schedule continues where the checkpoint was.
  std::fill(core.clocks.begin(), core.clocks.end(), clock);
  st.rule->restore(core, clock);
  return core.size();
}

parameter_shard::behavior_type shard_impl(shard_ptr self, shard_config cfg,
                                          caf::actor coordinator) {
  auto& st = self->state;
  st.rule = MakeTopology(cfg.mode)->make_shard_rule(cfg);
  st.core.cfg = std::move(cfg);
  st.core.lazy_l2 =
      st.rule->lazy_l2() && FormulationOf(st.core.cfg.model.kind) == Formulation::kDual;
  st.core.group_features();
  st.coordinator = std::move(coordinator);
  st.core.bulk = BulkChannelOf(self->home_system());
  st.core.w.assign(static_cast<std::size_t>(st.core.size()), 0.0);
  st.core.clocks.assign(st.core.cfg.workers, 0);
  st.core.pulled_at.assign(st.core.cfg.workers, 0);
  return {
      [self](push_atom, int32_t worker, int64_t clock, const dvec& x) -> caf::result<int64_t> {
        if (x.ref) {
          return internal::fetch_and_redeliver<parameter_shard>(
              self, self->state.fetcher, self->make_response_promise<int64_t>(), x,
              [worker, clock](dvec v) { return std::make_tuple(push_atom_v, worker, clock, std::move(v)); },
              static_cast<std::size_t>(self->state.core.size()));
        }
        if (auto err = push_dense(self, worker, clock, x)) return err;
        return self->state.rule->push_reply(self->state.core);
      },
      [self](pushpull_atom, int32_t worker, int64_t clock, const dvec& x) -> caf::result<dvec> {
        auto& st = self->state;
        if (x.ref) {
          return internal::fetch_and_redeliver<parameter_shard>(
              self, st.fetcher, self->make_response_promise<dvec>(), x,
              [worker, clock](dvec v) {
                return std::make_tuple(pushpull_atom_v, worker, clock, std::move(v));
              },
              static_cast<std::size_t>(st.core.size()));
        }
        // Halted, the pull is answered now: nothing would wait for the
        // round's check, so check on arrival.
        const bool defer = st.rule->checks_while_folding() && !st.core.halted;
        if (auto err = push_dense(self, worker, clock, x, defer)) return err;
        return pull_or_wait(self, worker, clock + 1, key_list{});
      },
      [self](push_atom, int32_t worker, int64_t clock, const sparse_dvec& x) -> caf::result<int64_t> {
        return push_sparse(self, worker, clock, x);
      },
      [self](pull_atom, int32_t worker, int64_t clock) -> caf::result<dvec> {
        auto& st = self->state;
        if (auto err = st.check_worker(worker)) return err;
        return pull_or_wait(self, worker, clock, key_list{});
      },
      [self](pull_atom, int32_t worker, int64_t clock, const key_list& keys) -> caf::result<dvec> {
        return pull_keys(self, worker, clock, keys);
      },
      [self](halt_atom) {
        self->state.core.halted = true;
        self->state.flush_waiting();
      },
      [self](calibrate_atom, double step0, double step_decay) {
        // A schedule that is not a positive finite step is ignored: the
        // shard keeps training with the one it has.
        if (!(step0 > 0) || !std::isfinite(step0) || !std::isfinite(step_decay)) return;
        self->state.core.cfg.step0 = step0;
        self->state.core.cfg.step_decay = step_decay;
      },
      [self](init_atom, const dvec& values, int64_t clock) -> caf::result<int64_t> {
        return restore(self, values, clock);
      },
      [self](elastic_atom, int32_t worker, const dvec& x) -> caf::result<dvec> {
        if (x.ref) {
          return internal::fetch_and_redeliver<parameter_shard>(
              self, self->state.fetcher, self->make_response_promise<dvec>(), x,
              [worker](dvec v) { return std::make_tuple(elastic_atom_v, worker, std::move(v)); },
              static_cast<std::size_t>(self->state.core.size()));
        }
        if (!x.wire_error.empty()) return bad("elastic exchange: " + x.wire_error);
        auto& st = self->state;
        if (auto err = st.check_worker(worker)) return err;
        auto e = st.rule->elastic(st.core, worker, x.view());
        if (!e.ok()) return as_error(e.status());
        return dvec(*std::move(e));
      },
      [self](read_atom) -> caf::result<dvec> { return self->state.core.snapshot(); },
      [self](stats_atom) -> caf::result<shard_stats> {
        shard_stats out = self->state.core.stats;
        out.clocks = self->state.core.clocks;
        return out;
      },
  };
}

}  // namespace

parameter_shard spawn_parameter_shard(caf::actor_system& sys, shard_config config,
                                      caf::actor coordinator) {
  return sys.spawn(shard_impl, std::move(config), std::move(coordinator));
}

}  // namespace dml::actors
