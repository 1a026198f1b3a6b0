// hogwild (Niu, Recht, Re, Wright 2011): the workers of one process take
// proximal SGD steps straight on one shared model of relaxed atomics,
// without locks, each sampling the whole dataset. No shards, no nodes, no
// checkpoint files.
#include "dml/actors/topology/modes.hpp"

#include "dml/actors/internal/shard_core.hpp"

namespace dml::actors {
namespace {

class no_shard_rule final : public shard_rule {
 public:
  absl::Status apply(internal::shard_core&, int32_t, int64_t, internal::held_push,
                     std::vector<refused_push>*) override {
    return internal::ShardError("push is not part of mode hogwild");
  }
};

class hogwild_topology final : public topology {
 public:
  Mode mode() const override { return Mode::kHogwild; }
  bool uses_shards() const override { return false; }
  bool samples_whole_data() const override { return true; }
  void sgd_step(worker_ops& ops) const override {
    if (auto s = ops.shared_model_step(); !s.ok()) return ops.fail(s);
    ops.step_done();
  }
  std::unique_ptr<shard_rule> make_shard_rule(const shard_config&) const override {
    return std::make_unique<no_shard_rule>();
  }
};

}  // namespace

std::shared_ptr<const topology> MakeHogwildTopology() {
  return std::make_shared<hogwild_topology>();
}

}  // namespace dml::actors
