// The free-running driver (SGD topologies): workers run their own loops
// from a clock and report every few clocks; the coordinator evaluates the
// primal every eval_every_epochs (each evaluation is also the restart point
// after a node loss), halts everyone when a rule holds, and certifies the
// final model.
#include <cmath>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "dml/actors/internal/coordinator_state.hpp"
#include "dml/actors/wire.hpp"
#include "dml/objective/evaluate.hpp"
#include "dml/objective/newton_certificate.hpp"

namespace dml::actors::internal {
namespace {

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
              if (self->state.finished() || gen != self->state.generation) return;
              if (auto bad = WireErrorOf(stats); !bad.ok()) return fail_job(self, bad);
              *best = std::max(*best, stats.max_granted_staleness);
              if (--*remaining == 0) done(*best);
            },
            [self, gen](caf::error& err) {
              if (gen == self->state.generation) fail_job(self, err);
            });
  }
}

// hogwild on nodes: a worker's (or the model read's) failure is often the
// first sign of a node's loss, seen by a key-value member before the
// coordinator's own connection to that node closes. Ask the group's nodes
// first: a node that does not answer is lost (node_lost says so, naming
// it); if all answer, the failure is the job's.
void kv_failure(self_ptr self, std::function<void()> fail) {
  auto& st = self->state;
  if (st.kv_hosts.empty()) return fail();
  auto remaining = std::make_shared<std::size_t>(st.kv_hosts.size());
  auto lost = std::make_shared<int>(-1);
  const uint64_t gen = st.generation;
  for (int n : st.kv_hosts) {
    auto one = [self, remaining, lost, gen, fail, n](bool answered) {
      auto& st = self->state;
      if (!answered && *lost < 0) *lost = n;
      if (--*remaining > 0 || st.finished() || gen != st.generation) return;
      if (*lost >= 0) return node_lost(self, *lost);
      fail();
    };
    self->request(st.nodes[static_cast<std::size_t>(n)], node_silence(st), hello_atom_v)
        .then([one](const std::string&, int64_t, int32_t) { one(true); },
              [one](caf::error&) { one(false); });
  }
}

// Reads hogwild's model through this process's key-value member on a
// thread of its own (a detached actor that quits after its answer): on
// nodes the pull crosses the network, and a stalled member must not hold
// the coordinator (its pings, ticks and down messages) for the store's
// operation timeout.
using kv_reader = caf::typed_actor<caf::replies_to<read_atom>::with<dvec>>;

kv_reader spawn_kv_reader(caf::actor_system& sys, std::shared_ptr<hogwild_model> model) {
  auto impl = [](kv_reader::pointer self,
                 std::shared_ptr<hogwild_model> model) -> kv_reader::behavior_type {
    return {
        [self, model](read_atom) -> caf::result<dvec> {
          self->quit();
          auto w = model->read();
          if (!w.ok()) {
            return caf::make_error(caf::sec::runtime_error, std::string(w.status().message()),
                                   static_cast<int32_t>(w.status().code()));
          }
          return dvec(*std::move(w));
        },
    };
  };
  return sys.spawn<caf::detached>(impl, std::move(model));
}

template <class Done>
void read_model(self_ptr self, Done done) {
  auto& st = self->state;
  if (!st.topo().uses_shards() && !st.kv_hosts.empty()) {
    const uint64_t gen = st.generation;
    // The store's operations give up after KvOptions::op_timeout_seconds.
    self->request(spawn_kv_reader(self->system(), st.hog), std::chrono::seconds(90), read_atom_v)
        .then(
            [self, gen, done](dvec w) mutable {
              if (self->state.finished() || gen != self->state.generation) return;
              done(std::move(w));
            },
            [self, gen](caf::error& err) {
              if (self->state.finished() || gen != self->state.generation) return;
              kv_failure(self, [self, err] { fail_job(self, err); });
            });
    return;
  }
  if (!st.topo().uses_shards()) {
    auto w = st.hog->read();
    if (!w.ok()) return kv_failure(self, [self, why = w.status()] { fail_job(self, why); });
    return done(dvec(*std::move(w)));
  }
  read_shards(self, std::move(done));
}

// A refinement that could not be finished (a non-finite Hessian product, a
// share of the wrong size) leaves the plain certificate, which is a bound
// by itself, and says so in the progress stream instead of failing the job.
void unrefined(coord_state& st, const absl::Status& why) {
  append_event(st, "certificate_unrefined", absl::StrCat("plain certificate: ", why.message()));
}

// Whether evaluations refine the certificate (SgdOptions::certificate_cg_steps).
bool refines(const coord_state& st) {
  return st.spec().sgd.certificate_cg_steps >= 0 &&
         RefinesIterateCertificate(st.spec().model.kind);
}

// The certificate of w: each worker sends its IterateShare (its rows' loss
// and share of A^T loss'(A w), a d-vector), the coordinator adds them up
// into P, D and the gap (evaluate.hpp, CertifyIterate).
// tag > 0: w also becomes SVRG snapshot `tag` (JobSgd::svrg): the workers
// keep their rows' derivatives at it, and once the shares are in, every
// worker gets the snapshot's full loss gradient mu = sum of the shares'
// gradients / n.
// newton: the workers keep this pass's rows for refine (under a new pass
// id) and done also gets the Newton certifier started from the total and
// that id (else null and 0).
template <class Done>
void certify_model(self_ptr self, dvec wd, int64_t tag, bool newton, Done done) {
  auto& st = self->state;
  const int64_t pass = newton ? ++st.newton_pass : 0;
  st.coordinator_bytes += static_cast<int64_t>(st.workers.size()) * wd.bytes();
  ask_workers<dvec>(self, [self, wd, tag, pass, done](std::vector<dvec>& shares) {
    auto& st = self->state;
    IterateShare total;
    for (std::size_t k = 0; k < shares.size(); ++k) {
      st.coordinator_bytes += shares[k].bytes();
      auto one = UnpackIterateShare(*shares[k].as_vector(), st.d);
      absl::Status added = one.ok() ? AddIterateShare(total, *one) : one.status();
      if (!added.ok()) {
        return fail_job(self, absl::DataLossError(absl::StrCat(
                                  "certificate share of worker ", k, ": ", added.message())));
      }
    }
    auto c = CertifyIterate(st.spec().model, *wd.as_vector(), total);
    if (!c.ok()) return fail_job(self, c.status());
    std::shared_ptr<NewtonCertifier> cg;
    if (!total.curvature.empty()) {
      auto started = NewtonCertifier::Start(st.spec().model, *wd.as_vector(), total,
                                            st.spec().sgd.certificate_cg_steps);
      if (started.ok()) {
        cg = std::make_shared<NewtonCertifier>(*std::move(started));
      } else {
        unrefined(st, started.status());
      }
    }
    if (tag > 0) {
      const double inv_n = 1.0 / static_cast<double>(total.rows);
      for (double& g : total.grad) g *= inv_n;
      dvec mu(std::move(total.grad));
      for (auto& w : st.workers) {
        st.coordinator_bytes += mu.bytes();
        self->send(w, svrg_atom_v, tag, mu);
      }
    }
    done(*c, std::move(cg), pass);
  }, iterate_atom_v, wd, tag, pass);
}

// The Newton-refined certificate (newton_certificate.hpp) from the rows
// the workers kept at iterate pass `pass` and that pass's plain
// certificate: Hessian products until CG is done, then the dual shares.
template <class Done>
void refine_certificate(self_ptr self, int64_t pass, std::shared_ptr<NewtonCertifier> cg,
                        Certificate plain, Done done) {
  auto& st = self->state;
  const int64_t workers = static_cast<int64_t>(st.workers.size());
  if (const std::vector<double>* p = cg->NeedsProduct()) {
    dvec v(*p);
    st.coordinator_bytes += workers * v.bytes();
    ask_workers<dvec>(self, [self, pass, cg, plain, done](std::vector<dvec>& shares) {
      auto& st = self->state;
      std::vector<double> sum(static_cast<std::size_t>(st.d), 0.0);
      for (std::size_t k = 0; k < shares.size(); ++k) {
        st.coordinator_bytes += shares[k].bytes();
        auto one = shares[k].as_vector();
        if (one->size() != sum.size()) {
          unrefined(st, absl::DataLossError(absl::StrCat("Hessian product of worker ", k, ": ",
                                                         one->size(), " values; expected ",
                                                         sum.size())));
          return done(plain);
        }
        for (std::size_t j = 0; j < sum.size(); ++j) sum[j] += (*one)[j];
      }
      if (auto added = cg->AddProduct(sum); !added.ok()) {
        unrefined(st, added);
        return done(plain);
      }
      refine_certificate(self, pass, cg, plain, done);
    }, refine_atom_v, pass, false, v);
    return;
  }
  dvec q(cg->Direction());
  st.coordinator_bytes += workers * q.bytes();
  ask_workers<dvec>(self, [self, cg, plain, done](std::vector<dvec>& shares) {
    auto& st = self->state;
    NewtonDualShare total;
    for (std::size_t k = 0; k < shares.size(); ++k) {
      st.coordinator_bytes += shares[k].bytes();
      auto one = UnpackNewtonDualShare(*shares[k].as_vector(), st.d);
      absl::Status added = one.ok() ? AddNewtonDualShare(total, *one) : one.status();
      if (!added.ok()) {
        unrefined(st, absl::DataLossError(absl::StrCat("Newton dual share of worker ", k, ": ",
                                                       added.message())));
        return done(plain);
      }
    }
    auto c = cg->Finish(plain, total);
    if (!c.ok()) unrefined(st, c.status());
    done(c.ok() ? *c : plain);
  }, refine_atom_v, pass, true, q);
}

constexpr double kRefineShare = 0.1;

// Reduce on plateau (async, ssp, easgd and model averaging,
// topology::reduces_step_on_plateau, on data with per-feature steps, i.e.
// features whose units span decades): where the iterate's best primal fell
// by less than kPlateauShare of the stopping rule's gap over the last
// kPlateauPatience evaluations, the iterate is at the noise floor that
// stale gradients (or easgd's and model averaging's local drift) give a
// step (one that more epochs do not lower; at that rate closing even the
// gap the job stops on takes 100 windows), so
// step0 is halved for every worker and shard (keeping the decay), as
// ReduceLROnPlateau does; the plan keeps it for restarts. Unscaled tabular
// sets, logistic C = 1, K = 4, 1000 epochs, -e 1e-3: without it async and
// ssp ended 0.1-17% above the optimum, with it within 1e-3 of it.
// The iterate, not the reported primal (the better of it and the average):
// the average creeps down at the floor, and a window test on it let a
// step 128x too large run 3000 epochs without a halving. Only on unscaled
// data: on well-scaled data the average gets past the floor and halving
// only slows it (news20, async, K = 4: step 4 halved to 0.004 in 30 s,
// relative 1e-3 missed in 120 s, reached in 63 s without the rule). The
// patience: an asynchronous iterate is a noisy sample; with 5, halving
// shrank 569x30's steps 16-fold in its first 40 epochs. The share: any
// gain above rounding used to reset the count, and easgd's centre creeps
// down (2e-6 of P per 20 epochs) 3e-3 above the optimum of a 569 x 30
// unscaled set for 5000 epochs.
constexpr double kPlateauShare = 0.01;
constexpr int kPlateauPatience = 20;

void reduce_on_plateau(self_ptr self, double primal) {
  auto& st = self->state;
  if (!st.topo().reduces_step_on_plateau() || st.plan.feature_steps.empty() ||
      !std::isfinite(primal)) {
    return;
  }
  st.best_iterate_primal = std::min(st.best_iterate_primal, primal);
  if (!std::isfinite(st.window_best_primal)) st.window_best_primal = st.best_iterate_primal;
  if (++st.evaluations_since_best < kPlateauPatience) return;
  const double fell = st.window_best_primal - st.best_iterate_primal;
  st.evaluations_since_best = 0;
  st.window_best_primal = st.best_iterate_primal;
  if (fell >= kPlateauShare * GapTarget(st.spec().stop, st.best_iterate_primal)) return;
  auto& sgd = st.plan.spec.sgd;
  sgd.step_decay = ResolveStepDecay(st.spec().model, sgd.step0, sgd.step_decay);
  sgd.step0 *= 0.5;
  for (auto& w : st.workers) self->send(w, calibrate_atom_v, sgd.step0, sgd.step_decay);
  for (auto& s : st.shards) self->send(s, calibrate_atom_v, sgd.step0, sgd.step_decay);
  append_event(st, "step_reduced",
               absl::StrCat("step0 halved to ", sgd.step0, ": the iterate's best primal fell by ", fell,
                            " (to ", st.best_iterate_primal, ") in ", kPlateauPatience,
                            " evaluations"));
}

// Certifies the current model and, for the L2 models (SgdOptions::average),
// the average of the evaluated ones; records the one with the lower primal
// (its certificate refined where refines()) and hands it to done (it is
// also the restart point after a loss).
// A refinement costs certificate_cg_steps + 1 passes over the data: one
// that did not halve the gap (far from the optimum the Newton step is no
// better than the plain point: news20's first hundreds of epochs) skips
// the next 1, 2, 4 .. 16 evaluations' refinements, a useful one none; and
// none while refining has taken a tenth of the job's time; the final
// evaluation always refines.
template <class Done>
void evaluate(self_ptr self, bool final, Done done) {
  read_model(self, [self, done, final](dvec wd) {
    auto& st = self->state;
    const int64_t tag = st.spec().sgd.svrg ? ++st.svrg_tag : 0;
    bool newton = refines(st);
    if (newton && !final && st.refine_skip > 0) {
      --st.refine_skip;
      newton = false;
    }
    // At most a tenth of the job's time goes to refining (news20, K=4:
    // refining every evaluation made an epoch 16-30% slower).
    if (newton && !final && st.refine_seconds > kRefineShare * st.seconds()) newton = false;
    // Records c (refined from the rows of iterate pass `pass` when cg is
    // set) and hands on the model it certifies.
    auto finish = [self, done](const Certificate& c, std::shared_ptr<NewtonCertifier> cg,
                               int64_t pass, std::shared_ptr<const std::vector<double>> w) {
      if (!cg) {
        record(self, c.primal, c.dual, c.gap);
        return done(*w);
      }
      const double started = self->state.seconds();
      refine_certificate(self, pass, std::move(cg), c, [self, c, w, done, started](const Certificate& r) {
        auto& st = self->state;
        st.refine_seconds += st.seconds() - started;
        st.refine_backoff = r.gap < 0.5 * c.gap ? 0 : std::min(16, std::max(1, 2 * st.refine_backoff));
        st.refine_skip = st.refine_backoff;
        record(self, r.primal, r.dual, r.gap);
        done(*w);
      });
    };
    certify_model(self, wd, tag, newton,
                  [self, wd, newton, final, finish](const Certificate& c,
                                             std::shared_ptr<NewtonCertifier> cg_c,
                                             int64_t pass_c) {
      auto& st = self->state;
      if (!final) reduce_on_plateau(self, c.primal);
      // One vector for both (a shard's arena block is a view: copied once).
      std::shared_ptr<const std::vector<double>> w = wd.as_vector();
      const bool averaging = AveragesIterates(st.spec().sgd, st.spec().model);
      if (averaging) st.average.Add(*w);
      if (!averaging || st.average.Count() < 2) return finish(c, std::move(cg_c), pass_c, w);
      dvec avg{std::vector<double>(st.average.Value())};
      certify_model(self, avg, 0, newton,
                    [c, cg_c, pass_c, w, avg, finish](const Certificate& a,
                                                      std::shared_ptr<NewtonCertifier> cg_a,
                                                      int64_t pass_a) {
        if (a.primal < c.primal) return finish(a, cg_a, pass_a, avg.as_vector());
        finish(c, cg_c, pass_c, w);
      });
    });
  });
}

// The rule that stops an SGD job on its certificate: the gap rule
// (kConverged), else the target primal.
std::optional<StopReason> certified_stop(const coord_state& st) {
  const StopRule& stop = st.spec().stop;
  const Progress& p = st.last;
  if (p.gap <= GapTarget(stop, p.primal)) {
    return StopReason::kConverged;
  }
  if (stop.target_primal && p.primal <= *stop.target_primal) return StopReason::kTargetReached;
  return std::nullopt;
}

// The workers may step on to kPermitIntervals evaluation intervals past
// `epochs` (the start of the last evaluation) and then wait for the next
// permit: on small data a worker otherwise runs to max_clock between two
// evaluations, so few iterates are averaged and the certificate that would
// stop the job comes late. Training cannot outrun the evaluations for
// long: where an evaluation takes longer than an interval's training, the
// workers wait (news20, K=4, sync: 39 s to the target paced, 34 s not).
constexpr double kPermitIntervals = 8.0;

// Rows one clock processes (a minibatch per worker).
double rows_per_clock(const coord_state& st) {
  return static_cast<double>(st.workers.size()) * st.spec().sgd.batch_size;
}

// The first clock at which `epochs` are done (at most 1e15).
int64_t clock_at(const coord_state& st, double epochs) {
  return static_cast<int64_t>(
      std::min(std::ceil(epochs * static_cast<double>(st.n) / rows_per_clock(st)), 1e15));
}

void permit_workers(self_ptr self, double epochs) {
  auto& st = self->state;
  const int64_t clock =
      clock_at(st, epochs + kPermitIntervals * st.spec().sgd.eval_every_epochs);
  for (auto& w : st.workers) self->send(w, permit_atom_v, clock);
}

}  // namespace

void halt_workers(self_ptr self, StopReason why) {
  auto& st = self->state;
  if (!enter(st, job_phase::kStopping)) return;
  st.reason = why;
  for (auto& w : st.workers) self->send(w, halt_atom_v);
  // Sync and model-averaging workers may be waiting at a barrier that a
  // halted peer never reaches: the shards release them.
  for (auto& s : st.shards) self->send(s, halt_atom_v);
}

void maybe_evaluate(self_ptr self) {
  auto& st = self->state;
  if (st.evaluating || st.phase != job_phase::kTraining || st.running == 0 || !all_workers_reachable(st) ||
      st.epochs < st.next_eval) {
    return;
  }
  st.evaluating = true;
  const double started = st.epochs;
  st.next_eval = started + st.spec().sgd.eval_every_epochs;
  evaluate(self, /*final=*/false, [self, started](const std::vector<double>& w) {
    auto& st = self->state;
    st.evaluating = false;
    if (st.phase == job_phase::kTraining) permit_workers(self, started);
    // The evaluated model is the restart point after a loss: every worker
    // resumes from the slowest clock seen (a multiple of tau for the
    // local-model modes, whose exchanges are counted in tau steps).
    auto& c = st.ckpt;
    c.round = st.round;
    c.epochs = st.epochs;
    c.processed = st.processed;
    c.clocks = st.clocks;
    c.shared = w;
    c.clock = st.topo().restart_clock(*std::min_element(st.clocks.begin(), st.clocks.end()),
                                      st.spec().sgd.tau);
    save_checkpoint(self);
    ++st.round;
    if (const auto why = certified_stop(st)) {
      // The certified model that met the rule: workers take a few more
      // steps before they see the halt, and those may move it back.
      st.target_model = std::make_shared<std::vector<double>>(w);
      st.target_progress = st.last;
      halt_workers(self, *why);
    }
  });
}

namespace {

void kv_store_event(coord_state& st, const std::vector<KvStats>& members, std::size_t asked) {
  KvStats sum;
  for (const KvStats& s : members) sum += s;
  const double all = static_cast<double>(sum.local_keys + sum.remote_keys + sum.queued_keys);
  append_event(st, "kv_store",
               absl::StrFormat("key-value store: %.1f%% of the keys pulled and pushed served in "
                               "place, %d blocks relocated, %d messages, %d bytes%s",
                               all > 0 ? 100.0 * static_cast<double>(sum.local_keys) / all : 0.0,
                               sum.blocks_in, sum.messages, sum.bytes,
                               members.size() == asked
                                   ? ""
                                   : absl::StrCat(" (", members.size(), " of ", asked,
                                                  " members answered)")));
}

// Where hogwild's keys were served (the workers' members: on nodes, not
// the coordinator's own, whose keys are the evaluations' reads), as the
// final progress entry; then `done`.
void kv_summary(self_ptr self, std::function<void()> done) {
  auto& st = self->state;
  if (!st.hog || st.hog->kv.empty()) return done();
  if (st.kv_hosts.empty()) {
    std::vector<KvStats> members;
    for (const auto& node : st.hog->kv) members.push_back(node->Stats());
    kv_store_event(st, members, members.size());
    return done();
  }
  auto got = std::make_shared<std::vector<KvStats>>();
  auto remaining = std::make_shared<std::size_t>(st.kv_hosts.size());
  const std::size_t asked = st.kv_hosts.size();
  auto one_done = [self, got, remaining, asked, done] {
    if (--*remaining > 0 || self->state.finished()) return;
    kv_store_event(self->state, *got, asked);
    done();
  };
  for (int n : st.kv_hosts) {
    self->request(st.nodes[static_cast<std::size_t>(n)], std::chrono::seconds(10), stats_atom_v,
                  caf::actor_cast<caf::actor>(self))
        .then(
            [got, one_done](const int64_list& v) {
              if (auto k = UnpackKvStats(v)) got->push_back(*k);
              one_done();
            },
            // A node that cannot say is left out of the sum (and counted).
            [one_done](caf::error&) { one_done(); });
  }
}

void final_evaluation(self_ptr self);

}  // namespace

void sgd_all_stopped(self_ptr self) {
  kv_summary(self, [self] { final_evaluation(self); });
}

namespace {

void final_evaluation(self_ptr self) {
  // Final certificate of the final model, then the ssp statistic.
  evaluate(self, /*final=*/true, [self](const std::vector<double>& w) {
    auto& st = self->state;
    ++st.round;
    if (st.phase != job_phase::kStopping) {
      if (const auto why = certified_stop(st)) st.reason = *why;
    }
    auto model = std::make_shared<std::vector<double>>(w);
    if (st.target_model && !certified_stop(st)) {
      // Stopped on the certificate: return the model certified to meet the
      // rule, not the one a few stale steps later that no longer does.
      model = st.target_model;
      st.last = st.target_progress;
    }
    shard_staleness(self, [self, model](int64_t granted) {
      finish_job(self, std::move(*model), granted);
    });
  });
}

}  // namespace

namespace {

// The clock an SGD run stops at and how often it reports.
std::pair<int64_t, int64_t> sgd_run_limits(const coord_state& st) {
  const int64_t max_clock = clock_at(st, st.spec().stop.max_epochs);
  // Reports a few times per evaluation interval: enough to evaluate on
  // time, few enough never to flood the coordinator's mailbox (the cancel
  // and budget timer queues behind them).
  const double clocks_per_eval =
      st.spec().sgd.eval_every_epochs * static_cast<double>(st.n) / rows_per_clock(st);
  const int64_t report_every = std::max<int64_t>(1, static_cast<int64_t>(clocks_per_eval / 4));
  return {max_clock, report_every};
}

}  // namespace

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
            if (st.finished() || gen != st.generation) return;
            if (auto bad = WireErrorOf(r); !bad.ok()) return fail_job(self, bad);
            absorb(st, r);
            if (--st.running == 0) sgd_all_stopped(self);
          },
          [self, gen](caf::error& err) {
            if (gen != self->state.generation) return;
            kv_failure(self, [self, err] { fail_job(self, err); });
          });
}

namespace {

void sgd_start(self_ptr self, int64_t start_clock) {
  auto& st = self->state;
  st.running = static_cast<int>(st.workers.size());
  st.next_eval = st.epochs + st.spec().sgd.eval_every_epochs;
  for (std::size_t k = 0; k < st.workers.size(); ++k) sgd_run_worker(self, k, start_clock);
  permit_workers(self, st.epochs);
}

void free_begin(self_ptr self) { sgd_start(self, 0); }
void free_resume(self_ptr self) { sgd_start(self, self->state.ckpt.clock); }

}  // namespace

const training_driver& FreeRunningDriver() {
  static const training_driver d{free_begin, free_resume, halt_workers};
  return d;
}

}  // namespace dml::actors::internal
