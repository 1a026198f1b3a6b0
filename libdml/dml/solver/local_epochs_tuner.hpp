#pragma once
// CoCoA+'s H chosen while the job runs (--local-epochs auto). The best H
// depends on the system: local work per round against the round's
// communication (the seed talk's Spark/MPI comparison: up to 6x from H
// alone). The tuner measures what matters, the duality gap's decrease per
// second, log(gap_before / gap_after) summed over a window of rounds divided
// by their wall time, and hill-climbs H by factors of 2: from the current H
// it tries 2H, then H/2, keeps whichever is faster by 3%, goes on in that
// direction, and, once settled, probes again every 8 windows, up and down
// in turn (the best H moves as the gap shrinks and the network's load
// changes). Windows are at least 3 rounds and 2% of the time so far.
//
// Plain value; thread-compatible. Never fails: rounds with non-finite or
// non-positive gaps are ignored.

#include <cstdint>

namespace dml {

class LocalEpochsTuner {
 public:
  /// `start`: the first H (local epochs per round); H stays in [lo, hi].
  explicit LocalEpochsTuner(double start = 1.0, double lo = 1.0 / 64, double hi = 64.0);

  /// H for the next round to be sent.
  double h() const { return trial_; }

  /// One finished round: the H it ran with, its wall seconds (certificate
  /// to certificate) and the gaps certified before and after it. Returns
  /// true when h() changed.
  bool Observe(double h, double seconds, double gap_before, double gap_after);

  /// Windows measured so far (for tests and the metrics stream).
  int64_t windows() const { return windows_; }

 private:
  enum class Phase { kBase, kUp, kDown, kSettled };
  void Decide(double rate);

  double lo_, hi_;
  double base_ = 1.0;       // the best H so far
  double base_rate_ = 0.0;  // its rate
  double trial_ = 1.0;      // the H being measured
  Phase phase_ = Phase::kBase;
  int settled_windows_ = 0;
  bool probe_up_ = false;  // the direction of the last re-probe
  double total_seconds_ = 0.0;
  // The current window.
  double drop_ = 0.0, seconds_ = 0.0;
  int rounds_ = 0;
  int64_t windows_ = 0;
};

}  // namespace dml
