#include "dml/metrics/progress_text.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "dml/util/status.hpp"

namespace dml {

std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string JsonString(std::string_view v) {
  std::string out = "\"";
  for (unsigned char c : v) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::vector<std::string> ProgressJsonLines(const Progress& p) {
  std::string stale;
  for (int64_t v : p.staleness) absl::StrAppend(&stale, stale.empty() ? "" : ",", v);
  std::vector<std::string> out;
  out.push_back(absl::StrCat(
      "{\"type\":\"progress\",\"round\":", p.round, ",\"epochs\":", JsonNumber(p.epochs),
      ",\"seconds\":", JsonNumber(p.seconds), ",\"primal\":", JsonNumber(p.primal),
      ",\"dual\":", JsonNumber(p.dual), ",\"gap\":", JsonNumber(p.gap),
      ",\"bytes\":", p.bytes_exchanged, ",\"nnz_touched\":", p.nnz_touched,
      // DuHL only: what was copied to the device(s) so far.
      p.device_bytes > 0 ? absl::StrCat(",\"device_bytes\":", p.device_bytes,
                                        ",\"device_swaps\":", p.device_swaps)
                         : "",
      ",\"staleness\":[", stale, "]}"));
  for (const auto& e : p.events) {
    out.push_back(absl::StrCat("{\"type\":\"event\",\"round\":", p.round,
                               ",\"seconds\":", JsonNumber(p.seconds), ",\"kind\":", JsonString(e.kind),
                               ",\"what\":", JsonString(e.what), "}"));
  }
  return out;
}

std::string ResultJson(const TrainResult& r) {
  return absl::StrCat("{\"type\":\"result\",\"reason\":", JsonString(StopReasonName(r.reason)),
                      ",\"rounds\":", r.rounds, ",\"epochs\":", JsonNumber(r.epochs),
                      ",\"seconds\":", JsonNumber(r.seconds), ",\"primal\":", JsonNumber(r.primal),
                      ",\"dual\":", JsonNumber(r.dual), ",\"gap\":", JsonNumber(r.gap),
                      ",\"bytes\":", r.bytes_exchanged,
                      // DuHL only, as in the progress lines (and the done: line).
                      r.device_bytes > 0 ? absl::StrCat(",\"device_bytes\":", r.device_bytes) : "",
                      "}");
}

std::string ProgressEstimate::StatusLine(const Progress& p) {
  double f = p.epochs / std::max(1, stop_.max_epochs);
  if (std::isfinite(stop_.max_seconds)) f = std::max(f, p.seconds / stop_.max_seconds);
  std::string gap = "gap n/a";  // a certificate that bounds nothing (infinite gap)
  if (std::isfinite(p.gap) && p.gap > 0) {
    const double target = GapTarget(stop_, p.primal);
    if (first_gap_ <= 0) first_gap_ = p.gap;
    if (target > 0 && first_gap_ > target) {
      f = std::max(f, std::log(first_gap_ / p.gap) / std::log(first_gap_ / target));
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "gap %.2e (target %.1e)", p.gap, target);
    gap = buf;
  }
  f = std::clamp(f, 0.0, 1.0);
  const int filled = static_cast<int>(f * 20);
  std::string left = "?";
  if (f > 0.01) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "~%.1fs", p.seconds * (1 - f) / f);
    left = buf;
  }
  char head[64];
  std::snprintf(head, sizeof head, "] %3.0f%%  round %d  epochs %.1f  ", 100 * f, p.round, p.epochs);
  char tail[64];
  std::snprintf(tail, sizeof tail, "  %.1fs, %s left", p.seconds, left.c_str());
  return absl::StrCat("[", std::string(filled, '#'), std::string(20 - filled, '.'), head, gap, tail);
}

}  // namespace dml
