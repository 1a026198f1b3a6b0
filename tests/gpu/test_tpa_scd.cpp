// TPA-SCD's CPU twin against sequential SCD for all seven models, and the
// error and fallback contract of the GPU entry points on every host (a
// device index no machine has forces "no device" even where there is one).
#define BOOST_TEST_MODULE gpu_tpa_scd
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "dml/gpu/tpa_scd.hpp"
#include "dml/objective/evaluate.hpp"
#include "tpa_problems.hpp"

namespace {

using tpa_testing::RelDiff;

BOOST_AUTO_TEST_CASE(twin_reaches_sequential_scds_optimum_for_every_model) {
  for (dml::ModelKind kind : tpa_testing::AllModels()) {
    BOOST_TEST_CONTEXT("model " << dml::ModelName(kind)) {
      const dml::Dataset data = tpa_testing::Problem(kind);
      const dml::ModelSpec spec = tpa_testing::Spec(kind, data);
      auto ref = dml::Train(data, spec, tpa_testing::Tight(dml::SolverKind::kScd));
      BOOST_REQUIRE_MESSAGE(ref.ok(), ref.status().ToString());
      BOOST_REQUIRE((ref->reason == dml::StopReason::kConverged));

      dml::gpu::TpaScdOptions gpu;
      gpu.twin_threads = 2;
      auto twin = dml::gpu::TrainTpaScdTwin(data, spec,
                                            tpa_testing::Tight(dml::SolverKind::kTpaScd), gpu);
      BOOST_REQUIRE_MESSAGE(twin.ok(), twin.status().ToString());
      BOOST_TEST((twin->reason == dml::StopReason::kConverged));
      BOOST_TEST(twin->note.rfind("tpa-scd ran its CPU twin (asynchronous SCD, ", 0) == 0,
                 twin->note);
      BOOST_TEST(RelDiff(twin->primal, ref->primal) <= 1e-6);
      // The certificate is exact: recomputed here from the returned iterate.
      auto c = dml::Evaluate(data, spec, twin->w, twin->alpha);
      BOOST_REQUIRE(c.ok());
      BOOST_TEST(RelDiff(c->primal, twin->primal) <= 1e-12);
      BOOST_TEST(c->gap <= 1e-9 * std::abs(c->primal) * 1.0000001);
    }
  }
}

BOOST_AUTO_TEST_CASE(no_device_is_an_error_that_names_it) {
  const dml::Dataset data = tpa_testing::Problem(dml::ModelKind::kRidge, 200, 20);
  dml::gpu::TpaScdOptions gpu;
  gpu.device = 4096;  // no machine has this many
  auto r = dml::gpu::TrainTpaScd(data, tpa_testing::Spec(dml::ModelKind::kRidge, data),
                                 tpa_testing::Tight(dml::SolverKind::kTpaScd), gpu);
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST((r.status().code() == absl::StatusCode::kUnavailable));
  const std::string msg(r.status().message());
  if (!dml::gpu::CudaCompiled()) {
    BOOST_TEST(msg == "libdml was built without CUDA");
  } else if (dml::gpu::CudaDeviceCount() > 0) {
    BOOST_TEST(msg == "no CUDA device 4096: this machine has " +
                          std::to_string(dml::gpu::CudaDeviceCount()));
  } else {
    const bool named = msg.rfind("no usable CUDA device", 0) == 0 ||
                       msg == "no CUDA device 4096: this machine has 0";
    BOOST_TEST(named, msg);
  }
  // dml::gpu::Train takes the same path; dml::Train refuses the kind.
  dml::SolverOptions o = tpa_testing::Tight(dml::SolverKind::kTpaScd);
  auto via = dml::gpu::Train(data, tpa_testing::Spec(dml::ModelKind::kRidge, data), o, gpu);
  BOOST_TEST(via.status().message() == r.status().message());
  auto core = dml::Train(data, tpa_testing::Spec(dml::ModelKind::kRidge, data), o);
  BOOST_TEST(core.status().message() ==
             "solver tpa-scd runs through dml::gpu::Train (dml/gpu/tpa_scd.hpp, library "
             "dml::gpu); dml::Train has no GPU solver");
  // Bad input is reported before any device question.
  dml::ModelSpec bad = tpa_testing::Spec(dml::ModelKind::kRidge, data);
  bad.lambda = -1;
  auto invalid = dml::gpu::TrainTpaScd(data, bad, o, gpu);
  BOOST_TEST((invalid.status().code() == absl::StatusCode::kInvalidArgument));
  gpu.device = 0;
  gpu.memory_budget_bytes = -5;
  auto negative = dml::gpu::TrainTpaScd(data, tpa_testing::Spec(dml::ModelKind::kRidge, data), o, gpu);
  BOOST_TEST(negative.status().message() ==
             "tpa-scd options must be >= 0: memory_budget_bytes -5, max_blocks 0, twin_threads 0, "
             "scratch_bytes 0");
}

// The caller's scratch and stream: checked on every host before any device
// question, TrainTpaScd's alone, and the size query needs a device.
BOOST_AUTO_TEST_CASE(scratch_and_stream_options_are_checked_first) {
  const dml::Dataset data = tpa_testing::Problem(dml::ModelKind::kHingeSvm, 200, 20);
  const dml::ModelSpec spec = tpa_testing::Spec(dml::ModelKind::kHingeSvm, data);
  const dml::SolverOptions o = tpa_testing::Tight(dml::SolverKind::kTpaScd);
  dml::gpu::TpaScdOptions gpu;
  gpu.device = 4096;
  gpu.scratch_bytes = 4096;
  auto half = dml::gpu::TrainTpaScd(data, spec, o, gpu);
  BOOST_TEST((half.status().code() == absl::StatusCode::kInvalidArgument));
  BOOST_TEST(half.status().message() ==
             "tpa-scd: scratch and scratch_bytes go together: scratch is null, scratch_bytes 4096");
  BOOST_TEST(dml::gpu::TpaScdScratchBytes(data, spec, gpu).status().message() ==
             half.status().message());
  // Not dereferenced: every check below fails before any device work.
  int host_word = 0;
  gpu.scratch = &host_word;
  gpu.scratch_bytes = -1;
  auto negative = dml::gpu::TrainTpaScd(data, spec, o, gpu);
  BOOST_TEST(negative.status().message() ==
             "tpa-scd options must be >= 0: memory_budget_bytes 0, max_blocks 0, twin_threads 0, "
             "scratch_bytes -1");
  gpu.scratch_bytes = 4096;
  gpu.allow_fallback = true;
  dml::LocalBlock block;
  block.rows = data.x;
  block.y = data.y;
  block.n_global = data.x.rows();
  auto local = dml::gpu::MakeTpaScdLocalSolver(block, spec, 1, gpu);
  BOOST_TEST((local.status().code() == absl::StatusCode::kInvalidArgument));
  BOOST_TEST(local.status().message() ==
             "tpa-scd: a local solver keeps its block in device memory of its own on the default "
             "stream; stream and scratch are TrainTpaScd's");
  gpu.scratch = nullptr;
  gpu.scratch_bytes = 0;
  auto size = dml::gpu::TpaScdScratchBytes(data, spec, gpu);
  BOOST_TEST((size.status().code() == absl::StatusCode::kUnavailable));
  BOOST_TEST(size.status().message() ==
             dml::gpu::TrainTpaScd(data, spec, o, [&] {
               dml::gpu::TpaScdOptions strict = gpu;
               strict.allow_fallback = false;
               return strict;
             }()).status().message());
}

BOOST_AUTO_TEST_CASE(allowed_fallback_runs_the_twin_and_says_why_once) {
  const dml::Dataset data = tpa_testing::Problem(dml::ModelKind::kLogisticL2, 500, 50);
  const dml::ModelSpec spec = tpa_testing::Spec(dml::ModelKind::kLogisticL2, data);
  dml::gpu::TpaScdOptions gpu;
  gpu.device = 4096;
  gpu.allow_fallback = true;
  gpu.twin_threads = 1;
  std::vector<std::string> lines;
  gpu.log = [&](std::string_view l) { lines.emplace_back(l); };
  auto r = dml::gpu::TrainTpaScd(data, spec, tpa_testing::Tight(dml::SolverKind::kTpaScd), gpu);
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  BOOST_REQUIRE(lines.size() == 1u);
  dml::gpu::TpaScdOptions strict;
  strict.device = 4096;
  auto direct =
      dml::gpu::TrainTpaScd(data, spec, tpa_testing::Tight(dml::SolverKind::kTpaScd), strict);
  BOOST_TEST(lines[0] ==
             "tpa-scd: running the CPU twin: " + std::string(direct.status().message()));
  BOOST_TEST(r->note == "tpa-scd ran its CPU twin (asynchronous SCD, 1 threads) (" +
                            std::string(direct.status().message()) + ")");
  BOOST_TEST((r->reason == dml::StopReason::kConverged));
  auto ref = dml::Train(data, spec, tpa_testing::Tight(dml::SolverKind::kScd));
  BOOST_REQUIRE(ref.ok());
  BOOST_TEST(RelDiff(r->primal, ref->primal) <= 1e-6);
  // Errors that are not about the device are never masked by the fallback.
  dml::ModelSpec bad = spec;
  bad.lambda = 0;
  auto invalid = dml::gpu::TrainTpaScd(data, bad, tpa_testing::Tight(dml::SolverKind::kTpaScd), gpu);
  BOOST_TEST((invalid.status().code() == absl::StatusCode::kInvalidArgument));
  BOOST_TEST(lines.size() == 1u);
}

BOOST_AUTO_TEST_CASE(local_solver_without_a_device_is_an_error_or_the_cpu_one) {
  const dml::Dataset data = tpa_testing::Problem(dml::ModelKind::kHingeSvm, 1000, 50);
  const dml::ModelSpec spec = tpa_testing::Spec(dml::ModelKind::kHingeSvm, data);
  auto block_of = [&] {
    dml::LocalBlock b;
    b.rows = data.x;
    b.y = data.y;
    b.n_global = data.x.rows();
    return b;
  };
  dml::gpu::TpaScdOptions gpu;
  gpu.device = 4096;
  auto strict = dml::gpu::MakeTpaScdLocalSolver(block_of(), spec, 1, gpu);
  BOOST_REQUIRE(!strict.ok());
  BOOST_TEST((strict.status().code() == absl::StatusCode::kUnavailable));
  // Bad input first, on every host.
  dml::LocalBlock bad = block_of();
  bad.y[3] = 0.5f;
  auto invalid = dml::gpu::MakeTpaScdLocalSolver(std::move(bad), spec, 1, gpu);
  BOOST_TEST(invalid.status().message() ==
             "model svm needs labels in {-1,+1}; block row 3 has label 0.5");
  // The fallback: the CPU local solver, one line saying why, and the same
  // CoCoA+ iterates as MakeLocalSolver's (same seeds).
  std::vector<std::string> lines;
  gpu.allow_fallback = true;
  gpu.log = [&](std::string_view l) { lines.emplace_back(l); };
  auto via = tpa_testing::RunCocoa(data, spec, 2, 30, [&](dml::LocalBlock b, uint64_t seed) {
    return dml::gpu::MakeTpaScdLocalSolver(std::move(b), spec, seed, gpu);
  });
  auto cpu = tpa_testing::RunCocoa(data, spec, 2, 30, [&](dml::LocalBlock b, uint64_t seed) {
    return dml::MakeLocalSolver(std::move(b), spec, seed);
  });
  BOOST_REQUIRE(lines.size() == 2u);
  BOOST_TEST(lines[0] == "tpa-scd: cocoa's CPU local solver instead: " +
                             std::string(strict.status().message()));
  BOOST_TEST(via.first == cpu.first);
  BOOST_TEST(via.second == cpu.second);
  // Primal blocks the same way: bad input first, then the device's error, or
  // the CPU local solver and one line.
  const dml::ModelSpec l1 = tpa_testing::Spec(dml::ModelKind::kLogisticL1, data);
  dml::gpu::TpaScdOptions plain;
  plain.device = 4096;
  dml::LocalBlock cols;
  cols.cols = data.x.Convert();
  cols.y = data.y;
  cols.n_global = data.x.rows();
  cols.loss_row_end = data.x.rows();
  dml::LocalBlock bad_cols = cols;
  bad_cols.y[3] = 0.5f;
  auto bad_primal = dml::gpu::MakeTpaScdLocalSolver(std::move(bad_cols), l1, 1, plain);
  BOOST_TEST(bad_primal.status().message() ==
             "primal local solver: label of example 3 is 0.5; model logistic-l1 needs labels in "
             "{-1,+1}");
  auto primal = dml::gpu::MakeTpaScdLocalSolver(cols, l1, 1, plain);
  BOOST_TEST((primal.status().code() == strict.status().code()));
  BOOST_TEST(primal.status().message() == strict.status().message());
  lines.clear();
  plain.allow_fallback = true;
  plain.log = gpu.log;
  auto fallback = dml::gpu::MakeTpaScdLocalSolver(cols, l1, 1, plain);
  BOOST_REQUIRE(fallback.ok());
  BOOST_REQUIRE(lines.size() == 1u);
  BOOST_TEST(lines[0] == "tpa-scd: cocoa's CPU local solver instead: " +
                             std::string(strict.status().message()));
  auto cpu_primal = dml::MakeLocalSolver(cols, l1, 1);
  BOOST_REQUIRE(cpu_primal.ok());
  const std::vector<double> v(static_cast<std::size_t>(data.x.rows()), 0.0);
  auto a = (*fallback)->Solve(v, 1.0, 1.0, 50);
  auto b = (*cpu_primal)->Solve(v, 1.0, 1.0, 50);
  BOOST_REQUIRE(a.ok());
  BOOST_REQUIRE(b.ok());
  BOOST_TEST(a->delta_shared == b->delta_shared);
}

// CoCoA+ over column blocks with MakeTpaScdLocalSolver for the primal
// models, on the CPU where no device is (the fallback): sequential CD's
// optimum. The GPU test runs the same harness on the device.
BOOST_AUTO_TEST_CASE(primal_cocoa_through_the_fallback_reaches_the_optimum) {
  for (dml::ModelKind kind : {dml::ModelKind::kLasso, dml::ModelKind::kElasticNet,
                              dml::ModelKind::kLogisticL1}) {
    BOOST_TEST_CONTEXT("model " << dml::ModelName(kind)) {
      const dml::Dataset data = tpa_testing::Problem(kind, 3000, 300);
      const dml::ModelSpec spec = tpa_testing::Spec(kind, data);
      dml::gpu::TpaScdOptions gpu;
      gpu.device = 4096;
      gpu.allow_fallback = true;
      auto run = tpa_testing::RunCocoaPrimal(data, 3, tpa_testing::kPrimalCocoaRounds,
                                             [&](dml::LocalBlock b, uint64_t seed) {
                                               return dml::gpu::MakeTpaScdLocalSolver(
                                                   std::move(b), spec, seed, gpu);
                                             });
      auto c = dml::EvaluatePrimal(data, spec, run.second);
      auto ref = dml::Train(data, spec, tpa_testing::Tight(dml::SolverKind::kScd));
      BOOST_REQUIRE(c.ok());
      BOOST_REQUIRE(ref.ok());
      BOOST_TEST_MESSAGE("cocoa " << dml::ModelName(kind) << ": P " << c->primal << " gap "
                                  << c->gap << ", scd P " << ref->primal);
      BOOST_TEST(c->gap <= 1e-6 * std::abs(c->primal));
      BOOST_TEST(tpa_testing::RelDiff(c->primal, ref->primal) <= 2e-6);
    }
  }
}

}  // namespace
