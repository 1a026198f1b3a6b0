// gap_memory actor: its threads bring every value to the published state
// (ages 0), the values then sum to the exact gap, top(m) is the m largest,
// and bad requests are errors with the library's message.
#define BOOST_TEST_MODULE actors_gap_memory
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include "dml/actors/gap_memory.hpp"
#include "dml/actors/register_types.hpp"
#include "dml/data/synthetic.hpp"
#include "dml/metrics/metrics.hpp"
#include "dml/objective/evaluate.hpp"
#include "dml/solver/solver.hpp"

namespace {

using dml::actors::dvec;
using dml::actors::int64_list;

constexpr auto kTimeout = std::chrono::seconds(20);

struct test_config : caf::actor_system_config {
  test_config() {
    dml::actors::RegisterTypes(*this);
    set("scheduler.max-threads", 2);
  }
};

std::shared_ptr<const dml::Dataset> Problem(dml::Task task = dml::Task::kClassification) {
  dml::SyntheticOptions o;
  o.rows = 600;
  o.cols = 50;
  o.nnz_per_row = 6;
  o.noise = 0.3;
  o.task = task;
  o.seed = 4;
  o.threads = 1;
  auto g = dml::GenerateSynthetic(o);
  BOOST_REQUIRE(g.ok());
  return std::make_shared<const dml::Dataset>(std::move(g->data));
}

// A state part-way to the optimum: two SCD epochs.
dml::TrainResult PartWay(const dml::Dataset& data, const dml::ModelSpec& m) {
  dml::SolverOptions few;
  few.kind = dml::SolverKind::kScd;
  few.stop.max_epochs = 2;
  auto t = dml::Train(data, m, few);
  BOOST_REQUIRE(t.ok());
  return *std::move(t);
}

// A dual model's state part-way: alpha after two SCD epochs, and its w.
std::pair<std::vector<double>, std::vector<double>> TwoEpochs(const dml::Dataset& data,
                                                              const dml::ModelSpec& m) {
  const dml::TrainResult t = PartWay(data, m);
  return {t.alpha, dml::PrimalFromDual(data.x, t.alpha, m.lambda)};
}

}  // namespace

BOOST_AUTO_TEST_CASE(threads_refresh_to_the_published_state_and_top_is_the_largest) {
  test_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto data = Problem();
  dml::ModelSpec m;
  m.kind = dml::ModelKind::kHingeSvm;
  m.lambda = 1e-2;
  auto actor = dml::actors::SpawnGapMemory(sys, data, m, 2);
  BOOST_REQUIRE(actor.ok());

  // Before any state: no value measured, every age "never" (last + 1 = 1).
  self->request(*actor, kTimeout, dml::actors::gaps_atom_v)
      .receive(
          [&](dvec& z, int64_list& ages) {
            BOOST_TEST(std::isinf((*z.as_vector())[0]));
            BOOST_TEST(std::all_of(ages.values.begin(), ages.values.end(),
                                   [](int64_t a) { return a == 1; }));
          },
          [&](caf::error& e) { BOOST_FAIL(sys.render(e)); });

  const auto [alpha, w] = TwoEpochs(*data, m);
  int64_t version = 0;
  self->request(*actor, kTimeout, dml::actors::publish_atom_v, dvec(w), dvec(alpha))
      .receive([&](int64_t v) { version = v; }, [&](caf::error& e) { BOOST_FAIL(sys.render(e)); });
  BOOST_TEST(version == 1);

  std::vector<double> z;
  bool fresh = false;
  for (int i = 0; i < 2000 && !fresh; ++i) {
    self->request(*actor, kTimeout, dml::actors::gaps_atom_v)
        .receive(
            [&](dvec& values, int64_list& ages) {
              z = *values.as_vector();
              fresh = std::all_of(ages.values.begin(), ages.values.end(),
                                  [](int64_t a) { return a == 0; });
            },
            [&](caf::error& e) { BOOST_FAIL(sys.render(e)); });
    if (!fresh) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  BOOST_REQUIRE(fresh);
  auto c = dml::EvaluateDual(*data, m, alpha);
  BOOST_REQUIRE(c.ok());
  BOOST_TEST(std::abs(std::accumulate(z.begin(), z.end(), 0.0) - c->separable_gap) <=
             1e-9 * c->separable_gap);
  BOOST_TEST(c->gap <= c->separable_gap);

  std::vector<int64_t> top;
  self->request(*actor, kTimeout, dml::actors::top_atom_v, int64_t{25})
      .receive([&](int64_list& ids) { top = ids.values; },
               [&](caf::error& e) { BOOST_FAIL(sys.render(e)); });
  BOOST_REQUIRE(top.size() == 25u);
  BOOST_TEST(std::is_sorted(top.begin(), top.end()));
  double smallest_in = INFINITY, largest_out = -INFINITY;
  std::vector<char> in(z.size(), 0);
  for (int64_t i : top) {
    in[i] = 1;
    smallest_in = std::min(smallest_in, z[i]);
  }
  for (std::size_t i = 0; i < z.size(); ++i) {
    if (!in[i]) largest_out = std::max(largest_out, z[i]);
  }
  BOOST_TEST(smallest_in >= largest_out);
  BOOST_TEST(largest_out > 0.0);  // not a trivial split

  self->request(*actor, kTimeout, dml::actors::top_atom_v, int64_t{100000})
      .receive([&](int64_list& ids) { BOOST_TEST(ids.values.size() == z.size()); },
               [&](caf::error& e) { BOOST_FAIL(sys.render(e)); });

  std::string error;
  self->request(*actor, kTimeout, dml::actors::publish_atom_v, dvec(std::vector<double>(3, 0.0)),
                dvec(alpha))
      .receive([&](int64_t) { BOOST_FAIL("a short state was accepted"); },
               [&](caf::error& e) { error = sys.render(e); });
  BOOST_TEST(error.find("gap memory: a state of 3 shared and 600 coordinate values; expected 50 "
                        "and 600") != std::string::npos, error);
  self->request(*actor, kTimeout, dml::actors::top_atom_v, int64_t{-1})
      .receive([&](int64_list&) { BOOST_FAIL("top -1 was accepted"); },
               [&](caf::error& e) { error = sys.render(e); });
  BOOST_TEST(error.find("gap memory: top -1; at least 0") != std::string::npos, error);
  self->send_exit(*actor, caf::exit_reason::user_shutdown);
}

// A primal gap memory in an actor over the columns its caller holds (DuHL's
// workers share their block's CSC): the values of one that converts the data
// itself, and the sum is the exact lasso gap.
BOOST_AUTO_TEST_CASE(an_actor_on_shared_columns_measures_the_same) {
  test_config cfg;
  caf::actor_system sys{cfg};
  auto data = Problem(dml::Task::kRegression);
  dml::ModelSpec m{dml::ModelKind::kLasso, 1e-3, 1.0};
  const dml::TrainResult t = PartWay(*data, m);
  const std::vector<double> v = dml::Predict(data->x, t.w);
  auto cols = std::make_shared<const dml::CscMatrix>(data->x.Convert());
  auto shared = dml::actors::MakeGapMemoryOnActor(sys, data, m, 0, cols);
  auto own = dml::actors::MakeGapMemoryOnActor(sys, data, m, 0);
  BOOST_REQUIRE_MESSAGE(shared.ok(), shared.status().ToString());
  BOOST_REQUIRE(own.ok());
  BOOST_REQUIRE((*shared)->Publish(v, t.w).ok());
  BOOST_REQUIRE((*own)->Publish(v, t.w).ok());
  (*shared)->RefreshAll();
  (*own)->RefreshAll();
  const std::vector<double> z = (*shared)->Values();
  BOOST_TEST(z == (*own)->Values(), boost::test_tools::per_element());
  auto c = dml::EvaluatePrimal(*data, m, t.w);
  BOOST_REQUIRE(c.ok());
  BOOST_TEST(c->gap > 0.0);
  BOOST_TEST(std::abs(std::accumulate(z.begin(), z.end(), 0.0) - c->separable_gap) <=
             1e-9 * c->separable_gap);
  BOOST_TEST(c->gap <= c->separable_gap);
}

// The client DuHL's device side uses in the runtime: every call a request
// to the actor. With no refresh threads, values change only by refresh:
// the block's ids alone, then all; the sum of fresh values is the exact
// gap; a bad id and a short state are refused with their reasons.
BOOST_AUTO_TEST_CASE(the_client_refreshes_by_request_and_sums_to_the_gap) {
  test_config cfg;
  caf::actor_system sys{cfg};
  auto data = Problem();
  dml::ModelSpec m{dml::ModelKind::kHingeSvm, 1e-2, 0.5};
  auto client = dml::actors::MakeGapMemoryOnActor(sys, data, m, 0);
  BOOST_REQUIRE(client.ok());
  dml::GapMemory& gm = **client;
  BOOST_TEST(gm.size() == 600);

  const auto [alpha, w] = TwoEpochs(*data, m);
  auto v = gm.Publish(w, alpha);
  BOOST_REQUIRE(v.ok());
  BOOST_TEST(*v == 1);
  BOOST_TEST(gm.version() == 1);

  gm.Refresh({3, 7});
  std::vector<double> z = gm.Values();
  std::vector<int64_t> versions = gm.Versions();
  BOOST_TEST(gm.refreshed() == 2);
  for (int64_t i = 0; i < 600; ++i) {
    const bool mine = i == 3 || i == 7;
    BOOST_TEST(std::isfinite(z[i]) == mine, i);
    BOOST_TEST(versions[i] == (mine ? 1 : 0), i);
  }
  gm.RefreshAll();
  z = gm.Values();
  BOOST_TEST(gm.refreshed() == 602);
  auto c = dml::EvaluateDual(*data, m, alpha);
  BOOST_REQUIRE(c.ok());
  BOOST_TEST(std::abs(std::accumulate(z.begin(), z.end(), 0.0) - c->separable_gap) <=
             1e-9 * c->separable_gap);
  BOOST_TEST(c->gap <= c->separable_gap);

  auto bad = gm.Publish(std::vector<double>(3, 0.0), alpha);
  BOOST_TEST(!bad.ok());
  BOOST_TEST(bad.status().message().find("a state of 3 shared and 600 coordinate values") !=
                 std::string::npos,
             bad.status().message());
  auto actor = dml::actors::SpawnGapMemory(sys, data, m, 0);
  BOOST_REQUIRE(actor.ok());
  caf::scoped_actor self{sys};
  std::string error;
  self->request(*actor, kTimeout, dml::actors::refresh_atom_v, false, int64_list{{600}, {}})
      .receive([&](int64_t) { BOOST_FAIL("id 600 was refreshed"); },
               [&](caf::error& e) { error = sys.render(e); });
  BOOST_TEST(error.find("gap memory: refresh of coordinate 600; there are 600") !=
                 std::string::npos,
             error);
  self->send_exit(*actor, caf::exit_reason::user_shutdown);
}
