// async (Downpour) and ssp: workers pull, compute one minibatch loss
// gradient and push on their own clocks; a shard takes one proximal step
// per gradient on arrival, with step_t = step0 / (1 + decay * t), t the
// gradients applied / K. ssp bounds the staleness: a pull at clock c waits
// until every worker has pushed c - s clocks (s = 0 behaves like BSP). A
// lost node without shards is survived: its workers are replaced and run
// on from their last reported clock while the others keep going.
#include "dml/actors/topology/modes.hpp"

#include <algorithm>
#include <cmath>

#include "dml/actors/internal/shard_core.hpp"

namespace dml::actors {
namespace {

class async_rule : public shard_rule {
 public:
  absl::Status apply(internal::shard_core& core, int32_t worker, int64_t, internal::held_push push,
                     std::vector<refused_push>*) override {
    // Staleness-aware (after Zhang, Gupta, Lian, Liu, IJCAI 2016, who take
    // step / tau): the gradient was taken tau updates ago; the step, chosen
    // for fresh gradients, shrinks by 1 / sqrt(1 + tau). Measured on a9a,
    // K = 4 (tau ~ 3): the calibrated step 1 ended 30 epochs at 9e-3 (async)
    // and 1.6e-2 (ssp) above the optimum, half of it at 1.2e-3.
    const std::size_t k = static_cast<std::size_t>(worker);
    const double tau = k < core.pulled_at.size()
                           ? static_cast<double>(std::max<int64_t>(0, core.applied - core.pulled_at[k]))
                           : 0.0;
    absl::Status st = core.sgd_step(push.idx, push.x, push.nnz,
                                    static_cast<double>(core.applied) / core.cfg.workers,
                                    1.0 / std::sqrt(1.0 + tau));
    ++core.applied;
    return st;
  }
  void restore(internal::shard_core& core, int64_t clock) override {
    core.round = clock;
    core.applied = clock * core.cfg.workers;
  }
  bool lazy_l2() const override { return true; }
};

class ssp_rule final : public async_rule {
 public:
  bool pull_ready(const internal::shard_core& core, int64_t clock) const override {
    return core.min_clock() >= clock - core.cfg.staleness;
  }
  void granted(internal::shard_core& core, int64_t clock) override {
    // Pulls released by the halt are not grants of the bound: the job is
    // over, and a worker left blocked behind a lost peer may be s+1 ahead.
    if (core.halted) return;
    core.stats.max_granted_staleness =
        std::max(core.stats.max_granted_staleness, clock - core.min_clock());
  }
};

template <Mode M, class Rule>
class async_topology final : public topology {
 public:
  Mode mode() const override { return M; }
  bool continues_after_worker_loss() const override { return true; }
  bool reduces_step_on_plateau() const override { return true; }
  void sgd_step(worker_ops& ops) const override { ops.gradient_exchange(); }
  std::unique_ptr<shard_rule> make_shard_rule(const shard_config&) const override {
    return std::make_unique<Rule>();
  }
};

}  // namespace

std::shared_ptr<const topology> MakeAsyncTopology() {
  return std::make_shared<async_topology<Mode::kAsync, async_rule>>();
}
std::shared_ptr<const topology> MakeSspTopology() {
  return std::make_shared<async_topology<Mode::kSsp, ssp_rule>>();
}

}  // namespace dml::actors
