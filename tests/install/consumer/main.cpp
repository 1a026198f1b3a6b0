// Trains a CoCoA job on 2 workers through the installed embedding API and
// checks its certificate against the library's own sequential solver.
#include <cmath>
#include <cstdio>
#include <memory>

#include "dml/actors/runtime.hpp"
#include "dml/data/synthetic.hpp"
#include "dml/solver/solver.hpp"

int main() {
  dml::SyntheticOptions g;
  g.rows = 2000;
  g.cols = 50;
  g.nnz_per_row = 6;
  g.task = dml::Task::kClassification;
  auto data = dml::GenerateSynthetic(g);
  if (!data.ok()) return std::printf("consumer: %s\n", data.status().ToString().c_str()), 1;
  auto shared = std::make_shared<const dml::Dataset>(std::move(data->data));
  const dml::ModelSpec model{dml::ModelKind::kLogisticL2, 1e-3};

  dml::SolverOptions ref_opts;
  ref_opts.stop.gap_rel = 1e-10;
  auto ref = dml::Train(*shared, model, ref_opts);
  if (!ref.ok()) return std::printf("consumer: %s\n", ref.status().ToString().c_str()), 1;

  dml::Runtime rt;
  dml::JobSpec spec;
  spec.data.dataset = shared;
  spec.model = model;
  spec.mode.kind = dml::Mode::kCocoa;
  spec.mode.workers = 2;
  spec.stop.gap_rel = 1e-8;
  auto job = rt.Submit(spec);
  if (!job.ok()) return std::printf("consumer: %s\n", job.status().ToString().c_str()), 1;
  auto r = job->Wait();
  if (!r.ok()) return std::printf("consumer: %s\n", r.status().ToString().c_str()), 1;
  const double rel = std::abs(r->primal - ref->primal) / ref->primal;
  std::printf("consumer: %s after %d rounds, primal %.10f (sequential %.10f, rel %.1e), gap %.2e\n",
              std::string(dml::StopReasonName(r->reason)).c_str(), r->rounds, r->primal,
              ref->primal, rel, r->gap);
  const bool ok = r->reason == dml::StopReason::kConverged && r->gap <= 1e-8 * r->primal && rel < 1e-6;
  return ok ? 0 : 1;
}
