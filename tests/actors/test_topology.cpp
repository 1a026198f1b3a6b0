// The topologies without an actor system: the factory, what each mode tells
// the coordinator and the workers, and every mode's shard rule driven
// directly on a shard core (the numbers a shard must produce).
#define BOOST_TEST_MODULE actors_topology
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "dml/actors/internal/shard_core.hpp"
#include "dml/actors/job_plan.hpp"
#include "dml/actors/topology/topology.hpp"
#include "dml/data/synthetic.hpp"

namespace {

using dml::Mode;
using dml::actors::MakeTopology;
using dml::actors::refused_push;
using dml::actors::shard_config;
using dml::actors::internal::held_push;
using dml::actors::internal::shard_core;

const Mode kAll[] = {Mode::kSync,    Mode::kAsync,          Mode::kSsp,   Mode::kEasgd,
                     Mode::kHogwild, Mode::kModelAveraging, Mode::kCocoa, Mode::kDuhl};

// A shard of keys [0, n) for K workers under `mode`, with its rule.
struct Shard {
  Shard(Mode mode, int32_t workers, int64_t n, dml::ModelSpec model = {dml::ModelKind::kRidge, 0.1}) {
    shard_config cfg;
    cfg.mode = mode;
    cfg.workers = workers;
    cfg.begin = 0;
    cfg.end = n;
    cfg.model = model;
    cfg.step0 = 0.5;
    cfg.step_decay = 0.0;
    cfg.gamma = 0.5;
    cfg.easgd_alpha = 0.25;
    cfg.staleness = 1;
    rule = MakeTopology(mode)->make_shard_rule(cfg);
    core.cfg = cfg;
    core.lazy_l2 = rule->lazy_l2() && dml::FormulationOf(model.kind) == dml::Formulation::kDual;
    core.w.assign(static_cast<std::size_t>(n), 0.0);
    core.clocks.assign(workers, 0);
    core.pulled_at.assign(workers, 0);
  }
  // A dense push, with the caller's bookkeeping (as the actor does it).
  absl::Status push(int32_t worker, int64_t clock, std::vector<double> x, bool checked = true) {
    auto owned = std::make_shared<std::vector<double>>(std::move(x));
    held_push h{owned, nullptr};
    h.x = owned->data();
    h.nnz = owned->size();
    h.checked = checked;
    h.prev_clock = core.clocks[worker];
    core.clocks[worker] = std::max(core.clocks[worker], clock + 1);
    ++core.stats.updates;
    return rule->apply(core, worker, clock, h, &refused);
  }
  // A sparse push of (idx, x) pairs, as the actor holds one: an empty one
  // has null pointers (an empty vector's data()).
  absl::Status push_sparse(int32_t worker, int64_t clock, std::vector<uint32_t> idx,
                           std::vector<double> x) {
    auto owned_idx = std::make_shared<std::vector<uint32_t>>(std::move(idx));
    auto owned_x = std::make_shared<std::vector<double>>(std::move(x));
    held_push h{owned_idx, owned_x};
    h.idx = owned_idx->empty() ? nullptr : owned_idx->data();
    h.x = owned_x->empty() ? nullptr : owned_x->data();
    h.nnz = owned_x->size();
    h.prev_clock = core.clocks[worker];
    core.clocks[worker] = std::max(core.clocks[worker], clock + 1);
    ++core.stats.updates;
    return rule->apply(core, worker, clock, h, &refused);
  }
  std::vector<double> values() const {
    std::vector<double> v(core.w.size());
    for (std::size_t j = 0; j < v.size(); ++j) v[j] = core.value(j);
    return v;
  }
  shard_core core;
  std::unique_ptr<dml::actors::shard_rule> rule;
  std::vector<refused_push> refused;
};

}  // namespace

// A minibatch whose rows all have zero loss derivative (hinge beyond the
// margin) is pushed as an empty sparse vector, whose pointers are null:
// sync's gather took that for a dense push and read the model's length
// from a null pointer (a segfault: svm, sync, K = 4, batch 35, on a
// 4601 x 57 tabular set). Every rule takes it as no change.
BOOST_AUTO_TEST_CASE(an_empty_sparse_push_is_no_change_in_every_mode) {
  for (Mode mode : {Mode::kSync, Mode::kAsync, Mode::kSsp, Mode::kModelAveraging, Mode::kCocoa}) {
    BOOST_TEST_CONTEXT(dml::ModeName(mode)) {
      Shard s(mode, 2, 4, {dml::ModelKind::kHingeSvm, 0.1});
      const bool averages = mode == Mode::kModelAveraging;
      BOOST_REQUIRE(s.push_sparse(0, 0, {}, {}).ok());
      BOOST_REQUIRE(s.push_sparse(1, 0, {1, 3}, {2.0, -4.0}).ok());
      const std::vector<double> v = s.values();
      for (std::size_t j : {0, 2}) BOOST_TEST(v[j] == 0.0);
      // A gradient push moves against its sign; an averaged model or a
      // cocoa update moves with it.
      BOOST_TEST(v[1] != 0.0);
      BOOST_TEST((v[1] > 0.0) == (averages || mode == Mode::kCocoa));
      BOOST_TEST(v[3] == -2.0 * v[1]);
      // Every push of a round empty, and an empty one beside a dense one.
      BOOST_REQUIRE(s.push_sparse(0, 1, {}, {}).ok());
      BOOST_REQUIRE(s.push_sparse(1, 1, {}, {}).ok());
      BOOST_REQUIRE(s.push_sparse(0, 2, {}, {}).ok());
      BOOST_REQUIRE(s.push(1, 2, {0.0, 0.0, 0.0, 0.0}).ok());
      const std::vector<double> after = s.values();
      for (std::size_t j = 0; j < 4; ++j) BOOST_TEST(std::isfinite(after[j]));
      if (mode == Mode::kCocoa) BOOST_TEST(after == v);
    }
  }
}

// SAGA on a shard (shard_config::saga_scale = |B| / n): each step adds
// the remembered mean, then the push times the scale joins it; sync's mean
// of K pushes joins it K times over. Ridge with lambda 0.1, step 0.5,
// range 2: w <- (w - 0.5 (g + mean)) / (1 + 0.5 * 0.1).
BOOST_AUTO_TEST_CASE(saga_shards_add_the_remembered_mean) {
  for (Mode mode : {Mode::kAsync, Mode::kSync}) {
    BOOST_TEST_CONTEXT(dml::ModeName(mode)) {
      Shard s(mode, 2, 2);
      s.core.cfg.saga_scale = 0.25;
      const double shrink = 1.0 / (1.0 + 0.5 * 0.1);
      std::vector<double> w{0.0, 0.0}, mean{0.0, 0.0};
      auto step = [&](std::vector<double> g, double pushes) {
        for (int j = 0; j < 2; ++j) {
          w[j] = (w[j] - 0.5 * (g[j] + mean[j])) * shrink;
          mean[j] += 0.25 * pushes * g[j];
        }
      };
      if (mode == Mode::kAsync) {
        // Fresh pulls before each push: no staleness factor.
        s.core.pulled_at[0] = s.core.applied;
        BOOST_REQUIRE(s.push(0, 0, {1.0, -2.0}).ok());
        step({1.0, -2.0}, 1);
        s.core.pulled_at[1] = s.core.applied;
        BOOST_REQUIRE(s.push_sparse(1, 0, {1}, {4.0}).ok());
        step({0.0, 4.0}, 1);
        s.core.pulled_at[0] = s.core.applied;
        BOOST_REQUIRE(s.push(0, 1, {0.0, 0.0}).ok());  // the mean alone moves w
        step({0.0, 0.0}, 1);
      } else {
        BOOST_REQUIRE(s.push(0, 0, {1.0, -2.0}).ok());
        BOOST_REQUIRE(s.push_sparse(1, 0, {1}, {4.0}).ok());
        step({0.5, 1.0}, 2);
        BOOST_REQUIRE(s.push(0, 1, {0.0, 0.0}).ok());
        BOOST_REQUIRE(s.push(1, 1, {0.0, 0.0}).ok());
        step({0.0, 0.0}, 2);
      }
      const std::vector<double> got = s.values();
      for (int j = 0; j < 2; ++j) {
        BOOST_TEST(std::abs(got[j] - w[j]) <= 1e-15);
        BOOST_TEST(std::abs(s.core.saga_mean[j] - mean[j]) <= 1e-15);
      }
      BOOST_TEST(w[0] != 0.0);
    }
  }
}

BOOST_AUTO_TEST_CASE(the_factory_has_one_policy_per_mode) {
  for (Mode m : kAll) {
    auto t = MakeTopology(m);
    BOOST_REQUIRE(t);
    BOOST_TEST((t->mode() == m));
    // Only cocoa and duhl are driven by coordinator rounds; only hogwild
    // has no shards.
    const bool rounds = m == Mode::kCocoa || m == Mode::kDuhl;
    BOOST_TEST(t->coordinator_rounds() == rounds);
    BOOST_TEST(t->solves_locally() == rounds);
    BOOST_TEST(t->uses_shards() == (m != Mode::kHogwild));
    BOOST_TEST(dml::IsSgdMode(m) == !rounds);
    BOOST_TEST(dml::ModeName(m) != "unknown");
    BOOST_TEST((dml::ParseMode(dml::ModeName(m)).value() == m));
    BOOST_TEST(t->continues_after_worker_loss() ==
               (m == Mode::kAsync || m == Mode::kSsp || m == Mode::kEasgd));
    BOOST_TEST(t->keeps_local_model() == (m == Mode::kEasgd || m == Mode::kModelAveraging));
  }
  // Restart points: the local-model modes restart at a multiple of tau, and
  // model-averaging shards count exchanges; cocoa shards count rounds.
  BOOST_TEST(MakeTopology(Mode::kEasgd)->restart_clock(23, 8) == 16);
  BOOST_TEST(MakeTopology(Mode::kModelAveraging)->restart_clock(23, 8) == 16);
  BOOST_TEST(MakeTopology(Mode::kAsync)->restart_clock(23, 8) == 23);
  BOOST_TEST(MakeTopology(Mode::kModelAveraging)->shard_restore_clock(16, 3, 8) == 2);
  BOOST_TEST(MakeTopology(Mode::kCocoa)->shard_restore_clock(16, 3, 8) == 3);
  BOOST_TEST(MakeTopology(Mode::kSync)->shard_restore_clock(16, 3, 8) == 16);
  // Primal models under cocoa share v = A w (one entry per example).
  BOOST_TEST(MakeTopology(Mode::kCocoa)->shares_predictions(dml::ModelKind::kLasso));
  BOOST_TEST(!MakeTopology(Mode::kCocoa)->shares_predictions(dml::ModelKind::kLogisticL2));
  BOOST_TEST(!MakeTopology(Mode::kSync)->shares_predictions(dml::ModelKind::kLasso));
  BOOST_TEST(MakeTopology(Mode::kDuhl)->shares_predictions(dml::ModelKind::kLasso));
  // duhl: worker 0 is the device (DuHL); the others keep the job's local
  // solver, or the CPU one where the job asked for DuHL everywhere.
  using dml::actors::kDuhlLocal;
  using dml::actors::kScdLocal;
  using dml::actors::kTpaScdLocal;
  const auto duhl = MakeTopology(Mode::kDuhl);
  BOOST_TEST(duhl->local_solver(0, kScdLocal) == kDuhlLocal);
  BOOST_TEST(duhl->local_solver(1, kScdLocal) == kScdLocal);
  BOOST_TEST(duhl->local_solver(2, kTpaScdLocal) == kTpaScdLocal);
  BOOST_TEST(duhl->local_solver(1, kDuhlLocal) == kScdLocal);
  BOOST_TEST(MakeTopology(Mode::kCocoa)->local_solver(0, kTpaScdLocal) == kTpaScdLocal);
  BOOST_TEST(MakeTopology(Mode::kCocoa)->local_solver(1, kDuhlLocal) == kDuhlLocal);
}

BOOST_AUTO_TEST_CASE(the_plan_resolves_every_default_once) {
  dml::JobSpec spec;
  spec.mode.kind = Mode::kEasgd;
  spec.mode.workers = 4;
  spec.cocoa.gamma = 0.5;
  auto plan = dml::actors::ResolvePlan(spec);
  BOOST_TEST(plan.spec.cocoa.sigma_prime == 2.0);   // gamma K
  BOOST_TEST(plan.spec.sgd.easgd_alpha == 0.225);  // 0.9 / K
  const auto bounds = dml::actors::ShardBounds(10, 3);
  BOOST_TEST(bounds == (std::vector<int64_t>{0, 3, 6, 10}));
  const auto s = plan.shard(2, bounds);
  BOOST_TEST(s.begin == 6);
  BOOST_TEST(s.end == 10);
  BOOST_TEST(s.easgd_alpha == 0.225);
  const auto w = plan.worker(3);
  BOOST_TEST(w.index == 3);
  BOOST_TEST(w.sigma_prime == 2.0);
  BOOST_TEST(plan.shared_length(100, 7) == 7);
  spec.cocoa.sigma_prime = 3.0;  // set by the user: kept
  BOOST_TEST(dml::actors::ResolvePlan(spec).spec.cocoa.sigma_prime == 3.0);
  BOOST_TEST(plan.spec.sgd.tau == 8);  // easgd: 8 whatever the data
}

// Model averaging's exchange period: at least 8 steps, else the model's
// values both ways over a step's nonzeros (batch * mean row), at most 1024.
BOOST_AUTO_TEST_CASE(model_averaging_exchanges_no_more_than_it_reads) {
  auto data_of = [](int64_t rows, int64_t cols, int64_t nnz) {
    dml::SyntheticOptions o;
    o.rows = rows;
    o.cols = cols;
    o.nnz_per_row = nnz;
    auto d = dml::GenerateSynthetic(o);
    BOOST_REQUIRE(d.ok());
    return std::make_shared<const dml::Dataset>(std::move(d->data));
  };
  const auto wide = data_of(500, 100000, 20);   // 2e5 / (64 * 20) = 156.25
  BOOST_TEST(dml::AutoTau(*wide, 64) == 157);
  BOOST_TEST(dml::AutoTau(*wide, 256) == 40);   // 2e5 / 5120 = 39.06
  BOOST_TEST(dml::AutoTau(*wide, 1) == 1024);   // 1e4: capped
  BOOST_TEST(dml::AutoTau(*data_of(500, 100, 20), 64) == 8);  // 0.16: the floor
  dml::JobSpec spec;
  spec.mode.kind = Mode::kModelAveraging;
  spec.data.dataset = wide;
  // The batch resolves first (AutoBatch: 500 / (32 x 2 workers) = 7), and
  // tau from it: 2e5 / (7 * 20) = 1428.6, capped.
  BOOST_TEST(dml::actors::ResolvePlan(spec).spec.sgd.batch_size == 7);
  BOOST_TEST(dml::actors::ResolvePlan(spec).spec.sgd.tau == 1024);
  spec.sgd.batch_size = 64;
  BOOST_TEST(dml::actors::ResolvePlan(spec).spec.sgd.tau == 157);
  BOOST_TEST(dml::actors::ResolvePlan(spec).worker(0).tau == 157);
  spec.sgd.tau = 5;  // set by the user: kept
  BOOST_TEST(dml::actors::ResolvePlan(spec).spec.sgd.tau == 5);
  spec.sgd.tau = 0;
  spec.data.dataset = nullptr;  // a path only: the data is not here
  spec.data.path = "/data/train.svm";
  BOOST_TEST(dml::actors::ResolvePlan(spec).spec.sgd.tau == 8);
}

// sync: the K gradients of a clock are averaged in worker order and one
// proximal step taken: w = prox(0 - 0.5 * mean) for ridge (lambda 0.1,
// lazily scaled by 1 / (1 + step lambda)).
BOOST_AUTO_TEST_CASE(sync_gathers_the_clock_then_steps_on_the_mean) {
  Shard s(Mode::kSync, 2, 3);
  BOOST_REQUIRE(s.push(0, 0, {1.0, 2.0, 3.0}).ok());
  BOOST_TEST(s.core.round == 0);
  BOOST_TEST(!s.rule->pull_ready(s.core, 1));
  BOOST_TEST(s.values() == (std::vector<double>{0, 0, 0}));
  BOOST_REQUIRE(s.push(1, 0, {3.0, 2.0, 1.0}).ok());
  BOOST_TEST(s.core.round == 1);
  BOOST_TEST(s.rule->pull_ready(s.core, 1));
  const double shrink = 1.0 / (1.0 + 0.5 * 0.1);
  for (double v : s.values()) BOOST_TEST(v == -0.5 * 2.0 * shrink, boost::test_tools::tolerance(1e-15));
  // A second push of the next clock twice, or of a stale clock, is refused.
  BOOST_REQUIRE(s.push(0, 1, {0, 0, 0}).ok());
  BOOST_TEST(std::string(s.push(0, 1, {0, 0, 0}).message()) ==
             "parameter shard: worker 0 pushed clock 1 twice");
  BOOST_TEST(std::string(s.push(1, 0, {0, 0, 0}).message()) ==
             "parameter shard: worker 1 pushed clock 0 but the shard is at clock 1");
}

// model averaging: the mean replaces the values; a non-finite push that was
// not checked on arrival is found while summing and refused (the other
// worker's is reported through `refused`), and the values stay as they were.
BOOST_AUTO_TEST_CASE(model_averaging_keeps_the_mean_and_refuses_a_bad_push) {
  Shard s(Mode::kModelAveraging, 2, 2);
  BOOST_REQUIRE(s.push(0, 0, {1.0, 4.0}, false).ok());
  BOOST_REQUIRE(s.push(1, 0, {3.0, 0.0}, false).ok());
  BOOST_TEST(s.values() == (std::vector<double>{2.0, 2.0}));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  BOOST_REQUIRE(s.push(0, 1, {nan, 1.0}, false).ok());  // arrives unchecked
  absl::Status mine = s.push(1, 1, {1.0, 1.0}, false);
  BOOST_TEST(mine.ok());  // worker 1's push was fine
  BOOST_REQUIRE_EQUAL(s.refused.size(), 1u);
  BOOST_TEST(s.refused[0].worker == 0);
  BOOST_TEST(std::string(s.refused[0].why.message()) ==
             "parameter shard: push from worker 0: value at key 0 is not finite");
  BOOST_TEST(s.core.round == 1);  // the round waits for worker 0 again
  BOOST_TEST(s.core.clocks[0] == 1);
  BOOST_TEST(s.values() == (std::vector<double>{2.0, 2.0}));
  BOOST_REQUIRE(s.push(0, 1, {3.0, 3.0}, false).ok());
  BOOST_TEST(s.values() == (std::vector<double>{2.0, 2.0}));
  BOOST_TEST(s.core.round == 2);
}

// ssp: a pull at clock c waits until the slowest worker has pushed c - s.
BOOST_AUTO_TEST_CASE(ssp_bounds_the_lead_and_counts_what_it_granted) {
  Shard s(Mode::kSsp, 2, 1);
  BOOST_TEST(s.rule->pull_ready(s.core, 1));   // 0 >= 1 - 1
  BOOST_TEST(!s.rule->pull_ready(s.core, 2));  // 0 >= 2 - 1 fails
  BOOST_REQUIRE(s.push(1, 0, {1.0}).ok());
  BOOST_REQUIRE(s.push(1, 1, {1.0}).ok());
  BOOST_TEST(!s.rule->pull_ready(s.core, 2));  // worker 0 is still at 0
  BOOST_REQUIRE(s.push(0, 0, {1.0}).ok());
  BOOST_TEST(s.rule->pull_ready(s.core, 2));
  s.rule->granted(s.core, 2);
  BOOST_TEST(s.core.stats.max_granted_staleness == 1);
  // Steps on arrival: three gradients of 1 with step 0.5, lazily shrunk.
  BOOST_TEST(s.core.applied == 3);
  BOOST_TEST(s.values()[0] < 0.0);
}

// async: a gradient taken tau updates ago (the updates applied since its
// worker's pull) steps by step / sqrt(1 + tau).
BOOST_AUTO_TEST_CASE(async_steps_shrink_with_staleness) {
  Shard s(Mode::kAsync, 2, 1, {dml::ModelKind::kRidge, 1e-300});
  s.core.pulled_at[0] = s.core.applied;  // worker 0 pulls, then computes for a while
  for (int c = 0; c < 3; ++c) {
    s.core.pulled_at[1] = s.core.applied;  // worker 1: fresh each time
    BOOST_REQUIRE(s.push(1, c, {1.0}).ok());
  }
  BOOST_TEST(std::abs(s.values()[0] - -1.5) < 1e-12);  // 3 fresh steps of 0.5
  BOOST_REQUIRE(s.push(0, 0, {1.0}).ok());              // tau = 3: 0.5 / 2
  BOOST_TEST(std::abs(s.values()[0] - -1.75) < 1e-12);
}

// easgd: e = alpha (x - center), center += e; a non-finite value is refused
// before the center moves.
BOOST_AUTO_TEST_CASE(easgd_moves_the_center_by_the_elastic_difference) {
  Shard s(Mode::kEasgd, 2, 2);
  auto e = s.rule->elastic(s.core, 1, std::vector<double>{4.0, -8.0});
  BOOST_REQUIRE(e.ok());
  BOOST_TEST(*e == (std::vector<double>{1.0, -2.0}));
  BOOST_TEST(s.values() == (std::vector<double>{1.0, -2.0}));
  const double inf = std::numeric_limits<double>::infinity();
  auto bad = s.rule->elastic(s.core, 0, std::vector<double>{0.0, inf});
  BOOST_TEST(std::string(bad.status().message()) ==
             "parameter shard: elastic exchange from worker 0: value at key 1 is not finite");
  BOOST_TEST(s.values() == (std::vector<double>{1.0, -2.0}));
  BOOST_TEST(std::string(s.push(0, 0, {0.0, 0.0}).message()) ==
             "parameter shard: push is not part of mode easgd");
  Shard other(Mode::kSync, 2, 2);
  BOOST_TEST(std::string(other.rule->elastic(other.core, 0, std::vector<double>{0, 0})
                             .status()
                             .message()) == "parameter shard: elastic exchange outside easgd mode");
}

// cocoa: gamma * delta added on arrival.
BOOST_AUTO_TEST_CASE(cocoa_adds_gamma_times_the_delta) {
  Shard s(Mode::kCocoa, 2, 2);
  BOOST_TEST(s.rule->announces_rounds());
  BOOST_REQUIRE(s.push(0, 0, {2.0, 4.0}).ok());
  BOOST_REQUIRE(s.push(1, 0, {-1.0, 1.0}).ok());
  BOOST_TEST(s.values() == (std::vector<double>{0.5, 2.5}));
  BOOST_TEST(s.core.min_clock() == 1);
}

// A snapshot stays as it was while the shard writes on: the write goes to
// a copy, and the snapshot's buffer is reused only once it is dropped.
BOOST_AUTO_TEST_CASE(snapshots_are_never_written_under_their_readers) {
  Shard s(Mode::kCocoa, 1, 3);
  BOOST_REQUIRE(s.push(0, 0, {1.0, 1.0, 1.0}).ok());
  dml::actors::dvec snap = s.core.snapshot();
  const double* held = snap.data();
  BOOST_REQUIRE(s.push(0, 1, {1.0, 1.0, 1.0}).ok());
  BOOST_TEST(snap.to_vector() == (std::vector<double>{0.5, 0.5, 0.5}));
  BOOST_TEST(s.values() == (std::vector<double>{1.0, 1.0, 1.0}));
  dml::actors::dvec now = s.core.snapshot();
  BOOST_TEST(now.data() != held);
  snap = dml::actors::dvec();  // the reader is done: its buffer is free again
  now = dml::actors::dvec();
  BOOST_REQUIRE(s.push(0, 2, {1.0, 1.0, 1.0}).ok());  // in place, no snapshot left
  BOOST_TEST(s.values() == (std::vector<double>{1.5, 1.5, 1.5}));
}
