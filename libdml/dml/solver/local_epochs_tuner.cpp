#include "dml/solver/local_epochs_tuner.hpp"

#include <algorithm>
#include <cmath>

namespace dml {
namespace {

// A window closes after this many rounds and this much wall time: enough
// to average out one slow round, short enough to adapt within a job.
constexpr int kWindowRounds = 3;
constexpr double kWindowSeconds = 0.02;
// ... and at least this fraction of the time observed so far, so windows
// grow with the job: later rates are averaged over more rounds (the gap's
// rounds are noisy) and probing stays a small share of the time.
constexpr double kWindowShare = 0.02;
// A trial H must beat the base by this much to replace it (rates are noisy).
constexpr double kMargin = 1.03;
constexpr int kReprobeWindows = 8;

}  // namespace

LocalEpochsTuner::LocalEpochsTuner(double start, double lo, double hi)
    : lo_(lo), hi_(hi), base_(std::clamp(start, lo, hi)), trial_(base_) {}

bool LocalEpochsTuner::Observe(double h, double seconds, double gap_before, double gap_after) {
  if (h != trial_) return false;  // a round sent before the last change
  if (!(gap_before > 0) || !(gap_after > 0) || !std::isfinite(gap_before) ||
      !std::isfinite(gap_after) || !(seconds > 0)) {
    return false;
  }
  drop_ += std::log(gap_before / gap_after);
  seconds_ += seconds;
  total_seconds_ += seconds;
  if (++rounds_ < kWindowRounds ||
      seconds_ < std::max(kWindowSeconds, kWindowShare * total_seconds_)) {
    return false;
  }
  const double rate = drop_ / seconds_;
  drop_ = seconds_ = 0.0;
  rounds_ = 0;
  ++windows_;
  const double before = trial_;
  Decide(rate);
  return trial_ != before;
}

void LocalEpochsTuner::Decide(double rate) {
  switch (phase_) {
    case Phase::kBase:
      base_rate_ = rate;
      if (base_ * 2 <= hi_) {
        trial_ = base_ * 2;
        phase_ = Phase::kUp;
      } else {
        trial_ = base_ / 2;
        phase_ = Phase::kDown;
      }
      return;
    case Phase::kUp:
      if (rate > base_rate_ * kMargin) {  // bigger was better: keep going up
        base_ = trial_;
        base_rate_ = rate;
        if (base_ * 2 <= hi_) {
          trial_ = base_ * 2;
          return;
        }
        phase_ = Phase::kSettled;
        settled_windows_ = 0;
        return;
      }
      if (base_ / 2 >= lo_) {
        trial_ = base_ / 2;
        phase_ = Phase::kDown;
        return;
      }
      trial_ = base_;
      phase_ = Phase::kSettled;
      settled_windows_ = 0;
      return;
    case Phase::kDown:
      if (rate > base_rate_ * kMargin) {
        base_ = trial_;
        base_rate_ = rate;
        if (base_ / 2 >= lo_) {
          trial_ = base_ / 2;
          return;
        }
      }
      trial_ = base_;
      phase_ = Phase::kSettled;
      settled_windows_ = 0;
      return;
    case Phase::kSettled:
      // The base's rate now (it changes as the gap shrinks), then probe
      // again, up and down in turn: the best H moves both ways.
      base_rate_ = rate;
      if (++settled_windows_ < kReprobeWindows) return;
      probe_up_ = !probe_up_;
      if ((probe_up_ || base_ / 2 < lo_) && base_ * 2 <= hi_) {
        trial_ = base_ * 2;
        phase_ = Phase::kUp;
      } else if (base_ / 2 >= lo_) {
        trial_ = base_ / 2;
        phase_ = Phase::kDown;
      }
      settled_windows_ = 0;
      return;
  }
}

}  // namespace dml
