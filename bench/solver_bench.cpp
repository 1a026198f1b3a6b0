// Times our solvers until they reach a given primal objective (a peer's,
// computed here with our objective code from the peer's weights). Driven by
// bench/solver_bench.py, which measures LIBLINEAR in the same run.
// Prints one line: "ref_primal=... t1=... t2=... primal1=... primal2=... gap1=... gap2=..."
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "dml/data/libsvm.hpp"
#include "dml/objective/evaluate.hpp"
#include "dml/objective/model.hpp"
#include "dml/solver/solver.hpp"

ABSL_FLAG(std::string, data, "", "LIBSVM file with labels in {-1,+1}");
ABSL_FLAG(std::string, model, "logistic", "model name");
ABSL_FLAG(double, c, 1.0, "LIBLINEAR's C");
ABSL_FLAG(std::string, w_ref, "", "files (comma-separated) with the peer's weights, one per line");
ABSL_FLAG(int, repeat, 3, "runs per solver; the median time is printed");
ABSL_FLAG(int, max_epochs, 2000, "epoch cap per run");
ABSL_FLAG(bool, ref_only, false, "print ref_primal (the highest of the peer's) and stop");
ABSL_FLAG(std::string, solver, "auto",
          "auto or newton: that solver with 1 thread, then 2; scd: scd, then async-scd with 2");

namespace {
int Die(const std::string& m) {
  std::fprintf(stderr, "solver_bench: %s\n", m.c_str());
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto kind = dml::ParseModelKind(absl::GetFlag(FLAGS_model));
  if (!kind.ok()) return Die(std::string(kind.status().message()));
  dml::LibsvmOptions lo;
  lo.task = dml::TaskOf(*kind);
  auto data = dml::ReadLibsvm(absl::GetFlag(FLAGS_data), lo);
  if (!data.ok()) return Die(std::string(data.status().message()));
  dml::ModelSpec spec{*kind, dml::LambdaFromC(absl::GetFlag(FLAGS_c), data->x.rows()), 0.5};

  // The target: the highest primal of the peer's weight files (its runs
  // differ where its solver is randomised).
  std::optional<double> ref;
  for (absl::string_view file : absl::StrSplit(absl::GetFlag(FLAGS_w_ref), ',')) {
    std::vector<double> w_ref;
    std::ifstream in{std::string(file)};
    if (!in) return Die("cannot read " + std::string(file));
    double v;
    while (in >> v) w_ref.push_back(v);
    w_ref.resize(static_cast<std::size_t>(data->x.cols()), 0.0);  // peer may see fewer features
    auto p = dml::PrimalValue(*data, spec, w_ref);
    if (!p.ok()) return Die(std::string(p.status().message()));
    ref = ref ? std::max(*ref, *p) : *p;
  }
  if (!ref) return Die("--w_ref names no file");
  if (absl::GetFlag(FLAGS_ref_only)) {
    std::printf("ref_primal=%.12g\n", *ref);
    return 0;
  }

  auto time_solver = [&](dml::SolverKind s, int threads, double& primal, double& gap,
                         int& epochs) -> double {
    std::vector<double> secs;
    for (int r = 0; r < absl::GetFlag(FLAGS_repeat); ++r) {
      dml::SolverOptions opt;
      opt.kind = s;
      opt.threads = threads;
      opt.seed = 1 + r;
      opt.eval_every = 0;
      opt.stop.gap_rel = 0;
      opt.stop.target_primal = *ref;
      opt.stop.max_epochs = absl::GetFlag(FLAGS_max_epochs);
      const auto t0 = std::chrono::steady_clock::now();
      auto res = dml::Train(*data, spec, opt);
      secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      if (!res.ok()) {
        Die(std::string(res.status().message()));
        return -1;
      }
      primal = res->primal;
      gap = res->gap;
      epochs = res->rounds;
      if (res->reason != dml::StopReason::kTargetReached) {
        std::fprintf(stderr, "solver_bench: %s did not reach the target (%s)\n",
                     std::string(dml::SolverName(s)).c_str(),
                     std::string(dml::StopReasonName(res->reason)).c_str());
      }
    }
    std::sort(secs.begin(), secs.end());
    return secs[secs.size() / 2];
  };
  double p1, p2, g1, g2;
  int e1, e2;
  auto solver = dml::ParseSolverKind(absl::GetFlag(FLAGS_solver));
  if (!solver.ok()) return Die(std::string(solver.status().message()));
  const dml::SolverKind second = *solver == dml::SolverKind::kScd ? dml::SolverKind::kAsyncScd : *solver;
  const double t1 = time_solver(*solver, 1, p1, g1, e1);
  const double t2 = time_solver(second, 2, p2, g2, e2);
  std::printf("ref_primal=%.12g t1=%.6f t2=%.6f primal1=%.12g primal2=%.12g gap1=%.3e gap2=%.3e "
              "epochs1=%d epochs2=%d n=%lld d=%lld nnz=%lld\n",
              *ref, t1, t2, p1, p2, g1, g2, e1, e2, static_cast<long long>(data->x.rows()),
              static_cast<long long>(data->x.cols()), static_cast<long long>(data->x.nnz()));
  return 0;
}
