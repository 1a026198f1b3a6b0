#include "dml/actors/parameter_shard.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
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
#include "dml/actors/network.hpp"
#include "dml/solver/sgd.hpp"
#include "dml/util/finite.hpp"

namespace dml::actors {
namespace {

caf::error bad(std::string what) {
  return caf::make_error(caf::sec::invalid_argument, "parameter shard: " + std::move(what));
}

struct pending_pull {
  int64_t clock;
  int32_t worker;
  key_list keys;  // empty: the whole range
  caf::typed_response_promise<dvec> promise;
};

// The range's values, shared copy-on-write with the snapshots handed to
// pullers: K pulls of one state share one buffer, and a push copies it only
// while a snapshot of it is still referenced (in flight or held).
// Model averaging replaces every value each round (next_block, commit): then
// they live in a block of the bulk channel's shared arena, which pullers on
// this machine read in place (no copy); the other modes update in place
// and keep a std::vector.
class cow_values {
 public:
  void assign(std::size_t n, double v) {
    b_.reset();
    p_ = std::make_shared<std::vector<double>>(n, v);
  }
  void replace(std::vector<double> v) {
    b_.reset();
    p_ = std::make_shared<std::vector<double>>(std::move(v));
  }
  std::size_t size() const { return b_ ? bn_ : p_->size(); }
  double operator[](std::size_t j) const { return b_ ? b_.get()[j] : (*p_)[j]; }
  std::vector<double>& mut() {
    if (b_) {  // back into a vector (a mode that updates in place)
      p_ = std::make_shared<std::vector<double>>(b_.get(), b_.get() + bn_);
      b_.reset();
    }
    if (p_.use_count() > 1) {
      std::vector<double>& fresh = unshared(p_->size());
      fresh.assign(p_->begin(), p_->end());
      std::swap(p_, spare_);
    }
    return *p_;
  }
  dvec share() const { return b_ ? dvec(b_, b_.get(), bn_) : dvec(p_); }
  // For a writer that replaces all n values: where to write them, never
  // w's own buffer, so a round rejected after the write (a bad value found
  // while summing) leaves w as it was; commit() makes them w. A block of
  // `bulk`'s arena (the spare one when no snapshot still reads it, else a
  // new one), or with no arena a vector.
  double* next_block(std::size_t n, net::BulkChannel* bulk) {
    next_in_block_ = false;
    if (bulk != nullptr) {
      if (!(b_spare_ && b_spare_.use_count() == 1 && bn_spare_ == n)) {
        b_spare_.reset();
        if (auto block = bulk->Allocate(n)) {
          b_spare_ = std::shared_ptr<double>(block->owner, block->data);
          bn_spare_ = n;
        }
      }
      if (b_spare_) {
        next_in_block_ = true;
        return b_spare_.get();
      }
    }
    return unshared(n).data();
  }
  void commit() {
    if (next_in_block_) {
      std::swap(b_, b_spare_);
      std::swap(bn_, bn_spare_);
    } else {
      b_.reset();
      std::swap(p_, spare_);
    }
  }

 private:
  // spare_ sized n and referenced by nobody else: the buffer a snapshot
  // held last time once its readers are done (no allocation, no page
  // faults in steady state), else a new one.
  std::vector<double>& unshared(std::size_t n) {
    if (!spare_ || spare_.use_count() > 1) spare_ = std::make_shared<std::vector<double>>();
    spare_->resize(n);
    return *spare_;
  }

  std::shared_ptr<std::vector<double>> p_ = std::make_shared<std::vector<double>>();
  std::shared_ptr<std::vector<double>> spare_;
  std::shared_ptr<double> b_, b_spare_;  // arena blocks; b_ set: the values are there
  std::size_t bn_ = 0, bn_spare_ = 0;
  bool next_in_block_ = false;  // what next_block handed out
};

// One worker's push of a gathering round (sync, model-averaging), kept
// uncopied until all K are in: its nonzeros (idx null: dense) and the
// buffers that own them. A dense pushpull's values are checked while the
// mean sums them (checked false until then: one pass over the push, not
// two); prev_clock and bytes undo its arrival if that check fails.
struct held_push {
  std::shared_ptr<const void> owner, owner2;
  const uint32_t* idx = nullptr;
  const double* x = nullptr;
  std::size_t nnz = 0;
  bool checked = true;
  int64_t prev_clock = 0;
  int64_t bytes = 0;
};

struct shard_state {
  shard_config cfg;
  cow_values w;
  net::BulkChannel* bulk = nullptr;  // the system's, if any (outlives the actor)
  int64_t round = 0;    // sync / model-averaging: clocks completed; cocoa: rounds announced
  caf::actor coordinator;  // cocoa: told when all K deltas of a round are in
  int64_t applied = 0;  // gradients or deltas applied
  std::vector<held_push> gathered;  // sync / model-averaging: per worker
  std::vector<double> scratch;      // sync: the mean gradient
  std::vector<bool> arrived;
  int32_t arrivals = 0;
  std::vector<int64_t> clocks;  // pushes seen per worker
  std::vector<pending_pull> waiting;
  shard_stats stats;
  static inline const char* name = "dml.parameter_shard";

  int64_t size() const { return cfg.end - cfg.begin; }
  bool gathers() const { return cfg.mode == Mode::kSync || cfg.mode == Mode::kModelAveraging; }

  double step_at(double t) const { return cfg.step0 / (1.0 + cfg.step_decay * t); }

  // Pure-L2 models in the gradient modes keep w = scale * v (see header).
  double scale = 1.0;
  bool lazy_l2() const {
    return FormulationOf(cfg.model.kind) == Formulation::kDual &&
           (cfg.mode == Mode::kSync || cfg.mode == Mode::kAsync || cfg.mode == Mode::kSsp);
  }
  double value(std::size_t j) const { return scale * w[j]; }

  // w <- prox(w - step * g) on this range, g given by its nonzeros (idx
  // null: dense, nnz == range size).
  caf::error sgd_step(const uint32_t* idx, const double* g, std::size_t nnz, double t) {
    const double step = step_at(t);
    if (lazy_l2()) {
      const double s = step / scale;
      std::vector<double>& v = w.mut();
      for (std::size_t k = 0; k < nnz; ++k) v[idx ? idx[k] : k] -= s * g[k];
      scale /= 1.0 + step * cfg.model.lambda;
      if (scale < 1e-150) {  // fold before underflow
        for (double& x : v) x *= scale;
        scale = 1.0;
      }
      return caf::none;
    }
    std::vector<double>& v = w.mut();
    for (std::size_t k = 0; k < nnz; ++k) v[idx ? idx[k] : k] -= step * g[k];
    absl::Status st = ProximalRegularizerStep(cfg.model, step, v);
    if (!st.ok()) return bad(std::string(st.message()));
    return caf::none;
  }

  int64_t min_clock() const {
    return clocks.empty() ? 0 : *std::min_element(clocks.begin(), clocks.end());
  }

  bool halted = false;

  bool pull_ready(int64_t clock) const {
    if (halted) return true;
    if (gathers()) return clock <= round;
    if (cfg.mode == Mode::kSsp) return min_clock() >= clock - cfg.staleness;
    return true;
  }

  dvec snapshot() const {
    if (scale == 1.0) {
      return w.share();
    }
    std::vector<double> out(w.size());
    for (std::size_t j = 0; j < w.size(); ++j) out[j] = value(j);
    return dvec(std::move(out));
  }

  // The reply to a pull that the mode now allows.
  dvec serve(int64_t clock, const key_list& keys) {
    // Pulls released by the halt are not grants of the bound: the job is
    // over, and a worker left blocked behind a lost peer may be s+1 ahead.
    if (cfg.mode == Mode::kSsp && !halted) {
      stats.max_granted_staleness = std::max(stats.max_granted_staleness, clock - min_clock());
    }
    ++stats.pulls;
    stats.bytes_in += keys.bytes();
    if (!keys.keys) {
      stats.bytes_out += static_cast<int64_t>(w.size() * sizeof(double));
      return snapshot();
    }
    std::vector<double> out(keys.size());
    for (std::size_t k = 0; k < out.size(); ++k) out[k] = value((*keys.keys)[k]);
    stats.bytes_out += static_cast<int64_t>(out.size() * sizeof(double));
    return dvec(std::move(out));
  }

  void answer(pending_pull& p) { p.promise.deliver(serve(p.clock, p.keys)); }

  void flush_waiting() {
    if (waiting.empty()) return;
    std::vector<pending_pull> still;
    for (auto& p : waiting) {
      if (pull_ready(p.clock)) {
        answer(p);
      } else {
        still.push_back(std::move(p));
      }
    }
    waiting = std::move(still);
  }

  caf::error check_worker(int32_t worker) const {
    if (worker < 0 || worker >= cfg.workers) {
      return bad("worker index " + std::to_string(worker) + " outside [0, " +
                 std::to_string(cfg.workers) + ")");
    }
    return caf::none;
  }

  // out = mean of the K gathered pushes, summed in worker order
  // (((x_0 + x_1) + x_2) + ...) / K, for every key. All dense: in blocks
  // that stay in L1 (one pass over each push, one write of out). Returns
  // false when a push not yet checked may hold a non-finite value: a sum
  // with a NaN or an infinity in it is not finite, so a finite block of
  // out clears every push for that block (the check costs a pass over an
  // L1-resident block, not over the pushes).
  bool gathered_mean(double* o, std::size_t n) const {
    const double inv_k = 1.0 / cfg.workers;
    bool dense = true, unchecked = false;
    for (const held_push& g : gathered) {
      dense = dense && g.idx == nullptr;
      unchecked = unchecked || !g.checked;
    }
    bool clear = true;
    if (dense) {
      // Up to four pushes per pass (the same order of additions): the
      // pushes are read as concurrent streams, not one short run after
      // another, and out is written once per four instead of per push.
      constexpr std::size_t kBlock = 2048;
      const std::size_t kk = gathered.size();
      for (std::size_t b = 0; b < n; b += kBlock) {
        const std::size_t e = std::min(n, b + kBlock);
        for (std::size_t k = 0; k < kk; k += 4) {
          const std::size_t m = std::min<std::size_t>(4, kk - k);
          const double* x0 = gathered[k].x;
          const double* x1 = m > 1 ? gathered[k + 1].x : nullptr;
          const double* x2 = m > 2 ? gathered[k + 2].x : nullptr;
          const double* x3 = m > 3 ? gathered[k + 3].x : nullptr;
          const bool first = k == 0, last = k + m == kk;
          const double s = last ? inv_k : 1.0;
          if (m == 4 && first) {
            for (std::size_t j = b; j < e; ++j) o[j] = (((x0[j] + x1[j]) + x2[j]) + x3[j]) * s;
          } else if (m == 4) {
            for (std::size_t j = b; j < e; ++j) {
              o[j] = ((((o[j] + x0[j]) + x1[j]) + x2[j]) + x3[j]) * s;
            }
          } else {
            for (std::size_t j = b; j < e; ++j) {
              double t = first ? x0[j] : o[j] + x0[j];
              if (m > 1) t += x1[j];
              if (m > 2) t += x2[j];
              o[j] = t * s;
            }
          }
        }
        if (unchecked && clear) clear = AllFinite(o + b, e - b);
      }
      return clear;
    }
    std::fill(o, o + n, 0.0);
    for (const auto& g : gathered) {
      for (std::size_t k = 0; k < g.nnz; ++k) o[g.idx ? g.idx[k] : k] += g.x[k];
    }
    for (std::size_t j = 0; j < n; ++j) o[j] *= inv_k;
    return !unchecked || AllFinite(o, n);
  }

  // The refusal of worker's dense push x[0, n) naming its first
  // non-finite key, or none when every value is finite.
  caf::error nonfinite_push(int32_t worker, const double* x, std::size_t n) const {
    for (std::size_t j = 0; j < n; ++j) {
      if (!std::isfinite(x[j])) {
        return bad("push from worker " + std::to_string(worker) + ": value at key " +
                   std::to_string(cfg.begin + static_cast<int64_t>(j)) + " is not finite");
      }
    }
    return caf::none;
  }

  // After gathered_mean found a non-finite sum: every gathered push not
  // yet checked that holds a non-finite value is refused as push_dense
  // would have refused it on arrival (its arrival undone; the round waits
  // for a good push from that worker). The error goes to `current` (the
  // pusher being handled) as the return value, to any other offender
  // through the pull of its pushpull, still waiting. Nothing refused: the
  // pushes were finite and their sum overflowed (kept, as before).
  caf::error refuse_nonfinite(int32_t current) {
    caf::error mine;
    for (int32_t k = 0; k < cfg.workers; ++k) {
      held_push& g = gathered[k];
      if (!arrived[k] || g.checked) continue;
      caf::error err = nonfinite_push(k, g.x, g.nnz);
      if (!err) {
        g.checked = true;
        continue;
      }
      clocks[k] = g.prev_clock;
      --stats.updates;
      stats.bytes_in -= g.bytes;
      arrived[k] = false;
      --arrivals;
      g = held_push{};
      if (k == current) {
        mine = std::move(err);
        continue;
      }
      auto it = std::find_if(waiting.begin(), waiting.end(), [&](const pending_pull& p) {
        return p.worker == k && p.clock == round + 1 && !p.keys.keys;
      });
      if (it != waiting.end()) {  // gone only if a halt answered it already
        it->promise.deliver(std::move(err));
        waiting.erase(it);
      }
    }
    return mine;
  }

  // Applies one update given by its nonzeros (idx null: dense).
  // `held` owns idx and x (kept by the gathering modes until the round ends).
  caf::error apply(int32_t worker, int64_t clock, const uint32_t* idx, const double* x,
                   std::size_t nnz, held_push held) {
    held.prev_clock = clocks[worker];
    clocks[worker] = std::max(clocks[worker], clock + 1);
    ++stats.updates;
    switch (cfg.mode) {
      case Mode::kSync:
      case Mode::kModelAveraging: {
        // Once halted, a barrier may have been released early: a push for
        // a round the shard will not complete is dropped, not an error.
        if (halted && (clock != round || arrived[worker])) return caf::none;
        if (clock != round) {
          return bad("worker " + std::to_string(worker) + " pushed clock " +
                     std::to_string(clock) + " but the shard is at clock " + std::to_string(round));
        }
        if (arrived[worker]) {
          return bad("worker " + std::to_string(worker) + " pushed clock " +
                     std::to_string(clock) + " twice");
        }
        arrived[worker] = true;
        held.idx = idx;
        held.x = x;
        held.nnz = nnz;
        gathered[worker] = std::move(held);
        if (++arrivals < cfg.workers) return caf::none;
        // All K are in: their mean, summed in worker order (deterministic).
        // Model averaging writes it into w's next buffer (w's values once
        // committed), sync into a scratch buffer for the step; neither
        // allocates in steady state.
        const auto n = static_cast<std::size_t>(size());
        double* mean = nullptr;
        if (cfg.mode == Mode::kSync) {
          scratch.resize(n);
          mean = scratch.data();
        } else {
          mean = w.next_block(n, bulk);
        }
        if (!gathered_mean(mean, n)) {
          caf::error refused = refuse_nonfinite(worker);
          if (arrivals < cfg.workers) return refused;  // w untouched
        }
        for (auto& g : gathered) g = held_push{};
        caf::error err;
        if (cfg.mode == Mode::kSync) {
          err = sgd_step(nullptr, mean, n, static_cast<double>(round));
        } else {
          w.commit();
        }
        std::fill(arrived.begin(), arrived.end(), false);
        arrivals = 0;
        ++round;
        ++applied;
        flush_waiting();
        return err;
      }
      case Mode::kAsync:
      case Mode::kSsp: {
        auto err = sgd_step(idx, x, nnz, static_cast<double>(applied) / cfg.workers);
        ++applied;
        flush_waiting();
        return err;
      }
      case Mode::kCocoa: {
        std::vector<double>& v = w.mut();
        for (std::size_t k = 0; k < nnz; ++k) v[idx ? idx[k] : k] += cfg.gamma * x[k];
        ++applied;
        return caf::none;
      }
      default:
        return bad(std::string("push is not part of mode ") + std::string(ModeName(cfg.mode)));
    }
  }
};

using shard_ptr = parameter_shard::stateful_pointer<shard_state>;

// cocoa: once every worker's delta of round r is in (each pushes once per
// round, with clock r), the range is the shared vector of round r + 1; the
// coordinator gets it at once (it starts the next round with it).
void announce_rounds(shard_ptr self) {
  auto& st = self->state;
  if (st.cfg.mode != Mode::kCocoa || !st.coordinator) return;
  const int64_t done = st.min_clock();
  if (done <= st.round) return;
  st.round = done;
  const dvec range = st.snapshot();
  st.stats.bytes_out += range.bytes();
  self->send(caf::actor_cast<coordinator_actor>(st.coordinator), round_atom_v, st.cfg.begin,
             done - 1, range);
}

// A checked pull: answered now if the mode allows `clock`, else once it
// does (flush_waiting).
caf::result<dvec> pull_or_wait(shard_ptr self, int32_t worker, int64_t clock, key_list keys) {
  auto& st = self->state;
  if (st.pull_ready(clock)) return st.serve(clock, keys);
  auto promise = self->make_response_promise<dvec>();
  st.waiting.push_back(pending_pull{clock, worker, std::move(keys), promise});
  return promise;
}

// A dense push, checked, then applied by the mode's rule. defer_finite: a
// gathering round's pushpull, whose reply waits for the round anyway, has
// its values checked while the round's mean sums them (refuse_nonfinite).
caf::error push_dense(shard_ptr self, int32_t worker, int64_t clock, const dvec& x,
                      bool defer_finite = false) {
  auto& st = self->state;
  if (!x.wire_error.empty()) return bad("dense push: " + x.wire_error);
  if (auto err = st.check_worker(worker)) return err;
  if (static_cast<int64_t>(x.size()) != st.size()) {
    return bad("dense push of " + std::to_string(x.size()) + " values to a range of " +
               std::to_string(st.size()));
  }
  // A decoder that checked the values as they arrived said so; otherwise
  // one fast pass, and the slow one only to name the bad key.
  if (!(x.finite || defer_finite || AllFinite(x.data(), x.size()))) {
    return st.nonfinite_push(worker, x.data(), x.size());
  }
  st.stats.bytes_in += x.bytes();
  held_push held{x.owner, nullptr};
  held.checked = x.finite || !defer_finite;
  held.bytes = x.bytes();
  if (auto err = st.apply(worker, clock, nullptr, x.data(), x.size(), std::move(held))) {
    return err;
  }
  announce_rounds(self);
  return caf::none;
}

parameter_shard::behavior_type shard_impl(shard_ptr self, shard_config cfg,
                                          caf::actor coordinator) {
  auto& st = self->state;
  st.cfg = cfg;
  st.coordinator = std::move(coordinator);
  st.bulk = BulkChannelOf(self->home_system());
  st.w.assign(static_cast<std::size_t>(st.size()), 0.0);
  st.clocks.assign(cfg.workers, 0);
  if (st.gathers()) {
    st.gathered.assign(cfg.workers, {});
    st.arrived.assign(cfg.workers, false);
  }
  return {
      [self](push_atom, int32_t worker, int64_t clock, const dvec& x) -> caf::result<int64_t> {
        if (auto err = push_dense(self, worker, clock, x)) return err;
        return self->state.gathers() ? self->state.round : self->state.applied;
      },
      [self](pushpull_atom, int32_t worker, int64_t clock, const dvec& x) -> caf::result<dvec> {
        auto& st = self->state;
        // Halted, the pull is answered now: nothing would wait for the
        // round's check, so check on arrival.
        if (auto err = push_dense(self, worker, clock, x, st.gathers() && !st.halted)) return err;
        return pull_or_wait(self, worker, clock + 1, key_list{});
      },
      [self](push_atom, int32_t worker, int64_t clock, const sparse_dvec& x) -> caf::result<int64_t> {
        auto& st = self->state;
        if (!x.wire_error.empty()) return bad("sparse push: " + x.wire_error);
        if (auto err = st.check_worker(worker)) return err;
        if (!x.index || !x.value || x.index->size() != x.value->size()) {
          return bad("sparse push with mismatched index and value lengths");
        }
        int64_t previous = -1;
        for (std::size_t k = 0; k < x.size(); ++k) {
          const int64_t j = (*x.index)[k];
          const double v = (*x.value)[k];
          if (j <= previous || j >= st.size()) {
            return bad("sparse push from worker " + std::to_string(worker) + ": entry " +
                       std::to_string(k) + " has offset " + std::to_string(j) +
                       (j >= st.size() ? " outside the range of " + std::to_string(st.size())
                                       : std::string(" not above the previous one")));
          }
          if (!std::isfinite(v)) {
            return bad("sparse push from worker " + std::to_string(worker) + ": value at key " +
                       std::to_string(st.cfg.begin + j) + " is not finite");
          }
          previous = j;
        }
        st.stats.bytes_in += x.bytes();
        if (auto err = st.apply(worker, clock, x.index->data(), x.value->data(), x.size(),
                                held_push{x.index, x.value})) {
          return err;
        }
        announce_rounds(self);
        return st.gathers() ? st.round : st.applied;
      },
      [self](pull_atom, int32_t worker, int64_t clock) -> caf::result<dvec> {
        auto& st = self->state;
        if (auto err = st.check_worker(worker)) return err;
        return pull_or_wait(self, worker, clock, key_list{});
      },
      [self](pull_atom, int32_t worker, int64_t clock, const key_list& keys) -> caf::result<dvec> {
        if (!keys.wire_error.empty()) return bad("pull: " + keys.wire_error);
        auto& st = self->state;
        if (auto err = st.check_worker(worker)) return err;
        if (!keys.keys) return bad("pull with a null key list");
        int64_t previous = -1;
        for (std::size_t k = 0; k < keys.size(); ++k) {
          const int64_t j = (*keys.keys)[k];
          if (j <= previous || j >= st.size()) {
            return bad("pull from worker " + std::to_string(worker) + ": key " + std::to_string(k) +
                       " has offset " + std::to_string(j) +
                       (j >= st.size() ? " outside the range of " + std::to_string(st.size())
                                       : std::string(" not above the previous one")));
          }
          previous = j;
        }
        return pull_or_wait(self, worker, clock, keys);
      },
      [self](halt_atom) {
        self->state.halted = true;
        self->state.flush_waiting();
      },
      [self](init_atom, const dvec& values, int64_t clock) -> caf::result<int64_t> {
        auto& st = self->state;
        if (!values.wire_error.empty()) return bad("restore: " + values.wire_error);
        if (static_cast<int64_t>(values.size()) != st.size()) {
          return bad("restore of " + std::to_string(values.size()) + " values to a range of " +
                     std::to_string(st.size()));
        }
        if (clock < 0) return bad("restore at negative clock " + std::to_string(clock));
        for (std::size_t j = 0; j < values.size(); ++j) {
          if (!std::isfinite(values.data()[j])) {
            return bad("restore: value at key " +
                       std::to_string(st.cfg.begin + static_cast<int64_t>(j)) + " is not finite");
          }
        }
        st.w.replace(values.to_vector());
        st.scale = 1.0;
        // Clocks as if every worker had pushed `clock` times: sync and
        // model-averaging wait for that round next, ssp grants from there,
        // and the step schedule continues where the checkpoint was.
        st.round = clock;
        st.applied = st.cfg.mode == Mode::kAsync || st.cfg.mode == Mode::kSsp
                         ? clock * st.cfg.workers
                         : clock;
        std::fill(st.clocks.begin(), st.clocks.end(), clock);
        if (st.gathers()) {
          std::fill(st.arrived.begin(), st.arrived.end(), false);
          st.gathered.assign(st.cfg.workers, held_push{});
          st.arrivals = 0;
        }
        return st.size();
      },
      [self](elastic_atom, int32_t worker, const dvec& x) -> caf::result<dvec> {
        if (!x.wire_error.empty()) return bad("elastic exchange: " + x.wire_error);
        auto& st = self->state;
        if (auto err = st.check_worker(worker)) return err;
        if (st.cfg.mode != Mode::kEasgd) return bad("elastic exchange outside easgd mode");
        if (static_cast<int64_t>(x.size()) != st.size()) {
          return bad("elastic exchange of " + std::to_string(x.size()) +
                     " values with a range of " + std::to_string(st.size()));
        }
        std::vector<double> e(x.size());
        std::vector<double>& center = st.w.mut();
        for (std::size_t j = 0; j < e.size(); ++j) {
          const double xj = x.data()[j];
          if (!std::isfinite(xj)) {
            return bad("elastic exchange from worker " + std::to_string(worker) +
                       ": value at key " + std::to_string(st.cfg.begin + static_cast<int64_t>(j)) +
                       " is not finite");
          }
          e[j] = st.cfg.easgd_alpha * (xj - center[j]);
          center[j] += e[j];
        }
        ++st.stats.updates;
        ++st.applied;
        st.clocks[worker] += 1;
        st.stats.bytes_in += x.bytes();
        st.stats.bytes_out += x.bytes();
        return dvec(std::move(e));
      },
      [self](read_atom) -> caf::result<dvec> { return self->state.snapshot(); },
      [self](stats_atom) -> caf::result<shard_stats> {
        shard_stats out = self->state.stats;
        out.clocks = self->state.clocks;
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
