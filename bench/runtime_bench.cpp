// runtime_bench: the actor runtime against direct solver calls and across modes.
//
//   runtime_bench --what=overhead|modes|hsweep (--data=FILE [--binarize=T] | --generate=RxC
//                 [--nnz=K]) [--model=logistic] [--c=1] [--workers=2,4] [--shards=2]
//                 [--budget=60] [--batch=auto] [--csv=PATH] [--repeat=3] [--threads=0]
//                 [--modes=cocoa,sync,...] [--step=auto|S] [--subopt=1e-3 | --abs-subopt=A]
//                 [--svrg=1 | --saga=1]  (sync, async, ssp: JobSgd::svrg, JobSgd::saga)
//
// overhead  cocoa with K=1, H = one epoch per round, vs the same local solver
//           called directly in a loop (same seed, same rounds, same certificate
//           per round): time(runtime)/time(direct), median of --repeat;
//           --rounds per run (default 1000).
// modes     every mode at each K: time, rounds and epochs to relative
//           suboptimality (P - P*) / P* <= --subopt (1e-3; --abs-subopt: an
//           absolute one), P* from sequential SCD to a 1e-10 gap, bytes
//           exchanged per round and per epoch; --budget seconds per run. The
//           SGD modes run libdml's defaults unless --step/--batch are given.
// hsweep    cocoa at the first K with H = 0.01 .. 10 local epochs per round:
//           rounds and seconds to a relative gap of 1e-4, as CSV (--csv).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_split.h"
#include "dml/actors/runtime.hpp"
#include "dml/data/libsvm.hpp"
#include "dml/data/synthetic.hpp"
#include "dml/objective/evaluate.hpp"
#include "dml/solver/cocoa_local.hpp"
#include "dml/solver/solver.hpp"

namespace {

using Clock = std::chrono::steady_clock;

std::map<std::string, std::string> ParseFlags(int argc, char** argv) {
  std::map<std::string, std::string> f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) continue;
    const auto eq = a.find('=');
    if (eq == std::string::npos) {
      f[a.substr(2)] = "1";
    } else {
      f[a.substr(2, eq - 2)] = a.substr(eq + 1);
    }
  }
  return f;
}

std::string Get(const std::map<std::string, std::string>& f, const std::string& k,
                const std::string& def) {
  auto it = f.find(k);
  return it == f.end() ? def : it->second;
}

bool Has(const std::map<std::string, std::string>& f, const std::string& k) {
  return f.count(k) > 0;
}

std::vector<int> IntList(const std::string& s) {
  std::vector<int> out;
  std::size_t pos = 0;
  while (pos < s.size()) {
    const auto comma = s.find(',', pos);
    out.push_back(std::stoi(s.substr(pos, comma - pos)));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

// This process's counters so far (all threads): CPU seconds (user +
// system), involuntary context switches (a thread preempted while it could
// still run) and minor page faults.
struct Usage {
  double cpu = 0, preempted = 0, faults = 0;
};

Usage UsageNow() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return {static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
              1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec),
          static_cast<double>(u.ru_nivcsw), static_cast<double>(u.ru_minflt)};
}

void AddUsage(const Usage& since, std::vector<Usage>* to) {
  const Usage now = UsageNow();
  to->push_back({now.cpu - since.cpu, now.preempted - since.preempted, now.faults - since.faults});
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double MedianOf(const std::vector<Usage>& v, double Usage::*field) {
  std::vector<double> x;
  for (const Usage& u : v) x.push_back(u.*field);
  return Median(std::move(x));
}

// The direct loop the runtime's cocoa K=1 performs: Solve one epoch, add the
// delta, certify. Returns seconds; rounds and final gap through pointers.
double DirectCocoa(const dml::Dataset& data, const dml::ModelSpec& m, double tol, int max_rounds,
                   int* rounds, double* gap_out) {
  const auto t0 = Clock::now();
  dml::LocalBlock block;
  block.rows = data.x;
  block.y = data.y;
  block.n_global = data.x.rows();
  // The runtime seeds worker k with seed * 1000003 + k (seed 1).
  auto solver = dml::MakeLocalSolver(std::move(block), m, 1000003);
  if (!solver.ok()) {
    std::fprintf(stderr, "%s\n", std::string(solver.status().message()).c_str());
    std::exit(1);
  }
  std::vector<double> w(data.x.cols(), 0.0);
  const double n = static_cast<double>(data.x.rows());
  for (int r = 0;; ++r) {
    auto c = (*solver)->Certify(w);
    double wsq = 0.0;
    for (double x : w) wsq += x * x;
    const double primal = c->loss_sum / n + 0.5 * m.lambda * wsq;
    const double gap = c->gap_sum / n;
    if (gap <= tol * std::abs(primal) || r >= max_rounds) {
      *rounds = r;
      *gap_out = gap;
      break;
    }
    auto up = (*solver)->Solve(w, 1.0, 1.0, data.x.rows());
    for (std::size_t j = 0; j < w.size(); ++j) w[j] += up->delta_shared[j];
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

dml::TrainResult MustRun(dml::Runtime& rt, const dml::JobSpec& s) {
  auto j = rt.Submit(s);
  if (!j.ok()) {
    std::fprintf(stderr, "submit: %s\n", std::string(j.status().message()).c_str());
    std::exit(1);
  }
  auto r = j->Wait();
  if (!r.ok()) {
    std::fprintf(stderr, "job: %s\n", std::string(r.status().message()).c_str());
    std::exit(1);
  }
  return *std::move(r);
}

}  // namespace

int main(int argc, char** argv) {
  const auto flags = ParseFlags(argc, argv);
  const std::string what = Get(flags, "what", "overhead");
  std::shared_ptr<const dml::Dataset> data;
  std::string name;
  const auto model_kind = dml::ParseModelKind(Get(flags, "model", "logistic"));
  if (!model_kind.ok()) return 2;
  const dml::Task task = dml::TaskOf(*model_kind);
  if (flags.count("data")) {
    dml::LibsvmOptions lo;
    lo.task = task;
    if (flags.count("binarize")) lo.binarize_threshold = std::stod(Get(flags, "binarize", "0"));
    auto d = dml::ReadLibsvm(Get(flags, "data", ""), lo);
    if (!d.ok()) {
      std::fprintf(stderr, "%s\n", std::string(d.status().message()).c_str());
      return 2;
    }
    data = std::make_shared<const dml::Dataset>(*std::move(d));
    name = Get(flags, "data", "");
    name = name.substr(name.find_last_of('/') + 1);
  } else {
    const std::string shape = Get(flags, "generate", "100000x10000");
    dml::SyntheticOptions g;
    g.rows = std::stoll(shape.substr(0, shape.find('x')));
    g.cols = std::stoll(shape.substr(shape.find('x') + 1));
    g.nnz_per_row = std::stoll(Get(flags, "nnz", "20"));
    g.noise = 0.3;
    g.task = task;
    auto s = dml::GenerateSynthetic(g);
    if (!s.ok()) return 2;
    data = std::make_shared<const dml::Dataset>(std::move(s->data));
    name = "gen" + shape;
  }
  const int64_t n = data->x.rows();
  const double c = std::stod(Get(flags, "c", "1"));
  const dml::ModelSpec m{*model_kind, dml::LambdaFromC(c, n), 0.5};
  const std::vector<int> ks = IntList(Get(flags, "workers", "2,4"));
  const int shards = std::stoi(Get(flags, "shards", "2"));
  const double budget = std::stod(Get(flags, "budget", "60"));
  const int repeat = std::stoi(Get(flags, "repeat", "3"));
  std::printf("data %s: %lld x %lld, nnz %lld; model %s, C=%g (lambda %.3g)\n", name.c_str(),
              static_cast<long long>(n), static_cast<long long>(data->x.cols()),
              static_cast<long long>(data->x.nnz()), std::string(dml::ModelName(m.kind)).c_str(), c,
              m.lambda);
  // --threads: the runtime's scheduler threads (0 = one per core).
  dml::RuntimeOptions options;
  options.threads = std::stoi(Get(flags, "threads", "0"));
  dml::Runtime rt(options);

  if (what == "overhead") {
    const double tol = 1e-6;
    // --rounds: rounds per run (H = 1 epoch: one epoch per round). Shorter
    // runs, more pairs: less drift of this machine's speed inside a pair.
    const int max_rounds = std::stoi(Get(flags, "rounds", "1000"));
    std::vector<double> direct, actor;
    std::vector<Usage> use_direct, use_actor;
    int rounds_direct = 0, rounds_actor = 0;
    double gap_direct = 0, gap_actor = 0;
    auto run_direct = [&] {
      const Usage u0 = UsageNow();
      direct.push_back(DirectCocoa(*data, m, tol, max_rounds, &rounds_direct, &gap_direct));
      AddUsage(u0, &use_direct);
    };
    auto run_runtime = [&] {
      dml::JobSpec s;
      s.data.dataset = data;
      s.model = m;
      s.mode.kind = dml::Mode::kCocoa;
      s.mode.workers = 1;
      s.mode.shards = 1;
      s.stop.gap_rel = tol;
      s.stop.max_epochs = max_rounds;
      const auto t0 = Clock::now();
      const Usage u0 = UsageNow();
      const dml::TrainResult r = MustRun(rt, s);
      actor.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      AddUsage(u0, &use_actor);
      rounds_actor = r.rounds;
      gap_actor = r.gap;
    };
    // Pairs alternate which side runs first, so neither always meets the
    // machine a few seconds later (or with warmer caches) than the other.
    for (int i = 0; i < repeat; ++i) {
      if (i % 2 == 0) {
        run_direct();
        run_runtime();
      } else {
        run_runtime();
        run_direct();
      }
    }
    // This machine's speed drifts by tens of percent over minutes: each
    // runtime run is paired with the direct run next to it, and the median
    // of the pairs' ratios is the figure.
    std::vector<double> ratios;
    for (std::size_t i = 0; i < actor.size(); ++i) ratios.push_back(actor[i] / direct[i]);
    std::printf("cocoa K=1 H=1 epoch to gap %g: direct %d rounds %.4f s (gap %.3e) | runtime %d rounds "
                "%.4f s (gap %.3e) | ratio of medians %.3f, median of paired ratios %.3f "
                "(%d pairs, min %.3f, max %.3f)\n",
                tol, rounds_direct, Median(direct), gap_direct, rounds_actor, Median(actor), gap_actor,
                Median(actor) / Median(direct), Median(ratios), repeat,
                *std::min_element(ratios.begin(), ratios.end()),
                *std::max_element(ratios.begin(), ratios.end()));
    // CPU time of the whole process (every thread) per run: runtime CPU above
    // direct CPU is work the runtime adds; wall above CPU is waiting.
    // Preemptions: the runtime's other threads taking the solving thread's
    // core. Minor faults: memory the run touched fresh (the runtime's come
    // from the worker's copy of its partition at job start).
    std::printf("per run (medians): cpu seconds direct %.4f, runtime %.4f | preempted direct %.0f, "
                "runtime %.0f | minor faults direct %.0f, runtime %.0f\n",
                MedianOf(use_direct, &Usage::cpu), MedianOf(use_actor, &Usage::cpu),
                MedianOf(use_direct, &Usage::preempted), MedianOf(use_actor, &Usage::preempted),
                MedianOf(use_direct, &Usage::faults), MedianOf(use_actor, &Usage::faults));
    return 0;
  }

  // P*: sequential SCD to a tight gap.
  dml::SolverOptions so;
  so.stop.gap_rel = 1e-10;
  so.stop.max_epochs = 3000;
  auto ref = dml::Train(*data, m, so);
  if (!ref.ok()) return 1;
  const double p_star = ref->primal;
  std::printf("P* = %.10f (sequential SCD, gap %.2e, %d epochs, %.2f s)\n", p_star, ref->gap,
              ref->rounds, ref->seconds);

  if (what == "modes") {
    // The target: relative suboptimality --subopt (1e-3), or an absolute
    // one with --abs-subopt (the earlier tables' P* + 1e-3).
    const double target = Has(flags, "abs-subopt")
                              ? p_star + std::stod(Get(flags, "abs-subopt", "1e-3"))
                              : p_star + std::stod(Get(flags, "subopt", "1e-3")) * std::abs(p_star);
    std::printf("target P <= %.10f; step %s, batch %s, svrg %s, saga %s\n", target,
                Get(flags, "step", "auto (calibrated)").c_str(), Get(flags, "batch", "auto (rows / 32 K, at most 64)").c_str(),
                Get(flags, "svrg", "0").c_str(), Get(flags, "saga", "0").c_str());
    std::printf("%-16s %2s %8s %9s %7s %8s %13s %14s %14s\n", "mode", "K", "reached", "seconds",
                "rounds", "epochs", "P-P*", "bytes/round", "bytes/epoch");
    std::vector<dml::Mode> modes;
    for (absl::string_view name : absl::StrSplit(
             Get(flags, "modes", "cocoa,sync,async,ssp,easgd,hogwild,model-averaging"), ',')) {
      auto mode = dml::ParseMode(std::string_view(name.data(), name.size()));
      if (!mode.ok()) {
        std::fprintf(stderr, "--modes: %s\n", std::string(mode.status().message()).c_str());
        return 2;
      }
      modes.push_back(*mode);
    }
    for (int k : ks) {
      for (dml::Mode mode : modes) {
        dml::JobSpec s;
        s.data.dataset = data;
        s.model = m;
        s.mode.kind = mode;
        s.mode.workers = k;
        s.mode.shards = shards;
        s.sgd.batch_size = std::stoi(Get(flags, "batch", "0"));
        // Default: libdml's own (step0 calibrated, decay lambda step0).
        const std::string step = Get(flags, "step", "auto");
        s.sgd.step0 = step == "auto" ? 0.0 : std::stod(step);
        const bool variance_reduced =
            mode == dml::Mode::kSync || mode == dml::Mode::kAsync || mode == dml::Mode::kSsp;
        s.sgd.svrg = Get(flags, "svrg", "0") == "1" && variance_reduced;
        s.sgd.saga = Get(flags, "saga", "0") == "1" && variance_reduced;
        s.sgd.eval_every_epochs = 0.5;
        s.stop.gap_rel = 0;
        s.stop.target_primal = target;
        s.stop.max_epochs = 100000;
        s.stop.max_seconds = budget;
        const dml::TrainResult r = MustRun(rt, s);
        const bool reached = r.primal <= target;
        std::printf("%-16s %2d %8s %9.3f %7d %8.2f %13.3e %14.4g %14.4g\n",
                    std::string(dml::ModeName(mode)).c_str(), k, reached ? "yes" : "no", r.seconds,
                    r.rounds, r.epochs, r.primal - p_star,
                    r.rounds > 0 ? static_cast<double>(r.bytes_exchanged) / r.rounds : 0.0,
                    r.epochs > 0 ? static_cast<double>(r.bytes_exchanged) / r.epochs : 0.0);
        std::fflush(stdout);
      }
    }
    return 0;
  }

  if (what == "hsweep") {
    const std::string csv = Get(flags, "csv", "hsweep.csv");
    std::ofstream out(csv);
    out << "H_epochs,workers,rounds,seconds,epochs,gap_rel,reached\n";
    std::printf("%8s %7s %9s %8s %11s\n", "H", "rounds", "seconds", "epochs", "gap_rel");
    for (double h : {0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0}) {
      dml::JobSpec s;
      s.data.dataset = data;
      s.model = m;
      s.mode.kind = dml::Mode::kCocoa;
      s.mode.workers = ks.front();
      s.mode.shards = shards;
      s.cocoa.local_epochs = h;
      s.stop.gap_rel = 1e-4;
      s.stop.max_epochs = 100000;
      s.stop.max_seconds = budget;
      const dml::TrainResult r = MustRun(rt, s);
      const double rel = r.gap / std::abs(r.primal);
      const bool reached = r.reason == dml::StopReason::kConverged;
      std::printf("%8.2f %7d %9.3f %8.2f %11.3e%s\n", h, r.rounds, r.seconds, r.epochs, rel,
                  reached ? "" : "  (budget)");
      out << h << "," << s.mode.workers << "," << r.rounds << "," << r.seconds << "," << r.epochs << ","
          << rel << "," << (reached ? 1 : 0) << "\n";
      std::fflush(stdout);
    }
    std::printf("wrote %s\n", csv.c_str());
    return 0;
  }
  std::fprintf(stderr, "unknown --what=%s\n", what.c_str());
  return 2;
}
