// sync (BSP): every clock, each worker pulls the model, computes one
// minibatch loss gradient and pushes it; a shard gathers the K gradients of
// the clock, averages them in worker order and takes one proximal step
// with step_t = step0 / (1 + decay * t), t the clock; pulls for the next
// clock wait for it. A lost node restarts the job from its last
// evaluation.
#include "dml/actors/topology/modes.hpp"

#include "dml/actors/topology/internal/gather.hpp"

namespace dml::actors {
namespace {

class sync_rule final : public internal::gather_rule {
 public:
  using gather_rule::gather_rule;
  bool lazy_l2() const override { return true; }

 private:
  double* mean_buffer(internal::shard_core&, std::size_t n) override {
    scratch_.resize(n);
    return scratch_.data();
  }
  absl::Status fold(internal::shard_core& core, const double* mean, std::size_t n) override {
    // The mean of K pushes: SAGA's mean takes K pushes' rows.
    return core.sgd_step(nullptr, mean, n, static_cast<double>(core.round), 1.0,
                         static_cast<double>(core.cfg.workers));
  }
  std::vector<double> scratch_;  // the mean gradient
};

class sync_topology final : public topology {
 public:
  Mode mode() const override { return Mode::kSync; }
  void sgd_step(worker_ops& ops) const override { ops.gradient_exchange(); }
  std::unique_ptr<shard_rule> make_shard_rule(const shard_config& cfg) const override {
    return std::make_unique<sync_rule>(cfg.workers);
  }
};

}  // namespace

std::shared_ptr<const topology> MakeSyncTopology() { return std::make_shared<sync_topology>(); }

}  // namespace dml::actors
