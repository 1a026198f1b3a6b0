#pragma once
// Progress as text, for hosts and the CLI alike: the JSON lines of
// dml-train --metrics-out (one object per progress entry, per event and for
// the result; non-finite numbers are null) and the one-line terminal status
// (bar, gap against the target, elapsed and estimated time left).
//
// Thread-compatible; the functions are pure, ProgressEstimate keeps the
// first gap it saw.

#include <string>
#include <string_view>
#include <vector>

#include "dml/solver/solver.hpp"

namespace dml {

/// `v` as a JSON number (%.17g), or null when it is not finite.
std::string JsonNumber(double v);
/// `v` as a JSON string, quotes, backslashes and control characters escaped.
std::string JsonString(std::string_view v);

/// The JSON lines of one progress entry: a "progress" object, then an
/// "event" object per entry of p.events.
std::vector<std::string> ProgressJsonLines(const Progress& p);
/// The "result" object of a finished run.
std::string ResultJson(const TrainResult& r);

/// How far a run is, from whichever stopping rule is nearest: the gap's
/// log-linear decrease toward its target, the epoch budget or the time budget.
class ProgressEstimate {
 public:
  explicit ProgressEstimate(const StopRule& stop) : stop_(stop) {}
  /// "[#####...............]  25%  round 12  epochs 12.0  gap 3.10e-04
  /// (target 1.0e-06)  1.2s, ~3.6s left" for `p` (no newline).
  std::string StatusLine(const Progress& p);

 private:
  StopRule stop_;
  double first_gap_ = 0.0;
};

}  // namespace dml
