#pragma once
// A JobSpec resolved once: every default decided (sigma' = gamma K, the
// EASGD alpha 0.9 / K), the mode's topology chosen, and the config of
// worker k and of shard s handed out from it. The coordinator builds one at
// start and uses it again to respawn actors after a node loss, so a
// replacement is configured exactly as the actor it replaces.
//
// Immutable after Resolve; thread-compatible.

#include <cstdint>
#include <memory>
#include <vector>

#include "dml/actors/messages.hpp"
#include "dml/actors/runtime.hpp"
#include "dml/actors/topology/topology.hpp"
#include "dml/actors/worker.hpp"

namespace dml::actors {

/// CoCoA+'s sigma' for `spec`: cocoa.sigma_prime where set (> 0), else
/// gamma K (what ResolvePlan decides, and what Submit checks DuHL against).
double ResolveSigmaPrime(const JobSpec& spec);

/// What ResolvePlan returns; see the file comment.
struct JobPlan {
  JobSpec spec;  ///< with every default resolved (no 0 = "default" left)
  std::shared_ptr<const topology> topo;  ///< MakeTopology(spec.mode.kind); shared, immutable
  /// SGD modes with sgd.feature_steps: the per-feature step factors, known
  /// once the workers have loaded (FeatureStepFactors of their column sums);
  /// empty before, or where every factor is 1.
  std::vector<double> feature_steps;
  /// The data's rows, once the workers have loaded (0 before): SAGA's
  /// shards need |B| / n.
  int64_t rows = 0;

  /// The shared vector is v = A w (one entry per example; workers own
  /// columns, an epoch is d coordinates), else w.
  bool shares_predictions() const { return topo->shares_predictions(spec.model.kind); }
  /// The length of the shared vector for data of n x d.
  int64_t shared_length(int64_t n, int64_t d) const { return shares_predictions() ? n : d; }
  /// Worker k's config; the in-process parts (coordinator, hogwild model,
  /// interrupt flag) are the caller's to set.
  worker_config worker(int32_t k) const;
  /// Shard s's config for the key boundaries `bounds` (S + 1 entries).
  shard_config shard(int32_t s, const std::vector<int64_t>& bounds) const;
};

/// Resolves the defaults of a validated spec.
JobPlan ResolvePlan(JobSpec spec);

/// Range partition of m keys into S shards: S + 1 boundaries, m s / S for
/// s = 0..S (sizes differ by at most one).
std::vector<int64_t> ShardBounds(int64_t m, int32_t shards);

}  // namespace dml::actors
