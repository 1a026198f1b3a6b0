// TPA-SCD on a GPU against its CPU twin. Compiled only with CUDA; every case
// is skipped at run time, with one line saying so, where no device is found.
#define BOOST_TEST_MODULE gpu_tpa_scd_device
#include <boost/test/unit_test.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dml/gpu/tpa_scd.hpp"
#include "dml/metrics/metrics.hpp"
#include "dml/objective/evaluate.hpp"
#include "dml/solver/duhl.hpp"
#include "tpa_problems.hpp"

namespace {

using tpa_testing::RelDiff;

bool HaveDevice() {
  static const bool have = [] {
    auto info = dml::gpu::QueryDevice(0);
    if (!info.ok()) {
      std::printf("test_tpa_scd_device: skipped, no CUDA device: %s\n",
                  std::string(info.status().message()).c_str());
      return false;
    }
    std::printf("test_tpa_scd_device: on %s\n", dml::gpu::DescribeDevice(*info).c_str());
    return true;
  }();
  return have;
}

BOOST_AUTO_TEST_CASE(gpu_matches_the_twin_for_every_model_over_five_runs) {
  if (!HaveDevice()) return;
  for (dml::ModelKind kind : tpa_testing::AllModels()) {
    BOOST_TEST_CONTEXT("model " << dml::ModelName(kind)) {
      const dml::Dataset data = tpa_testing::Problem(kind, 20000, 2000);
      const dml::ModelSpec spec = tpa_testing::Spec(kind, data);
      dml::gpu::TpaScdOptions gpu;
      gpu.twin_threads = 4;
      dml::SolverOptions tight = tpa_testing::Tight(dml::SolverKind::kTpaScd);
      auto twin = dml::gpu::TrainTpaScdTwin(data, spec, tight, gpu);
      BOOST_REQUIRE_MESSAGE(twin.ok(), twin.status().ToString());
      BOOST_REQUIRE((twin->reason == dml::StopReason::kConverged));
      std::vector<double> primals;
      for (uint64_t seed = 1; seed <= 5; ++seed) {
        auto r = dml::gpu::TrainTpaScd(data, spec, tpa_testing::Tight(dml::SolverKind::kTpaScd, seed),
                                       gpu);
        BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
        std::printf("  %s seed %d: P %.12g gap %.3g epochs %g %.3f s (twin P %.12g, %.3f s) %s\n",
                    std::string(dml::ModelName(kind)).c_str(), static_cast<int>(seed), r->primal,
                    r->gap, r->epochs, r->seconds, twin->primal, twin->seconds, r->note.c_str());
        BOOST_TEST((r->reason == dml::StopReason::kConverged));
        BOOST_TEST(r->note.rfind("tpa-scd ran on ", 0) == 0, r->note);
        BOOST_TEST(RelDiff(r->primal, twin->primal) <= 1e-6);
        auto c = dml::Evaluate(data, spec, r->w, r->alpha);
        BOOST_REQUIRE(c.ok());
        BOOST_TEST(RelDiff(c->primal, r->primal) <= 1e-12);
        BOOST_TEST(c->gap <= 1e-9 * std::abs(c->primal) * 1.0000001);
        primals.push_back(r->primal);
      }
      for (double p : primals) BOOST_TEST(RelDiff(p, primals[0]) <= 1e-6);
    }
  }
}

// One column in every row and 20 copies of another: many blocks in flight
// read and write the same entries of w at once.
BOOST_AUTO_TEST_CASE(dense_and_duplicated_columns_do_not_diverge) {
  if (!HaveDevice()) return;
  for (dml::ModelKind kind : {dml::ModelKind::kRidge, dml::ModelKind::kLogisticL2,
                              dml::ModelKind::kHingeSvm, dml::ModelKind::kLasso,
                              dml::ModelKind::kLogisticL1}) {
    BOOST_TEST_CONTEXT("model " << dml::ModelName(kind)) {
      const dml::Dataset base = tpa_testing::Problem(kind, 20000, 200);
      std::vector<int64_t> off{0};
      std::vector<uint32_t> idx;
      std::vector<float> val;
      const int64_t d = base.x.cols();
      for (int64_t i = 0; i < base.x.rows(); ++i) {
        const dml::SparseView row = base.x.outer(i);
        idx.push_back(0);  // the dense column
        val.push_back(1.0f);
        for (std::size_t k = 0; k < row.size; ++k) {
          idx.push_back(row.index[k] + 1);
          val.push_back(row.value[k]);
        }
        if (row.size > 0) {  // 20 copies of the row's first feature
          for (int c = 0; c < 20; ++c) {
            idx.push_back(static_cast<uint32_t>(d + 1 + c));
            val.push_back(row.value[0]);
          }
        }
        off.push_back(static_cast<int64_t>(idx.size()));
      }
      auto x = dml::CsrMatrix::FromArrays(base.x.rows(), d + 21, std::move(off), std::move(idx),
                                          std::move(val));
      BOOST_REQUIRE(x.ok());
      dml::Dataset data{*std::move(x), base.y, base.task, {}};
      const dml::ModelSpec spec = tpa_testing::Spec(kind, data);
      dml::SolverOptions o = tpa_testing::Tight(dml::SolverKind::kTpaScd);
      o.stop.gap_rel = 1e-6;
      auto r = dml::gpu::TrainTpaScd(data, spec, o);
      BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
      std::printf("  dense+dup %s: P %.12g gap %.3g epochs %g %s\n",
                  std::string(dml::ModelName(kind)).c_str(), r->primal, r->gap, r->epochs,
                  r->note.c_str());
      BOOST_TEST((r->reason == dml::StopReason::kConverged));
      auto ref = dml::Train(data, spec, tpa_testing::Tight(dml::SolverKind::kScd));
      BOOST_REQUIRE(ref.ok());
      BOOST_TEST(RelDiff(r->primal, ref->primal) <= 2e-6);
    }
  }
}

BOOST_AUTO_TEST_CASE(over_the_memory_budget_is_an_error_or_a_logged_fallback) {
  if (!HaveDevice()) return;
  const dml::Dataset data = tpa_testing::Problem(dml::ModelKind::kRidge, 2000, 100);
  const dml::ModelSpec spec = tpa_testing::Spec(dml::ModelKind::kRidge, data);
  dml::gpu::TpaScdOptions gpu;
  gpu.memory_budget_bytes = 1000;
  auto r = dml::gpu::TrainTpaScd(data, spec, tpa_testing::Tight(dml::SolverKind::kTpaScd), gpu);
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST((r.status().code() == absl::StatusCode::kResourceExhausted));
  // Every buffer as allocated, in 256-byte pieces: y, q, alpha, its saved
  // copy, the gaps per example; w shared and for the certificate; the sums.
  auto ab = [](int64_t b) { return (b + 255) / 256 * 256; };
  const int64_t state = ab(2000 * 4) + 4 * ab(2000 * 8) + 2 * ab(100 * 8) + ab(32);
  const int64_t rows = ab(2001 * 8 + static_cast<int64_t>(data.x.values().size()) * 8);
  BOOST_TEST(std::string(r.status().message()) ==
             "tpa-scd: the per-example state needs " + std::to_string(state) +
                 " bytes of device memory and the rows " + std::to_string(rows) +
                 "; the budget of 1000 bytes holds neither all of them nor the state and two "
                 "streaming buffers");
  std::vector<std::string> lines;
  gpu.allow_fallback = true;
  gpu.log = [&](std::string_view l) { lines.emplace_back(l); };
  auto fb = dml::gpu::TrainTpaScd(data, spec, tpa_testing::Tight(dml::SolverKind::kTpaScd), gpu);
  BOOST_REQUIRE(fb.ok());
  BOOST_REQUIRE(lines.size() == 1u);
  BOOST_TEST(lines[0] == "tpa-scd: running the CPU twin: " + std::string(r.status().message()));
  // A primal model whose state alone is over the budget.
  const dml::Dataset reg = tpa_testing::Problem(dml::ModelKind::kLasso, 2000, 100);
  dml::gpu::TpaScdOptions small;
  small.memory_budget_bytes = 1000;
  auto lasso = dml::gpu::TrainTpaScd(reg, tpa_testing::Spec(dml::ModelKind::kLasso, reg),
                                     tpa_testing::Tight(dml::SolverKind::kTpaScd), small);
  BOOST_TEST((lasso.status().code() == absl::StatusCode::kResourceExhausted));
  // y; q, w, its saved copy, the gaps per feature; v, u; the sums.
  const int64_t primal_state = ab(2000 * 4) + 4 * ab(100 * 8) + 2 * ab(2000 * 8) + ab(32);
  const int64_t cols = ab(101 * 8 + static_cast<int64_t>(reg.x.values().size()) * 8);
  BOOST_TEST(std::string(lasso.status().message()) ==
             "tpa-scd: the per-feature and per-example state needs " +
                 std::to_string(primal_state) + " bytes of device memory and the columns " +
                 std::to_string(cols) +
                 "; the budget of 1000 bytes holds neither all of them nor the state and two "
                 "streaming buffers");
}

// Rows (dual models) or columns (primal) over the budget are streamed in
// chunks: the same optimum as resident.
BOOST_AUTO_TEST_CASE(streamed_rows_and_columns_reach_the_resident_optimum) {
  if (!HaveDevice()) return;
  for (dml::ModelKind kind : {dml::ModelKind::kLogisticL2, dml::ModelKind::kHingeSvm,
                              dml::ModelKind::kLasso, dml::ModelKind::kLogisticL1}) {
    BOOST_TEST_CONTEXT("model " << dml::ModelName(kind)) {
      const bool dual = dml::FormulationOf(kind) == dml::Formulation::kDual;
      const dml::Dataset data = dual ? tpa_testing::Problem(kind, 30000, 1000)
                                     : tpa_testing::Problem(kind, 20000, 3000);
      const dml::ModelSpec spec = tpa_testing::Spec(kind, data);
      const int64_t n = data.x.rows(), d = data.x.cols();
      // newGLMNET (L1-logistic) adds 4 doubles per feature, 2 per example.
      const int64_t glmnet = kind == dml::ModelKind::kLogisticL1 ? d * 32 + n * 16 + 32 : 0;
      const int64_t state = (dual ? n * 36 + d * 8 + 64 : d * 32 + n * 20 + 64) + glmnet;
      const int64_t vectors =
          ((dual ? n : d) + 1) * 8 + static_cast<int64_t>(data.x.values().size()) * 8;
      dml::gpu::TpaScdOptions gpu;
      auto resident = dml::gpu::TrainTpaScd(data, spec, tpa_testing::Tight(dml::SolverKind::kTpaScd), gpu);
      BOOST_REQUIRE_MESSAGE(resident.ok(), resident.status().ToString());
      gpu.memory_budget_bytes = state + vectors / 3;
      auto streamed = dml::gpu::TrainTpaScd(data, spec, tpa_testing::Tight(dml::SolverKind::kTpaScd), gpu);
      BOOST_REQUIRE_MESSAGE(streamed.ok(), streamed.status().ToString());
      std::printf("  streamed %s: P %.12g gap %.3g epochs %g %.3f s (resident %.12g, %g epochs, %.3f s) %s\n",
                  std::string(dml::ModelName(kind)).c_str(), streamed->primal, streamed->gap,
                  streamed->epochs, streamed->seconds, resident->primal, resident->epochs,
                  resident->seconds, streamed->note.c_str());
      // Two buffers of a sixth of the vectors each: 6 chunks, 7 where they straddle.
      const std::string says = dual ? "; rows streamed in " : "; columns streamed in ";
      const std::size_t at = streamed->note.find(says);
      BOOST_REQUIRE_MESSAGE(at != std::string::npos, streamed->note);
      const int chunks = std::atoi(streamed->note.c_str() + at + says.size());
      BOOST_TEST((chunks == 6 || chunks == 7), streamed->note);
      // Resident: the vectors cross once. Streamed: every chunk at least
      // once, and then a pass copies only what its two slots do not hold,
      // so over enough epochs an epoch and its evaluation (two passes; a
      // rollback or a certificate adds one or two now and then) copy less
      // than twice the vectors. (An epoch of newGLMNET, L1-logistic's, is
      // an outer iteration of several passes.)
      BOOST_TEST(resident->device_bytes == vectors);
      BOOST_TEST(streamed->device_bytes >= vectors);
      const dml::Progress& first = streamed->history.front();
      const dml::Progress& last = streamed->history.back();
      if (kind != dml::ModelKind::kLogisticL1 && last.epochs - first.epochs >= 8) {
        BOOST_TEST(static_cast<double>(last.device_bytes - first.device_bytes) <
                       2.0 * (last.epochs - first.epochs) * static_cast<double>(vectors),
                   streamed->device_bytes);
      }
      BOOST_TEST((streamed->reason == dml::StopReason::kConverged));
      BOOST_TEST(RelDiff(streamed->primal, resident->primal) <= 1e-6);
    }
  }
}

// The caller's stream and scratch (CUB's habit): a scratch of
// TpaScdScratchBytes holds the run, resident or streamed, and it reaches
// the optimum of a run in memory of its own; a scratch short of what the
// budget's layout needs is refused, naming both sizes.
BOOST_AUTO_TEST_CASE(callers_stream_and_scratch_hold_the_run) {
  if (!HaveDevice()) return;
  cudaStream_t stream = nullptr;
  BOOST_REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  // L1-logistic: newGLMNET's own state is in the scratch too.
  for (dml::ModelKind kind :
       {dml::ModelKind::kHingeSvm, dml::ModelKind::kLasso, dml::ModelKind::kLogisticL1}) {
    BOOST_TEST_CONTEXT("model " << dml::ModelName(kind)) {
      const dml::Dataset data = tpa_testing::Problem(kind, 20000, 1000);
      const dml::ModelSpec spec = tpa_testing::Spec(kind, data);
      const dml::SolverOptions tight = tpa_testing::Tight(dml::SolverKind::kTpaScd);
      auto own = dml::gpu::TrainTpaScd(data, spec, tight, {});
      BOOST_REQUIRE_MESSAGE(own.ok(), own.status().ToString());
      auto resident_bytes = dml::gpu::TpaScdScratchBytes(data, spec, {});
      BOOST_REQUIRE_MESSAGE(resident_bytes.ok(), resident_bytes.status().ToString());
      for (bool streamed : {false, true}) {
        dml::gpu::TpaScdOptions o;
        if (streamed) o.memory_budget_bytes = *resident_bytes / 2;
        auto bytes = dml::gpu::TpaScdScratchBytes(data, spec, o);
        BOOST_REQUIRE_MESSAGE(bytes.ok(), bytes.status().ToString());
        if (!streamed) BOOST_TEST(*bytes == *resident_bytes);
        if (streamed) BOOST_TEST(*bytes <= o.memory_budget_bytes);
        void* scratch = nullptr;
        BOOST_REQUIRE(cudaMalloc(&scratch, static_cast<std::size_t>(*bytes)) == cudaSuccess);
        o.stream = stream;
        o.scratch = scratch;
        o.scratch_bytes = *bytes;
        auto r = dml::gpu::TrainTpaScd(data, spec, tight, o);
        BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
        std::printf("  caller's scratch %s %s: %lld bytes, P %.12g (own memory %.12g) %s\n",
                    std::string(dml::ModelName(kind)).c_str(), streamed ? "streamed" : "resident",
                    static_cast<long long>(*bytes), r->primal, own->primal, r->note.c_str());
        BOOST_TEST((r->reason == dml::StopReason::kConverged));
        BOOST_TEST(RelDiff(r->primal, own->primal) <= 1e-6);
        BOOST_TEST((r->note.find(" streamed in ") != std::string::npos) == streamed, r->note);
        // The budget fixed, a scratch one byte short of its layout.
        o.memory_budget_bytes = *bytes;
        o.scratch_bytes = *bytes - 1;
        auto refused = dml::gpu::TrainTpaScd(data, spec, tight, o);
        BOOST_TEST((refused.status().code() == absl::StatusCode::kInvalidArgument));
        BOOST_TEST(std::string(refused.status().message()) ==
                   "tpa-scd: the caller's scratch holds " + std::to_string(*bytes - 1) +
                       " bytes; this run needs " + std::to_string(*bytes) +
                       " (TpaScdScratchBytes)");
        BOOST_REQUIRE(cudaFree(scratch) == cudaSuccess);
      }
    }
  }
  BOOST_REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
}

// The primal device paths on a problem small enough for compute-sanitizer
// (bench/tpa_scd_device.sh runs memcheck and racecheck on this case):
// streamed columns on the caller's stream and scratch, the CoCoA+ local
// solver, and a Reload that keeps some columns and takes new ones.
BOOST_AUTO_TEST_CASE(primal_paths_on_a_small_problem) {
  if (!HaveDevice()) return;
  const dml::Dataset data = tpa_testing::Problem(dml::ModelKind::kLasso, 400, 120);
  const dml::ModelSpec spec = tpa_testing::Spec(dml::ModelKind::kLasso, data);
  dml::SolverOptions o = tpa_testing::Tight(dml::SolverKind::kTpaScd);
  auto resident = dml::gpu::TrainTpaScd(data, spec, o, {});
  BOOST_REQUIRE_MESSAGE(resident.ok(), resident.status().ToString());
  auto full = dml::gpu::TpaScdScratchBytes(data, spec, {});
  BOOST_REQUIRE(full.ok());
  dml::gpu::TpaScdOptions small;
  small.memory_budget_bytes = *full - *full / 4;
  auto bytes = dml::gpu::TpaScdScratchBytes(data, spec, small);
  BOOST_REQUIRE_MESSAGE(bytes.ok(), bytes.status().ToString());
  cudaStream_t stream = nullptr;
  BOOST_REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  void* scratch = nullptr;
  BOOST_REQUIRE(cudaMalloc(&scratch, static_cast<std::size_t>(*bytes)) == cudaSuccess);
  small.stream = stream;
  small.scratch = scratch;
  small.scratch_bytes = *bytes;
  auto streamed = dml::gpu::TrainTpaScd(data, spec, o, small);
  BOOST_REQUIRE_MESSAGE(streamed.ok(), streamed.status().ToString());
  BOOST_TEST(streamed->note.find("; columns streamed in ") != std::string::npos, streamed->note);
  BOOST_TEST(RelDiff(streamed->primal, resident->primal) <= 1e-6);
  BOOST_REQUIRE(cudaFree(scratch) == cudaSuccess);
  BOOST_REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
  // CoCoA+ over 2 column blocks, then block 0 reloaded with half its
  // columns kept and the other block's first columns new.
  dml::gpu::TpaScdOptions gpu;
  auto run = tpa_testing::RunCocoaPrimal(data, 2, tpa_testing::kPrimalCocoaRounds,
                                         [&](dml::LocalBlock b, uint64_t seed) {
                                           return dml::gpu::MakeTpaScdLocalSolver(std::move(b), spec,
                                                                                  seed, gpu);
                                         });
  auto c = dml::EvaluatePrimal(data, spec, run.second);
  BOOST_REQUIRE(c.ok());
  BOOST_TEST(c->gap <= 1e-6 * std::abs(c->primal));
  const dml::CscMatrix a = data.x.Convert();
  dml::LocalBlock b0;
  b0.cols = a.SliceOuter(0, 60);
  b0.y = data.y;
  b0.n_global = data.x.rows();
  b0.loss_row_end = data.x.rows();
  auto solver = dml::gpu::MakeTpaScdLocalSolver(b0, spec, 3, gpu);
  BOOST_REQUIRE(solver.ok());
  dml::LocalBlock next;
  next.cols = a.SliceOuter(30, 90);  // columns 30..59 kept (slots 30..59), 60..89 new
  next.y = data.y;
  next.n_global = data.x.rows();
  next.loss_row_end = data.x.rows();
  std::vector<int64_t> kept(60, -1);
  for (int64_t k = 0; k < 30; ++k) kept[k] = 30 + k;
  auto moved = (*solver)->Reload(next, kept);
  BOOST_REQUIRE_MESSAGE(moved.ok(), moved.status().ToString());
  const int64_t new_nnz = a.offsets()[90] - a.offsets()[60];
  BOOST_TEST(*moved == 61 * 8 + 60 * 8 + new_nnz * 8 + 60 * 8);  // offsets, sources, new, q
  // The reloaded solver is the one a fresh solver of `next` is: same Certify.
  auto fresh = dml::MakeLocalSolver(next, spec, 3);
  BOOST_REQUIRE(fresh.ok());
  const std::vector<double> w(run.second.begin() + 30, run.second.begin() + 90);
  BOOST_REQUIRE((*solver)->set_coordinates(w).ok());
  BOOST_REQUIRE((*fresh)->set_coordinates(w).ok());
  auto c1 = (*solver)->Certify(run.first);
  auto c2 = (*fresh)->Certify(run.first);
  BOOST_REQUIRE(c1.ok());
  BOOST_REQUIRE(c2.ok());
  BOOST_TEST(RelDiff(c1->loss_sum, c2->loss_sum) <= 1e-12);
  BOOST_TEST(RelDiff(c1->reg_sum, c2->reg_sum) <= 1e-12);
  BOOST_TEST(std::abs(c1->gap_sum - c2->gap_sum) <= 1e-9 * (c2->gap_sum + c2->reg_sum) + 1e-15);
}

// A single block in flight is sequential SCD on the device: the same optimum.
BOOST_AUTO_TEST_CASE(one_block_in_flight_is_sequential) {
  if (!HaveDevice()) return;
  const dml::Dataset data = tpa_testing::Problem(dml::ModelKind::kHingeSvm, 2000, 100);
  const dml::ModelSpec spec = tpa_testing::Spec(dml::ModelKind::kHingeSvm, data);
  dml::gpu::TpaScdOptions gpu;
  gpu.max_blocks = 1;
  auto r = dml::gpu::TrainTpaScd(data, spec, tpa_testing::Tight(dml::SolverKind::kTpaScd), gpu);
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  BOOST_TEST(r->note.find(": 1 blocks of 32 threads in flight") != std::string::npos, r->note);
  auto ref = dml::Train(data, spec, tpa_testing::Tight(dml::SolverKind::kScd));
  BOOST_REQUIRE(ref.ok());
  BOOST_TEST(RelDiff(r->primal, ref->primal) <= 1e-6);
}

// CoCoA+ over 3 blocks with the device local solvers against the CPU ones:
// the same optimum, and Certify agrees with the CPU block's at the same point.
BOOST_AUTO_TEST_CASE(device_local_solver_matches_the_cpu_one_in_cocoa) {
  if (!HaveDevice()) return;
  for (dml::ModelKind kind : {dml::ModelKind::kRidge, dml::ModelKind::kLogisticL2,
                              dml::ModelKind::kHingeSvm, dml::ModelKind::kSquaredHingeSvm}) {
    BOOST_TEST_CONTEXT("model " << dml::ModelName(kind)) {
      const dml::Dataset data = tpa_testing::Problem(kind, 20000, 500);
      const dml::ModelSpec spec = tpa_testing::Spec(kind, data);
      dml::gpu::TpaScdOptions gpu;
      std::vector<std::string> lines;
      gpu.log = [&](std::string_view l) { lines.emplace_back(l); };
      auto dev = tpa_testing::RunCocoa(data, spec, 3, 300, [&](dml::LocalBlock b, uint64_t seed) {
        return dml::gpu::MakeTpaScdLocalSolver(std::move(b), spec, seed, gpu);
      });
      auto cpu = tpa_testing::RunCocoa(data, spec, 3, 300, [&](dml::LocalBlock b, uint64_t seed) {
        return dml::MakeLocalSolver(std::move(b), spec, seed);
      });
      BOOST_REQUIRE(lines.size() == 3u);
      BOOST_TEST(lines[0].rfind("tpa-scd: cocoa's local solver on ", 0) == 0, lines[0]);
      auto cd = dml::EvaluateDual(data, spec, dev.second);
      auto cc = dml::EvaluateDual(data, spec, cpu.second);
      BOOST_REQUIRE(cd.ok());
      BOOST_REQUIRE(cc.ok());
      std::printf("  cocoa %s: device P %.12g gap %.3g, cpu P %.12g gap %.3g\n",
                  std::string(dml::ModelName(kind)).c_str(), cd->primal, cd->gap, cc->primal,
                  cc->gap);
      BOOST_TEST(cd->gap <= 1e-6 * std::abs(cd->primal));
      BOOST_TEST(RelDiff(cd->primal, cc->primal) <= 2e-6);
      // The shared w the rounds built is A^T alpha / (lambda n).
      const std::vector<double> w = dml::PrimalFromDual(data.x, dev.second, spec.lambda);
      const auto [err, norm] = tpa_testing::MaxDiffAndNorm(w, dev.first);
      BOOST_TEST(err <= 1e-9 * norm);
      // Certify on the device = Certify on the CPU at the same alpha and w.
      dml::LocalBlock b1, b2;
      b1.rows = b2.rows = data.x;
      b1.y = b2.y = data.y;
      b1.n_global = b2.n_global = data.x.rows();
      auto ds = dml::gpu::MakeTpaScdLocalSolver(std::move(b1), spec, 1, gpu);
      auto cs = dml::MakeLocalSolver(std::move(b2), spec, 1);
      BOOST_REQUIRE(ds.ok());
      BOOST_REQUIRE(cs.ok());
      BOOST_REQUIRE((*ds)->set_coordinates(dev.second).ok());
      BOOST_REQUIRE((*cs)->set_coordinates(dev.second).ok());
      auto c1 = (*ds)->Certify(dev.first);
      auto c2 = (*cs)->Certify(dev.first);
      BOOST_REQUIRE(c1.ok());
      BOOST_REQUIRE(c2.ok());
      BOOST_TEST(RelDiff(c1->loss_sum, c2->loss_sum) <= 1e-12);
      BOOST_TEST(std::abs(c1->gap_sum - c2->gap_sum) <= 1e-12 * c2->loss_sum + 1e-15);
      BOOST_TEST((*ds)->coordinates() == dev.second);
    }
  }
}

// The same for the primal models over 3 column blocks: the device's
// optimum is the CPU's, the v the rounds built is A w, and Certify agrees.
BOOST_AUTO_TEST_CASE(device_primal_local_solver_matches_the_cpu_one_in_cocoa) {
  if (!HaveDevice()) return;
  for (dml::ModelKind kind : {dml::ModelKind::kLasso, dml::ModelKind::kElasticNet,
                              dml::ModelKind::kLogisticL1}) {
    BOOST_TEST_CONTEXT("model " << dml::ModelName(kind)) {
      const dml::Dataset data = tpa_testing::Problem(kind, 20000, 1500);
      const dml::ModelSpec spec = tpa_testing::Spec(kind, data);
      dml::gpu::TpaScdOptions gpu;
      std::vector<std::string> lines;
      gpu.log = [&](std::string_view l) { lines.emplace_back(l); };
      const int rounds = 4 * tpa_testing::kPrimalCocoaRounds;
      auto dev = tpa_testing::RunCocoaPrimal(data, 3, rounds, [&](dml::LocalBlock b, uint64_t seed) {
        return dml::gpu::MakeTpaScdLocalSolver(std::move(b), spec, seed, gpu);
      });
      auto cpu = tpa_testing::RunCocoaPrimal(data, 3, rounds, [&](dml::LocalBlock b, uint64_t seed) {
        return dml::MakeLocalSolver(std::move(b), spec, seed);
      });
      BOOST_REQUIRE(lines.size() == 3u);
      BOOST_TEST(lines[0].rfind("tpa-scd: cocoa's local solver on ", 0) == 0, lines[0]);
      auto cd = dml::EvaluatePrimal(data, spec, dev.second);
      auto cc = dml::EvaluatePrimal(data, spec, cpu.second);
      BOOST_REQUIRE(cd.ok());
      BOOST_REQUIRE(cc.ok());
      std::printf("  cocoa %s: device P %.12g gap %.3g, cpu P %.12g gap %.3g\n",
                  std::string(dml::ModelName(kind)).c_str(), cd->primal, cd->gap, cc->primal,
                  cc->gap);
      BOOST_TEST(cd->gap <= 1e-6 * std::abs(cd->primal));
      BOOST_TEST(RelDiff(cd->primal, cc->primal) <= 2e-6);
      const std::vector<double> v = dml::Predict(data.x, dev.second);
      const auto [err, norm] = tpa_testing::MaxDiffAndNorm(v, dev.first);
      BOOST_TEST(err <= 1e-9 * norm);
      dml::LocalBlock b1, b2;
      b1.cols = b2.cols = data.x.Convert();
      b1.y = b2.y = data.y;
      b1.n_global = b2.n_global = data.x.rows();
      b1.loss_row_end = b2.loss_row_end = data.x.rows();
      auto ds = dml::gpu::MakeTpaScdLocalSolver(std::move(b1), spec, 1, gpu);
      auto cs = dml::MakeLocalSolver(std::move(b2), spec, 1);
      BOOST_REQUIRE(ds.ok());
      BOOST_REQUIRE(cs.ok());
      BOOST_REQUIRE((*ds)->set_coordinates(dev.second).ok());
      BOOST_REQUIRE((*cs)->set_coordinates(dev.second).ok());
      auto c1 = (*ds)->Certify(dev.first);
      auto c2 = (*cs)->Certify(dev.first);
      BOOST_REQUIRE(c1.ok());
      BOOST_REQUIRE(c2.ok());
      BOOST_TEST(RelDiff(c1->loss_sum, c2->loss_sum) <= 1e-12);
      BOOST_TEST(RelDiff(c1->reg_sum, c2->reg_sum) <= 1e-12);
      BOOST_TEST(std::abs(c1->gap_sum - c2->gap_sum) <= 1e-9 * (c2->gap_sum + c2->reg_sum) + 1e-15);
      BOOST_TEST((*ds)->coordinates() == dev.second);
    }
  }
}

}  // namespace

// DuHL with the GPU as its device: TPA-SCD on the block, which stays on the
// device between rounds (only new rows, or columns, copied): the twin's optimum, and
// what the device says it copied is at least what the twin counts.
BOOST_AUTO_TEST_CASE(duhl_on_the_device_reaches_the_twins_optimum) {
  if (!HaveDevice()) return;
  for (dml::ModelKind kind : {dml::ModelKind::kHingeSvm, dml::ModelKind::kLogisticL2,
                              dml::ModelKind::kLasso}) {
    const dml::Dataset data = tpa_testing::Problem(kind, 3000, 300);
    const dml::ModelSpec spec = tpa_testing::Spec(kind, data);
    dml::SolverOptions o;
    o.stop.gap_rel = 1e-7;
    o.stop.max_epochs = 3000;
    dml::DuhlOptions twin;
    twin.device_fraction = 0.2;
    dml::DuhlOptions device = twin;
    dml::gpu::TpaScdOptions gpu;
    device.make_solver = [gpu](dml::LocalBlock b, const dml::ModelSpec& m, uint64_t seed) {
      return dml::gpu::MakeTpaScdLocalSolver(std::move(b), m, seed, gpu);
    };
    auto t = dml::TrainDuhl(data, spec, o, twin);
    auto g = dml::TrainDuhl(data, spec, o, device);
    BOOST_REQUIRE_MESSAGE(t.ok(), t.status().ToString());
    BOOST_REQUIRE_MESSAGE(g.ok(), g.status().ToString());
    std::printf("  duhl %s: device P %.12g gap %.3g, %zu rounds, %lld bytes moved; twin P %.12g, "
                "%zu rounds, %lld bytes\n",
                std::string(dml::ModelName(kind)).c_str(), g->train.primal, g->train.gap,
                g->rounds.size(), static_cast<long long>(g->device_bytes), t->train.primal,
                t->rounds.size(), static_cast<long long>(t->device_bytes));
    BOOST_TEST((g->train.reason == dml::StopReason::kConverged));
    BOOST_TEST(RelDiff(g->train.primal, t->train.primal) <= 1e-6);
    BOOST_TEST(g->rounds.size() > 1u);
    int64_t formula = 0;
    for (const dml::DuhlRound& r : g->rounds) formula += r.swaps;
    BOOST_TEST(formula > 0);
    BOOST_TEST(g->device_bytes >= g->rounds[0].bytes);
  }
}
