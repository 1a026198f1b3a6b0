#pragma once
// The stop rule shared by every solver, so they all stop, time and report the
// same way. Not thread-safe: owned by the thread that runs the epochs.

#include <chrono>
#include <cmath>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "dml/solver/solver.hpp"

namespace dml::internal {

class StopChecker {
 public:
  StopChecker(const StopRule& rule, std::function<void(const Progress&)> on_epoch)
      : rule_(rule), on_epoch_(std::move(on_epoch)), start_(Clock::now()) {}

  double Elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  /// Before starting epoch `epoch` (1-based): the budget rules.
  std::optional<StopReason> BeforeEpoch(int epoch) const {
    if (Cancelled()) return StopReason::kCancelled;
    if (epoch > rule_.max_epochs) return StopReason::kMaxEpochs;
    if (Elapsed() >= rule_.max_seconds) return StopReason::kTimeBudget;
    return std::nullopt;
  }
  bool Cancelled() const {
    return rule_.cancel != nullptr && rule_.cancel->load(std::memory_order_relaxed);
  }

  /// Whether (primal, gap) satisfies the gap or target rule: solvers use it
  /// on running estimates to decide when an exact check is worth a pass.
  std::optional<StopReason> Satisfied(double primal, double gap) const {
    if (rule_.target_primal && primal <= *rule_.target_primal) return StopReason::kTargetReached;
    if (gap <= GapTarget(rule_, primal)) {
      return StopReason::kConverged;
    }
    return std::nullopt;
  }

  /// After an exact certificate for an epoch: records it, reports it, and
  /// says whether to stop.
  std::optional<StopReason> AfterEpoch(Progress report) {
    report.seconds = Elapsed();
    history_.push_back(report);
    if (on_epoch_) on_epoch_(report);
    return Satisfied(report.primal, report.gap);
  }

  const std::vector<Progress>& history() const { return history_; }
  std::vector<Progress> TakeHistory() { return std::move(history_); }

 private:
  using Clock = std::chrono::steady_clock;
  StopRule rule_;
  std::function<void(const Progress&)> on_epoch_;
  Clock::time_point start_;
  std::vector<Progress> history_;
};

}  // namespace dml::internal
