#include "dml/actors/job_plan.hpp"

#include <utility>

namespace dml::actors {

job_plan ResolvePlan(job_spec spec) {
  job_plan p;
  const double k = static_cast<double>(spec.workers);
  if (!(spec.sigma_prime > 0)) spec.sigma_prime = spec.gamma * k;
  // beta = K alpha = 0.9, the EASGD paper's choice.
  if (!(spec.easgd_alpha > 0)) spec.easgd_alpha = 0.9 / k;
  p.topo = MakeTopology(spec.mode);
  p.spec = std::move(spec);
  return p;
}

worker_config job_plan::worker(int32_t k) const {
  worker_config c;
  c.mode = spec.mode;
  c.index = k;
  c.workers = spec.workers;
  c.model = spec.model;
  c.seed = spec.seed;
  c.data = spec.data;
  c.path = spec.data_path;
  c.load = spec.load_options;
  c.batch_size = spec.batch_size;
  c.step0 = spec.step0;
  c.step_decay = spec.step_decay;
  c.tau = spec.tau;
  c.local_epochs = spec.local_epochs;
  c.gamma = spec.gamma;
  c.sigma_prime = spec.sigma_prime;
  return c;
}

shard_config job_plan::shard(int32_t s, const std::vector<int64_t>& bounds) const {
  shard_config c;
  c.mode = spec.mode;
  c.workers = spec.workers;
  c.begin = bounds[s];
  c.end = bounds[s + 1];
  c.model = spec.model;
  c.step0 = spec.step0;
  c.step_decay = spec.step_decay;
  c.gamma = spec.gamma;
  c.easgd_alpha = spec.easgd_alpha;
  c.staleness = spec.staleness;
  return c;
}

std::vector<int64_t> ShardBounds(int64_t m, int32_t shards) {
  std::vector<int64_t> b(static_cast<std::size_t>(shards) + 1);
  for (int32_t s = 0; s <= shards; ++s) b[s] = m * s / shards;
  return b;
}

}  // namespace dml::actors
