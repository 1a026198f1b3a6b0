#include "dml/actors/job_plan.hpp"

#include <utility>

#include "dml/solver/sgd.hpp"

namespace dml::actors {

double ResolveSigmaPrime(const JobSpec& spec) {
  return spec.cocoa.sigma_prime > 0 ? spec.cocoa.sigma_prime
                                    : spec.cocoa.gamma * static_cast<double>(spec.mode.workers);
}

JobPlan ResolvePlan(JobSpec spec) {
  JobPlan p;
  const double k = static_cast<double>(spec.mode.workers);
  spec.cocoa.sigma_prime = ResolveSigmaPrime(spec);
  // beta = K alpha = 0.9, the EASGD paper's choice.
  if (!(spec.sgd.easgd_alpha > 0)) spec.sgd.easgd_alpha = 0.9 / k;
  // A path-only job's batch is resolved where the data was read
  // (dml-train); without it, the most AutoBatch gives.
  if (spec.sgd.batch_size == 0) {
    spec.sgd.batch_size = spec.data.dataset ? AutoBatch(spec.data.dataset->x.rows(), spec.mode.workers)
                                            : kMaxAutoBatch;
  }
  if (spec.sgd.tau == 0) {
    spec.sgd.tau = spec.mode.kind == Mode::kModelAveraging && spec.data.dataset
                       ? AutoTau(*spec.data.dataset, spec.sgd.batch_size)
                       : 8;
  }
  // A given step0 fixes the decay now; a calibrated one (step0 == 0) once
  // the workers have found it (coordinator.cpp).
  if (spec.sgd.step0 > 0) {
    spec.sgd.step_decay = ResolveStepDecay(spec.model, spec.sgd.step0, spec.sgd.step_decay);
  }
  p.topo = MakeTopology(spec.mode.kind);
  p.spec = std::move(spec);
  return p;
}

worker_config JobPlan::worker(int32_t k) const {
  worker_config c;
  c.mode = spec.mode.kind;
  c.index = k;
  c.workers = spec.mode.workers;
  c.model = spec.model;
  c.seed = spec.mode.seed;
  c.data = spec.data.dataset;
  c.path = spec.data.path;
  c.load = spec.data.load;
  c.batch_size = spec.sgd.batch_size;
  c.step0 = spec.sgd.step0;
  c.step_decay = spec.sgd.step_decay;
  c.tau = spec.sgd.tau;
  c.local_epochs = spec.cocoa.local_epochs;
  c.gamma = spec.cocoa.gamma;
  c.sigma_prime = spec.cocoa.sigma_prime;
  c.local_solver = spec.cocoa.local_solver == SolverKind::kTpaScd ? 1
                   : spec.cocoa.local_solver == SolverKind::kDuhl ? 2
                                                                  : 0;
  c.duhl_device_bytes = spec.cocoa.duhl.device_bytes;
  c.duhl_device_fraction = spec.cocoa.duhl.device_fraction;
  c.duhl_selection = static_cast<int32_t>(spec.cocoa.duhl.selection);
  c.duhl_gap_threads = spec.cocoa.duhl.gap_threads;
  c.duhl_passes = spec.cocoa.duhl.passes;
  c.duhl_gpu = spec.cocoa.duhl.gpu;
  c.device = spec.cocoa.device;
  c.gpu_fallback = spec.cocoa.gpu_fallback;
  c.feature_steps = feature_steps;
  c.saga = spec.sgd.saga;
  return c;
}

shard_config JobPlan::shard(int32_t s, const std::vector<int64_t>& bounds) const {
  shard_config c;
  c.mode = spec.mode.kind;
  c.workers = spec.mode.workers;
  c.begin = bounds[s];
  c.end = bounds[s + 1];
  c.model = spec.model;
  c.step0 = spec.sgd.step0;
  c.step_decay = spec.sgd.step_decay;
  c.gamma = spec.cocoa.gamma;
  c.easgd_alpha = spec.sgd.easgd_alpha;
  c.staleness = spec.sgd.staleness;
  if (!feature_steps.empty()) {
    c.feature_steps.assign(feature_steps.begin() + c.begin, feature_steps.begin() + c.end);
  }
  if (spec.sgd.saga && rows > 0) {
    c.saga_scale = static_cast<double>(spec.sgd.batch_size) / static_cast<double>(rows);
  }
  return c;
}

std::vector<int64_t> ShardBounds(int64_t m, int32_t shards) {
  std::vector<int64_t> b(static_cast<std::size_t>(shards) + 1);
  for (int32_t s = 0; s <= shards; ++s) b[s] = m * s / shards;
  return b;
}

}  // namespace dml::actors
