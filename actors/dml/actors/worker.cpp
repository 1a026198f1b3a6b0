#include "dml/actors/worker.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/result.hpp>
#include <caf/send.hpp>
#include <caf/sec.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "dml/actors/gap_memory.hpp"
#include "dml/actors/internal/bulk_resolve.hpp"
#include "dml/actors/gpu_solver.hpp"
#include "dml/actors/internal/worker_state.hpp"
#include "dml/actors/parameter_shard.hpp"
#include "dml/actors/topology/topology.hpp"
#include "dml/data/libsvm.hpp"
#include "dml/data/partition.hpp"
#include "dml/gpu/tpa_scd.hpp"
#include "dml/objective/evaluate.hpp"
#include "dml/objective/newton_certificate.hpp"
#include "dml/solver/cocoa_local.hpp"
#include "dml/solver/duhl.hpp"
#include "dml/solver/sgd.hpp"
#include "dml/util/rng.hpp"
#include "dml/util/status.hpp"
#include "absl/strings/str_cat.h"

namespace dml::actors {
namespace internal {
namespace {


// Why a connect(shards, bounds) cannot be used, or "".
std::string ConnectError(const worker_state& st, std::size_t shards, const int64_list& bounds) {
  if (!bounds.wire_error.empty()) return "connect: " + bounds.wire_error;
  const auto& b = bounds.values;
  if (shards == 0) return "connect: no shards";
  if (b.size() != shards + 1) {
    return "connect: " + std::to_string(b.size()) + " bounds for " + std::to_string(shards) +
           " shards (need shards + 1)";
  }
  if (b.front() != 0) return "connect: bounds start at " + std::to_string(b.front()) + ", not 0";
  for (std::size_t s = 1; s < b.size(); ++s) {
    if (b[s] <= b[s - 1]) {
      return "connect: bounds not increasing at position " + std::to_string(s);
    }
  }
  if (b.back() != static_cast<int64_t>(st.w.size())) {
    return "connect: bounds end at " + std::to_string(b.back()) + " but the shared vector has " +
           std::to_string(st.w.size()) + " entries";
  }
  return "";
}

// `text` cut to what a worker_report's text fields carry on the wire, at a
// character's start (it may reach a JSON metrics file).
std::string CutForReport(std::string text) {
  std::size_t cut = std::min(text.size(), net::kMaxWorkerFailureBytes);
  while (cut > 0 && cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) {
    --cut;
  }
  text.resize(cut);
  return text;
}

// The cocoa local solver the spec names: the CPU SCD, or TPA-SCD on a GPU
// of this process, held by that device's gpu_solver (its fallback, when
// allowed, goes to the coordinator as the worker's note: an event of the
// job's progress stream).
absl::StatusOr<std::unique_ptr<LocalSolver>> MakeWorkerLocalSolver(caf::actor_system& sys,
                                                                   LocalBlock block,
                                                                   const worker_state& st,
                                                                   uint64_t seed) {
  const worker_config& cfg = st.cfg;
  const int32_t kind = st.topo->local_solver(cfg.index, cfg.local_solver);
  if (kind == kScdLocal) return MakeLocalSolver(std::move(block), cfg.model, seed);
  gpu::TpaScdOptions gpu;
  // The workers of a process take the devices from cfg.device on in turn:
  // one gpu_solver per device, holding the blocks of the workers on it.
  const int count = gpu::CudaDeviceCount();
  gpu.device = count > cfg.device ? cfg.device + cfg.index % (count - cfg.device) : cfg.device;
  gpu.allow_fallback = cfg.gpu_fallback;
  const int32_t index = cfg.index;
  // DuHL makes a solver per block where the device cannot hold one: one
  // line, not one a block. It goes to the coordinator in the worker's
  // reports (an event of the progress stream: a node process's stderr is
  // not the user's).
  gpu.log = [index, note = st.note](std::string_view line) {
    if (!note->empty()) return;
    *note = CutForReport(absl::StrCat("worker ", index, ": ", AsAbsl(line)));
  };
  if (kind == kDuhlLocal) {
    DuhlOptions d;
    d.device_bytes = cfg.duhl_device_bytes;
    d.device_fraction = cfg.duhl_device_fraction;
    d.selection = static_cast<DuhlSelection>(cfg.duhl_selection);
    d.gap_threads = cfg.duhl_gap_threads;
    d.passes = cfg.duhl_passes;
    // The gap memory is an actor of this process beside the worker.
    d.make_gap_memory = [&sys](std::shared_ptr<const Dataset> view, const ModelSpec& m,
                               int threads, std::shared_ptr<const CscMatrix> cols) {
      return MakeGapMemoryOnActor(sys, std::move(view), m, threads, std::move(cols));
    };
    if (cfg.duhl_gpu) {
      // The blocks in the gpu_solver of the worker's device, reloaded there.
      d.make_solver = [&sys, gpu, interrupt = cfg.interrupt](LocalBlock b, const ModelSpec& m,
                                                            uint64_t s) {
        return MakeGpuLocalSolver(sys, std::move(b), m, s, gpu, interrupt);
      };
    }
    absl::StatusOr<std::unique_ptr<DuhlLocalSolver>> s =
        MakeDuhlLocalSolver(std::move(block), cfg.model, seed, d);
    if (!s.ok()) return s.status();
    return std::unique_ptr<LocalSolver>(*std::move(s));
  }
  return MakeGpuLocalSolver(sys, std::move(block), cfg.model, seed, gpu, cfg.interrupt);
}

absl::Status LoadAndPartition(caf::actor_system& sys, worker_state& st) {
  const worker_config& cfg = st.cfg;
  std::shared_ptr<const Dataset> full = cfg.data;
  if (!full) {
    absl::StatusOr<Dataset> loaded = ReadLibsvm(cfg.path, cfg.load);
    if (!loaded.ok()) return loaded.status();
    full = std::make_shared<const Dataset>(*std::move(loaded));
  }
  const CsrMatrix& x = full->x;
  st.n_global = x.rows();
  st.d = x.cols();
  if (x.rows() < cfg.workers) {
    return absl::InvalidArgumentError(absl::StrCat("the data has ", x.rows(), " examples for ",
                                                   cfg.workers, " workers"));
  }
  const bool classification = TaskOf(cfg.model.kind) == Task::kClassification;
  if (st.topo->shares_predictions(cfg.model.kind)) {
    // The columns' copies (the whole CSC, then this worker's slice) and the
    // block's per-feature vectors come before init's check of the shared
    // vector (n entries here): one stray feature index near 2^32 made the
    // conversion throw bad_alloc. DuHL keeps about 20 doubles a feature
    // (selection keys, gap memory values and versions, coordinates, its
    // local solvers'), a plain local solver about 8.
    const int64_t per_feature =
        st.topo->local_solver(cfg.index, cfg.local_solver) == kDuhlLocal ? 20 : 8;
    DML_RETURN_IF_ERROR(CheckModelMemory(x.cols(), per_feature, 2 * x.nnz() * 8,
                                         "a worker's block of columns", VectorOrigin::kFeatures));
    CscMatrix cols = x.Convert();
    auto ranges = BalancedRanges(cols.offsets(), cfg.workers);
    if (!ranges.ok()) return ranges.status();
    const Range r = (*ranges)[cfg.index];
    if (r.size() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("no features left for this worker (", x.cols(), " features)"));
    }
    LocalBlock block;
    block.cols = cols.SliceOuter(r.begin, r.end);
    block.y = full->y;
    block.n_global = x.rows();
    block.loss_row_begin = x.rows() * cfg.index / cfg.workers;
    block.loss_row_end = x.rows() * (cfg.index + 1) / cfg.workers;
    auto solver = MakeWorkerLocalSolver(sys, std::move(block), st, cfg.seed * 1000003 + cfg.index);
    if (!solver.ok()) return solver.status();
    st.solver = *std::move(solver);
    st.default_steps = std::max<int64_t>(1, std::llround(cfg.local_epochs * r.size()));
    return absl::OkStatus();
  }
  auto ranges = BalancedRanges(x.offsets(), cfg.workers);
  if (!ranges.ok()) return ranges.status();
  const Range r = (*ranges)[cfg.index];
  st.local.x = x.SliceOuter(r.begin, r.end);
  st.local.y.assign(full->y.begin() + r.begin, full->y.begin() + r.end);
  st.local.task = full->task;
  for (std::size_t i = 0; i < st.local.y.size(); ++i) {
    const float y = st.local.y[i];
    if (!std::isfinite(y) || (classification && y != 1.0f && y != -1.0f)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "label of example ", r.begin + static_cast<int64_t>(i), " is ", y, "; model ",
          AsAbsl(ModelName(cfg.model.kind)),
          classification ? " needs labels in {-1,+1}" : " needs finite labels"));
    }
  }
  // Hogwild threads share memory, so each samples from the whole dataset
  // (Niu et al.): a worker that runs ahead must not fit only its own rows.
  if (st.topo->samples_whole_data()) st.shared_data = full;
  if (st.topo->solves_locally()) {
    LocalBlock block;
    block.rows = st.local.x;
    block.y = st.local.y;
    block.n_global = x.rows();
    auto solver = MakeWorkerLocalSolver(sys, std::move(block), st, cfg.seed * 1000003 + cfg.index);
    if (!solver.ok()) return solver.status();
    st.solver = *std::move(solver);
    st.default_steps = std::max<int64_t>(1, std::llround(cfg.local_epochs * r.size()));
  }
  return absl::OkStatus();
}

caf::result<worker_report> start_run(self_ptr self, int64_t max_clock, int64_t report_every,
                                     int64_t start_clock) {
  auto& st = self->state;
  if (!st.connect_error.empty()) return fail(st.who + st.connect_error);
  if (start_clock < 0) return fail(st.who + "run from a negative clock");
  if (st.topo->coordinator_rounds()) {
    return fail(st.who + "run is not part of mode " + std::string(ModeName(st.cfg.mode)));
  }
  if (st.topo->uses_shards() &&
      (st.shards.empty() || st.bounds.size() != st.shards.size() + 1 ||
       st.bounds.back() != static_cast<int64_t>(st.w.size()))) {
    return fail(st.who + "not connected to shards covering the model");
  }
  if (!st.topo->uses_shards() &&
      (!st.cfg.hogwild || static_cast<int64_t>(st.cfg.hogwild->size()) != st.d)) {
    return fail(st.who + "hogwild mode without a shared model of the data's dimension");
  }
  // A run while running supersedes the old one (recovery restarts
  // every worker from a checkpoint): the old one answers now with
  // where it got to, and its pending continuations are dropped.
  if (st.running) finish_run(self, caf::none, st.loop);
  ++st.loop;
  st.running = true;
  st.halted = false;
  st.clock = start_clock;
  st.processed = start_clock * st.cfg.batch_size;
  st.exchanges = start_clock / st.cfg.tau;
  st.max_clock = max_clock;
  st.permit = INT64_MAX;
  st.parked = false;
  st.report_every = std::max<int64_t>(1, report_every);
  if (st.cfg.saga) st.saga_memory.assign(static_cast<std::size_t>(st.local.x.rows()), 0.0);
  st.run_promise = self->make_response_promise<worker_report>();
  // A local model that never trained (a replacement after a lost
  // node) joining a run past its start begins from the shards' model
  // (easgd: the center; model-averaging: the last mean), not from 0.
  if (st.topo->keeps_local_model() && start_clock > 0 && !st.trained) {
    const uint64_t loop = st.loop;
    pull_all(self, st.exchanges, [self, loop] { self->send(self, step_atom_v, loop); },
             [self, loop](caf::error err) { finish_run(self, std::move(err), loop); });
  } else {
    self->send(self, step_atom_v, st.loop);
  }
  st.trained = true;
  return st.run_promise;
}

// A cocoa round: certify s_r (answered at once), then solve H steps from it
// and push the shared-vector delta to the shards.
caf::result<block_sums, worker_report> solve_round(self_ptr self, int64_t r, const dvec& shared,
                                                   int64_t steps) {
  auto& st = self->state;
  if (shared.ref) {
    return internal::fetch_and_redeliver<worker_actor>(
        self, st.fetcher, self->make_response_promise<block_sums, worker_report>(), shared,
        [r, steps](dvec v) { return std::make_tuple(round_atom_v, r, std::move(v), steps); },
        st.w.size());
  }
  if (steps <= 0) steps = st.default_steps;
  if (!shared.wire_error.empty()) return fail(st.who + "round: " + shared.wire_error);
  if (!st.connect_error.empty()) return fail(st.who + st.connect_error);
  if (!st.solver) return fail(st.who + "round is only part of mode cocoa");
  if (shared.size() != st.w.size()) {
    return fail(st.who + "round with a shared vector of " + std::to_string(shared.size()) +
                " entries; expected " + std::to_string(st.w.size()));
  }
  if (r < 0) return fail(st.who + "round " + std::to_string(r));
  // One vector for both calls (a copy only where no vector owns the values).
  const std::shared_ptr<const std::vector<double>> s_r = shared.as_vector();
  auto cert = st.solver->Certify(*s_r);
  if (!cert.ok()) return as_error(st, cert.status());
  st.bytes += shared.bytes();
  // The certificate goes out now: the coordinator decides on it while
  // this round solves.
  auto promise = self->make_response_promise<block_sums, worker_report>();
  promise.deliver(block_sums{cert->loss_sum, cert->gap_sum, cert->reg_sum, {}}, st.report());
  st.last_round = r;
  st.round_start_coords = st.solver->coordinates();
  auto up = st.solver->Solve(*s_r, st.cfg.sigma_prime, st.cfg.gamma, steps,
                             st.cfg.interrupt.get());
  auto report_failure = [self](const std::string& what) {
    auto& st = self->state;
    worker_report failed = st.report();
    failed.wire_error = CutForReport(what);
    if (st.cfg.coordinator) caf::anon_send(st.cfg.coordinator, failed);
  };
  if (!up.ok()) {
    report_failure(st.who + std::string(up.status().message()));
    return promise;
  }
  st.processed += up->steps;
  ++st.clock;
  push_all(self, r, up->delta_shared, [] {},
           [self, report_failure](caf::error err) {
             report_failure(self->system().render(err));
           },
           &up->delta_shared);
  return promise;
}

caf::result<dvec> certify_iterate(self_ptr self, const dvec& w, int64_t tag, int64_t pass) {
  auto& st = self->state;
  if (w.ref) {
    return internal::fetch_and_redeliver<worker_actor>(
        self, st.fetcher, self->make_response_promise<dvec>(), w,
        [tag, pass](dvec v) { return std::make_tuple(iterate_atom_v, std::move(v), tag, pass); },
        static_cast<std::size_t>(st.d));
  }
  if (!w.wire_error.empty()) return fail(st.who + "certificate: " + w.wire_error);
  if (!w.has_values() || static_cast<int64_t>(w.size()) != st.d) {
    return fail(st.who + "certificate at " + std::to_string(w.size()) +
                " weights; the model has " + std::to_string(st.d));
  }
  NewtonRows* keep = nullptr;
  if (pass > 0) {  // replaces the oldest pass kept
    auto oldest = std::min_element(st.newton.begin(), st.newton.end(),
                                   [](const auto& a, const auto& b) { return a.first < b.first; });
    oldest->first = pass;
    keep = &oldest->second;
  }
  auto share = IterateShareOf(st.local, st.cfg.model, *w.as_vector(), keep);
  if (!share.ok()) return as_error(st, share.status());
  if (tag > 0) {
    // The pass that kept its rows has the same loss' already (same sums,
    // same order): no second pass.
    auto anchor = keep != nullptr && keep->derivative.size() == static_cast<std::size_t>(st.local.x.rows())
                      ? absl::StatusOr<std::vector<double>>(keep->derivative)
                      : LossDerivatives(st.local, st.cfg.model, *w.as_vector());
    if (!anchor.ok()) return as_error(st, anchor.status());
    st.anchor = *std::move(anchor);
    st.anchor_tag = tag;
    st.svrg_mu.clear();  // until this snapshot's mu arrives
  }
  return dvec(PackIterateShare(*share));
}

// A pass of the Newton-refined certificate over the rows kept by iterate
// pass `pass` (worker.hpp).
caf::result<dvec> refine_pass(self_ptr self, int64_t pass, bool last, const dvec& v) {
  auto& st = self->state;
  if (v.ref) {
    return internal::fetch_and_redeliver<worker_actor>(
        self, st.fetcher, self->make_response_promise<dvec>(), v,
        [pass, last](dvec x) { return std::make_tuple(refine_atom_v, pass, last, std::move(x)); },
        static_cast<std::size_t>(st.d));
  }
  if (!v.wire_error.empty()) return fail(st.who + "refine: " + v.wire_error);
  if (!v.has_values() || static_cast<int64_t>(v.size()) != st.d) {
    return fail(st.who + "refine with " + std::to_string(v.size()) +
                " values; the model has " + std::to_string(st.d));
  }
  auto kept = std::find_if(st.newton.begin(), st.newton.end(),
                           [pass](const auto& p) { return p.first == pass; });
  if (pass <= 0 || kept == st.newton.end() ||
      kept->second.second.size() != static_cast<std::size_t>(st.local.x.rows())) {
    return fail(st.who + "refine: no rows kept for iterate pass " + std::to_string(pass));
  }
  const NewtonRows& rows = kept->second;
  if (!last) {
    auto hp = HessianProductShare(st.local, rows, *v.as_vector());
    if (!hp.ok()) return as_error(st, hp.status());
    return dvec(*std::move(hp));
  }
  auto dual = NewtonDualShareOf(st.local, st.cfg.model, rows, *v.as_vector());
  if (!dual.ok()) return as_error(st, dual.status());
  return dvec(PackNewtonDualShare(*dual));
}

// Checkpoint restore (cocoa): this block's coordinates as of round r.
caf::result<int64_t> restore_coords(self_ptr self, int64_t r, const dvec& coords) {
  auto& st = self->state;
  if (coords.ref) {
    return internal::fetch_and_redeliver<worker_actor>(
        self, st.fetcher, self->make_response_promise<int64_t>(), coords,
        [r](dvec v) { return std::make_tuple(coords_atom_v, r, std::move(v)); });
  }
  if (!coords.wire_error.empty()) return fail(st.who + "restore: " + coords.wire_error);
  if (!st.solver) return fail(st.who + "restore is only part of mode cocoa");
  if (r < 0) return fail(st.who + "restore at round " + std::to_string(r));
  st.last_round = r - 1;
  st.round_start_coords.clear();
  // Empty: the zero state (a checkpoint taken before the first round).
  std::vector<double> c = coords.size() > 0
                              ? coords.to_vector()
                              : std::vector<double>(st.solver->coordinates().size(), 0.0);
  if (auto s = st.solver->set_coordinates(std::move(c)); !s.ok()) {
    return as_error(st, s);
  }
  return static_cast<int64_t>(coords.size());
}

worker_actor::behavior_type worker_impl(self_ptr self, worker_config cfg) {
  self->state.topo = MakeTopology(cfg.mode);
  self->state.cfg = std::move(cfg);
  self->state.who = "worker " + std::to_string(self->state.cfg.index) + ": ";
  return {
      [self](init_atom) -> caf::result<int64_t, int64_t> {
        auto& st = self->state;
        absl::Status s = LoadAndPartition(self->system(), st);
        st.cfg.data.reset();  // the partition is ours now; let the host's copy go
        if (!s.ok()) return as_error(st, s);
        const bool predictions = st.topo->shares_predictions(st.cfg.model.kind);
        const int64_t m = predictions ? st.n_global : st.d;
        // Before any vector of the model's size: each worker keeps about two
        // (its copy and its solver's), all of a job's in one process when
        // the coordinator runs here, plus the shards'.
        const bool here = st.cfg.coordinator && st.cfg.coordinator.node() == self->system().node();
        const int64_t vectors = here ? 2 * static_cast<int64_t>(st.cfg.workers) + 2 : 2;
        s = CheckModelMemory(m, vectors, 0,
                             here ? absl::StrCat("a job of ", st.cfg.workers, " workers in one process")
                                  : std::string("a worker"),
                             predictions ? VectorOrigin::kExamples : VectorOrigin::kFeatures);
        if (!s.ok()) return as_error(st, s);
        st.w.assign(static_cast<std::size_t>(m), 0.0);
        return {st.n_global, st.d};
      },
      [self](connect_atom, const std::vector<caf::actor>& shards, const int64_list& bounds) {
        // One-way: a bad wiring is remembered and fails the next run/round.
        auto& st = self->state;
        st.shards.clear();
        st.bounds.clear();
        st.connect_error = ConnectError(st, shards.size(), bounds);
        if (!st.connect_error.empty()) return;
        for (const auto& s : shards) st.shards.push_back(caf::actor_cast<parameter_shard>(s));
        st.bounds = bounds.values;
      },
      [self](run_atom, int64_t max_clock, int64_t report_every,
             int64_t start_clock) -> caf::result<worker_report> {
        return start_run(self, max_clock, report_every, start_clock);
      },
      [self](step_atom, uint64_t loop) {
        if (loop == self->state.loop) sgd_step(self);
      },
      [self](halt_atom) {
        auto& st = self->state;
        st.halted = true;
        if (st.parked) {  // the loop ends at its next step
          st.parked = false;
          self->send(self, step_atom_v, st.loop);
        }
      },
      [self](permit_atom, int64_t clock) {
        auto& st = self->state;
        st.permit = clock;
        if (st.parked && st.clock < clock) {
          st.parked = false;
          self->send(self, step_atom_v, st.loop);
        }
      },
      [self](round_atom, int64_t r, const dvec& shared,
             int64_t steps) -> caf::result<block_sums, worker_report> {
        return solve_round(self, r, shared, steps);
      },
      [self](iterate_atom, const dvec& w, int64_t tag, int64_t pass) -> caf::result<dvec> {
        return certify_iterate(self, w, tag, pass);
      },
      [self](refine_atom, int64_t pass, bool last, const dvec& v) -> caf::result<dvec> {
        return refine_pass(self, pass, last, v);
      },
      [self](svrg_atom, int64_t tag, const dvec& mu) {
        auto& st = self->state;
        if (mu.ref) {
          // A large mu came by reference: fetch it, then handle it as if sent.
          internal::with_values(
              self, st.fetcher, mu,
              [self, tag](dvec v) { self->send(self, svrg_atom_v, tag, std::move(v)); },
              static_cast<std::size_t>(st.d));
          return;
        }
        if (tag != st.anchor_tag || !mu.wire_error.empty() || !mu.has_values() ||
            static_cast<int64_t>(mu.size()) != st.d) {
          return;  // not this worker's snapshot (replaced since), or unusable: plain steps
        }
        st.svrg_mu.assign(mu.view().begin(), mu.view().end());
      },
      [self](calibrate_atom) -> caf::result<double> {
        auto& st = self->state;
        auto eta = CalibrateStep(st.local, st.cfg.model, st.cfg.batch_size,
                                 st.cfg.seed ^ static_cast<uint64_t>(st.cfg.index),
                                 st.cfg.feature_steps);
        if (!eta.ok()) return as_error(st, eta.status());
        return *eta;
      },
      [self](features_atom) -> caf::result<dvec> {
        return dvec(ColumnSquareSums(self->state.local));
      },
      [self](features_atom, const dvec& f) -> caf::result<int64_t> {
        auto& st = self->state;
        if (f.ref) {
          return internal::fetch_and_redeliver<worker_actor>(
              self, st.fetcher, self->make_response_promise<int64_t>(), f,
              [](dvec v) { return std::make_tuple(features_atom_v, std::move(v)); },
              static_cast<std::size_t>(st.d));
        }
        if (!f.wire_error.empty()) return fail(st.who + "feature steps: " + f.wire_error);
        if (!f.has_values() || static_cast<int64_t>(f.size()) != st.d) {
          return fail(st.who + "feature steps: " + std::to_string(f.size()) +
                      " factors; the model has " + std::to_string(st.d));
        }
        std::vector<double> factors = f.to_vector();
        if (auto bad = CheckFeatureStepFactors(factors, factors.size()); !bad.ok()) {
          return as_error(st, bad);
        }
        sync_local_model(st);
        st.lazy.reset();  // its steps were for the old factors
        st.cfg.feature_steps = std::move(factors);
        return st.d;
      },
      [self](calibrate_atom, double step0, double step_decay) {
        auto& st = self->state;
        // As the shards: a step that is not positive and finite is ignored.
        if (!(step0 > 0) || !std::isfinite(step0) || !std::isfinite(step_decay)) return;
        st.cfg.step0 = step0;
        st.cfg.step_decay = step_decay;
      },
      [self](coords_atom, int64_t r) -> caf::result<dvec> {
        auto& st = self->state;
        if (!st.solver) {
          sync_local_model(st);
          return dvec(st.w);
        }
        if (r == st.last_round) return dvec(st.round_start_coords);
        if (r == st.last_round + 1) return dvec(st.solver->coordinates());
        return fail(st.who + "coordinates of round " + std::to_string(r) +
                    " are not kept (last round " + std::to_string(st.last_round) + ")");
      },
      [self](coords_atom, int64_t r, const dvec& coords) -> caf::result<int64_t> {
        return restore_coords(self, r, coords);
      },
  };
}

}  // namespace
}  // namespace internal

std::vector<int64_t> SampleBatch(uint64_t seed, int32_t index, int64_t clock, int64_t rows,
                                 int32_t batch) {
  Rng rng(seed ^ (static_cast<uint64_t>(index) + 1) * 0x9E3779B97F4A7C15ull ^
          (static_cast<uint64_t>(clock) + 1) * 0xBF58476D1CE4E5B9ull);
  std::vector<int64_t> out(static_cast<std::size_t>(batch));
  for (auto& r : out) r = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(rows)));
  return out;
}

worker_actor spawn_worker(caf::actor_system& sys, worker_config config, bool detached) {
  if (detached) return sys.spawn<caf::detached>(internal::worker_impl, std::move(config));
  return sys.spawn(internal::worker_impl, std::move(config));
}

}  // namespace dml::actors
