// The actor runtime end to end, in one process: every mode converges on a
// problem whose optimum is computed independently (sequential SCD run to a
// 1e-12 gap); sync is deterministic and equals a replayed single-process
// minibatch run; ssp never grants more than s clocks of lead; cancel and
// runtime destruction are prompt; load and solver errors fail the job.
#define BOOST_TEST_MODULE actors_runtime
#include <boost/test/unit_test.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>

#include "dml/gpu/tpa_scd.hpp"
#include "dml/actors/parameter_shard.hpp"
#include "dml/actors/register_types.hpp"
#include "dml/actors/runtime.hpp"
#include "dml/actors/worker.hpp"
#include "dml/data/partition.hpp"
#include "dml/data/synthetic.hpp"
#include "dml/objective/evaluate.hpp"
#include "dml/objective/newton_certificate.hpp"
#include "unscaled_problem.hpp"
#include "dml/solver/duhl.hpp"
#include "dml/solver/sgd.hpp"
#include "dml/solver/solver.hpp"

namespace dml::actors {
// An actor system for tests that talk to single actors directly.
struct test_config_holder {
  struct config : caf::actor_system_config {
    config() {
      RegisterTypes(*this);
      set("scheduler.max-threads", static_cast<size_t>(2));
    }
  } cfg;
  caf::actor_system sys{cfg};
};
}  // namespace dml::actors

namespace {

dml::RuntimeOptions WithThreads(int threads) {
  dml::RuntimeOptions o;
  o.threads = threads;
  return o;
}

using Clock = std::chrono::steady_clock;

// User + system CPU time of this process so far, every thread.
double CpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

std::shared_ptr<const dml::Dataset> Problem(dml::Task task, int64_t rows, int64_t cols,
                                            uint64_t seed = 7) {
  dml::SyntheticOptions o;
  o.rows = rows;
  o.cols = cols;
  o.nnz_per_row = 8;
  o.noise = 0.3;
  o.task = task;
  o.seed = seed;
  auto s = dml::GenerateSynthetic(o);
  BOOST_REQUIRE_MESSAGE(s.ok(), s.status().ToString());
  return std::make_shared<const dml::Dataset>(std::move(s->data));
}

// P* from a library solver (default: sequential SCD) run to a 1e-12
// relative gap within `max_epochs` (an independent solver).
double Optimum(const dml::Dataset& data, const dml::ModelSpec& m, int max_epochs = 5000,
               dml::SolverOptions o = {}) {
  o.stop.gap_rel = 1e-12;
  o.stop.max_epochs = max_epochs;
  auto r = dml::Train(data, m, o);
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  BOOST_REQUIRE(r->gap <= 1e-10 * std::abs(r->primal));
  return r->primal;
}

// wait() with a deadline: a hung job fails the test instead of hanging it.
dml::TrainResult MustFinish(dml::Job& j, double seconds = 60) {
  auto r = j.WaitFor(std::chrono::duration<double>(seconds));
  BOOST_REQUIRE_MESSAGE(r.status().code() != absl::StatusCode::kDeadlineExceeded,
                        "job did not finish within " << seconds << " s");
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  return *std::move(r);
}

// Submits `s`, lets it run 300 ms, cancels it, and checks that the cancel
// took at most 200 ms and ended the job as cancelled.
dml::TrainResult CancelAfter300ms(dml::Runtime& rt, const dml::JobSpec& s, double finish_seconds) {
  auto j = rt.Submit(s);
  BOOST_REQUIRE(j.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  BOOST_TEST(!j->Done());
  const auto t0 = Clock::now();
  j->Cancel();
  const dml::TrainResult r = MustFinish(*j, finish_seconds);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  BOOST_TEST(ms <= 200.0, "cancel took " << ms << " ms");
  BOOST_TEST((r.reason == dml::StopReason::kCancelled));
  return r;
}

dml::JobSpec SgdSpec(std::shared_ptr<const dml::Dataset> data, dml::ModelSpec m, dml::Mode mode,
                      int epochs) {
  dml::JobSpec s;
  s.data.dataset = std::move(data);
  s.model = m;
  s.mode.kind = mode;
  s.mode.workers = 2;
  s.mode.shards = 2;
  s.sgd.batch_size = 16;
  s.sgd.step0 = 0.5;
  // step_t = 1 / (lambda (t + t0)): the classic rate for a lambda-strongly
  // convex objective, t counted in clocks.
  s.sgd.step_decay = m.lambda * s.sgd.step0;
  s.stop.max_epochs = epochs;
  s.mode.seed = 3;
  return s;
}

}  // namespace

BOOST_AUTO_TEST_CASE(cocoa_reaches_the_gap_for_dual_and_primal_models) {
  dml::Runtime rt(WithThreads(2));
  struct Case {
    dml::ModelKind kind;
    dml::Task task;
    double lambda;
  };
  for (const Case& c : {Case{dml::ModelKind::kLogisticL2, dml::Task::kClassification, 1e-3},
                        Case{dml::ModelKind::kHingeSvm, dml::Task::kClassification, 1e-2},
                        Case{dml::ModelKind::kRidge, dml::Task::kRegression, 1e-3},
                        Case{dml::ModelKind::kLasso, dml::Task::kRegression, 1e-2},
                        Case{dml::ModelKind::kLogisticL1, dml::Task::kClassification, 1e-3}}) {
    BOOST_TEST_CONTEXT("model " << dml::ModelName(c.kind)) {
      auto data = Problem(c.task, 1200, 60);
      dml::ModelSpec m{c.kind, c.lambda, 0.5};
      const double p_star = Optimum(*data, m);
      dml::JobSpec s;
      s.data.dataset = data;
      s.model = m;
      s.mode.kind = dml::Mode::kCocoa;
      s.mode.workers = 3;
      s.mode.shards = 2;
      s.stop.gap_rel = 1e-6;
      s.stop.max_epochs = 3000;
      auto j = rt.Submit(s);
      BOOST_REQUIRE_MESSAGE(j.ok(), j.status().ToString());
      const dml::TrainResult r = MustFinish(*j);
      BOOST_TEST((r.reason == dml::StopReason::kConverged));
      BOOST_TEST(r.gap <= 1e-6 * std::abs(r.primal));
      BOOST_TEST(r.gap >= 0.0);
      BOOST_TEST(std::abs(r.primal - r.dual - r.gap) <= 1e-12 * std::abs(r.primal));
      // The certificate from the workers' partial sums is the real one.
      auto exact = dml::PrimalValue(*data, m, r.w);
      BOOST_REQUIRE(exact.ok());
      BOOST_TEST(std::abs(*exact - r.primal) <= 1e-9 * std::abs(r.primal));
      BOOST_TEST(r.primal - p_star <= 1e-6 * std::abs(p_star) + 1e-12);
      BOOST_TEST(r.primal >= p_star - 1e-9 * std::abs(p_star));
      BOOST_TEST(r.history.size() == static_cast<std::size_t>(r.rounds + 1));
      BOOST_TEST(r.bytes_exchanged > 0);
    }
  }
}

// cocoa with tpa-scd as the workers' local solver: on a GPU where there is
// one; elsewhere an error naming why, or (gpu_fallback) the CPU local
// solver and the same optimum.
BOOST_AUTO_TEST_CASE(cocoa_with_the_gpu_local_solver_or_its_fallback) {
  dml::Runtime rt(WithThreads(2));
  auto data = Problem(dml::Task::kClassification, 1200, 60);
  dml::ModelSpec m{dml::ModelKind::kLogisticL2, 1e-3, 0.5};
  const double p_star = Optimum(*data, m);
  const bool gpu = dml::gpu::CudaDeviceCount() > 0;
  for (bool fallback : {false, true}) {
    BOOST_TEST_CONTEXT("gpu_fallback " << fallback) {
      dml::JobSpec s;
      s.data.dataset = data;
      s.model = m;
      s.mode.kind = dml::Mode::kCocoa;
      s.mode.workers = 2;
      s.stop.gap_rel = 1e-6;
      s.stop.max_epochs = 3000;
      s.cocoa.local_solver = dml::SolverKind::kTpaScd;
      s.cocoa.gpu_fallback = fallback;
      auto j = rt.Submit(s);
      BOOST_REQUIRE_MESSAGE(j.ok(), j.status().ToString());
      auto r = j->Wait();
      if (!gpu && !fallback) {
        BOOST_REQUIRE(!r.ok());
        const std::string msg(r.status().message());
        const bool named = msg.find("libdml was built without CUDA") != std::string::npos ||
                           msg.find("no usable CUDA device") != std::string::npos;
        BOOST_TEST(named, msg);
        BOOST_TEST(msg.find("worker") != std::string::npos, msg);
        continue;
      }
      BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
      BOOST_TEST((r->reason == dml::StopReason::kConverged));
      BOOST_TEST(r->primal - p_star <= 1e-6 * std::abs(p_star) + 1e-12);
      BOOST_TEST(r->primal >= p_star - 1e-9 * std::abs(p_star));
    }
  }
  dml::JobSpec bad;
  bad.data.dataset = data;
  bad.model = m;
  bad.mode.kind = dml::Mode::kCocoa;
  bad.cocoa.local_solver = dml::SolverKind::kNewton;
  BOOST_TEST(rt.Submit(bad).status().message() ==
             "JobSpec.cocoa.local_solver: must be scd, tpa-scd or duhl, got newton");
}

// A DuHL job on 1200 x 60 generated rows of `m` (a 25% device budget,
// relative gap 1e-6): runs it and checks it converged to P*.
dml::TrainResult RunDuhlJob(dml::Runtime& rt, dml::JobSpec s, const dml::ModelSpec& m) {
  auto data = Problem(dml::TaskOf(m.kind), 1200, 60);
  const double p_star = Optimum(*data, m);
  s.data.dataset = data;
  s.model = m;
  s.stop.gap_rel = 1e-6;
  s.stop.max_epochs = 3000;
  auto j = rt.Submit(s);
  BOOST_REQUIRE_MESSAGE(j.ok(), j.status().ToString());
  auto r = j->Wait();
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  BOOST_TEST((r->reason == dml::StopReason::kConverged));
  BOOST_TEST(r->primal - p_star <= 1e-6 * std::abs(p_star) + 1e-12);
  BOOST_TEST(r->primal >= p_star - 1e-9 * std::abs(p_star));
  return *std::move(r);
}

// DuHL as the workers' local solver (its device the CPU twin): dual and
// primal models reach the optimum; a bad DuHL option is refused by field.
BOOST_AUTO_TEST_CASE(cocoa_with_the_duhl_local_solver) {
  dml::Runtime rt(WithThreads(2));
  // The last case: DuHL's blocks on a GPU (TPA-SCD through the
  // gpu_solver), or where there is none, with the fallback, on the CPU.
  const std::pair<dml::ModelKind, bool> cases[] = {
      {dml::ModelKind::kHingeSvm, false}, {dml::ModelKind::kLasso, false},
      {dml::ModelKind::kHingeSvm, true}};
  for (const auto& [kind, gpu] : cases) {
    BOOST_TEST_CONTEXT(dml::ModelName(kind) << (gpu ? " on a GPU or its fallback" : "")) {
      dml::JobSpec s;
      s.mode.kind = dml::Mode::kCocoa;
      s.mode.workers = 2;
      s.cocoa.local_solver = dml::SolverKind::kDuhl;
      s.cocoa.duhl.device_fraction = 0.25;
      s.cocoa.duhl.gpu = gpu;
      s.cocoa.gpu_fallback = gpu;
      const dml::TrainResult result = RunDuhlJob(rt, s, {kind, 1e-3, 0.5});
      const dml::TrainResult* r = &result;
      // The workers' bytes to their devices reach the progress and the
      // result: at least each block's first quarter of the data.
      BOOST_TEST(r->device_bytes > 0);
      BOOST_TEST(r->history.back().device_bytes <= r->device_bytes);
      BOOST_TEST(r->bytes_exchanged > 0);
    }
  }
  dml::JobSpec bad;
  bad.data.dataset = Problem(dml::Task::kClassification, 100, 10);
  bad.model = {dml::ModelKind::kHingeSvm, 1e-3, 0.5};
  bad.mode.kind = dml::Mode::kCocoa;
  bad.cocoa.local_solver = dml::SolverKind::kDuhl;
  bad.cocoa.duhl.device_fraction = 0;
  BOOST_TEST(rt.Submit(bad).status().message() ==
             "JobSpec.cocoa.duhl.device_fraction: must be in (0, 1], got 0");
}

// The duhl topology: a device worker (DuHL over its partition, its gap
// memory an actor, its device the CPU twin) alone or beside a CPU worker,
// under cocoa's rounds. Dual and primal models reach the optimum; every
// progress entry carries the bytes and coordinates copied so far; with the
// whole data resident, each coordinate is copied exactly once.
BOOST_AUTO_TEST_CASE(the_duhl_topology_converges_and_reports_its_copies) {
  dml::Runtime rt(WithThreads(2));
  struct Case {
    dml::ModelKind kind;
    int workers;
    dml::DuhlSelection selection;
    double fraction;
  };
  const Case cases[] = {{dml::ModelKind::kHingeSvm, 1, dml::DuhlSelection::kGap, 0.25},
                        {dml::ModelKind::kLasso, 1, dml::DuhlSelection::kGap, 0.25},
                        {dml::ModelKind::kLogisticL2, 2, dml::DuhlSelection::kGap, 0.25},
                        {dml::ModelKind::kRidge, 1, dml::DuhlSelection::kResident, 1.0}};
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(dml::ModelName(c.kind) << ", " << c.workers << " worker(s), "
                                              << dml::DuhlSelectionName(c.selection)) {
      dml::JobSpec s;
      s.mode.kind = dml::Mode::kDuhl;
      s.mode.workers = c.workers;
      s.cocoa.duhl.device_fraction = c.fraction;
      s.cocoa.duhl.selection = c.selection;
      const dml::TrainResult result = RunDuhlJob(rt, s, {c.kind, 1e-3, 0.5});
      const dml::TrainResult* r = &result;
      const auto data = Problem(dml::TaskOf(c.kind), 1200, 60);  // the same rows
      BOOST_REQUIRE(!r->history.empty());
      int64_t bytes = 0, swaps = 0;
      for (const dml::Progress& p : r->history) {
        BOOST_TEST(p.device_bytes >= bytes);
        BOOST_TEST(p.device_swaps >= swaps);
        bytes = p.device_bytes;
        swaps = p.device_swaps;
      }
      BOOST_TEST(swaps > 0);
      BOOST_TEST(r->device_bytes >= bytes);
      if (c.selection == dml::DuhlSelection::kResident) {
        // One worker holds every row: each copied once, in round 1.
        int64_t all = 0;
        for (int64_t i = 0; i < data->x.rows(); ++i) {
          all += dml::DuhlCoordinateBytes(data->x.outer_nnz(i));
        }
        BOOST_TEST(swaps == data->x.rows());
        BOOST_TEST(r->device_bytes == all);
        for (const dml::Progress& p : r->history) {
          BOOST_TEST((p.device_swaps == 0 || p.device_swaps == data->x.rows()));
        }
      }
    }
  }
}

// Automatic H changes the work per round, never what is certified: the job
// converges to the same optimum, each worker's steps follow the tuner's H
// (the epochs a round adds), and every change is a local_epochs event.
BOOST_AUTO_TEST_CASE(cocoa_with_automatic_h_converges_and_reports_its_changes) {
  dml::Runtime rt(WithThreads(2));
  auto data = Problem(dml::Task::kClassification, 3000, 100);
  dml::ModelSpec m{dml::ModelKind::kLogisticL2, 1e-4, 0.5};
  const double p_star = Optimum(*data, m);
  dml::JobSpec s;
  s.data.dataset = data;
  s.model = m;
  s.mode.kind = dml::Mode::kCocoa;
  s.mode.workers = 3;
  s.mode.shards = 2;
  s.cocoa.auto_local_epochs = true;
  s.stop.gap_rel = 1e-8;
  s.stop.max_epochs = 100000;
  auto j = rt.Submit(s);
  BOOST_REQUIRE_MESSAGE(j.ok(), j.status().ToString());
  const dml::TrainResult r = MustFinish(*j);
  BOOST_TEST((r.reason == dml::StopReason::kConverged));
  BOOST_TEST(r.primal - p_star <= 1e-8 * std::abs(p_star) + 1e-12);
  std::vector<double> hs;
  double h = 1.0;
  for (std::size_t i = 1; i < r.history.size(); ++i) {
    for (const auto& e : r.history[i].events) {
      if (e.kind != "local_epochs") continue;
      BOOST_REQUIRE(e.what.rfind("H = ", 0) == 0u);
      h = std::stod(e.what.substr(4));
      hs.push_back(h);
      BOOST_TEST((h >= 1.0 / 64 && h <= 64.0));
    }
  }
  BOOST_TEST_MESSAGE("H changes: " << hs.size() << ", last H " << h << ", rounds " << r.rounds);
  BOOST_TEST(!hs.empty());  // it probed at least once (2H first)
  BOOST_TEST(hs.front() == 2.0);
}

// Every SGD mode with libdml's defaults (calibrated step, per-feature steps,
// averaging, Newton-refined certificates, workers paced by the
// evaluations) on features in units over 4 decades: stops on its
// certificate at a relative gap of 1e-3, so within 1e-3 of the optimum,
// long before max epochs.
// `mode` with K = 4 and libdml's SGD defaults, stopping on a relative gap
// of 1e-3 or after `max_epochs`.
dml::TrainResult RunWithDefaults(dml::Runtime& rt, const std::shared_ptr<const dml::Dataset>& data,
                                 const dml::ModelSpec& m, dml::Mode mode, int max_epochs) {
  dml::JobSpec s;
  s.data.dataset = data;
  s.model = m;
  s.mode.kind = mode;
  s.mode.workers = 4;
  s.stop.gap_rel = 1e-3;
  s.stop.max_epochs = max_epochs;
  auto j = rt.Submit(s);
  BOOST_REQUIRE_MESSAGE(j.ok(), j.status().ToString());
  return MustFinish(*j);
}

BOOST_AUTO_TEST_CASE(sgd_modes_with_defaults_certify_1e_3_on_unscaled_features) {
  dml::Runtime rt(WithThreads(2));
  auto data = std::make_shared<const dml::Dataset>(dml::testing::UnscaledProblem());
  const dml::ModelSpec m{dml::ModelKind::kLogisticL2, 1e-3, 0.5};
  const double p_star = Optimum(*data, m, 100000);
  for (dml::Mode mode : {dml::Mode::kSync, dml::Mode::kAsync, dml::Mode::kSsp, dml::Mode::kEasgd,
                         dml::Mode::kHogwild, dml::Mode::kModelAveraging}) {
    BOOST_TEST_CONTEXT("mode " << dml::ModeName(mode)) {
      const dml::TrainResult r = RunWithDefaults(rt, data, m, mode, 2000);
      const double subopt = (r.primal - p_star) / p_star;
      BOOST_TEST_MESSAGE(dml::ModeName(mode) << ": " << r.epochs << " epochs, relative subopt "
                                             << subopt << ", gap " << r.gap / r.primal);
      BOOST_TEST((r.reason == dml::StopReason::kConverged));
      BOOST_TEST(r.epochs < 2000);
      BOOST_TEST(r.gap <= 1e-3 * r.primal);
      // The gap is relative to P, the suboptimality to P*: P - P* <= gap
      // <= 1e-3 P bounds it by 1e-3 P / P* (a run that stops just under
      // its rule is up to that factor above 1e-3 of P*).
      BOOST_TEST(subopt <= 1e-3 * r.primal / p_star);
      BOOST_TEST(r.gap >= 0.0);
      BOOST_TEST(r.primal - r.gap <= p_star * (1 + 1e-12));
      auto exact = dml::PrimalValue(*data, m, r.w);
      BOOST_REQUIRE(exact.ok());
      BOOST_TEST(std::abs(*exact - r.primal) <= 1e-12 * r.primal);
    }
  }
}

// Unscaled tabular data as users bring it (569 x 30, columns far from
// centred, units over 5 decades; 4 draws), dml-train's default lambda,
// K = 4, every SGD mode with default flags for 1000 epochs. What holds on
// every draw: the certificate is tight (the gap is P - P* to 10%: CG run to
// d + 1 on small models and stopped on the gap it can still cost; it was
// 70-3000 times P - P*), and no mode diverges (the calibration stopped at a
// step ending above P(0) and every mode ended 40% to 2x above P*). Most
// runs stop on the 1e-3 rule (a batch sized to the data: 64 gave sync 2
// steps an epoch; easgd and model averaging halve a plateaued step): 21
// of the 24 when this was written; on the first draw sync, easgd and
// hogwild ended at 1.5e-3 to 1.4e-2 after 1000 epochs (SGD's rate on H's
// flat directions, which no diagonal step factor reaches).
BOOST_AUTO_TEST_CASE(sgd_modes_with_defaults_on_offset_tabular_features) {
  dml::Runtime rt(WithThreads(2));
  const dml::ModelSpec m{dml::ModelKind::kLogisticL2, 1e-4, 0.5};
  int stopped = 0, runs = 0;
  for (uint64_t seed : {41, 42, 43, 44}) {
    auto data = std::make_shared<const dml::Dataset>(dml::testing::OffsetProblem(569, 30, 3.0, seed));
    dml::SolverOptions newton;
    newton.kind = dml::SolverKind::kNewton;
    const double p_star = Optimum(*data, m, 500, newton);
    for (dml::Mode mode : {dml::Mode::kSync, dml::Mode::kAsync, dml::Mode::kSsp, dml::Mode::kEasgd,
                           dml::Mode::kHogwild, dml::Mode::kModelAveraging}) {
      BOOST_TEST_CONTEXT("seed " << seed << " mode " << dml::ModeName(mode)) {
        const dml::TrainResult r = RunWithDefaults(rt, data, m, mode, 1000);
        const double subopt = r.primal - p_star;
        BOOST_TEST_MESSAGE("seed " << seed << " " << dml::ModeName(mode) << ": " << r.epochs
                                   << " epochs, relative subopt " << subopt / p_star << ", gap "
                                   << r.gap / r.primal);
        ++runs;
        if (r.reason == dml::StopReason::kConverged) {
          ++stopped;
          BOOST_TEST(r.gap <= 1e-3 * r.primal);
        }
        BOOST_TEST(subopt <= 2e-2 * p_star);
        BOOST_TEST(r.primal - r.gap <= p_star * (1 + 1e-12));  // a bound
        BOOST_TEST(r.gap <= 1.1 * subopt + 1e-9 * p_star);     // and a tight one
      }
    }
  }
  BOOST_TEST_MESSAGE(stopped << " of " << runs << " runs stopped on the 1e-3 rule");
  BOOST_TEST(stopped >= runs / 2);
}

// async with a hand-set step 128 times the calibrated one on the unscaled
// problem: the iterate stalls at the noise floor of stale gradients until
// the coordinator halves step0 on the plateau; then the job stops on its
// certificate.
BOOST_AUTO_TEST_CASE(async_halves_a_plateaued_step_and_certifies) {
  dml::Runtime rt(WithThreads(2));
  auto data = std::make_shared<const dml::Dataset>(dml::testing::UnscaledProblem());
  const dml::ModelSpec m{dml::ModelKind::kLogisticL2, 1.0 / 2000.0, 0.5};
  dml::SolverOptions newton;
  newton.kind = dml::SolverKind::kNewton;
  const double p_star = Optimum(*data, m, 1000, newton);
  dml::JobSpec s;
  s.data.dataset = data;
  s.model = m;
  s.mode.kind = dml::Mode::kAsync;
  s.mode.workers = 4;
  s.sgd.step0 = 4.0;
  s.stop.gap_rel = 1e-3;
  s.stop.max_epochs = 3000;
  auto j = rt.Submit(s);
  BOOST_REQUIRE_MESSAGE(j.ok(), j.status().ToString());
  const dml::TrainResult r = MustFinish(*j);
  int halvings = 0;
  for (const dml::Progress& p : r.history) {
    for (const dml::ProgressEvent& e : p.events) {
      if (e.kind != "step_reduced") continue;
      ++halvings;
      BOOST_TEST(e.what.find("step0 halved to ") == 0, e.what);
    }
  }
  BOOST_TEST_MESSAGE("async, step0 4: " << r.epochs << " epochs, " << halvings
                                          << " halvings, relative subopt "
                                          << (r.primal - p_star) / p_star);
  BOOST_TEST(halvings >= 1);
  BOOST_TEST((r.reason == dml::StopReason::kConverged));
  BOOST_TEST(r.gap <= 1e-3 * r.primal);
  BOOST_TEST((r.primal - p_star) / p_star <= 1e-3);
}

// Data clustered by worker: the rows of worker k's partition (rows in
// order, equal nonzeros) draw their 8 features from column block (k + 1)
// mod K, which the key-value store homes at node k + 1: with static
// placement none of a worker's keys are its own, with localize nearly all.
std::shared_ptr<const dml::Dataset> ClusteredProblem(int workers, int64_t rows_per_worker,
                                                     int64_t cols_per_block) {
  std::mt19937_64 g(11);
  std::normal_distribution<double> normal(0.0, 1.0);
  const int64_t d = workers * cols_per_block;
  std::vector<double> truth(static_cast<std::size_t>(d));
  for (double& t : truth) t = normal(g);
  std::vector<int64_t> offsets{0};
  std::vector<uint32_t> idx;
  std::vector<float> val;
  std::vector<float> y;
  for (int k = 0; k < workers; ++k) {
    const int64_t base = ((k + 1) % workers) * cols_per_block;
    std::uniform_int_distribution<int64_t> col(0, cols_per_block - 1);
    for (int64_t r = 0; r < rows_per_worker; ++r) {
      std::vector<uint32_t> cols;
      while (cols.size() < 8) {
        const auto c = static_cast<uint32_t>(base + col(g));
        if (std::find(cols.begin(), cols.end(), c) == cols.end()) cols.push_back(c);
      }
      std::sort(cols.begin(), cols.end());
      double margin = 0.3 * normal(g);
      for (uint32_t c : cols) {
        const float v = static_cast<float>(normal(g));
        idx.push_back(c);
        val.push_back(v);
        margin += v * truth[c];
      }
      offsets.push_back(static_cast<int64_t>(idx.size()));
      y.push_back(margin >= 0 ? 1.0f : -1.0f);
    }
  }
  auto x = dml::CsrMatrix::FromArrays(static_cast<int64_t>(y.size()), d, std::move(offsets),
                                      std::move(idx), std::move(val));
  BOOST_REQUIRE_MESSAGE(x.ok(), x.status().ToString());
  dml::Dataset data;
  data.x = *std::move(x);
  data.y = std::move(y);
  data.task = dml::Task::kClassification;
  return std::make_shared<const dml::Dataset>(std::move(data));
}

// The percentage in the "kv_store" event of a hogwild run on the store.
double ServedInPlace(const dml::TrainResult& r) {
  for (const auto& p : r.history) {
    for (const auto& e : p.events) {
      double pct = -1;
      if (e.kind == "kv_store" && std::sscanf(e.what.c_str(), "key-value store: %lf%%", &pct) == 1) {
        return pct;
      }
    }
  }
  return -1;
}

BOOST_AUTO_TEST_CASE(hogwild_on_the_key_value_store_reaches_the_optimum_and_localizes) {
  dml::Runtime rt(WithThreads(2));
  auto data = ClusteredProblem(4, 500, 30);
  const dml::ModelSpec m{dml::ModelKind::kLogisticL2, 1e-2, 0.5};
  const double p_star = Optimum(*data, m);
  struct Case {
    dml::JobSgd::Store store;
    bool localize;
    const char* name;
  };
  for (const Case c : {Case{dml::JobSgd::Store::kMemory, false, "memory"},
                       Case{dml::JobSgd::Store::kKv, false, "kv"},
                       Case{dml::JobSgd::Store::kKv, true, "kv+localize"}}) {
    BOOST_TEST_CONTEXT("store " << c.name) {
      dml::JobSpec s = SgdSpec(data, m, dml::Mode::kHogwild, 40);
      s.mode.workers = 4;
      s.sgd.store = c.store;
      s.sgd.localize = c.localize;
      auto j = rt.Submit(s);
      BOOST_REQUIRE_MESSAGE(j.ok(), j.status().ToString());
      const dml::TrainResult r = MustFinish(*j);
      auto exact = dml::PrimalValue(*data, m, r.w);
      BOOST_REQUIRE(exact.ok());
      BOOST_TEST(std::abs(*exact - r.primal) <= 1e-12 * std::abs(r.primal));
      BOOST_TEST_MESSAGE(c.name << ": suboptimality " << r.primal - p_star << ", served in place "
                                << ServedInPlace(r) << "%");
      BOOST_TEST(r.primal - p_star <= 1e-3, "suboptimality " << r.primal - p_star);
      BOOST_TEST(r.gap >= 0.0);
      BOOST_TEST(r.primal - r.gap <= p_star + 1e-12);
      const double local = ServedInPlace(r);
      if (c.store == dml::JobSgd::Store::kMemory) {
        BOOST_TEST(local == -1.0);  // no store, no event
      } else if (!c.localize) {
        // Every column a worker touches lives at another worker's node;
        // what is local is the coordinator's reads of the model through
        // node 0 (its home range: a quarter of every read).
        BOOST_TEST(local >= 0.0);
        BOOST_TEST(local <= 2.0);
      } else {
        BOOST_TEST(local >= 95.0);
      }
    }
  }
  // The store is hogwild's only.
  dml::JobSpec bad = SgdSpec(data, m, dml::Mode::kAsync, 1);
  bad.sgd.store = dml::JobSgd::Store::kKv;
  BOOST_TEST(rt.Submit(bad).status().message() ==
             "JobSpec.sgd.store: the key-value store holds hogwild's model; mode async keeps its "
             "model on the parameter shards");
  bad = SgdSpec(data, m, dml::Mode::kHogwild, 1);
  bad.sgd.localize = true;
  BOOST_TEST(rt.Submit(bad).status().message() ==
             "JobSpec.sgd.localize: needs sgd.store = kKv (keys move between key-value nodes)");
}

BOOST_AUTO_TEST_CASE(sgd_modes_reach_1e_3_suboptimality) {
  dml::Runtime rt(WithThreads(2));
  auto data = Problem(dml::Task::kClassification, 2000, 40);
  const dml::ModelSpec m{dml::ModelKind::kLogisticL2, 1e-2, 0.5};
  const double p_star = Optimum(*data, m);
  for (dml::Mode mode : {dml::Mode::kSync, dml::Mode::kAsync, dml::Mode::kSsp, dml::Mode::kEasgd,
                         dml::Mode::kHogwild, dml::Mode::kModelAveraging}) {
    BOOST_TEST_CONTEXT("mode " << dml::ModeName(mode)) {
      // EASGD's center is a damped average of the local models and lags
      // them: it needs more epochs for the same suboptimality (measured:
      // about 1.7e-3 after 40 epochs here, where the others are below 2e-4;
      // after 160, 5e-5..4e-4 in 15 runs of 16 and 1.7e-3 in one).
      const int epochs = mode == dml::Mode::kEasgd ? 320 : 40;
      dml::JobSpec s = SgdSpec(data, m, mode, epochs);
      s.sgd.tau = 4;
      auto j = rt.Submit(s);
      BOOST_REQUIRE_MESSAGE(j.ok(), j.status().ToString());
      const dml::TrainResult r = MustFinish(*j);
      BOOST_TEST((r.reason == dml::StopReason::kMaxEpochs));
      auto exact = dml::PrimalValue(*data, m, r.w);
      BOOST_REQUIRE(exact.ok());
      BOOST_TEST(std::abs(*exact - r.primal) <= 1e-12 * std::abs(r.primal));
      BOOST_TEST_MESSAGE(dml::ModeName(mode) << " suboptimality " << r.primal - p_star);
      BOOST_TEST(r.primal - p_star <= 1e-3, "suboptimality " << r.primal - p_star);
      BOOST_TEST(r.primal >= p_star - 1e-12);
      BOOST_TEST(r.epochs >= epochs - 1e-9);
      // The certificate (a dual point from the margins) bounds the
      // suboptimality: D = P - gap is below the optimum.
      BOOST_TEST(r.gap >= 0.0);
      BOOST_TEST(r.primal - r.gap <= p_star + 1e-12);
      BOOST_TEST(r.gap >= r.primal - p_star - 1e-12);
      // The workers' shares (the iterate pass, CG's Hessian products, the
      // dual pass) add up to the Newton-refined certificate of the whole
      // data (CG may take its last step on either side of its threshold:
      // sums in another order), tighter than the plain one.
      auto whole = dml::CertifyIterateNewton(*data, m, r.w, s.sgd.certificate_cg_steps);
      BOOST_REQUIRE(whole.ok());
      BOOST_TEST(std::abs(whole->gap - r.gap) <= 1e-8 * r.primal);
      BOOST_TEST(std::abs(whole->dual - r.dual) <= 1e-8 * r.primal);
      auto share = dml::IterateShareOf(*data, m, r.w);
      BOOST_REQUIRE(share.ok());
      auto plain = dml::CertifyIterate(m, r.w, *share);
      BOOST_REQUIRE(plain.ok());
      BOOST_TEST(r.gap < plain->gap);
    }
  }
}

// With libdml's defaults (calibrated step falling as 1/(lambda t), the
// average certified beside the iterate, staleness-aware steps) async with 4
// workers has no noise floor that more epochs cannot lower: 4x the epochs
// never ends worse. And a job stops on its certificate (--tol) once the gap
// allows it.
BOOST_AUTO_TEST_CASE(async_defaults_improve_with_epochs_and_stop_on_the_gap) {
  dml::Runtime rt(WithThreads(2));
  auto data = Problem(dml::Task::kClassification, 2000, 40);
  const dml::ModelSpec m{dml::ModelKind::kLogisticL2, 1e-2, 0.5};
  const double p_star = Optimum(*data, m);
  auto run = [&](int epochs, double tol) {
    dml::JobSpec s;
    s.data.dataset = data;
    s.model = m;
    s.mode.kind = dml::Mode::kAsync;
    s.mode.workers = 4;
    s.stop.max_epochs = epochs;
    s.stop.gap_rel = tol;
    auto j = rt.Submit(s);
    BOOST_REQUIRE_MESSAGE(j.ok(), j.status().ToString());
    return MustFinish(*j);
  };
  // Medians of 3 runs each, alternated: a single pair overlapped once in
  // a parallel CI ctest on 2 cores (80 epochs 3e-5 above 20), where a
  // starved worker's stale pushes land late; alone and beside two busy
  // loops 11 of 11 pairs kept the order, 1.4-7x apart (at the batch
  // AutoBatch gives 2000 rows on 4 workers, 15).
  std::vector<double> short_runs, long_runs;
  dml::TrainResult long_run;
  for (int k = 0; k < 3; ++k) {
    const bool long_first = k % 2 == 1;
    if (long_first) long_runs.push_back((long_run = run(80, 0.0)).primal - p_star);
    short_runs.push_back(run(20, 0.0).primal - p_star);
    if (!long_first) long_runs.push_back((long_run = run(80, 0.0)).primal - p_star);
    BOOST_TEST(long_runs.back() <= 1e-3 * p_star);
  }
  std::sort(short_runs.begin(), short_runs.end());
  std::sort(long_runs.begin(), long_runs.end());
  BOOST_TEST_MESSAGE("async defaults: 20 epochs " << short_runs[1] << ", 80 epochs " << long_runs[1]
                                                  << " (medians of 3)");
  BOOST_TEST(long_runs[1] <= short_runs[1]);
  bool calibrated = false;
  for (const auto& p : long_run.history) {
    for (const auto& e : p.events) calibrated |= e.kind == "step_calibrated";
  }
  BOOST_TEST(calibrated);
  // Stops on the certificate: a gap of 1e-2 relative is reached early.
  const dml::TrainResult tol_run = run(1000, 1e-2);
  BOOST_TEST((tol_run.reason == dml::StopReason::kConverged));
  BOOST_TEST(tol_run.gap <= 1e-2 * tol_run.primal);
  BOOST_TEST(tol_run.epochs < 1000);
  BOOST_TEST(tol_run.primal - p_star <= tol_run.gap + 1e-12);
}

// Medians of 3 runs each, sides alternated (both depend on scheduling), of
// 40 epochs of K = 4 `mode` plain ([0]) and with `variant` set ([1]):
// relative suboptimality and relative gap; every certificate a bound.
struct PlainAndVariant {
  double subopt[2];
  double gap[2];
};
PlainAndVariant MediansOfPlainAndVariant(dml::Runtime& rt,
                                         const std::shared_ptr<const dml::Dataset>& data,
                                         const dml::ModelSpec& m, double p_star, dml::Mode mode,
                                         const std::function<void(dml::JobSgd&)>& variant) {
  std::vector<double> subopts[2], gaps[2];
  for (int run = 0; run < 3; ++run) {
    for (int k = 0; k < 2; ++k) {
      const int side = run % 2 == 0 ? k : 1 - k;
      dml::JobSpec s;
      s.data.dataset = data;
      s.model = m;
      s.mode.kind = mode;
      s.mode.workers = 4;
      s.stop.max_epochs = 40;
      s.stop.gap_rel = 0;
      if (side == 1) variant(s.sgd);
      auto j = rt.Submit(s);
      BOOST_REQUIRE_MESSAGE(j.ok(), j.status().ToString());
      const dml::TrainResult r = MustFinish(*j);
      subopts[side].push_back((r.primal - p_star) / p_star);
      gaps[side].push_back(r.gap / r.primal);
      BOOST_TEST(r.primal - r.gap <= p_star + 1e-12);
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  PlainAndVariant out{{median(subopts[0]), median(subopts[1])}, {median(gaps[0]), median(gaps[1])}};
  BOOST_TEST_MESSAGE(dml::ModeName(mode) << ": suboptimality " << out.subopt[0] << " -> "
                                         << out.subopt[1] << ", gap " << out.gap[0] << " -> "
                                         << out.gap[1]);
  return out;
}

// SVRG (JobSgd::svrg) in the gradient-exchange modes: tighter than plain
// SGD after the same epochs, its certificate too; refused elsewhere by name.
BOOST_AUTO_TEST_CASE(svrg_tightens_sync_and_async) {
  dml::Runtime rt(WithThreads(2));
  auto data = Problem(dml::Task::kClassification, 2000, 40);
  const dml::ModelSpec m{dml::ModelKind::kLogisticL2, 1e-3, 0.5};
  const double p_star = Optimum(*data, m);
  for (dml::Mode mode : {dml::Mode::kSync, dml::Mode::kAsync}) {
    BOOST_TEST_CONTEXT("mode " << dml::ModeName(mode)) {
      // async most depends on scheduling: a starved worker's stale pushes
      // left SVRG behind once in CI on 2 busy cores.
      const PlainAndVariant r = MediansOfPlainAndVariant(
          rt, data, m, p_star, mode, [](dml::JobSgd& sgd) { sgd.svrg = true; });
      if (mode == dml::Mode::kSync) {
        BOOST_TEST(r.subopt[1] < r.subopt[0]);
        BOOST_TEST(r.gap[1] < r.gap[0]);
      } else {
        // async: usually 10x tighter too, but with 2 scheduler threads on
        // 2 busy cores (a full parallel ctest) a starved worker's stale
        // snapshot can leave it behind plain SGD; what always holds is
        // that it converges (bench/results/modes_* measure the gain).
        BOOST_TEST(r.subopt[1] < 5e-3);
      }
    }
  }
  dml::JobSpec s = SgdSpec(data, m, dml::Mode::kEasgd, 1);
  s.sgd.svrg = true;
  BOOST_TEST(rt.Submit(s).status().message() ==
             "JobSpec.sgd.svrg: modes sync, async and ssp only, not easgd");
}

// SAGA (JobSgd::saga; ASAGA in async and ssp) after the same 40 epochs:
// tighter than plain SGD on the same problem (measured: async and ssp at
// the optimum to 1e-13 against 4.4e-4; sync 3.5e-8 against 3.4e-4);
// refused by name outside sync, async and ssp and beside SVRG.
BOOST_AUTO_TEST_CASE(saga_tightens_async_and_ssp) {
  dml::Runtime rt(WithThreads(2));
  auto data = Problem(dml::Task::kClassification, 2000, 40);
  const dml::ModelSpec m{dml::ModelKind::kLogisticL2, 1e-3, 0.5};
  const double p_star = Optimum(*data, m);
  for (dml::Mode mode : {dml::Mode::kAsync, dml::Mode::kSsp, dml::Mode::kSync}) {
    BOOST_TEST_CONTEXT("mode " << dml::ModeName(mode)) {
      const PlainAndVariant r = MediansOfPlainAndVariant(
          rt, data, m, p_star, mode, [](dml::JobSgd& sgd) { sgd.saga = true; });
      BOOST_TEST(r.subopt[1] < r.subopt[0]);
    }
  }
  dml::JobSpec s = SgdSpec(data, m, dml::Mode::kHogwild, 1);
  s.sgd.saga = true;
  BOOST_TEST(rt.Submit(s).status().message() ==
             "JobSpec.sgd.saga: modes sync, async and ssp only, not hogwild");
  s = SgdSpec(data, m, dml::Mode::kAsync, 1);
  s.sgd.saga = s.sgd.svrg = true;
  BOOST_TEST(rt.Submit(s).status().message() ==
             "JobSpec.sgd.saga: SAGA and SVRG are alternatives: choose one");
}

BOOST_AUTO_TEST_CASE(sync_is_deterministic_and_equals_the_single_process_minibatch_run) {
  // 30 features: workers pull whole ranges; 3000: they pull the batch's keys.
  for (int64_t cols : {30, 3000}) {
  BOOST_TEST_CONTEXT("features " << cols) {
  auto data = Problem(dml::Task::kClassification, 600, cols, 11);
  const dml::ModelSpec m{dml::ModelKind::kLogisticL2, 1e-2, 0.5};
  const int K = 3;
  dml::JobSpec s = SgdSpec(data, m, dml::Mode::kSync, 5);
  s.mode.workers = K;
  s.mode.shards = 2;
  s.sgd.batch_size = 8;
  dml::Runtime rt(WithThreads(2));
  auto j1 = rt.Submit(s);
  auto j2 = rt.Submit(s);
  BOOST_REQUIRE(j1.ok());
  BOOST_REQUIRE(j2.ok());
  const dml::TrainResult a = MustFinish(*j1);
  const dml::TrainResult b = MustFinish(*j2);
  BOOST_TEST(a.w == b.w);  // bit for bit, though the two ran concurrently

  // Replay: one process, one minibatch of K*batch rows per clock (the union
  // of the workers' batches), the same proximal step.
  auto ranges = dml::BalancedRanges(data->x.offsets(), K);
  BOOST_REQUIRE(ranges.ok());
  const int64_t clocks = (5 * data->x.rows() + K * s.sgd.batch_size - 1) / (K * s.sgd.batch_size);
  std::vector<double> w(data->x.cols(), 0.0);
  for (int64_t c = 0; c < clocks; ++c) {
    std::vector<int64_t> rows;
    for (int k = 0; k < K; ++k) {
      const dml::Range r = (*ranges)[k];
      for (int64_t i : dml::actors::SampleBatch(s.mode.seed, k, c, r.size(), s.sgd.batch_size)) {
        rows.push_back(r.begin + i);
      }
    }
    const double step = s.sgd.step0 / (1.0 + s.sgd.step_decay * static_cast<double>(c));
    BOOST_REQUIRE(dml::SgdStep(*data, m, rows, step, w).ok());
  }
  double worst = 0.0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    worst = std::max(worst, std::abs(w[i] - a.w[i]) / (1e-12 + std::abs(w[i])));
  }
  BOOST_TEST(worst <= 1e-10, "largest relative difference " << worst);
  }
  }
}

BOOST_AUTO_TEST_CASE(parameter_shard_refuses_bad_pushes_and_pulls) {
  dml::actors::test_config_holder h;
  caf::scoped_actor self{h.sys};
  dml::actors::shard_config c;
  c.mode = dml::Mode::kSync;
  c.workers = 2;
  c.begin = 100;
  c.end = 110;
  c.model = {dml::ModelKind::kLogisticL2, 1e-2, 0.5};
  auto shard = dml::actors::spawn_parameter_shard(h.sys, c);
  auto error_of = [&](auto... xs) {
    std::string msg;
    using reply = std::conditional_t<
        std::is_same_v<std::tuple_element_t<0, std::tuple<decltype(xs)...>>, dml::actors::pull_atom>,
        dml::actors::dvec, int64_t>;
    self->request(shard, std::chrono::seconds(10), xs...)
        .receive([&](const reply&) { msg = "no error"; },
                 [&](caf::error& e) { msg = h.sys.render(e); });
    return msg;
  };
  using namespace dml::actors;
  auto keys = [](std::vector<uint32_t> k) {
    return key_list{std::make_shared<const std::vector<uint32_t>>(std::move(k)), {}};
  };
  BOOST_TEST(error_of(pull_atom_v, int32_t{0}, int64_t{0}, keys({5, 3})).find("key 1 has offset 3 not above") != std::string::npos);
  BOOST_TEST(error_of(pull_atom_v, int32_t{0}, int64_t{0}, keys({10})).find("outside the range of 10") != std::string::npos);
  BOOST_TEST(error_of(pull_atom_v, int32_t{2}, int64_t{0}).find("worker index 2 outside [0, 2)") != std::string::npos);
  BOOST_TEST(error_of(push_atom_v, int32_t{0}, int64_t{0}, dvec(std::vector<double>(9, 0.0))).find("dense push of 9 values to a range of 10") != std::string::npos);
  std::vector<double> nan(10, 0.0);
  nan[4] = std::nan("");
  BOOST_TEST(error_of(push_atom_v, int32_t{1}, int64_t{0}, dvec(nan)).find("value at key 104 is not finite") != std::string::npos);
  BOOST_TEST(error_of(push_atom_v, int32_t{0}, int64_t{3}, dvec(std::vector<double>(10, 0.0))).find("pushed clock 3 but the shard is at clock 0") != std::string::npos);
  // A valid sync round: the mean of the two gradients, one proximal step.
  BOOST_TEST(error_of(push_atom_v, int32_t{0}, int64_t{0}, dvec(std::vector<double>(10, 1.0))) == "no error");
  BOOST_TEST(error_of(push_atom_v, int32_t{0}, int64_t{0}, dvec(std::vector<double>(10, 1.0))).find("twice") != std::string::npos);
  BOOST_TEST(error_of(push_atom_v, int32_t{1}, int64_t{0}, dvec(std::vector<double>(10, 3.0))) == "no error");
  dvec got;
  self->request(shard, std::chrono::seconds(10), pull_atom_v, int32_t{0}, int64_t{1}, keys({0, 9}))
      .receive([&](const dvec& v) { got = v; }, [&](caf::error&) {});
  BOOST_REQUIRE(got.size() == 2u);
  // w = (0 - 0.5 * 2) / (1 + 0.5 * 1e-2)
  BOOST_TEST(got.view()[0] == -1.0 / 1.005, boost::test_tools::tolerance(1e-14));
  BOOST_TEST(got.view()[1] == -1.0 / 1.005, boost::test_tools::tolerance(1e-14));
  self->send_exit(shard, caf::exit_reason::user_shutdown);
}

// pushpull on a model-averaging shard: the first worker's exchange waits
// for the second's push; both get the mean (the allreduce primitive). The
// cocoa shard tells its coordinator when every worker's delta is in.
BOOST_AUTO_TEST_CASE(pushpull_answers_with_the_mean_and_cocoa_shards_announce_rounds) {
  using namespace dml::actors;
  dml::actors::test_config_holder h;
  caf::scoped_actor self{h.sys};
  shard_config c;
  c.mode = dml::Mode::kModelAveraging;
  c.workers = 2;
  c.begin = 0;
  c.end = 4;
  auto shard = spawn_parameter_shard(h.sys, c);
  auto first = self->request(shard, std::chrono::seconds(10), pushpull_atom_v, int32_t{0},
                             int64_t{0}, dvec({1.0, 2.0, 3.0, 4.0}));
  auto second = self->request(shard, std::chrono::seconds(10), pushpull_atom_v, int32_t{1},
                              int64_t{0}, dvec({3.0, 2.0, 1.0, -4.0}));
  for (auto* h2 : {&first, &second}) {
    dvec got;
    h2->receive([&](const dvec& v) { got = v; }, [](caf::error&) {});
    BOOST_REQUIRE_EQUAL(got.size(), 4u);
    BOOST_TEST(got.view()[0] == 2.0);
    BOOST_TEST(got.view()[1] == 2.0);
    BOOST_TEST(got.view()[2] == 2.0);
    BOOST_TEST(got.view()[3] == 0.0);
  }
  self->send_exit(shard, caf::exit_reason::user_shutdown);

  // A pushpull's values are checked while the round's mean sums them: a
  // non-finite push is refused to its own exchange, whether it came first
  // or last, the other worker keeps waiting, the model keeps the last
  // round's mean, and the round completes once the worker pushes again.
  for (const bool offender_first : {true, false}) {
    BOOST_TEST_CONTEXT("offender first " << offender_first) {
      auto avg = spawn_parameter_shard(h.sys, c);
      auto round0a = self->request(avg, std::chrono::seconds(10), pushpull_atom_v, int32_t{0},
                                   int64_t{0}, dvec({1.0, 2.0, 3.0, 4.0}));
      auto round0b = self->request(avg, std::chrono::seconds(10), pushpull_atom_v, int32_t{1},
                                   int64_t{0}, dvec({3.0, 2.0, 1.0, 0.0}));
      round0a.receive([](const dvec&) {}, [](caf::error&) {});
      round0b.receive([](const dvec&) {}, [](caf::error&) {});
      std::vector<double> bad = {1.0, 1.0, 1.0, 1.0};
      bad[2] = offender_first ? std::nan("") : -std::numeric_limits<double>::infinity();
      const int32_t offender = offender_first ? 0 : 1;
      const int32_t good = 1 - offender;
      std::string refused = "no reply", good_reply = "no reply";
      dvec mean;
      auto send_bad = [&] {
        return self->request(avg, std::chrono::seconds(10), pushpull_atom_v, offender, int64_t{1},
                             dvec(bad));
      };
      auto send_good = [&] {
        return self->request(avg, std::chrono::seconds(10), pushpull_atom_v, good, int64_t{1},
                             dvec({5.0, 6.0, 7.0, 8.0}));
      };
      auto first_h = offender_first ? send_bad() : send_good();
      auto second_h = offender_first ? send_good() : send_bad();
      auto& bad_h = offender_first ? first_h : second_h;
      auto& good_h = offender_first ? second_h : first_h;
      bad_h.receive([&](const dvec&) { refused = "answered"; },
                    [&](caf::error& e) { refused = h.sys.render(e); });
      BOOST_TEST(refused.find("push from worker " + std::to_string(offender) +
                              ": value at key 2 is not finite") != std::string::npos,
                 refused);
      dvec now;
      self->request(avg, std::chrono::seconds(10), read_atom_v)
          .receive([&](const dvec& v) { now = v; }, [](caf::error&) {});
      BOOST_REQUIRE_EQUAL(now.size(), 4u);
      BOOST_TEST(now.to_vector() == std::vector<double>({2.0, 2.0, 2.0, 2.0}),
                 boost::test_tools::per_element());
      // The good worker's exchange still waits; the offender's retry ends it.
      auto retry = self->request(avg, std::chrono::seconds(10), pushpull_atom_v, offender,
                                 int64_t{1}, dvec({3.0, 2.0, 1.0, 0.0}));
      for (auto* x : {&good_h, &retry}) {
        x->receive([&](const dvec& v) { mean = v; },
                   [&](caf::error& e) { good_reply = h.sys.render(e); });
        BOOST_REQUIRE_EQUAL(mean.size(), 4u);
        BOOST_TEST(mean.to_vector() == std::vector<double>({4.0, 4.0, 4.0, 4.0}),
                   boost::test_tools::per_element());
      }
      BOOST_TEST(good_reply == "no reply");
      self->send_exit(avg, caf::exit_reason::user_shutdown);
    }
  }

  // The mean is summed in worker order, bit for bit, for K that are and
  // are not multiples of the four pushes one pass reads, over a range of
  // several blocks; values of mixed magnitude make another order show.
  for (const int32_t k : {1, 3, 4, 5, 9}) {
    BOOST_TEST_CONTEXT("K = " << k) {
      shard_config mc = c;
      mc.workers = k;
      mc.end = 5001;
      auto avg = spawn_parameter_shard(h.sys, mc);
      std::vector<std::vector<double>> xs(k, std::vector<double>(5001));
      for (int32_t w = 0; w < k; ++w) {
        for (std::size_t j = 0; j < 5001; ++j) {
          xs[w][j] = (w % 2 == 0 ? 1e16 : -1e16) * ((j + w) % 3) + 0.1 * (w + 1) + 1e-3 * j;
        }
      }
      std::vector<double> expect(5001);
      for (std::size_t j = 0; j < 5001; ++j) {
        double sum = xs[0][j];
        for (int32_t w = 1; w < k; ++w) sum += xs[w][j];
        expect[j] = sum * (1.0 / k);
      }
      using handle = decltype(self->request(avg, std::chrono::seconds(10), pushpull_atom_v,
                                            int32_t{0}, int64_t{0}, dvec(xs[0])));
      std::vector<handle> hs;
      for (int32_t w = 0; w < k; ++w) {
        hs.push_back(self->request(avg, std::chrono::seconds(10), pushpull_atom_v, w, int64_t{0},
                                   dvec(xs[w])));
      }
      for (auto& x : hs) {
        dvec got;
        x.receive([&](const dvec& v) { got = v; }, [](caf::error&) {});
        BOOST_REQUIRE_EQUAL(got.size(), 5001u);
        BOOST_TEST(got.to_vector() == expect, boost::test_tools::per_element());
      }
      self->send_exit(avg, caf::exit_reason::user_shutdown);
    }
  }

  // cocoa: gamma * delta added on arrival; (begin, r, range) once all K
  // deltas of round r are in, to the coordinator given at spawn.
  shard_config cc;
  cc.mode = dml::Mode::kCocoa;
  cc.workers = 2;
  cc.begin = 10;
  cc.end = 13;
  cc.gamma = 0.5;
  auto cocoa = spawn_parameter_shard(h.sys, cc, caf::actor_cast<caf::actor>(self));
  self->request(cocoa, std::chrono::seconds(10), push_atom_v, int32_t{1}, int64_t{0},
                dvec({2.0, 4.0, 6.0}))
      .receive([](int64_t) {}, [](caf::error&) {});
  int64_t begin = -1, round = -1;
  dvec range;
  self->receive([&](round_atom, int64_t b, int64_t r, const dvec& v) { begin = b; round = r; },
                caf::after(std::chrono::milliseconds(100)) >> [] {});
  BOOST_TEST(round == -1);  // one of two deltas: nothing yet
  self->request(cocoa, std::chrono::seconds(10), push_atom_v, int32_t{0}, int64_t{0},
                dvec({-2.0, 0.0, 2.0}))
      .receive([](int64_t) {}, [](caf::error&) {});
  self->receive([&](round_atom, int64_t b, int64_t r, const dvec& v) {
    begin = b;
    round = r;
    range = v;
  });
  BOOST_TEST(begin == 10);
  BOOST_TEST(round == 0);
  BOOST_REQUIRE_EQUAL(range.size(), 3u);
  BOOST_TEST(range.view()[0] == 0.0);
  BOOST_TEST(range.view()[1] == 2.0);
  BOOST_TEST(range.view()[2] == 4.0);
  self->send_exit(cocoa, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(ssp_never_grants_more_than_s_clocks_of_lead) {
  auto data = Problem(dml::Task::kClassification, 1500, 40, 5);
  const dml::ModelSpec m{dml::ModelKind::kLogisticL2, 1e-2, 0.5};
  dml::Runtime rt(WithThreads(2));
  for (int staleness : {0, 1, 3}) {
    BOOST_TEST_CONTEXT("s = " << staleness) {
      dml::JobSpec s = SgdSpec(data, m, dml::Mode::kSsp, 3);
      s.mode.workers = 3;
      s.sgd.batch_size = 4;
      s.sgd.staleness = staleness;
      auto j = rt.Submit(s);
      BOOST_REQUIRE(j.ok());
      const dml::TrainResult r = MustFinish(*j);
      BOOST_TEST(r.max_granted_staleness <= staleness);
      BOOST_TEST(r.max_granted_staleness >= 0);
    }
  }
}

BOOST_AUTO_TEST_CASE(progress_streams_to_callback_and_poll) {
  auto data = Problem(dml::Task::kClassification, 800, 30);
  dml::Runtime rt(WithThreads(2));
  dml::JobSpec s;
  s.data.dataset = data;
  s.model = {dml::ModelKind::kLogisticL2, 1e-3, 0.5};
  s.mode.kind = dml::Mode::kCocoa;
  s.mode.workers = 2;
  s.stop.gap_rel = 1e-8;
  std::atomic<int> calls{0};
  auto j = rt.Submit(s, [&](const dml::Progress& p) {
    calls++;
    BOOST_CHECK(p.gap >= 0.0);
  });
  BOOST_REQUIRE(j.ok());
  const dml::TrainResult r = MustFinish(*j);
  const auto polled = j->Poll();
  BOOST_TEST(polled.size() == r.history.size());
  BOOST_TEST(calls.load() == static_cast<int>(r.history.size()));
  BOOST_TEST(j->Poll().empty());
  for (std::size_t i = 1; i < r.history.size(); ++i) {
    BOOST_TEST(r.history[i].round == r.history[i - 1].round + 1);
    BOOST_TEST(r.history[i].bytes_exchanged > r.history[i - 1].bytes_exchanged);
  }
}

// wait_for: a running job is still running after the timeout (and goes
// on); once it ends, the result comes back at once.
BOOST_AUTO_TEST_CASE(wait_for_times_out_on_a_running_job_and_returns_a_finished_one) {
  auto data = Problem(dml::Task::kClassification, 2000, 40);
  dml::Runtime rt(WithThreads(2));
  dml::JobSpec s = SgdSpec(data, {dml::ModelKind::kLogisticL2, 1e-3, 0.5}, dml::Mode::kAsync,
                            1000000);
  auto j = rt.Submit(s);
  BOOST_REQUIRE(j.ok());
  const auto t0 = Clock::now();
  auto early = j->WaitFor(std::chrono::milliseconds(50));
  const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
  BOOST_TEST((early.status().code() == absl::StatusCode::kDeadlineExceeded));
  BOOST_TEST(std::string(early.status().message()) == "job still running after 0.05 s");
  BOOST_TEST(waited >= 0.05);
  BOOST_TEST(!j->Done());
  j->Cancel();
  auto r = j->WaitFor(std::chrono::seconds(10));
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  BOOST_TEST((r->reason == dml::StopReason::kCancelled));
  auto again = j->WaitFor(std::chrono::seconds(0));  // ended: no waiting
  BOOST_REQUIRE(again.ok());
  BOOST_TEST(again->primal == r->primal);
  dml::Job empty;
  BOOST_TEST((empty.WaitFor(std::chrono::seconds(1)).status().code() ==
              absl::StatusCode::kFailedPrecondition));
}

BOOST_AUTO_TEST_CASE(cancel_stops_a_long_job_within_200ms_and_keeps_the_model) {
  auto data = Problem(dml::Task::kClassification, 3000, 50);
  const dml::ModelSpec m{dml::ModelKind::kLogisticL2, 1e-3, 0.5};
  dml::Runtime rt(WithThreads(2));
  for (dml::Mode mode : {dml::Mode::kAsync, dml::Mode::kSync, dml::Mode::kCocoa}) {
    BOOST_TEST_CONTEXT("mode " << dml::ModeName(mode)) {
      dml::JobSpec s = SgdSpec(data, m, mode, 1000000);
      s.stop.gap_rel = 0;  // cocoa: never converges by the gap
      s.cocoa.local_epochs = 0.1;
      const dml::TrainResult r = CancelAfter300ms(rt, s, 5);
      // What was trained is returned, not lost.
      BOOST_TEST(r.w.size() == static_cast<std::size_t>(data->x.cols()));
      BOOST_TEST(r.primal < std::log(2.0));
    }
  }
}

// A cocoa round of ~thousands of local epochs is cut short: the solve in
// progress checks the job's interrupt flag, the shards announce the partial
// round, and the job ends on a certified shared vector.
BOOST_AUTO_TEST_CASE(cancel_interrupts_a_long_cocoa_round) {
  auto data = Problem(dml::Task::kClassification, 3000, 50);
  const dml::ModelSpec m{dml::ModelKind::kLogisticL2, 1e-3, 0.5};
  dml::Runtime rt(WithThreads(2));
  dml::JobSpec s = SgdSpec(data, m, dml::Mode::kCocoa, 1000000);
  s.stop.gap_rel = 0;
  // One round: 150 million coordinate steps per worker, seconds on any
  // machine (5000 local epochs, the earlier value, ran in under the 300 ms
  // before the cancel on an idle machine, so the round was never cut).
  s.cocoa.local_epochs = 100000;
  const dml::TrainResult r = CancelAfter300ms(rt, s, 30);
  // The round 0 certificate (w = 0), then the one of the interrupted round.
  BOOST_REQUIRE(r.history.size() >= 2u);
  BOOST_TEST(r.history.back().epochs < 100000.0);  // cut short
  BOOST_TEST(r.primal < std::log(2.0));
  BOOST_TEST(std::isfinite(r.gap));
  BOOST_TEST(r.gap >= 0.0);
  // The returned model is the certified one.
  BOOST_TEST(dml::PrimalValue(*data, m, r.w).value() == r.primal,
             boost::test_tools::tolerance(1e-9));
}

// Cocoa decides on the certificate at s_r while the solve from s_r runs: a job
// that stops there must not wait for that solve (a primal model's job
// collects the workers' coordinates first), nor leave it burning a
// scheduler thread after wait() returned. Uninterrupted, the solve here
// would run for seconds.
BOOST_AUTO_TEST_CASE(a_finished_cocoa_job_ends_the_solve_nobody_reads) {
  auto data = Problem(dml::Task::kClassification, 3000, 50);
  dml::Runtime rt(WithThreads(2));
  struct Case {
    dml::ModelSpec m;
    double local_epochs;  // one round: seconds on a 2-core machine
  };
  for (const Case& c : {Case{{dml::ModelKind::kLogisticL2, 1e-3, 0.5}, 2e4},
                        Case{{dml::ModelKind::kLogisticL1, 1e-3, 0.5}, 4e3}}) {
    BOOST_TEST_CONTEXT(dml::ModelName(c.m.kind)) {
      dml::JobSpec s = SgdSpec(data, c.m, dml::Mode::kCocoa, 1000000000);
      s.mode.workers = 1;
      s.mode.shards = 1;
      s.stop.gap_rel = 0;
      s.stop.target_primal = 1.0;  // above log 2: met by round 0's certificate (w = 0)
      s.cocoa.local_epochs = c.local_epochs;
      const auto t0 = Clock::now();
      auto job = rt.Submit(s);
      BOOST_REQUIRE_MESSAGE(job.ok(), job.status().ToString());
      auto r = job->Wait();
      const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
      BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
      BOOST_TEST(r->rounds == 0);
      BOOST_TEST((r->reason == dml::StopReason::kTargetReached));
      BOOST_TEST(r->primal == std::log(2.0), boost::test_tools::tolerance(1e-12));
      BOOST_TEST(r->w.size() == static_cast<std::size_t>(data->x.cols()));
      BOOST_TEST(waited < 5.0);
      const double cpu0 = CpuSeconds();
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      BOOST_TEST(CpuSeconds() - cpu0 < 0.1);
    }
  }
}

BOOST_AUTO_TEST_CASE(destroying_a_runtime_cancels_its_jobs_without_hanging) {
  auto data = Problem(dml::Task::kClassification, 2000, 40);
  const dml::ModelSpec m{dml::ModelKind::kLogisticL2, 1e-3, 0.5};
  std::vector<dml::Job> jobs;
  const auto t0 = Clock::now();
  {
    dml::Runtime rt(WithThreads(2));
    for (dml::Mode mode : {dml::Mode::kAsync, dml::Mode::kHogwild, dml::Mode::kCocoa}) {
      dml::JobSpec s = SgdSpec(data, m, mode, 1000000);
      s.stop.gap_rel = 0;
      auto j = rt.Submit(s);
      BOOST_REQUIRE(j.ok());
      jobs.push_back(*j);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  BOOST_TEST(s < 3.0, "destruction took " << s << " s");
  for (auto& j : jobs) {
    BOOST_TEST(j.Done());  // the handle outlives the runtime
    auto r = j.Wait();
    // Cancelled while training (a result) or before it started (an error).
    BOOST_TEST((r.ok() ? r->reason == dml::StopReason::kCancelled
                       : r.status().code() == absl::StatusCode::kCancelled));
  }
}

BOOST_AUTO_TEST_CASE(two_runtimes_side_by_side) {
  auto data = Problem(dml::Task::kRegression, 500, 20);
  const dml::ModelSpec m{dml::ModelKind::kRidge, 1e-2, 0.5};
  dml::Runtime a(WithThreads(1));
  dml::Runtime b(WithThreads(1));
  dml::JobSpec s;
  s.data.dataset = data;
  s.model = m;
  s.mode.kind = dml::Mode::kCocoa;
  s.stop.gap_rel = 1e-8;
  auto ja = a.Submit(s);
  auto jb = b.Submit(s);
  BOOST_REQUIRE(ja.ok());
  BOOST_REQUIRE(jb.ok());
  const auto ra = MustFinish(*ja);
  const auto rb = MustFinish(*jb);
  BOOST_TEST(ra.w == rb.w);  // same seed, same rounds, independent systems
  BOOST_TEST((ra.reason == dml::StopReason::kConverged));
}

BOOST_AUTO_TEST_CASE(load_and_solver_errors_fail_the_job) {
  dml::Runtime rt(WithThreads(2));
  // A worker whose data fails to load.
  dml::JobSpec s;
  s.data.path = "/nonexistent/dir/train.libsvm";
  s.model = {dml::ModelKind::kHingeSvm, 1e-2, 0.5};
  s.mode.kind = dml::Mode::kCocoa;
  auto j = rt.Submit(s);
  BOOST_REQUIRE(j.ok());
  auto r = j->Wait();
  BOOST_REQUIRE(!r.ok());
  const std::string msg(r.status().message());
  BOOST_TEST(msg.find("worker") != std::string::npos, msg);
  BOOST_TEST(msg.find("/nonexistent/dir/train.libsvm") != std::string::npos, msg);

  // A solver that refuses its data: real-valued labels for an SVM.
  auto reg = Problem(dml::Task::kRegression, 200, 10);
  for (dml::Mode mode : {dml::Mode::kCocoa, dml::Mode::kAsync}) {
    dml::JobSpec t;
    t.data.dataset = reg;
    t.model = {dml::ModelKind::kHingeSvm, 1e-2, 0.5};
    t.mode.kind = mode;
    auto jt = rt.Submit(t);
    BOOST_REQUIRE(jt.ok());
    auto rt_result = jt->Wait();
    BOOST_REQUIRE(!rt_result.ok());
    const std::string m2(rt_result.status().message());
    BOOST_TEST(m2.find("needs labels in {-1,+1}") != std::string::npos, m2);
    BOOST_TEST((rt_result.status().code() == absl::StatusCode::kInvalidArgument));
  }
}

// One stray feature index makes a model too large for the memory: the
// workers refuse it before any vector of its size, and the job fails with
// their words (not CAF's rendering of the error around them).
BOOST_AUTO_TEST_CASE(a_model_over_the_memory_fails_the_job_before_any_vector) {
  const dml::ScopedMemoryLimit limit(int64_t{1} << 30);  // 1 GiB
  const int64_t d = int64_t{1} << 26;    // 512 MiB a vector
  auto data = std::make_shared<dml::Dataset>();
  data->x = dml::CsrMatrix::FromArraysUnchecked(4, d, {0, 1, 2, 3, 4},
                                                {0u, 1u, 2u, static_cast<uint32_t>(d - 1)},
                                                {1.0f, 1.0f, 1.0f, 1.0f});
  data->y = {1.0f, -1.0f, 1.0f, -1.0f};
  data->task = dml::Task::kClassification;
  dml::Runtime rt(WithThreads(2));
  for (dml::Mode mode : {dml::Mode::kCocoa, dml::Mode::kAsync}) {
    dml::JobSpec s;
    s.data.dataset = data;
    s.model = {dml::ModelKind::kLogisticL2, 1e-2, 0.0};
    s.mode.kind = mode;
    s.mode.workers = 2;
    auto j = rt.Submit(s);
    BOOST_REQUIRE(j.ok());
    auto r = j->WaitFor(std::chrono::seconds(60));
    BOOST_REQUIRE(!r.ok());
    BOOST_TEST((r.status().code() == absl::StatusCode::kResourceExhausted));
    const std::string msg(r.status().message());
    BOOST_TEST(msg.rfind("worker ", 0) == 0, msg);
    BOOST_TEST(msg.find(": the model has 67108864 weights (the data's largest feature index + 1): "
                        "a job of 2 workers in one process needs about 3.0 GiB for its vectors, "
                        "more than the 1.0 GiB of memory here") != std::string::npos,
               msg);
  }
}

BOOST_AUTO_TEST_CASE(bad_specs_are_refused_naming_the_field) {
  dml::Runtime rt(WithThreads(1));
  auto data = Problem(dml::Task::kClassification, 50, 10);
  auto field_of = [&](auto mutate) {
    dml::JobSpec s;
    s.data.dataset = data;
    s.model = {dml::ModelKind::kLogisticL2, 1e-2, 0.5};
    mutate(s);
    auto j = rt.Submit(s);
    BOOST_REQUIRE(!j.ok());
    BOOST_TEST((j.status().code() == absl::StatusCode::kInvalidArgument));
    return std::string(j.status().message());
  };
  BOOST_TEST(field_of([](dml::JobSpec& s) { s.mode.workers = 0; }).find("JobSpec.mode.workers") == 0u);
  // Out-of-range enums and NaN stop rules (a Mode of 99 crashed Submit).
  BOOST_TEST(field_of([](dml::JobSpec& s) { s.mode.kind = static_cast<dml::Mode>(99); }) ==
             "JobSpec.mode.kind: 99 is not a Mode");
  BOOST_TEST(field_of([](dml::JobSpec& s) { s.model.kind = static_cast<dml::ModelKind>(42); }) ==
             "JobSpec.model: model kind 42 is not a ModelKind");
  BOOST_TEST(field_of([](dml::JobSpec& s) { s.stop.gap_rel = NAN; }).find("JobSpec.stop: gap tolerances") == 0u);
  BOOST_TEST(field_of([](dml::JobSpec& s) { s.stop.max_seconds = NAN; }).find("JobSpec.stop: max_seconds") == 0u);
  BOOST_TEST(field_of([](dml::JobSpec& s) { s.sgd.batch_size = 1 << 30; }) ==
             "JobSpec.sgd.batch_size: must be in [0, 16777216] (0: auto), got 1073741824");
  BOOST_TEST(field_of([](dml::JobSpec& s) { s.cocoa.local_epochs = 1e18; }) ==
             "JobSpec.cocoa.local_epochs: must be in (0, 1e6], got 1e+18");
  BOOST_TEST(field_of([](dml::JobSpec& s) { s.mode.workers = 51; }).find("JobSpec.mode.workers") == 0u);
  BOOST_TEST(field_of([](dml::JobSpec& s) { s.mode.shards = 0; }).find("JobSpec.mode.shards") == 0u);
  BOOST_TEST(field_of([](dml::JobSpec& s) { s.cocoa.gamma = 1.5; }).find("JobSpec.cocoa.gamma") == 0u);
  BOOST_TEST(field_of([](dml::JobSpec& s) { s.sgd.step0 = -1; }).find("JobSpec.sgd.step0") == 0u);
  BOOST_TEST(field_of([](dml::JobSpec& s) { s.sgd.momentum = 0.9; }) ==
             "JobSpec.sgd.momentum: the SGD modes take no momentum (must be 0), got 0.9");
  BOOST_TEST(field_of([](dml::JobSpec& s) { s.model.lambda = 0; }).find("JobSpec.model") == 0u);
  BOOST_TEST(field_of([](dml::JobSpec& s) { s.data.path = "x"; }).find("JobSpec.data") == 0u);
  BOOST_TEST(field_of([](dml::JobSpec& s) { s.recovery.node_silence_seconds = 0; }) ==
             "JobSpec.recovery.node_silence_seconds: must be in [0.1, 3600], got 0");
  // More shards than keys: refused by the coordinator once the data is known.
  dml::JobSpec s;
  s.data.dataset = data;
  s.model = {dml::ModelKind::kLogisticL2, 1e-2, 0.5};
  s.mode.shards = 11;
  auto j = rt.Submit(s);
  BOOST_REQUIRE(j.ok());
  auto r = j->Wait();
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST(std::string(r.status().message()).find("JobSpec.mode.shards") == 0u);
}
