// gpu_solver: the actor that holds the local solvers of one device's blocks.
// Its protocol is tested with CPU local solvers as the blocks' factories
// (the device's TPA-SCD solver is tested in tests/gpu): a block behind the
// actor gives bitwise the results of the same solver called directly, the
// workers of one device share one actor, which ends with its last block,
// and errors keep their code and message. Without a device,
// MakeGpuLocalSolver is exactly MakeTpaScdLocalSolver's error or fallback.
#define BOOST_TEST_MODULE actors_gpu_solver
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "dml/actors/gpu_solver.hpp"
#include "dml/actors/register_types.hpp"
#include "dml/data/synthetic.hpp"
#include "dml/gpu/tpa_scd.hpp"
#include "dml/solver/cocoa_local.hpp"

namespace {

struct test_config : caf::actor_system_config {
  test_config() {
    dml::actors::RegisterTypes(*this);
    set("scheduler.max-threads", 2);
  }
};

dml::LocalBlock Block(int64_t rows, uint64_t seed) {
  dml::SyntheticOptions o;
  o.rows = rows;
  o.cols = 40;
  o.nnz_per_row = 6;
  o.noise = 0.3;
  o.task = dml::Task::kClassification;
  o.seed = seed;
  o.threads = 1;
  auto g = dml::GenerateSynthetic(o);
  BOOST_REQUIRE(g.ok());
  dml::LocalBlock b;
  b.rows = g->data.x;
  b.y = g->data.y;
  b.n_global = 2 * rows;
  return b;
}

dml::ModelSpec Logistic() {
  dml::ModelSpec m;
  m.kind = dml::ModelKind::kLogisticL2;
  m.lambda = 1e-2;
  return m;
}

// A factory for the actor: the CPU local solver of `block`.
dml::actors::gpu_block Cpu(const dml::LocalBlock& block, uint64_t seed) {
  dml::actors::gpu_block b;
  b.make = [block, seed] { return dml::MakeLocalSolver(block, Logistic(), seed); };
  b.interrupt = std::make_shared<std::atomic<bool>>(false);
  return b;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_block_behind_the_actor_solves_as_the_solver_itself) {
  test_config cfg;
  caf::actor_system sys{cfg};
  const dml::LocalBlock block = Block(300, 3);
  auto direct = dml::MakeLocalSolver(block, Logistic(), 11);
  auto remote = dml::actors::MakeRemoteLocalSolver(sys, 0, Cpu(block, 11));
  BOOST_REQUIRE(direct.ok());
  BOOST_REQUIRE(remote.ok());
  std::vector<double> w_direct(40, 0.0), w_remote(40, 0.0);
  for (int round = 0; round < 4; ++round) {
    auto cd = (*direct)->Certify(w_direct);
    auto cr = (*remote)->Certify(w_remote);
    BOOST_REQUIRE(cd.ok());
    BOOST_REQUIRE(cr.ok());
    BOOST_TEST(cd->loss_sum == cr->loss_sum);
    BOOST_TEST(cd->gap_sum == cr->gap_sum);
    auto ud = (*direct)->Solve(w_direct, 2.0, 0.5, 300);
    auto ur = (*remote)->Solve(w_remote, 2.0, 0.5, 300);
    BOOST_REQUIRE(ud.ok());
    BOOST_REQUIRE(ur.ok());
    BOOST_TEST(ud->steps == 300);
    BOOST_TEST(ur->steps == ud->steps);
    BOOST_TEST(ur->nnz_touched == ud->nnz_touched);
    BOOST_TEST(ur->delta_shared == ud->delta_shared);  // bitwise
    for (std::size_t j = 0; j < w_direct.size(); ++j) {
      w_direct[j] += 0.5 * ud->delta_shared[j];
      w_remote[j] += 0.5 * ur->delta_shared[j];
    }
  }
  BOOST_TEST((*remote)->coordinates() == (*direct)->coordinates());
  // Gaps fell over the rounds (the solver is doing its job, not only
  // agreeing with itself).
  auto first = dml::MakeLocalSolver(block, Logistic(), 11);
  BOOST_REQUIRE(first.ok());
  auto c0 = (*first)->Certify(std::vector<double>(40, 0.0));
  auto c4 = (*remote)->Certify(w_remote);
  BOOST_REQUIRE(c0.ok());
  BOOST_REQUIRE(c4.ok());
  BOOST_TEST(c4->gap_sum < 0.5 * c0->gap_sum);

  // Coordinates in and out; a bad one is the solver's own error.
  std::vector<double> c = (*direct)->coordinates();
  for (double& x : c) x *= 0.5;  // the dual domain is convex and holds 0
  BOOST_REQUIRE((*remote)->set_coordinates(c).ok());
  BOOST_TEST((*remote)->coordinates() == c);
  std::vector<double> bad = c;
  bad[7] = 5.0;
  const absl::Status want = (*direct)->set_coordinates(bad);
  const absl::Status got = (*remote)->set_coordinates(bad);
  BOOST_TEST(!want.ok());
  BOOST_TEST((got.code() == want.code()));
  BOOST_TEST(std::string(got.message()) == std::string(want.message()));
  // Reload travels to the block's solver; the CPU one cannot (DuHL then
  // makes a solver per block).
  auto reload = (*remote)->Reload(block, std::vector<int64_t>(300, -1));
  BOOST_TEST((reload.status().code() == absl::StatusCode::kUnimplemented));
  BOOST_TEST(std::string(reload.status().message()) == "this local solver cannot reload its block");
  auto short_shared = (*remote)->Solve(std::vector<double>(39, 0.0), 2.0, 0.5, 10);
  BOOST_TEST((short_shared.status().code() == absl::StatusCode::kInvalidArgument));
  BOOST_TEST(std::string(short_shared.status().message()) ==
             std::string((*direct)->Solve(std::vector<double>(39, 0.0), 2.0, 0.5, 10)
                             .status()
                             .message()));
}

BOOST_AUTO_TEST_CASE(one_actor_per_device_ending_with_its_last_block) {
  test_config cfg;
  caf::actor_system sys{cfg};
  auto a = dml::actors::MakeRemoteLocalSolver(sys, 3, Cpu(Block(100, 1), 1));
  auto b = dml::actors::MakeRemoteLocalSolver(sys, 3, Cpu(Block(100, 2), 2));
  auto other = dml::actors::MakeRemoteLocalSolver(sys, 4, Cpu(Block(100, 2), 2));
  BOOST_REQUIRE(a.ok());
  BOOST_REQUIRE(b.ok());
  BOOST_REQUIRE(other.ok());
  const caf::actor_addr on3 = dml::actors::GpuSolverOf(sys, 3).address();
  BOOST_TEST((dml::actors::GpuSolverOf(sys, 3).address() == on3));
  BOOST_TEST((dml::actors::GpuSolverOf(sys, 4).address() != on3));
  // Two blocks on one actor keep their own state.
  auto ua = (*a)->Solve(std::vector<double>(40, 0.0), 1.0, 1.0, 100);
  BOOST_REQUIRE(ua.ok());
  BOOST_TEST((*b)->coordinates() == std::vector<double>(100, 0.0));
  BOOST_TEST((*a)->coordinates() != std::vector<double>(100, 0.0));
  a->reset();
  BOOST_TEST((dml::actors::GpuSolverOf(sys, 3).address() == on3));  // b is still there
  b->reset();
  // The actor ends once it has read the halt; then a new one is spawned.
  bool replaced = false;
  for (int i = 0; i < 200 && !replaced; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    replaced = dml::actors::GpuSolverOf(sys, 3).address() != on3;
  }
  BOOST_TEST(replaced);
  auto again = dml::actors::MakeRemoteLocalSolver(sys, 3, Cpu(Block(100, 1), 1));
  BOOST_TEST(again.ok());
}

BOOST_AUTO_TEST_CASE(an_init_error_keeps_its_code_and_message) {
  test_config cfg;
  caf::actor_system sys{cfg};
  dml::actors::gpu_block b;
  b.make = []() -> absl::StatusOr<std::unique_ptr<dml::LocalSolver>> {
    return absl::ResourceExhaustedError("tpa-scd: 5 bytes over the budget");
  };
  auto r = dml::actors::MakeRemoteLocalSolver(sys, 9, std::move(b));
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST((r.status().code() == absl::StatusCode::kResourceExhausted));
  BOOST_TEST(std::string(r.status().message()) == "tpa-scd: 5 bytes over the budget");
  // The actor that never held a block ended (else ~actor_system would wait
  // for it): a block can still be added afterwards.
  auto ok = dml::actors::MakeRemoteLocalSolver(sys, 9, Cpu(Block(50, 4), 4));
  BOOST_TEST(ok.ok());
}

BOOST_AUTO_TEST_CASE(without_a_device_the_gpu_local_solver_errs_or_falls_back_as_documented) {
  if (dml::gpu::QueryDevice(0).ok()) {
    BOOST_TEST_MESSAGE("a CUDA device is present: the no-device paths are not what runs here");
    return;
  }
  test_config cfg;
  caf::actor_system sys{cfg};
  dml::gpu::TpaScdOptions gpu;
  const auto why = dml::gpu::QueryDevice(0).status();
  auto r = dml::actors::MakeGpuLocalSolver(sys, Block(80, 5), Logistic(), 1, gpu, nullptr);
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST((r.status().code() == absl::StatusCode::kUnavailable));
  BOOST_TEST(std::string(r.status().message()) == std::string(why.message()));
  std::vector<std::string> lines;
  gpu.allow_fallback = true;
  gpu.log = [&](std::string_view l) { lines.emplace_back(l); };
  auto fb = dml::actors::MakeGpuLocalSolver(sys, Block(80, 5), Logistic(), 1, gpu, nullptr);
  BOOST_REQUIRE(fb.ok());
  BOOST_REQUIRE(lines.size() == 1u);
  BOOST_TEST(lines[0] == "tpa-scd: cocoa's CPU local solver instead: " + std::string(why.message()));
  // The fallback is the CPU local solver itself, in this thread.
  auto cpu = dml::MakeLocalSolver(Block(80, 5), Logistic(), 1);
  BOOST_REQUIRE(cpu.ok());
  auto u1 = (*fb)->Solve(std::vector<double>(40, 0.0), 1.0, 1.0, 80);
  auto u2 = (*cpu)->Solve(std::vector<double>(40, 0.0), 1.0, 1.0, 80);
  BOOST_REQUIRE(u1.ok());
  BOOST_REQUIRE(u2.ok());
  BOOST_TEST(u1->delta_shared == u2->delta_shared);
}
