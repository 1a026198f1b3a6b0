// DuHL (dml/solver/duhl.hpp) and its gap memory (dml/solver/gap_memory.hpp):
// the gap memory sums to the exact certificate's gap for all seven models,
// with its threads too; a 100% budget swaps nothing after round 1 and
// reaches plain SCD's optimum; on lasso the block settles (swaps in the last
// quarter of rounds at most 10% of round 1's); every rule ends with an
// exact certificate; bytes are counted exactly; bad options are errors.
#define BOOST_TEST_MODULE libdml_duhl
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cmath>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "dml/data/synthetic.hpp"
#include "dml/metrics/metrics.hpp"
#include "dml/objective/evaluate.hpp"
#include "dml/solver/duhl.hpp"
#include "dml/solver/gap_memory.hpp"
#include "dml/solver/solver.hpp"

namespace {

const dml::ModelKind kAll[] = {dml::ModelKind::kRidge,      dml::ModelKind::kLasso,
                               dml::ModelKind::kElasticNet, dml::ModelKind::kLogisticL2,
                               dml::ModelKind::kLogisticL1, dml::ModelKind::kHingeSvm,
                               dml::ModelKind::kSquaredHingeSvm};

dml::Dataset Problem(dml::ModelKind kind, int64_t rows, int64_t cols, uint64_t seed = 7,
                     double density = 1.0) {
  dml::SyntheticOptions o;
  o.rows = rows;
  o.cols = cols;
  o.nnz_per_row = 8;
  o.noise = 0.3;
  o.model_density = density;
  o.task = dml::TaskOf(kind);
  o.seed = seed;
  o.threads = 1;
  auto g = dml::GenerateSynthetic(o);
  BOOST_REQUIRE(g.ok());
  return std::move(g->data);
}

dml::ModelSpec Spec(dml::ModelKind kind, double lambda = 1e-2) {
  dml::ModelSpec m;
  m.kind = kind;
  m.lambda = lambda;
  m.l1_ratio = 0.5;
  return m;
}

dml::SolverOptions Tight(double gap_rel = 1e-8, int max_epochs = 3000) {
  dml::SolverOptions o;
  o.stop.gap_rel = gap_rel;
  o.stop.max_epochs = max_epochs;
  o.seed = 3;
  return o;
}

bool Dual(dml::ModelKind k) { return dml::FormulationOf(k) == dml::Formulation::kDual; }

double Sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

// A state part of the way: two epochs of SCD.
dml::TrainResult PartWay(const dml::Dataset& data, const dml::ModelSpec& m) {
  dml::SolverOptions few = Tight();
  few.kind = dml::SolverKind::kScd;
  few.stop.max_epochs = 2;
  auto t = dml::Train(data, m, few);
  BOOST_REQUIRE_MESSAGE(t.ok(), t.status().ToString());
  return *std::move(t);
}

}  // namespace

BOOST_AUTO_TEST_CASE(fresh_gap_memory_sums_to_the_exact_gap_for_every_model) {
  for (dml::ModelKind kind : kAll) {
    BOOST_TEST_CONTEXT(dml::ModelName(kind)) {
      const dml::Dataset data = Problem(kind, 400, 60);
      const dml::ModelSpec m = Spec(kind);
      const dml::TrainResult t = PartWay(data, m);
      std::vector<double> shared, coords;
      if (Dual(kind)) {
        coords = t.alpha;
        shared = dml::PrimalFromDual(data.x, coords, m.lambda);
      } else {
        coords = t.w;
        shared = dml::Predict(data.x, coords);
      }
      auto c = dml::Evaluate(data, m, t.w, t.alpha, /*per_coordinate=*/true);
      BOOST_REQUIRE(c.ok());
      BOOST_TEST(c->gap > 0.0);
      for (int threads : {0, 3}) {
        auto gm = dml::GapMemory::Make(data, m, threads);
        BOOST_REQUIRE(gm.ok());
        BOOST_TEST(std::isinf((*gm)->Values()[0]));
        auto v = (*gm)->Publish(shared, coords);
        BOOST_REQUIRE(v.ok());
        if (threads == 0) {
          (*gm)->RefreshAll();
        } else {
          // The threads refresh on their own; wait until all are fresh.
          for (int i = 0; i < 2000; ++i) {
            const auto ver = (*gm)->Versions();
            if (std::all_of(ver.begin(), ver.end(), [&](int64_t x) { return x == *v; })) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
        }
        const auto ver = (*gm)->Versions();
        BOOST_TEST(std::all_of(ver.begin(), ver.end(), [&](int64_t x) { return x == *v; }));
        const std::vector<double> z = (*gm)->Values();
        BOOST_TEST(std::abs(Sum(z) - c->separable_gap) <= 1e-9 * c->separable_gap);
        for (std::size_t i = 0; i < z.size(); ++i) {
          BOOST_TEST(std::abs(z[i] - c->coordinate_gaps[i]) <= 1e-12 + 1e-9 * std::abs(z[i]));
        }
      }
    }
  }
  const dml::Dataset small = Problem(dml::ModelKind::kRidge, 50, 10);  // outlives the memory
  auto gm = dml::GapMemory::Make(small, Spec(dml::ModelKind::kRidge), 0);
  BOOST_REQUIRE(gm.ok());
  BOOST_TEST((*gm)->Publish(std::vector<double>(9, 0.0), std::vector<double>(50, 0.0)).status().message() ==
             "gap memory: a state of 9 shared and 50 coordinate values; expected 10 and 50");
}

// A primal gap memory over columns its caller holds: the same values as one
// that converts the data itself; columns of other data, or a dual model,
// refused.
BOOST_AUTO_TEST_CASE(gap_memory_on_shared_columns_measures_the_same) {
  for (dml::ModelKind kind : {dml::ModelKind::kLasso, dml::ModelKind::kElasticNet,
                              dml::ModelKind::kLogisticL1}) {
    BOOST_TEST_CONTEXT(dml::ModelName(kind)) {
      const dml::Dataset data = Problem(kind, 400, 60);
      const dml::ModelSpec m = Spec(kind);
      const dml::TrainResult t = PartWay(data, m);
      const std::vector<double> shared = dml::Predict(data.x, t.w);
      auto cols = std::make_shared<const dml::CscMatrix>(data.x.Convert());
      auto own = dml::GapMemory::Make(data, m, 0);
      auto with = dml::GapMemory::Make(data, m, 0, cols);
      BOOST_REQUIRE(own.ok());
      BOOST_REQUIRE_MESSAGE(with.ok(), with.status().ToString());
      BOOST_REQUIRE((*own)->Publish(shared, t.w).ok());
      BOOST_REQUIRE((*with)->Publish(shared, t.w).ok());
      (*own)->RefreshAll();
      (*with)->RefreshAll();
      BOOST_TEST((*own)->Values() == (*with)->Values(), boost::test_tools::per_element());
      BOOST_TEST(Sum((*with)->Values()) > 0.0);
      const dml::Dataset other = Problem(kind, 400, 61);
      auto wrong = dml::GapMemory::Make(
          data, m, 0, std::make_shared<const dml::CscMatrix>(other.x.Convert()));
      BOOST_TEST(wrong.status().message() ==
                 "gap memory: the shared columns are not the data's (shape or nonzeros differ)");
      BOOST_TEST(dml::GapMemory::Make(data, m, 0, nullptr).status().code() ==
                 absl::StatusCode::kInvalidArgument);
    }
  }
  const dml::Dataset svm = Problem(dml::ModelKind::kHingeSvm, 50, 10);
  auto dual = dml::GapMemory::Make(svm, Spec(dml::ModelKind::kHingeSvm), 0,
                                   std::make_shared<const dml::CscMatrix>(svm.x.Convert()));
  BOOST_TEST(dual.status().message() == "gap memory: shared columns are for primal models, not svm");
}

BOOST_AUTO_TEST_CASE(a_full_budget_swaps_nothing_after_round_one_and_reaches_scds_optimum) {
  for (dml::ModelKind kind : {dml::ModelKind::kHingeSvm, dml::ModelKind::kLasso,
                              dml::ModelKind::kLogisticL2}) {
    BOOST_TEST_CONTEXT(dml::ModelName(kind)) {
      const dml::Dataset data = Problem(kind, 500, 80);
      const dml::ModelSpec m = Spec(kind);
      dml::DuhlOptions o;
      o.device_fraction = 1.0;
      auto r = dml::TrainDuhl(data, m, Tight(), o);
      BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
      BOOST_TEST((r->train.reason == dml::StopReason::kConverged));
      BOOST_REQUIRE(!r->rounds.empty());
      const int64_t count = Dual(kind) ? data.x.rows() : data.x.cols();
      BOOST_TEST(r->rounds[0].swaps == count);
      BOOST_TEST(r->rounds[0].bytes == r->data_bytes);
      for (std::size_t k = 1; k < r->rounds.size(); ++k) BOOST_TEST(r->rounds[k].swaps == 0);
      BOOST_TEST(r->device_bytes == r->data_bytes);
      dml::SolverOptions scd = Tight();
      scd.kind = dml::SolverKind::kScd;
      auto ref = dml::Train(data, m, scd);
      BOOST_REQUIRE(ref.ok());
      BOOST_TEST(std::abs(r->train.primal - ref->primal) <= 1e-6 * std::abs(ref->primal));
    }
  }
}

BOOST_AUTO_TEST_CASE(on_lasso_the_block_settles) {
  // A sparse planted model: the gap concentrates on its few features.
  const dml::Dataset data = Problem(dml::ModelKind::kLasso, 2000, 2000, 11, 0.02);
  const dml::ModelSpec m = Spec(dml::ModelKind::kLasso, 2e-4);
  dml::DuhlOptions o;
  o.device_fraction = 0.25;  // the optimum's ~270 nonzero features fit (~450)
  o.gap_threads = 0;  // fresh gaps: the rule, not the threads' timing
  auto r = dml::TrainDuhl(data, m, Tight(1e-8), o);
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  BOOST_TEST((r->train.reason == dml::StopReason::kConverged));
  const std::size_t rounds = r->rounds.size();
  BOOST_TEST_MESSAGE("lasso: " << rounds << " rounds, round 1 swaps " << r->rounds[0].swaps);
  BOOST_REQUIRE(rounds >= 4u);
  for (std::size_t k = rounds - rounds / 4; k < rounds; ++k) {
    BOOST_TEST(r->rounds[k].swaps <= r->rounds[0].swaps / 10);
  }
}

BOOST_AUTO_TEST_CASE(every_rule_ends_with_an_exact_certificate) {
  for (dml::ModelKind kind : {dml::ModelKind::kHingeSvm, dml::ModelKind::kLasso}) {
    const dml::Dataset data = Problem(kind, 500, 100, 5);
    const dml::ModelSpec m = Spec(kind);
    for (dml::DuhlSelection rule :
         {dml::DuhlSelection::kGap, dml::DuhlSelection::kGapGreedy, dml::DuhlSelection::kRandom,
          dml::DuhlSelection::kSequential, dml::DuhlSelection::kResident}) {
      BOOST_TEST_CONTEXT(dml::ModelName(kind) << " " << dml::DuhlSelectionName(rule)) {
        dml::DuhlOptions o;
        o.selection = rule;
        o.device_fraction = rule == dml::DuhlSelection::kResident ? 1.0 : 0.2;
        auto r = dml::TrainDuhl(data, m, Tight(1e-4, 400), o);
        BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
        auto c = dml::Evaluate(data, m, r->train.w, r->train.alpha);
        BOOST_REQUIRE(c.ok());
        BOOST_TEST(r->train.gap == c->gap);
        BOOST_TEST(r->train.primal == c->primal);
        // Greedy may stall (duhl.hpp); the others converge.
        if (rule != dml::DuhlSelection::kGapGreedy) {
          BOOST_TEST((r->train.reason == dml::StopReason::kConverged));
          BOOST_TEST(c->gap <= 1e-4 * std::abs(c->primal));
        }
        int64_t moved = 0;
        for (const dml::DuhlRound& k : r->rounds) {
          moved += k.bytes;
          BOOST_TEST(k.coordinates >= k.swaps);
        }
        BOOST_TEST(moved == r->device_bytes);
        BOOST_TEST(r->train.device_bytes == r->device_bytes);
        BOOST_TEST(r->train.history.back().device_bytes <= r->device_bytes);
        // The progress stream carries the copies: the events add up.
        int64_t copied = 0;
        for (const dml::Progress& p : r->train.history) {
          BOOST_REQUIRE(p.events.size() == 1u);
          BOOST_TEST(p.events[0].kind == "device_copies");
          copied += std::stoll(p.events[0].what);
        }
        int64_t swaps = 0;
        for (const dml::DuhlRound& k : r->rounds) swaps += k.swaps;
        // Rounds after the last evaluation are not in an event (none here:
        // the run stops at an evaluation or at max epochs after one).
        BOOST_TEST(copied <= swaps);
        BOOST_TEST(copied >= r->rounds[0].swaps);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(sequential_streams_the_data_through_in_turn) {
  const dml::Dataset data = Problem(dml::ModelKind::kHingeSvm, 300, 50, 9);
  dml::DuhlOptions o;
  o.selection = dml::DuhlSelection::kSequential;
  o.device_fraction = 0.25;
  dml::SolverOptions s = Tight(0.0, 2);  // two epochs: rounds of 5 passes over a quarter
  s.stop.max_epochs = 5;
  auto r = dml::TrainDuhl(data, Spec(dml::ModelKind::kHingeSvm), s, o);
  BOOST_REQUIRE(r.ok());
  // Every round's block is wholly new (a quarter of the data), so the bytes
  // moved in four rounds are about the data's.
  int64_t four = 0;
  for (std::size_t k = 0; k < 4 && k < r->rounds.size(); ++k) {
    BOOST_TEST(r->rounds[k].swaps == r->rounds[k].coordinates);
    four += r->rounds[k].bytes;
  }
  BOOST_TEST(four <= r->data_bytes);
  BOOST_TEST(four >= r->data_bytes - 4 * dml::DuhlCoordinateBytes(50));
}

BOOST_AUTO_TEST_CASE(bad_budgets_and_options_are_errors) {
  const dml::Dataset data = Problem(dml::ModelKind::kHingeSvm, 100, 30);
  const dml::ModelSpec m = Spec(dml::ModelKind::kHingeSvm);
  dml::DuhlOptions o;
  o.device_bytes = 50;
  auto small = dml::TrainDuhl(data, m, Tight(), o);
  BOOST_TEST((small.status().code() == absl::StatusCode::kResourceExhausted));
  BOOST_TEST(std::string(small.status().message()) ==
             "duhl: example 0 takes " + std::to_string(dml::DuhlCoordinateBytes(data.x.outer_nnz(0))) +
                 " bytes on the device, more than the budget of 50 (raise DuhlOptions.device_bytes "
                 "or device_fraction: dml-train --device-memory)");
  o.device_bytes = 0;
  o.device_fraction = 0.5;
  o.selection = dml::DuhlSelection::kResident;
  auto resident = dml::TrainDuhl(data, m, Tight(), o);
  BOOST_TEST((resident.status().code() == absl::StatusCode::kResourceExhausted));
  BOOST_TEST(std::string(resident.status().message()).find("duhl: resident selection needs the whole data") == 0u);
  o.selection = dml::DuhlSelection::kGap;
  o.device_fraction = 1.5;
  BOOST_TEST(std::string(dml::TrainDuhl(data, m, Tight(), o).status().message()) ==
             "duhl: device_fraction is 1.5; in (0, 1]");
  o.device_fraction = 0.5;
  o.gap_threads = -1;
  BOOST_TEST(std::string(dml::TrainDuhl(data, m, Tight(), o).status().message()) ==
             "duhl: gap_threads is -1; in [0, 1024]");
  o.gap_threads = 1;
  o.selection = static_cast<dml::DuhlSelection>(9);
  BOOST_TEST(std::string(dml::TrainDuhl(data, m, Tight(), o).status().message()) ==
             "duhl: selection is 9; one of gap, gap-greedy, random, sequential, resident");
  BOOST_TEST(std::string(dml::ParseDuhlSelection("best").status().message()) ==
             "unknown selection 'best'; expected gap, gap-greedy, random, sequential or resident");
  BOOST_TEST((*dml::ParseDuhlSelection("gap-greedy") == dml::DuhlSelection::kGapGreedy));
}

// DuHL as CoCoA+'s local solver: two row blocks, sigma' = 2, gamma = 1,
// each Solve a few rounds on a fifth of its block; the sum of the blocks'
// changes reaches SCD's optimum, and the blocks' certificates add up to the
// exact one.
BOOST_AUTO_TEST_CASE(as_cocoas_local_solver_it_reaches_the_optimum) {
  for (dml::ModelKind kind : {dml::ModelKind::kLogisticL2, dml::ModelKind::kHingeSvm}) {
    BOOST_TEST_CONTEXT(dml::ModelName(kind)) {
      const dml::Dataset data = Problem(kind, 600, 60, 21);
      const dml::ModelSpec m = Spec(kind);
      const int64_t n = data.x.rows(), half = n / 2;
      std::vector<std::unique_ptr<dml::DuhlLocalSolver>> blocks;
      for (int k = 0; k < 2; ++k) {
        const int64_t b = k == 0 ? 0 : half, e = k == 0 ? half : n;
        dml::LocalBlock block;
        block.rows = data.x.SliceOuter(b, e);
        block.y.assign(data.y.begin() + b, data.y.begin() + e);
        block.n_global = n;
        dml::DuhlOptions o;
        o.device_fraction = 0.2;
        o.gap_threads = 1;
        auto s = dml::MakeDuhlLocalSolver(std::move(block), m, 5 + k, o);
        BOOST_REQUIRE_MESSAGE(s.ok(), s.status().ToString());
        blocks.push_back(*std::move(s));
      }
      std::vector<double> w(static_cast<std::size_t>(data.x.cols()), 0.0);
      double gap = 1e300, primal = 0.0;
      for (int round = 0; round < 400 && gap > 1e-8 * std::abs(primal); ++round) {
        std::vector<double> sum(w.size(), 0.0);
        for (auto& b : blocks) {
          auto up = b->Solve(w, 2.0, 1.0, half);
          BOOST_REQUIRE(up.ok());
          for (std::size_t j = 0; j < w.size(); ++j) sum[j] += up->delta_shared[j];
        }
        for (std::size_t j = 0; j < w.size(); ++j) w[j] += sum[j];
        double loss = 0.0, gaps = 0.0;
        for (auto& b : blocks) {
          auto c = b->Certify(w);
          BOOST_REQUIRE(c.ok());
          loss += c->loss_sum;
          gaps += c->gap_sum;
        }
        double wsq = 0.0;
        for (double x : w) wsq += x * x;
        primal = loss / static_cast<double>(n) + 0.5 * m.lambda * wsq;
        gap = gaps / static_cast<double>(n);
      }
      BOOST_TEST(gap <= 1e-8 * std::abs(primal));
      std::vector<double> alpha;
      for (auto& b : blocks) {
        alpha.insert(alpha.end(), b->coordinates().begin(), b->coordinates().end());
        BOOST_TEST(b->rounds().size() >= 2u);
        BOOST_TEST(b->device_bytes() > 0);
      }
      auto exact = dml::EvaluateDual(data, m, alpha);
      BOOST_REQUIRE(exact.ok());
      BOOST_TEST(std::abs(exact->primal - primal) <= 1e-9 * std::abs(primal));
      dml::SolverOptions scd = Tight();
      scd.kind = dml::SolverKind::kScd;
      auto ref = dml::Train(data, m, scd);
      BOOST_REQUIRE(ref.ok());
      BOOST_TEST(std::abs(exact->primal - ref->primal) <= 1e-7 * std::abs(ref->primal));
    }
  }
}
