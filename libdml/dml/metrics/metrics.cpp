// Prediction and evaluation metrics. AUC is the Mann-Whitney statistic:
//   AUC = (sum of the positives' ranks - P(P+1)/2) / (P N)
// with ranks 1..n in ascending score order and every run of tied scores given
// the average of its ranks, which counts a tied (positive, negative) pair as
// one half (Hanley & McNeil, Radiology 1982; Fawcett, Pattern Recognition
// Letters 2006, Sec. 7).

#include "dml/metrics/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dml/objective/losses.hpp"

namespace dml {
namespace {

absl::Status CheckSizes(std::size_t labels, std::size_t values, const char* what) {
  if (labels != values) {
    return absl::InvalidArgumentError(
        absl::StrCat(labels, " labels but ", values, " ", what));
  }
  if (labels == 0) return absl::InvalidArgumentError("no examples to evaluate");
  return absl::OkStatus();
}

absl::Status CheckSignLabels(absl::Span<const float> y) {
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (y[i] != 1.0f && y[i] != -1.0f) {
      return absl::InvalidArgumentError(
          absl::StrCat("label of example ", i, " is ", y[i], "; expected -1 or +1"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckFinite(absl::Span<const float> y, const char* what) {
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (!std::isfinite(y[i])) {
      return absl::InvalidArgumentError(absl::StrCat(what, " of example ", i, " is not finite"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckFinite(absl::Span<const double> v, const char* what) {
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i])) {
      return absl::InvalidArgumentError(absl::StrCat(what, " of example ", i, " is not finite"));
    }
  }
  return absl::OkStatus();
}

// Labels and predictions for a regression metric: equal non-zero sizes, all finite.
absl::Status CheckRegression(absl::Span<const float> y, absl::Span<const double> pred) {
  if (auto s = CheckSizes(y.size(), pred.size(), "predictions"); !s.ok()) return s;
  if (auto s = CheckFinite(y, "label"); !s.ok()) return s;
  return CheckFinite(pred, "prediction");
}

absl::Status CheckClassification(absl::Span<const float> y, absl::Span<const double> scores,
                                 const char* what) {
  if (auto s = CheckSizes(y.size(), scores.size(), what); !s.ok()) return s;
  if (auto s = CheckSignLabels(y); !s.ok()) return s;
  return CheckFinite(scores, "score");
}

}  // namespace

std::vector<double> Predict(const CsrMatrix& x, const std::vector<double>& w) {
  std::vector<double> z(static_cast<std::size_t>(x.rows()), 0.0);
  const std::size_t d = w.size();
  for (int64_t i = 0; i < x.rows(); ++i) {
    const SparseView r = x.outer(i);
    double s = 0.0;
    // Inner indices are sorted, so the first one at or past d ends the row.
    for (std::size_t k = 0; k < r.size && r.index[k] < d; ++k) s += r.value[k] * w[r.index[k]];
    z[i] = s;
  }
  return z;
}

absl::StatusOr<double> Accuracy(absl::Span<const float> y, absl::Span<const double> margins) {
  if (auto s = CheckClassification(y, margins, "margins"); !s.ok()) return s;
  int64_t correct = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const float predicted = margins[i] > 0.0 ? 1.0f : -1.0f;
    correct += predicted == y[i];
  }
  return static_cast<double>(correct) / static_cast<double>(y.size());
}

absl::StatusOr<double> Auc(absl::Span<const float> y, absl::Span<const double> scores) {
  if (auto s = CheckClassification(y, scores, "scores"); !s.ok()) return s;
  const std::size_t n = y.size();
  // The Mann-Whitney count: the positives' and the negatives' scores each
  // sorted as order-preserving keys by an LSD radix sort (std::sort
  // through an index was a twentieth of a9a's whole dml-train run), then
  // merged, a tie counting a half. 16 bytes an example. Scores are finite
  // (checked); -0 is folded into +0 so that equal scores have equal keys.
  std::vector<std::uint64_t> pos, neg;
  for (std::size_t i = 0; i < n; ++i) {
    const double score = scores[i] == 0.0 ? 0.0 : scores[i];
    std::uint64_t bits;
    std::memcpy(&bits, &score, sizeof bits);
    // Negative: all bits flipped; positive: the sign bit set.
    bits = (bits >> 63) != 0 ? ~bits : bits | (std::uint64_t{1} << 63);
    (y[i] > 0 ? pos : neg).push_back(bits);
  }
  std::vector<std::uint64_t> buffer(std::max(pos.size(), neg.size()));
  for (std::vector<std::uint64_t>* keys : {&pos, &neg}) {
    std::vector<std::uint64_t>& k = *keys;
    const std::size_t m = k.size();
    if (m == 0) continue;
    for (int shift = 0; shift < 64; shift += 8) {
      std::size_t count[257] = {};
      for (std::size_t i = 0; i < m; ++i) ++count[((k[i] >> shift) & 0xff) + 1];
      if (count[((k[0] >> shift) & 0xff) + 1] == m) continue;  // one byte value: in order
      for (int b = 0; b < 256; ++b) count[b + 1] += count[b];
      for (std::size_t i = 0; i < m; ++i) buffer[count[(k[i] >> shift) & 0xff]++] = k[i];
      std::copy(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(m), k.begin());
    }
  }
  const double positives = static_cast<double>(pos.size());
  // Over the positives: the negatives below, and half those equal.
  double wins = 0.0;
  std::size_t below = 0;
  for (std::size_t p = 0; p < pos.size();) {
    std::size_t p_end = p + 1;
    while (p_end < pos.size() && pos[p_end] == pos[p]) ++p_end;
    while (below < neg.size() && neg[below] < pos[p]) ++below;
    std::size_t equal_end = below;
    while (equal_end < neg.size() && neg[equal_end] == pos[p]) ++equal_end;
    wins += static_cast<double>(p_end - p) *
            (static_cast<double>(below) + 0.5 * static_cast<double>(equal_end - below));
    p = p_end;
  }
  const double negatives = static_cast<double>(n) - positives;
  if (positives == 0.0 || negatives == 0.0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AUC needs both classes; the ", n, " labels are all ", positives > 0 ? "+1" : "-1"));
  }
  return wins / (positives * negatives);
}

absl::StatusOr<double> LogLoss(absl::Span<const float> y, absl::Span<const double> margins) {
  if (auto s = CheckClassification(y, margins, "margins"); !s.ok()) return s;
  double sum = 0.0;
  for (std::size_t i = 0; i < y.size(); ++i) sum += loss::Logistic::Value(y[i], margins[i]);
  return sum / static_cast<double>(y.size());
}

absl::StatusOr<double> Rmse(absl::Span<const float> y, absl::Span<const double> pred) {
  if (auto s = CheckRegression(y, pred); !s.ok()) return s;
  double sum = 0.0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double r = static_cast<double>(y[i]) - pred[i];
    sum += r * r;
  }
  return std::sqrt(sum / static_cast<double>(y.size()));
}

absl::StatusOr<double> R2(absl::Span<const float> y, absl::Span<const double> pred) {
  if (auto s = CheckRegression(y, pred); !s.ok()) return s;
  double mean = 0.0;
  for (float v : y) mean += v;
  mean /= static_cast<double>(y.size());
  double ss_tot = 0.0;
  double ss_res = 0.0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double c = static_cast<double>(y[i]) - mean;
    const double r = static_cast<double>(y[i]) - pred[i];
    ss_tot += c * c;
    ss_res += r * r;
  }
  if (ss_tot == 0.0) {
    return absl::InvalidArgumentError(
        absl::StrCat("R^2 is undefined: all ", y.size(), " labels equal ", mean));
  }
  return 1.0 - ss_res / ss_tot;
}

}  // namespace dml
