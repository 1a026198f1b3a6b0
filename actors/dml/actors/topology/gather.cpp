#include "dml/actors/topology/internal/gather.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dml/util/finite.hpp"

namespace dml::actors::internal {

gather_rule::gather_rule(int32_t workers) : gathered_(workers), arrived_(workers, false) {}

absl::Status gather_rule::apply(shard_core& core, int32_t worker, int64_t clock, held_push held,
                                std::vector<refused_push>* others) {
  // Once halted, a barrier may have been released early: a push for a
  // round the shard will not complete is dropped, not an error.
  if (core.halted && (clock != core.round || arrived_[worker])) return absl::OkStatus();
  if (clock != core.round) {
    return ShardError(absl::StrCat("worker ", worker, " pushed clock ", clock,
                                   " but the shard is at clock ", core.round));
  }
  if (arrived_[worker]) {
    return ShardError(absl::StrCat("worker ", worker, " pushed clock ", clock, " twice"));
  }
  arrived_[worker] = true;
  gathered_[worker] = std::move(held);
  if (++arrivals_ < core.cfg.workers) return absl::OkStatus();
  // All K are in. The mean goes where the mode wants it (neither mode
  // allocates in steady state).
  const auto n = static_cast<std::size_t>(core.size());
  double* mean = mean_buffer(core, n);
  if (!gathered_mean(core, mean, n)) {
    absl::Status refused = refuse_nonfinite(core, worker, others);
    if (arrivals_ < core.cfg.workers) return refused;  // w untouched
  }
  for (auto& g : gathered_) g = held_push{};
  absl::Status folded = fold(core, mean, n);
  std::fill(arrived_.begin(), arrived_.end(), false);
  arrivals_ = 0;
  ++core.round;
  ++core.applied;
  return folded;
}

void gather_rule::restore(shard_core& core, int64_t clock) {
  shard_rule::restore(core, clock);
  std::fill(arrived_.begin(), arrived_.end(), false);
  gathered_.assign(core.cfg.workers, held_push{});
  arrivals_ = 0;
}

// out = the mean of the K gathered pushes. All dense: in blocks that stay
// in L1 (one pass over each push, one write of out). Returns false when a
// push not yet checked may hold a non-finite value: a sum with a NaN or an
// infinity in it is not finite, so a finite block of out clears every push
// for that block (the check costs a pass over an L1-resident block, not
// over the pushes).
bool gather_rule::gathered_mean(const shard_core& core, double* o, std::size_t n) const {
  const double inv_k = 1.0 / core.cfg.workers;
  bool dense = true, unchecked = false;
  for (const held_push& g : gathered_) {
    // An empty sparse push has a null idx too (an empty vector's data()).
    dense = dense && g.idx == nullptr && g.nnz == n;
    unchecked = unchecked || !g.checked;
  }
  bool clear = true;
  if (dense) {
    // Up to four pushes per pass (the same order of additions): the
    // pushes are read as concurrent streams, not one short run after
    // another, and out is written once per four instead of per push.
    constexpr std::size_t kBlock = 2048;
    const std::size_t kk = gathered_.size();
    for (std::size_t b = 0; b < n; b += kBlock) {
      const std::size_t e = std::min(n, b + kBlock);
      for (std::size_t k = 0; k < kk; k += 4) {
        const std::size_t m = std::min<std::size_t>(4, kk - k);
        const double* x0 = gathered_[k].x;
        const double* x1 = m > 1 ? gathered_[k + 1].x : nullptr;
        const double* x2 = m > 2 ? gathered_[k + 2].x : nullptr;
        const double* x3 = m > 3 ? gathered_[k + 3].x : nullptr;
        const bool first = k == 0, last = k + m == kk;
        const double s = last ? inv_k : 1.0;
        if (m == 4 && first) {
          for (std::size_t j = b; j < e; ++j) o[j] = (((x0[j] + x1[j]) + x2[j]) + x3[j]) * s;
        } else if (m == 4) {
          for (std::size_t j = b; j < e; ++j) {
            o[j] = ((((o[j] + x0[j]) + x1[j]) + x2[j]) + x3[j]) * s;
          }
        } else {
          for (std::size_t j = b; j < e; ++j) {
            double t = first ? x0[j] : o[j] + x0[j];
            if (m > 1) t += x1[j];
            if (m > 2) t += x2[j];
            o[j] = t * s;
          }
        }
      }
      if (unchecked && clear) clear = AllFinite(o + b, e - b);
    }
    return clear;
  }
  std::fill(o, o + n, 0.0);
  for (const auto& g : gathered_) {
    for (std::size_t k = 0; k < g.nnz; ++k) o[g.idx ? g.idx[k] : k] += g.x[k];
  }
  for (std::size_t j = 0; j < n; ++j) o[j] *= inv_k;
  return !unchecked || AllFinite(o, n);
}

// After gathered_mean found a non-finite sum: every gathered push not yet
// checked that holds a non-finite value is refused as it would have been
// on arrival (its arrival undone; the round waits for a good push from
// that worker). The error for `current` (the pusher being handled) is
// returned; the others go to `others` (the actor fails their waiting
// pulls). Nothing refused: the pushes were finite and their sum
// overflowed (kept, as before).
absl::Status gather_rule::refuse_nonfinite(shard_core& core, int32_t current,
                                           std::vector<refused_push>* others) {
  absl::Status mine;
  for (int32_t k = 0; k < core.cfg.workers; ++k) {
    held_push& g = gathered_[k];
    if (!arrived_[k] || g.checked) continue;
    absl::Status err = core.nonfinite_push(k, g.x, g.nnz);
    if (err.ok()) {
      g.checked = true;
      continue;
    }
    core.clocks[k] = g.prev_clock;
    --core.stats.updates;
    core.stats.bytes_in -= g.bytes;
    arrived_[k] = false;
    --arrivals_;
    g = held_push{};
    if (k == current) {
      mine = std::move(err);
    } else {
      others->push_back(refused_push{k, std::move(err)});
    }
  }
  return mine;
}

}  // namespace dml::actors::internal
