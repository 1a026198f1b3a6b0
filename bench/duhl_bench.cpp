// DuHL's selection rules against each other in one run: bytes moved to the
// device and wall time to a relative gap (default 1e-4) for gap,
// gap-greedy, random and sequential selection at device budgets of 10% and
// 25% of the data, as ratios against sequential (cyclic streaming) measured
// in the same run. The device is the CPU twin (the block solved by the CPU
// local solver in its own buffer; bytes counted as they would be copied).
// Writes the table to stdout and every evaluation (policy, budget, bytes,
// gap) to a CSV for bench/duhl_plot.py.
//
//   duhl_bench [--models lasso,svm] [--budgets 0.1,0.25] [--gap 1e-4]
//              [--seconds 120] [--gap-threads 1] [--passes 5] [--eval-every 10] [--lasso-lambda L]
//              [--gen-rows N] [--gen-noise S] [--csv FILE] [--tpa-scd]
//              [--selections sequential,gap,random,gap-greedy] FILE.svm ...
//
// --tpa-scd: the device is the GPU (dml::gpu::MakeTpaScdLocalSolver, the
// block kept there between rounds; every model); bytes are then what it
// copied.
//
// lasso's lambda defaults to 1e-2 of lambda_max = ||A^T y||_inf / n (a
// sparse but not trivial model); svm's is LIBLINEAR's C = 1 (1 / n).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench_cases.hpp"
#include "dml/data/libsvm.hpp"
#include "dml/objective/evaluate.hpp"
#include "dml/data/synthetic.hpp"
#include "dml/gpu/tpa_scd.hpp"
#include "dml/solver/duhl.hpp"

namespace {

using dml::bench::Case;


}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> models = {"lasso", "svm"}, files;
  std::vector<double> budgets = {0.1, 0.25};
  double gap = 1e-4, seconds = 120, lasso_fraction = 1e-2;
  int gap_threads = 1;
  double passes = 5;
  int eval_every = 10;
  int errors = 0;
  int64_t gen_rows = 0;
  double gen_noise = 0.5;  // the generator's label noise (0.5: 99% of the rows are support vectors)
  std::string csv = "duhl_bench.csv";
  bool on_gpu = false;
  // Sequential first: the others' ratios are against it.
  std::vector<dml::DuhlSelection> rules = {dml::DuhlSelection::kSequential, dml::DuhlSelection::kGap,
                                           dml::DuhlSelection::kRandom,
                                           dml::DuhlSelection::kGapGreedy};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    // A number or exit 2 (atof read "abc" as a budget of 0).
    auto number = [&](double lo, double hi) {
      const std::string v = next();
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(x >= lo && x <= hi)) {
        std::fprintf(stderr, "%s: expected a number in [%g, %g], got \"%s\"\n", a.c_str(), lo, hi,
                     v.c_str());
        std::exit(2);
      }
      return x;
    };
    if (a == "--models") models = absl::StrSplit(next(), ',');
    else if (a == "--budgets") {
      budgets.clear();
      for (auto b : absl::StrSplit(next(), ',')) {
        char* end = nullptr;
        const std::string v(b);
        const double x = std::strtod(v.c_str(), &end);
        if (v.empty() || *end != '\0' || !(x > 0 && x <= 1)) {
          std::fprintf(stderr, "--budgets: fractions in (0, 1], got \"%s\"\n", v.c_str());
          return 2;
        }
        budgets.push_back(x);
      }
    } else if (a == "--gap") gap = number(0, 1);
    else if (a == "--seconds") seconds = number(1e-3, 1e9);
    else if (a == "--gap-threads") gap_threads = static_cast<int>(number(0, 1024));
    else if (a == "--passes") passes = number(1e-6, 1e6);
    else if (a == "--eval-every") eval_every = static_cast<int>(number(1, 1e9));
    else if (a == "--lasso-lambda") lasso_fraction = number(1e-12, 1);
    else if (a == "--gen-rows") gen_rows = static_cast<int64_t>(number(1, 1e9));
    else if (a == "--gen-noise") gen_noise = number(0, 100);
    else if (a == "--selections") {
      rules.clear();
      for (auto name : absl::StrSplit(next(), ',')) {
        auto rule = dml::ParseDuhlSelection(std::string_view(name.data(), name.size()));
        if (!rule.ok()) {
          std::fprintf(stderr, "--selections: %s\n", std::string(rule.status().message()).c_str());
          return 2;
        }
        rules.push_back(*rule);
      }
    }
    else if (a == "--csv") csv = next();
    else if (a == "--tpa-scd") on_gpu = true;
    else files.push_back(a);
  }
  auto read = dml::bench::ReadCases(files);
  if (!read.ok()) {
    std::fprintf(stderr, "%s\n", std::string(read.status().message()).c_str());
    return 1;
  }
  std::vector<Case> cases = *std::move(read);
  if (gen_rows > 0) {
    // news20's shape scaled: 80 nonzeros a row over 10x its columns.
    dml::SyntheticOptions so;
    so.rows = gen_rows;
    so.cols = 600000;
    so.nnz_per_row = 80;
    so.noise = gen_noise;
    so.model_density = 0.01;
    so.task = dml::Task::kClassification;
    auto d = dml::GenerateSynthetic(so);
    if (!d.ok()) {
      std::fprintf(stderr, "generate: %s\n", std::string(d.status().message()).c_str());
      return 1;
    }
    cases.push_back({"gen-" + std::to_string(gen_rows) + "x80" +
                         (gen_noise == 0.5 ? "" : absl::StrCat("-noise", gen_noise)),
                     std::move(d->data)});
  }
  std::FILE* out = std::fopen(csv.c_str(), "w");
  if (out == nullptr) {
    std::fprintf(stderr, "cannot write %s\n", csv.c_str());
    return 1;
  }
  std::fprintf(out, "data,model,budget,selection,round,seconds,device_bytes,data_bytes,gap_rel\n");
  std::printf("host: %u hardware threads; gap threads %d; relative gap %g; the device: %s\n",
              std::thread::hardware_concurrency(), gap_threads, gap,
              on_gpu ? "the GPU (tpa-scd)" : "the CPU twin");
  std::printf("%-20s %-6s %6s %-11s %6s %9s %12s %8s %8s %8s %s\n", "data", "model", "budget",
              "selection", "rounds", "seconds", "bytes moved", "x data", "bytes/seq", "time/seq",
              "end");
  for (const Case& c : cases) {
    for (const std::string& mname : models) {
      dml::ModelSpec m;
      auto kind = dml::ParseModelKind(mname);
      if (!kind.ok()) {
        std::fprintf(stderr, "%s\n", std::string(kind.status().message()).c_str());
        return 2;
      }
      m.kind = *kind;
      m.lambda = 1.0 / static_cast<double>(c.data.x.rows());
      if (m.kind == dml::ModelKind::kLasso) {
        auto lambda_max = dml::L1LambdaMax(c.data, m.kind);
        if (!lambda_max.ok()) {
          std::fprintf(stderr, "%s: %s\n", c.name.c_str(),
                       std::string(lambda_max.status().message()).c_str());
          return 1;
        }
        m.lambda = lasso_fraction * *lambda_max;
      }
      for (double budget : budgets) {
        double seq_bytes = 0, seq_seconds = 0;
        for (dml::DuhlSelection rule : rules) {
          dml::SolverOptions o;
          o.stop.gap_rel = gap;
          o.stop.max_epochs = 100000;
          o.stop.max_seconds = seconds;
          o.seed = 1;
          o.eval_every = eval_every;  // and whenever the gap memory says the target may be met
          dml::DuhlOptions d;
          d.device_fraction = budget;
          d.selection = rule;
          d.gap_threads = gap_threads;
          d.passes = passes;
          if (on_gpu) {
            d.make_solver = [](dml::LocalBlock b, const dml::ModelSpec& m, uint64_t seed) {
              return dml::gpu::MakeTpaScdLocalSolver(std::move(b), m, seed, {});
            };
          }
          std::vector<std::pair<double, double>> evals;
          const auto t0 = std::chrono::steady_clock::now();
          auto r = dml::TrainDuhl(c.data, m, o, d);
          const double wall =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          if (!r.ok()) {
            std::printf("%-20s %-6s %6.2f %-11s error: %s\n", c.name.c_str(), mname.c_str(), budget,
                        std::string(dml::DuhlSelectionName(rule)).c_str(),
                        std::string(r.status().message()).c_str());
            ++errors;
            continue;
          }
          for (const dml::Progress& p : r->train.history) {
            std::fprintf(out, "%s,%s,%g,%s,%d,%.6g,%lld,%lld,%.6g\n", c.name.c_str(),
                         mname.c_str(), budget, std::string(dml::DuhlSelectionName(rule)).c_str(),
                         p.round, p.seconds, static_cast<long long>(p.bytes_exchanged),
                         static_cast<long long>(r->data_bytes),
                         p.gap / std::max(1e-300, std::abs(p.primal)));
          }
          const bool done = r->train.reason == dml::StopReason::kConverged;
          if (rule == dml::DuhlSelection::kSequential) {
            seq_bytes = done ? static_cast<double>(r->device_bytes) : 0;
            seq_seconds = done ? wall : 0;
          }
          // A ratio needs both runs to have converged ("-" otherwise).
          auto ratio = [&](double mine, double seq) {
            char buf[32];
            if (done && seq > 0) {
              std::snprintf(buf, sizeof buf, "%8.3f", mine / seq);
            } else {
              std::snprintf(buf, sizeof buf, "%8s", "-");
            }
            return std::string(buf);
          };
          std::printf("%-20s %-6s %6.2f %-11s %6zu %9.3f %12lld %8.2f %s %s %s (gap %.2e)\n",
                      c.name.c_str(), mname.c_str(), budget,
                      std::string(dml::DuhlSelectionName(rule)).c_str(), r->rounds.size(), wall,
                      static_cast<long long>(r->device_bytes),
                      static_cast<double>(r->device_bytes) / static_cast<double>(r->data_bytes),
                      ratio(static_cast<double>(r->device_bytes), seq_bytes).c_str(),
                      ratio(wall, seq_seconds).c_str(),
                      std::string(dml::StopReasonName(r->train.reason)).c_str(),
                      r->train.gap / std::abs(r->train.primal));
          std::fflush(stdout);
        }
      }
    }
  }
  std::fclose(out);
  std::printf("csv: %s\n", csv.c_str());
  return errors > 0 ? 1 : 0;  // a run that failed is not a table
}
