// TPA-SCD on the GPU against its CPU twin on all cores and sequential SCD,
// all in one run on one machine: time to a relative gap (default 1e-4),
// epochs per second, and for the GPU the bytes of nonzeros streamed per
// second as a fraction of the device-to-device copy bandwidth measured in
// the same run.
//
//   tpa_scd_bench [--gen-rows N --gen-nnz K] [--models logistic,svm] [--gpu-only]
//                 [--gap 1e-4] [--seq-seconds 120] FILE.svm ...
//
// Each case: GPU, twin, sequential, twin, GPU (alternating sides), the
// medians of the repeated sides reported; times are of the whole call
// (upload and setup included). epochs/s comes from a separate run, between
// its evaluations after epochs 10 and 30. Without a device the GPU columns say
// why and the rest still runs.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_split.h"
#include "bench_cases.hpp"
#include "dml/data/libsvm.hpp"
#include "dml/data/synthetic.hpp"
#include "dml/gpu/tpa_scd.hpp"
#include "dml/solver/solver.hpp"

namespace {

using dml::bench::Case;

struct Outcome {
  double seconds = -1;  // to the gap; -1: did not reach it
  double epochs = 0;
  double epochs_per_second = 0;
  double primal = 0;
  // Where the time to the gap went: until the first evaluation (upload,
  // setup, first epoch), the loop per epoch, after the last evaluation (the
  // exact host certificate and the result).
  double setup = 0, first_eval = 0, per_epoch = 0, after_last = 0;
  std::string note;
  std::string error;
};

dml::SolverOptions Options(dml::SolverKind kind, double gap, double seconds) {
  dml::SolverOptions o;
  o.kind = kind;
  o.stop.gap_rel = gap;
  o.stop.max_epochs = 100000;
  o.stop.max_seconds = seconds;
  o.eval_every = 1;
  return o;
}

Outcome Run(const Case& c, const dml::ModelSpec& spec, dml::SolverKind kind, double gap,
            double seconds, const dml::gpu::TpaScdOptions& gpu) {
  Outcome out;
  auto timed = [&](const dml::SolverOptions& o) {
    return kind == dml::SolverKind::kTpaScd ? dml::gpu::TrainTpaScd(c.data, spec, o, gpu)
                                            : dml::gpu::Train(c.data, spec, o, gpu);
  };
  dml::SolverOptions o = Options(kind, gap, seconds);
  if (kind == dml::SolverKind::kAsyncScd) {
    o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    o.fit_threads = false;  // the twin on all cores, as asked
  }
  std::vector<std::pair<double, double>> evals;  // (epoch, seconds)
  o.on_epoch = [&](const dml::Progress& p) { evals.emplace_back(p.epochs, p.seconds); };
  const auto t0 = std::chrono::steady_clock::now();
  auto r = timed(o);
  // The whole call: the upload and setup of each side count.
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!r.ok()) {
    out.error = std::string(r.status().message());
    return out;
  }
  out.note = r->note;
  out.primal = r->primal;
  out.epochs = r->epochs;
  if (r->reason == dml::StopReason::kConverged) out.seconds = wall;
  if (!evals.empty()) {
    out.setup = wall - r->seconds;
    out.first_eval = evals.front().second;
    out.after_last = r->seconds - evals.back().second;
    const double de = evals.back().first - evals.front().first;
    if (de > 0) out.per_epoch = (evals.back().second - evals.front().second) / de;
  }
  // Epoch rate: 30 epochs evaluated every 10, the rate taken between the
  // evaluations after epochs 10 and 30 (so without the setup and the final
  // host certificate; with one evaluation).
  dml::SolverOptions rate = o;
  rate.stop.gap_rel = 0;
  rate.stop.max_epochs = 30;
  rate.eval_every = 10;
  rate.stop.max_seconds = seconds;
  evals.clear();
  auto rr = timed(rate);
  if (rr.ok() && evals.size() >= 2 && evals.back().second > evals[0].second) {
    out.epochs_per_second =
        (evals.back().first - evals[0].first) / (evals.back().second - evals[0].second);
  } else if (rr.ok() && rr->seconds > 0) {
    out.epochs_per_second = rr->epochs / rr->seconds;
  }
  return out;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return -1;
  const std::size_t h = v.size() / 2;
  return v.size() % 2 == 1 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t gen_rows = 0, gen_nnz = 100;
  double gap = 1e-4, seq_seconds = 120;
  std::vector<std::string> models = {"logistic", "svm"};
  std::vector<std::string> files;
  bool gpu_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--gen-rows") gen_rows = std::atoll(next().c_str());
    else if (a == "--gen-nnz") gen_nnz = std::atoll(next().c_str());
    else if (a == "--gap") gap = std::atof(next().c_str());
    else if (a == "--seq-seconds") seq_seconds = std::atof(next().c_str());
    else if (a == "--models") models = absl::StrSplit(next(), ',');
    else if (a == "--gpu-only") gpu_only = true;  // e.g. under a profiler
    else files.push_back(a);
  }

  // Kernels loaded with the context, as in a service that trains more than
  // once, not on their first launch inside the first timed run.
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  auto info = dml::gpu::QueryDevice(0);
  double copy_bw = 0, h2d_bw = 0;
  if (info.ok()) {
    auto bw = dml::gpu::MeasureCopyBandwidth(0, int64_t{4} << 30);
    if (bw.ok()) copy_bw = *bw;
    auto h2d = dml::gpu::MeasureHostToDeviceBandwidth(0, int64_t{1} << 30);
    if (h2d.ok()) h2d_bw = *h2d;
    std::printf("device: %s; copy bandwidth %.0f GB/s (read + write, 4 GiB copy); host to device "
                "%.1f GB/s (page-locked, 1 GiB)\n",
                dml::gpu::DescribeDevice(*info).c_str(), copy_bw / 1e9, h2d_bw / 1e9);
  } else {
    std::printf("device: none (%s)\n", std::string(info.status().message()).c_str());
  }
  std::printf("host: %u hardware threads\n", std::thread::hardware_concurrency());

  auto read = dml::bench::ReadCases(files);
  if (!read.ok()) {
    std::fprintf(stderr, "%s\n", std::string(read.status().message()).c_str());
    return 1;
  }
  std::vector<Case> cases = *std::move(read);
  if (gen_rows > 0) {
    dml::SyntheticOptions so;
    so.rows = gen_rows;
    so.cols = 100000;
    so.nnz_per_row = gen_nnz;
    so.noise = 0.5;
    so.task = dml::Task::kClassification;
    auto t0 = std::chrono::steady_clock::now();
    auto d = dml::GenerateSynthetic(so);
    if (!d.ok()) {
      std::fprintf(stderr, "generate: %s\n", std::string(d.status().message()).c_str());
      return 1;
    }
    std::printf("generated %lld x %lld, %lld nonzeros in %.1f s\n",
                static_cast<long long>(so.rows), static_cast<long long>(so.cols),
                static_cast<long long>(d->data.x.values().size()),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    cases.push_back({"gen-" + std::to_string(gen_rows) + "x" + std::to_string(gen_nnz),
                     std::move(d->data)});
  }

  std::printf("\n%-22s %-9s %10s %10s %10s %8s %8s | %9s %9s %9s | %7s %7s\n", "data", "model",
              "gpu s", "twin s", "seq s", "gpu/twin", "seq/gpu", "gpu ep/s", "twin ep/s",
              "seq ep/s", "GB/s", "of copy");
  for (const Case& c : cases) {
    const int64_t nnz = static_cast<int64_t>(c.data.x.values().size());
    for (const std::string& m : models) {
      auto kind = dml::ParseModelKind(m);
      if (!kind.ok()) {
        std::fprintf(stderr, "%s\n", std::string(kind.status().message()).c_str());
        return 2;
      }
      dml::ModelSpec spec;
      spec.kind = *kind;
      spec.lambda = 1.0 / static_cast<double>(c.data.x.rows());  // LIBLINEAR's C = 1
      dml::gpu::TpaScdOptions gpu;
      std::vector<Outcome> g, t;
      Outcome s;
      g.push_back(Run(c, spec, dml::SolverKind::kTpaScd, gap, seq_seconds, gpu));
      if (!gpu_only) {
        t.push_back(Run(c, spec, dml::SolverKind::kAsyncScd, gap, seq_seconds, gpu));
        s = Run(c, spec, dml::SolverKind::kScd, gap, seq_seconds, gpu);
        t.push_back(Run(c, spec, dml::SolverKind::kAsyncScd, gap, seq_seconds, gpu));
      } else {
        t.resize(2);
      }
      g.push_back(Run(c, spec, dml::SolverKind::kTpaScd, gap, seq_seconds, gpu));
      auto secs = [](const std::vector<Outcome>& v) {
        std::vector<double> x;
        for (const Outcome& o : v) x.push_back(o.seconds < 0 ? 1e30 : o.seconds);
        return Median(x);
      };
      auto rate = [](const std::vector<Outcome>& v) {
        std::vector<double> x;
        for (const Outcome& o : v) x.push_back(o.epochs_per_second);
        return Median(x);
      };
      const double gs = g[0].error.empty() ? secs(g) : -1;
      const double ts = secs(t), ss = s.seconds < 0 ? 1e30 : s.seconds;
      const double gr = g[0].error.empty() ? rate(g) : 0;
      const double streamed = gr * static_cast<double>(nnz) * 8.0;  // value + index per nonzero
      std::printf("%-22s %-9s %10.4g %10.4g %10.4g %8.3g %8.3g | %9.4g %9.4g %9.4g | %7.1f %7.3f\n",
                  c.name.c_str(), m.c_str(), gs, ts, ss, gs > 0 ? gs / ts : 0, gs > 0 ? ss / gs : 0,
                  gr, rate(t), s.epochs_per_second, streamed / 1e9,
                  copy_bw > 0 ? streamed / copy_bw : 0);
      std::printf("    P gpu %.10g twin %.10g seq %.10g; epochs gpu %g twin %g seq %g\n",
                  g[0].primal, t[0].primal, s.primal, g[0].epochs, t[0].epochs, s.epochs);
      if (!g[0].error.empty()) std::printf("    gpu: %s\n", g[0].error.c_str());
      else std::printf("    gpu: %s\n", g[0].note.c_str());
      for (const auto& [side, o] : {std::pair<const char*, const Outcome*>{"gpu", &g[1]},
                                    {"twin", &t[1]}, {"seq", &s}}) {
        std::printf("    %s time: setup %.4g s, then first evaluation at %.4g s, %.4g s per epoch "
                    "(evaluated each), %.4g s after the last evaluation\n",
                    side, o->setup, o->first_eval, o->per_epoch, o->after_last);
      }
      // Streaming: the rows (dual models) or columns (primal) get a third
      // of their size (two buffers of a sixth) beside the resident state
      // (TrainTpaScd's accounting); the epoch time is taken between the
      // evaluations after epochs 10 and 30.
      if (g[0].error.empty()) {
        const int64_t n = c.data.x.rows(), d = c.data.x.cols();
        const bool dual = dml::FormulationOf(spec.kind) == dml::Formulation::kDual;
        const int64_t glmnet = spec.kind == dml::ModelKind::kLogisticL1 ? d * 32 + n * 16 + 32 : 0;
        const int64_t state = (dual ? n * 36 + d * 16 + 64 : d * 32 + n * 20 + 64) + glmnet;
        const int64_t rows = ((dual ? n : d) + 1) * 8 + nnz * 8;
        dml::gpu::TpaScdOptions streamed;
        streamed.memory_budget_bytes = state + rows / 3;
        dml::SolverOptions o = Options(dml::SolverKind::kTpaScd, 0, seq_seconds);
        o.stop.max_epochs = 30;
        o.eval_every = 10;
        struct Eval {
          double epochs, seconds;
          int64_t copied;
        };
        std::vector<Eval> evals;
        o.on_epoch = [&](const dml::Progress& p) { evals.push_back({p.epochs, p.seconds, p.device_bytes}); };
        std::vector<double> st, copied;
        std::string note;
        for (int rep = 0; rep < 2; ++rep) {
          evals.clear();
          auto r = dml::gpu::TrainTpaScd(c.data, spec, o, streamed);
          if (!r.ok()) {
            note = std::string(r.status().message());
            break;
          }
          // Seconds per epoch between the evaluations after epochs 10 and 30.
          if (evals.size() >= 2 && evals.back().epochs > evals[0].epochs) {
            const double epochs = evals.back().epochs - evals[0].epochs;
            st.push_back((evals.back().seconds - evals[0].seconds) / epochs);
            copied.push_back(static_cast<double>(evals.back().copied - evals[0].copied) / epochs);
          }
          note = r->note;
        }
        if (!st.empty()) {
          const double stream_s = Median(st), compute_s = 1.0 / gr,
                       copy_s = h2d_bw > 0 ? static_cast<double>(rows) / h2d_bw : 0;
          // A pass copies only the chunks its two slots do not still hold:
          // the ratio against what it copied says how well the copies and
          // the compute overlap.
          const double copied_s = h2d_bw > 0 ? Median(copied) / h2d_bw : 0;
          std::printf("    streamed epoch %.4g s; resident (compute) %.4g s; copy of the %s %.4g s;"
                      " streamed / max(copy, compute) %.3f; copied per epoch %.3g of them (%.4g s),"
                      " streamed / max(that copy, compute) %.3f\n",
                      stream_s, compute_s, dual ? "rows" : "columns", copy_s,
                      stream_s / std::max(copy_s, compute_s), Median(copied) / static_cast<double>(rows),
                      copied_s, stream_s / std::max(copied_s, compute_s));
        }
        std::printf("    streamed: %s\n", note.c_str());
      }
      std::printf("    twin: %s\n", t[0].note.c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}
