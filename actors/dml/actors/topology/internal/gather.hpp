#pragma once
// The shard rule of the gathering modes (sync, model averaging): a round
// waits for every worker's push of the current clock, then folds their
// mean, summed in worker order (((x_0 + x_1) + x_2) + ...) / K for every
// key (deterministic); pulls for the next clock wait for it (the BSP
// barrier). What the mean becomes is the mode's: a proximal step (sync) or
// the new values (model averaging).

#include <cstdint>
#include <vector>

#include "dml/actors/internal/shard_core.hpp"
#include "dml/actors/topology/topology.hpp"

namespace dml::actors::internal {

/// The gathering shard_rule; a mode supplies mean_buffer and fold. One
/// shard's state, used on that shard's thread only.
class gather_rule : public shard_rule {
 public:
  /// For rounds of `workers` (K) pushes each.
  explicit gather_rule(int32_t workers);
  /// shard_rule's: a push must be for the current round and once per worker
  /// (else InvalidArgument; ignored once halted); the K-th folds the mean.
  /// Pulls wait for the round; a push replies the rounds completed.
  absl::Status apply(shard_core& core, int32_t worker, int64_t clock, held_push push,
                     std::vector<refused_push>* others) final;
  bool pull_ready(const shard_core& core, int64_t clock) const final { return clock <= core.round; }
  int64_t push_reply(const shard_core& core) const final { return core.round; }
  bool checks_while_folding() const final { return true; }
  void restore(shard_core& core, int64_t clock) final;

 protected:
  /// Where the round's mean of n values is written.
  virtual double* mean_buffer(shard_core& core, std::size_t n) = 0;
  /// Folds the mean (at mean_buffer) into the range.
  virtual absl::Status fold(shard_core& core, const double* mean, std::size_t n) = 0;

 private:
  bool gathered_mean(const shard_core& core, double* o, std::size_t n) const;
  absl::Status refuse_nonfinite(shard_core& core, int32_t current,
                                std::vector<refused_push>* others);

  std::vector<held_push> gathered_;
  std::vector<bool> arrived_;
  int32_t arrivals_ = 0;
};

}  // namespace dml::actors::internal
