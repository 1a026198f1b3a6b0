// cocoa (CoCoA+, Ma, Smith, Jaggi, Jordan, Richtarik, Takac 2015): the
// coordinator drives rounds; in round r every worker certifies its block
// at the shared vector s_r, solves H local coordinate steps of its
// subproblem against s_r + sigma' delta, and pushes delta; a shard adds
// gamma * delta on arrival and, once every worker's delta of round r is
// in, sends its range of s_{r+1} to the coordinator. Dual models share
// w = A^T alpha / (lambda n) and partition rows; primal models share
// v = A w and partition columns. A lost node restarts the job from the
// last checkpointed round.
#include "dml/actors/topology/modes.hpp"

#include "dml/actors/internal/shard_core.hpp"

namespace dml::actors {
namespace {

class cocoa_rule final : public shard_rule {
 public:
  absl::Status apply(internal::shard_core& core, int32_t, int64_t, internal::held_push push,
                     std::vector<refused_push>*) override {
    std::vector<double>& v = core.w.mut();
    for (std::size_t k = 0; k < push.nnz; ++k) {
      v[push.idx ? push.idx[k] : k] += core.cfg.gamma * push.x[k];
    }
    ++core.applied;
    return absl::OkStatus();
  }
  bool announces_rounds() const override { return true; }
};

class cocoa_topology final : public topology {
 public:
  Mode mode() const override { return Mode::kCocoa; }
  bool coordinator_rounds() const override { return true; }
  int64_t shard_restore_clock(int64_t, int64_t round, int32_t) const override { return round; }
  bool shares_predictions(ModelKind kind) const override {
    return FormulationOf(kind) == Formulation::kPrimal;
  }
  bool solves_locally() const override { return true; }
  std::unique_ptr<shard_rule> make_shard_rule(const shard_config&) const override {
    return std::make_unique<cocoa_rule>();
  }
};

}  // namespace

std::shared_ptr<const topology> MakeCocoaTopology() { return std::make_shared<cocoa_topology>(); }

}  // namespace dml::actors
