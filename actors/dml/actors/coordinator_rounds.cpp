// The round driver (topologies with coordinator_rounds(): cocoa).
//
// Round r, pipelined: the coordinator sends every worker round(r, s_r); each
// answers at once with its share of the certificate at s_r, then solves
// and pushes its delta; each shard, once all K deltas of round r are in,
// sends its range of s_{r+1}. The coordinator decides on the certificate
// while the workers solve: if it stops, the model is s_r (and, for primal
// models, the coordinates of round r, which workers keep); otherwise round
// r + 1 starts as soon as every range of s_{r+1} is in. Three message hops
// per round on the critical path (round, push, range).
#include <cmath>

#include "dml/actors/internal/coordinator_state.hpp"
#include "dml/actors/wire.hpp"
#include "dml/objective/evaluate.hpp"

namespace dml::actors::internal {
namespace {

void cocoa_round(self_ptr self);

void cocoa_finish(self_ptr self) {
  auto& st = self->state;
  if (!st.plan.shares_predictions()) return finish_job(self, st.shared.to_vector(), 0);
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
  return st.spec().recovery.checkpoint_every > 0 && (!st.nodes.empty() || !st.spec().recovery.path.empty());
}

// Every checkpoint_every rounds (jobs on nodes, or with a checkpoint
// file): the shared vector of this round and every worker's coordinates,
// kept to restore from after a loss (and written to the file), then `then`.
template <class Then>
void cocoa_checkpoint(self_ptr self, Then then) {
  auto& st = self->state;
  if (!checkpointing(st) || st.round % st.spec().recovery.checkpoint_every != 0) return then();
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

// Automatic H: the round before this certificate ran with the H it was sent
// with; its wall time (certificate to certificate) and gap drop go to the
// tuner. Its reports give each worker's steps at the spec's H once.
void tune_local_epochs(coord_state& st, double gap) {
  auto& a = st.auto_h;
  const double now = st.seconds();
  const int64_t prev = st.round - 1;
  auto sent = a.sent_h.find(prev);
  if (a.last_seconds >= 0 && sent != a.sent_h.end()) {
    if (a.default_steps.empty() && sent->second == st.spec().cocoa.local_epochs &&
        a.last_processed.size() == st.processed.size()) {
      a.default_steps.resize(st.processed.size());
      for (std::size_t k = 0; k < st.processed.size(); ++k) {
        a.default_steps[k] = std::max<int64_t>(1, st.processed[k] - a.last_processed[k]);
      }
    }
    if (a.tuner->Observe(sent->second, now - a.last_seconds, a.last_gap, gap)) {
      append_event(st, "local_epochs", absl::StrCat("H = ", a.tuner->h(), " local epochs"));
    }
  }
  a.sent_h.erase(a.sent_h.begin(), a.sent_h.upper_bound(prev));
  a.last_seconds = now;
  a.last_gap = gap;
  a.last_processed = st.processed;
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
  if (st.plan.shares_predictions()) {
    primal = total.loss_sum * inv_n + total.reg_sum;
    gap = std::max(0.0, total.gap_sum);
  } else {
    primal = total.loss_sum * inv_n + RegularizerValue(st.spec().model, *st.shared.as_vector());
    gap = std::max(0.0, total.gap_sum * inv_n);
  }
  if (auto& a = st.auto_h; a.tuner) {
    // The tuner follows the best gap so far (lowest primal minus highest
    // dual seen): also a valid bound, and monotone, where a round's own gap
    // jumps with the primal of its shared vector.
    a.best_primal = std::min(a.best_primal, primal);
    a.best_dual = std::max(a.best_dual, primal - gap);
    tune_local_epochs(st, std::max(a.best_primal - a.best_dual, 0.0));
  }
  record(self, primal, primal - gap, gap);
  const StopRule& stop = st.spec().stop;
  StopReason why;
  if (gap <= GapTarget(stop, primal)) {
    st.reason = StopReason::kConverged;
  } else if (stop.target_primal && primal <= *stop.target_primal) {
    st.reason = StopReason::kTargetReached;
  } else if (st.epochs >= stop.max_epochs) {
    st.reason = StopReason::kMaxEpochs;
  } else if (external_stop(st, &why)) {
    st.reason = why;
    if (enter(st, job_phase::kStopping)) {
      // The workers are already solving this round: cut it short and take
      // its result, certified, as the model (one more certificate).
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
  // Steps per worker: 0 = its default (H = cocoa.local_epochs); with
  // automatic H, the tuner's H scaled from those defaults once known.
  std::vector<int64_t> steps(st.workers.size(), 0);
  if (auto& a = st.auto_h; a.tuner) {
    const bool scaled = a.default_steps.size() == st.workers.size();
    const double h = scaled ? a.tuner->h() : st.spec().cocoa.local_epochs;
    a.sent_h[r] = h;
    for (std::size_t k = 0; scaled && k < steps.size(); ++k) {
      steps[k] = std::max<int64_t>(
          1, std::llround(static_cast<double>(a.default_steps[k]) * h / st.spec().cocoa.local_epochs));
    }
  }
  for (std::size_t k = 0; k < st.workers.size(); ++k) {
    self->request(st.workers[k], reply_timeout(st), round_atom_v, r, s, steps[k])
        .then(
            [self, k, sums, remaining, gen, r](block_sums& b, worker_report& report) {
              auto& st = self->state;
              if (st.finished() || gen != st.generation || r != st.pipe.round) return;
              if (!b.wire_error.empty() || !report.wire_error.empty()) {
                return fail_job(self, absl::DataLossError(absl::StrCat(
                                          "round reply of worker ", k, ": ",
                                          b.wire_error.empty() ? report.wire_error : b.wire_error)));
              }
              if (k < st.base_pending.size() && st.base_pending[k]) {
                st.processed_base[k] = st.resumed_counts[k] - report.processed;
                st.base_pending[k] = false;
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

void round_begin(self_ptr self) {
  auto& st = self->state;
  st.shared = dvec(st.ckpt.shared);  // zeros: shards start at zero too
  cocoa_round(self);
}

// After a restore: every worker's coordinates back to the checkpoint, and
// the shared vector (the shards hold it again) with them.
void round_resume(self_ptr self) {
  auto& st = self->state;
  const auto& c = st.ckpt;
  st.shared = dvec(c.shared);
  const uint64_t gen = st.generation;
  auto remaining = std::make_shared<std::size_t>(st.workers.size());
  for (std::size_t k = 0; k < st.workers.size(); ++k) {
    dvec coords = k < c.coords.size() ? dvec(c.coords[k]) : dvec();
    self->request(st.workers[k], reply_timeout(st), coords_atom_v, int64_t{c.round}, coords)
        .then(
            [self, gen, remaining](int64_t) {
              if (self->state.finished() || gen != self->state.generation) return;
              if (--*remaining == 0) cocoa_round(self);
            },
            [self, gen](caf::error& err) {
              if (gen == self->state.generation) fail_job(self, err);
            });
  }
}

// An outside stop: the certificate of the round in progress decides
// (cocoa_decide); the local solves end early.
void round_stop(self_ptr self, StopReason) { interrupt_solves(self); }

}  // namespace

void cocoa_range(self_ptr self, const caf::actor_addr& from, int64_t begin, int64_t round,
                 const dvec& part) {
  auto& st = self->state;
  if (st.finished() || !st.topo().coordinator_rounds()) return;
  // Only the current shards count: a replaced one may still be talking.
  std::size_t s = 0;
  while (s < st.shards.size() && (!from || st.shards[s].address() != from)) ++s;
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

const training_driver& RoundDriver() {
  static const training_driver d{round_begin, round_resume, round_stop};
  return d;
}

}  // namespace dml::actors::internal
