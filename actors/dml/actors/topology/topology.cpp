// The defaults of the topology interface and the steps every shard rule
// shares (shard_core).
#include "dml/actors/topology/topology.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "dml/actors/internal/shard_core.hpp"
#include "dml/solver/sgd.hpp"
#include "dml/util/status.hpp"

namespace dml::actors {

int64_t shard_rule::push_reply(const internal::shard_core& core) const { return core.applied; }

void shard_rule::restore(internal::shard_core& core, int64_t clock) {
  core.round = clock;
  core.applied = clock;
}

absl::StatusOr<std::vector<double>> shard_rule::elastic(internal::shard_core&, int32_t,
                                                        absl::Span<const double>) {
  return internal::ShardError("elastic exchange outside easgd mode");
}

void topology::sgd_step(worker_ops& ops) const {
  ops.fail(absl::FailedPreconditionError(
      absl::StrCat("run is not part of mode ", AsAbsl(ModeName(mode())))));
}

namespace internal {

void shard_core::group_features() {
  group.clear();
  group_factor.assign(1, 1.0);
  if (!cfg.feature_steps.empty()) {
    FeatureStepGroups g = GroupFeatureSteps(cfg.feature_steps, cfg.feature_steps.size());
    group = std::move(g.of);
    group_factor = std::move(g.factor);
  }
  scales.assign(group_factor.size(), 1.0);
}

void shard_core::fold_scales() {
  if (unscaled()) return;
  std::vector<double>& v = w.mut();
  for (std::size_t j = 0; j < v.size(); ++j) v[j] = value(j);
  std::fill(scales.begin(), scales.end(), 1.0);
}

absl::Status shard_core::sgd_step(const uint32_t* idx, const double* g, std::size_t nnz,
                                  double t, double factor, double pushes) {
  const double step = factor * step_at(t);
  const bool saga = cfg.saga_scale > 0;
  if (saga && saga_mean.size() != w.size()) saga_mean.assign(w.size(), 0.0);
  // SAGA's mean goes in with the step and takes the push in after it (a
  // dense pass over the range per step: what ASAGA's shared mean costs).
  const auto take_push = [&] {
    if (!saga) return;
    const double s = cfg.saga_scale * pushes;
    for (std::size_t k = 0; k < nnz; ++k) saga_mean[idx ? idx[k] : k] += s * g[k];
  };
  if (lazy_l2) {
    std::vector<double>& v = w.mut();
    if (group.empty()) {
      const double s = step / scales[0];
      for (std::size_t k = 0; k < nnz; ++k) v[idx ? idx[k] : k] -= s * g[k];
      if (saga) {
        for (std::size_t j = 0; j < v.size(); ++j) v[j] -= s * saga_mean[j];
      }
    } else {
      for (std::size_t k = 0; k < nnz; ++k) {
        const std::size_t j = idx ? idx[k] : k;
        const uint16_t gj = group[j];
        v[j] -= step * group_factor[gj] / scales[gj] * g[k];
      }
      if (saga) {
        for (std::size_t j = 0; j < v.size(); ++j) {
          v[j] -= step * group_factor[group[j]] / scales[group[j]] * saga_mean[j];
        }
      }
    }
    take_push();
    bool small = false;
    for (std::size_t q = 0; q < scales.size(); ++q) {
      scales[q] /= 1.0 + step * group_factor[q] * cfg.model.lambda;
      small |= scales[q] < 1e-150;
    }
    if (small) fold_scales();  // before underflow
    return absl::OkStatus();
  }
  std::vector<double>& v = w.mut();
  const std::vector<double>& f = cfg.feature_steps;
  for (std::size_t k = 0; k < nnz; ++k) {
    const std::size_t j = idx ? idx[k] : k;
    v[j] -= (f.empty() ? step : step * f[j]) * g[k];
  }
  if (saga) {
    for (std::size_t j = 0; j < v.size(); ++j) v[j] -= (f.empty() ? step : step * f[j]) * saga_mean[j];
  }
  take_push();
  absl::Status st = ProximalRegularizerStep(cfg.model, step, v, f);
  if (!st.ok()) return ShardError(std::string(st.message()));
  return absl::OkStatus();
}

absl::Status shard_core::nonfinite_push(int32_t worker, const double* x, std::size_t n) const {
  for (std::size_t j = 0; j < n; ++j) {
    if (!std::isfinite(x[j])) {
      return ShardError(absl::StrCat("push from worker ", worker, ": value at key ",
                                     cfg.begin + static_cast<int64_t>(j), " is not finite"));
    }
  }
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace dml::actors
