// model averaging (local SGD): workers take local proximal SGD steps and
// every tau steps push their model and continue from the shards' mean of
// the K models (one pushpull per shard: an allreduce through the shards).
// The mean goes into a block of the bulk channel's shared arena, which
// pullers on this machine read in place. A lost node restarts the job from
// its last evaluation, at a multiple of tau.
#include "dml/actors/topology/modes.hpp"

#include "dml/actors/topology/internal/gather.hpp"

namespace dml::actors {
namespace {

class averaging_rule final : public internal::gather_rule {
 public:
  using gather_rule::gather_rule;

 private:
  double* mean_buffer(internal::shard_core& core, std::size_t n) override {
    return core.w.next_block(n, core.bulk);
  }
  absl::Status fold(internal::shard_core& core, const double*, std::size_t) override {
    core.w.commit();
    return absl::OkStatus();
  }
};

class averaging_topology final : public topology {
 public:
  Mode mode() const override { return Mode::kModelAveraging; }
  int64_t restart_clock(int64_t slowest, int32_t tau) const override {
    return slowest - slowest % tau;
  }
  // Model-averaging shards count exchanges (one per tau steps).
  int64_t shard_restore_clock(int64_t clock, int64_t, int32_t tau) const override {
    return clock / tau;
  }
  bool keeps_local_model() const override { return true; }
  bool reduces_step_on_plateau() const override { return true; }
  void sgd_step(worker_ops& ops) const override {
    if (auto s = ops.local_step(); !s.ok()) return ops.fail(s);
    if ((ops.clock() + 1) % ops.tau() != 0) return ops.step_done();
    ops.average_exchange();
  }
  std::unique_ptr<shard_rule> make_shard_rule(const shard_config& cfg) const override {
    return std::make_unique<averaging_rule>(cfg.workers);
  }
};

}  // namespace

std::shared_ptr<const topology> MakeModelAveragingTopology() {
  return std::make_shared<averaging_topology>();
}

}  // namespace dml::actors
