// duhl (Duenner, Parnell, Jaggi, NeurIPS 2017): one device worker and,
// beside it, CPU workers, under CoCoA+'s rounds. Worker 0 is the device
// side: DuHL over its partition (dml/solver/duhl.hpp), its gap memory a
// gap_memory actor of its own process refreshed by cocoa.duhl.gap_threads
// threads while the device (cocoa.duhl.gpu: the gpu_solver of its GPU;
// else the CPU twin) solves the blocks that fit cocoa.duhl's budget. The
// other workers, if any, run the job's CPU (or TPA-SCD) local solver on
// theirs. Rounds, shared vector, shards and recovery are cocoa's: deltas
// are added with gamma, a lost node restarts from the last checkpoint.
// Bytes moved to the device and coordinates swapped in go into every
// round's progress (Progress::device_bytes, ::device_swaps).
#include "dml/actors/topology/modes.hpp"

namespace dml::actors {
namespace {

class duhl_topology final : public topology {
 public:
  explicit duhl_topology(std::shared_ptr<const topology> cocoa) : cocoa_(std::move(cocoa)) {}
  Mode mode() const override { return Mode::kDuhl; }
  bool coordinator_rounds() const override { return true; }
  int64_t shard_restore_clock(int64_t clock, int64_t round, int32_t tau) const override {
    return cocoa_->shard_restore_clock(clock, round, tau);
  }
  bool shares_predictions(ModelKind kind) const override {
    return cocoa_->shares_predictions(kind);
  }
  bool solves_locally() const override { return true; }
  int32_t local_solver(int32_t index, int32_t configured) const override {
    if (index == 0) return kDuhlLocal;
    return configured == kDuhlLocal ? kScdLocal : configured;
  }
  std::unique_ptr<shard_rule> make_shard_rule(const shard_config& cfg) const override {
    return cocoa_->make_shard_rule(cfg);
  }

 private:
  std::shared_ptr<const topology> cocoa_;
};

}  // namespace

std::shared_ptr<const topology> MakeDuhlTopology() {
  return std::make_shared<duhl_topology>(MakeCocoaTopology());
}

}  // namespace dml::actors
