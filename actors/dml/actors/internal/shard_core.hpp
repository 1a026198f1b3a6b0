#pragma once
// The state of one parameter shard that every mode's shard_rule works on,
// and the steps they share (a proximal SGD step on the range, snapshots).
// The actor (parameter_shard.cpp) owns it and does the messaging: checks,
// waiting pulls, replies. Used on the shard's thread only.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dml/actors/internal/shard_values.hpp"
#include "dml/actors/messages.hpp"
#include "dml/actors/topology/topology.hpp"
#include "dml/net/bulk.hpp"

namespace dml::actors::internal {

/// One worker's push of a gathering round (sync, model-averaging), kept
/// uncopied until all K are in: its nonzeros (idx null: dense) and the
/// buffers that own them. A dense pushpull's values are checked while the
/// mean sums them (checked false until then: one pass over the push, not
/// two); prev_clock and bytes undo its arrival if that check fails.
struct held_push {
  std::shared_ptr<const void> owner, owner2;
  const uint32_t* idx = nullptr;
  const double* x = nullptr;
  std::size_t nnz = 0;
  bool checked = true;
  int64_t prev_clock = 0;
  int64_t bytes = 0;
};

/// A refusal with the text a requester sees ("parameter shard: ...").
inline absl::Status ShardError(std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("parameter shard: ", absl::string_view(what.data(), what.size())));
}

struct shard_core {
  shard_config cfg;
  shard_values w;
  net::BulkChannel* bulk = nullptr;  // the system's, if any (outlives the shard)
  // Lazy L2: w_j = scales[g] * values_j, one scale per group g of features
  // with equal step factors (cfg.feature_steps, powers of two); group
  // empty: one group of all.
  std::vector<double> scales{1.0};
  std::vector<double> group_factor{1.0};
  std::vector<uint16_t> group;
  bool lazy_l2 = false;
  int64_t round = 0;    // gathering modes: clocks completed; cocoa: rounds announced
  int64_t applied = 0;  // gradients or deltas applied
  std::vector<int64_t> clocks;  // pushes seen per worker
  /// `applied` when each worker's last pull was served: a push's staleness
  /// is the updates applied since (async, ssp).
  std::vector<int64_t> pulled_at;
  shard_stats stats;
  bool halted = false;
  /// SAGA (cfg.saga_scale > 0): the mean over all rows of their remembered
  /// loss gradients, on this range; zero at the start (every memory 0) and
  /// rebuilt with the shard after a restart (the workers' memories start
  /// again too).
  std::vector<double> saga_mean;

  int64_t size() const { return cfg.end - cfg.begin; }
  double step_at(double t) const { return cfg.step0 / (1.0 + cfg.step_decay * t); }
  double value(std::size_t j) const { return scales[group.empty() ? 0 : group[j]] * w[j]; }
  bool unscaled() const {
    return std::all_of(scales.begin(), scales.end(), [](double s) { return s == 1.0; });
  }
  /// Groups the range's features by cfg.feature_steps (once cfg is set).
  void group_features();
  /// Folds the scales into the values (all 1 after).
  void fold_scales();
  int64_t min_clock() const {
    return clocks.empty() ? 0 : *std::min_element(clocks.begin(), clocks.end());
  }

  /// The range now, without a copy where it can.
  dvec snapshot() {
    if (unscaled()) {
      shard_values::snapshot s = w.share();
      return s.vec ? dvec(std::move(s.vec)) : dvec(std::move(s.owner), s.data, s.size);
    }
    std::vector<double> out(w.size());
    for (std::size_t j = 0; j < w.size(); ++j) out[j] = value(j);
    return dvec(std::move(out));
  }

  /// w <- prox(w - step F g) on this range, step = factor * step_at(t), F
  /// the range's feature step factors, g given by its nonzeros (idx null:
  /// dense, nnz == range size). With SAGA, g + saga_mean is stepped, then
  /// saga_mean += g * cfg.saga_scale * pushes (g a mean of `pushes` pushes).
  absl::Status sgd_step(const uint32_t* idx, const double* g, std::size_t nnz, double t,
                        double factor = 1.0, double pushes = 1.0);

  /// The refusal of worker's dense push x[0, n) naming its first
  /// non-finite key, or OK when every value is finite.
  absl::Status nonfinite_push(int32_t worker, const double* x, std::size_t n) const;
};

}  // namespace dml::actors::internal
