// easgd (elastic averaging SGD, Zhang, Choromanska, LeCun 2015): workers
// take local proximal SGD steps and every tau steps exchange with the
// center on the shards: e = alpha (x - center), center += e, the worker
// subtracts e. Pushes are refused. A lost node without shards is survived
// (its workers restart from the center at the last multiple of tau).
#include "dml/actors/topology/modes.hpp"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "dml/actors/internal/shard_core.hpp"

namespace dml::actors {
namespace {

class easgd_rule final : public shard_rule {
 public:
  absl::Status apply(internal::shard_core&, int32_t, int64_t, internal::held_push,
                     std::vector<refused_push>*) override {
    return internal::ShardError("push is not part of mode easgd");
  }
  absl::StatusOr<std::vector<double>> elastic(internal::shard_core& core, int32_t worker,
                                              absl::Span<const double> x) override {
    if (static_cast<int64_t>(x.size()) != core.size()) {
      return internal::ShardError(absl::StrCat("elastic exchange of ", x.size(),
                                               " values with a range of ", core.size()));
    }
    // Checked before the center moves: a bad exchange leaves it as it was.
    for (std::size_t j = 0; j < x.size(); ++j) {
      if (!std::isfinite(x[j])) {
        return internal::ShardError(absl::StrCat("elastic exchange from worker ", worker,
                                                 ": value at key ",
                                                 core.cfg.begin + static_cast<int64_t>(j),
                                                 " is not finite"));
      }
    }
    std::vector<double> e(x.size());
    std::vector<double>& center = core.w.mut();
    for (std::size_t j = 0; j < e.size(); ++j) {
      e[j] = core.cfg.easgd_alpha * (x[j] - center[j]);
      center[j] += e[j];
    }
    ++core.stats.updates;
    ++core.applied;
    core.clocks[worker] += 1;
    const auto bytes = static_cast<int64_t>(x.size() * sizeof(double));
    core.stats.bytes_in += bytes;
    core.stats.bytes_out += bytes;
    return e;
  }
};

class easgd_topology final : public topology {
 public:
  Mode mode() const override { return Mode::kEasgd; }
  bool continues_after_worker_loss() const override { return true; }
  int64_t restart_clock(int64_t slowest, int32_t tau) const override {
    return slowest - slowest % tau;
  }
  bool keeps_local_model() const override { return true; }
  bool reduces_step_on_plateau() const override { return true; }
  void sgd_step(worker_ops& ops) const override {
    if (auto s = ops.local_step(); !s.ok()) return ops.fail(s);
    if ((ops.clock() + 1) % ops.tau() != 0) return ops.step_done();
    ops.elastic_exchange();
  }
  std::unique_ptr<shard_rule> make_shard_rule(const shard_config&) const override {
    return std::make_unique<easgd_rule>();
  }
};

}  // namespace

std::shared_ptr<const topology> MakeEasgdTopology() { return std::make_shared<easgd_topology>(); }

}  // namespace dml::actors
