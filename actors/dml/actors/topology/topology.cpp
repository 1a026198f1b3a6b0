// The defaults of the topology interface and the steps every shard rule
// shares (shard_core).
#include "dml/actors/topology/topology.hpp"

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

absl::Status shard_core::sgd_step(const uint32_t* idx, const double* g, std::size_t nnz,
                                  double t, double factor) {
  const double step = factor * step_at(t);
  if (lazy_l2) {
    const double s = step / scale;
    std::vector<double>& v = w.mut();
    for (std::size_t k = 0; k < nnz; ++k) v[idx ? idx[k] : k] -= s * g[k];
    scale /= 1.0 + step * cfg.model.lambda;
    if (scale < 1e-150) {  // fold before underflow
      for (double& x : v) x *= scale;
      scale = 1.0;
    }
    return absl::OkStatus();
  }
  std::vector<double>& v = w.mut();
  for (std::size_t k = 0; k < nnz; ++k) v[idx ? idx[k] : k] -= step * g[k];
  absl::Status st = ProximalRegularizerStep(cfg.model, step, v);
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
