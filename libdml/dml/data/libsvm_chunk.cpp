// The LIBSVM reader's per-thread parser: one chunk of whole lines, parsed
// straight into the chunk's slots of the final CSR arrays (see libsvm.cpp
// for the layout and the merge). Indices go through a hand-written integer
// parser, labels and values through ParseReal (internal/libsvm_text.hpp).
// Nothing is allocated per token or per line; errors are rare, so their slow
// paths (token echo, duplicate search) may re-scan the line.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dml/data/internal/libsvm.hpp"
#include "dml/data/internal/libsvm_text.hpp"

namespace dml::internal::libsvm {
namespace {

class ChunkParser {
 public:
  ChunkParser(const LibsvmOptions& options, uint64_t index_limit, ChunkResult* out,
              const Output& dst)
      : regression_(options.task == Task::kRegression),
        track_labels_(options.task == Task::kClassification && !options.binarize_threshold),
        threshold_(options.binarize_threshold.value_or(0.0)),
        index_limit_(index_limit),
        num_features_(options.num_features),
        out_(out),
        row_end_(dst.row_end + out->row_at),
        y_(dst.y + out->row_at),
        ind_(dst.indices + out->nnz_at),
        val_(dst.values + out->nnz_at) {}

  void Parse() {
    const char* p = out_->begin;
    const char* const end = out_->end;
    int64_t line = 0;
    while (p < end) {
      const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
      const char* eol = nl ? nl : end;
      ++line;
      if (!ParseLine(p, eol, line)) break;
      p = nl ? nl + 1 : end;
    }
    out_->lines = line;
    out_->rows = rows_;
    out_->nnz = nnz_;
  }

 private:
  bool Fail(const char* line_begin, const char* at, int64_t line, std::string what) {
    out_->has_error = true;
    out_->error.line = line;
    out_->error.col = (at - line_begin) + 1;
    out_->error.what = std::move(what);
    return false;
  }

  // A syntax error at `at` in a line whose indices were out of order: an
  // earlier token may repeat an index, which is the first error then.
  bool FailLine(const char* lb, const char* le, const char* at, int64_t line, bool unsorted,
                std::string what) {
    if (unsorted) {
      uint32_t dup = 0;
      if (const char* d = FindDuplicate(lb, at, &dup)) {
        return Fail(lb, d, line, absl::StrCat("duplicate feature index ", uint64_t{dup} + 1));
      }
    }
    return Fail(lb, at, line, std::move(what));
  }

  // Returns the first `index:value` token in [lb, le) whose index already
  // appeared in the line, or null. Only called on lines whose tokens before
  // `le` are well formed.
  static const char* FindDuplicate(const char* lb, const char* le, uint32_t* dup) {
    std::vector<std::pair<uint32_t, const char*>> seen;
    const char* p = SkipSpace(lb, le);
    p = TokenEnd(p, le);  // label
    while (true) {
      p = SkipSpace(p, le);
      if (p == le || *p == '#') break;
      const char* tok = p;
      p = TokenEnd(p, le);
      if (!IsDigit(*tok)) continue;  // qid
      uint64_t idx = 0;
      for (const char* q = tok; q < p && IsDigit(*q); ++q) {
        idx = std::min<uint64_t>(idx * 10 + static_cast<uint64_t>(*q - '0'), uint64_t{1} << 40);
      }
      if (idx == 0 || idx > (uint64_t{1} << 32)) continue;
      seen.emplace_back(static_cast<uint32_t>(idx - 1), tok);
    }
    // The first token whose index occurred before it in the line.
    const char* best = nullptr;
    std::vector<std::pair<uint32_t, const char*>> sorted = seen;
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (std::size_t i = 1; i < sorted.size(); ++i) {
      if (sorted[i].first == sorted[i - 1].first && (best == nullptr || sorted[i].second < best)) {
        best = sorted[i].second;
        *dup = sorted[i].first;
      }
    }
    return best;
  }

  // A comment from `p` to `le`: skipped, unless it holds a NUL byte (binary
  // data; a stream or decompressed output stops at the same byte).
  bool SkipComment(const char* lb, const char* p, const char* le, int64_t line) {
    if (const void* nul = std::memchr(p, '\0', static_cast<std::size_t>(le - p))) {
      return Fail(lb, static_cast<const char*>(nul), line,
                  "a NUL byte in a comment: binary data, not LIBSVM text");
    }
    return true;
  }

  bool ParseLine(const char* lb, const char* le, int64_t line) {
    const char* p = SkipSpace(lb, le);
    if (p == le) return true;  // blank line
    if (*p == '#') return SkipComment(lb, p, le, line);

    // Label.
    double label = 0;
    const char* after = nullptr;
    FloatResult lr;
    if (regression_) {
      float f = 0;
      lr = ParseReal(p, le, &f, &after);
      label = f;
    } else {
      lr = ParseReal(p, le, &label, &after);
    }
    if (lr != FloatResult::kOk) {
      if (lr == FloatResult::kNonFinite) {
        return Fail(lb, p, line, absl::StrCat("non-finite label ", Quote(p, le)));
      }
      if (lr == FloatResult::kOutOfRange) {
        return Fail(lb, p, line, absl::StrCat("label ", Quote(p, le), " is out of range"));
      }
      return Fail(lb, p, line, absl::StrCat("expected a numeric label, got ", Quote(p, le)));
    }
    float y;
    if (track_labels_) {
      y = static_cast<float>(TrackLabel(label, line, (p - lb) + 1));
    } else if (regression_) {
      y = static_cast<float>(label);
    } else {
      y = label > threshold_ ? 1.0f : -1.0f;
    }
    p = after;

    // Features. Every stored pair used up one ':' of the chunk, so they fit.
    uint32_t* const ib = ind_;
    float* const vb = val_;
    const std::size_t row_begin = nnz_;
    std::size_t n = row_begin;
    int64_t prev = -1;
    bool unsorted = false;
    while (true) {
      p = SkipSpace(p, le);
      if (p == le) break;
      if (*p == '#') {
        if (!SkipComment(lb, p, le, line)) return false;
        break;
      }
      const char* tok = p;
      if (!IsDigit(*p)) {
        if (le - p >= 4 && std::memcmp(p, "qid:", 4) == 0) {
          p = TokenEnd(p, le);
          continue;
        }
        if (*p == '-' && p + 1 < le && IsDigit(p[1])) {
          return FailLine(lb, le, tok, line, unsorted,
                          absl::StrCat("feature index -", Digits(p + 1, le),
                                       " is negative (must be >= 1)"));
        }
        return FailLine(lb, le, tok, line, unsorted,
                        absl::StrCat("expected a feature index, got ", Quote(tok, le)));
      }
      uint64_t idx = 0;
      do {
        if (idx < (uint64_t{1} << 40)) idx = idx * 10 + static_cast<uint64_t>(*p - '0');
        ++p;
      } while (p < le && IsDigit(*p));
      if (p == le || *p != ':') {
        return FailLine(lb, le, tok, line, unsorted,
                        absl::StrCat("expected ':' after feature index, got ", Quote(tok, le)));
      }
      // One unsigned compare catches 0, 32-bit overflow and num_features.
      if (idx - 1 >= index_limit_) {
        return FailLine(lb, le, tok, line, unsorted, IndexError(idx, tok, le));
      }
      ++p;
      float v = 0;
      FloatResult vr = ParseReal(p, le, &v, &after);
      if (vr != FloatResult::kOk) {
        std::string what;
        if (vr == FloatResult::kNonFinite) {
          what = absl::StrCat("non-finite value ", Quote(p, le));
        } else if (vr == FloatResult::kOutOfRange) {
          what = absl::StrCat("value ", Quote(p, le), " is out of range for float");
        } else {
          what = absl::StrCat("expected a numeric value after ':', got ", Quote(p, le));
        }
        return FailLine(lb, le, p, line, unsorted, std::move(what));
      }
      p = after;
      const int64_t i0 = static_cast<int64_t>(idx - 1);
      if (i0 <= prev) {
        if (i0 == prev) {
          return FailLine(lb, le, tok, line, unsorted,
                          absl::StrCat("duplicate feature index ", idx));
        }
        unsorted = true;
      } else {
        prev = i0;  // prev tracks the running maximum
      }
      ib[n] = static_cast<uint32_t>(i0);
      vb[n] = v;
      ++n;
    }

    if (unsorted && !SortRow(ib + row_begin, vb + row_begin, n - row_begin)) {
      uint32_t dup = 0;
      const char* d = FindDuplicate(lb, le, &dup);
      if (d == nullptr) d = lb;  // cannot happen: SortRow found one
      return Fail(lb, d, line, absl::StrCat("duplicate feature index ", uint64_t{dup} + 1));
    }
    if (prev > out_->max_index) out_->max_index = prev;
    nnz_ = n;
    row_end_[rows_] = static_cast<int64_t>(n);
    y_[rows_] = y;
    ++rows_;
    return true;
  }

  std::string IndexError(uint64_t idx, const char* tok, const char* le) const {
    if (idx == 0) return "feature index must be >= 1, got 0";
    if (idx > (uint64_t{1} << 32)) {
      return absl::StrCat("feature index ", Digits(tok, le), " overflows 32-bit indices");
    }
    return absl::StrCat("feature index ", idx, " exceeds num_features = ", num_features_);
  }

  // Sorts one row by index; false if an index repeats.
  bool SortRow(uint32_t* idx, float* val, std::size_t n) {
    scratch_.resize(n);
    for (std::size_t k = 0; k < n; ++k) scratch_[k] = {idx[k], val[k]};
    std::sort(scratch_.begin(), scratch_.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (std::size_t k = 0; k < n; ++k) {
      if (k > 0 && scratch_[k].first == scratch_[k - 1].first) return false;
      idx[k] = scratch_[k].first;
      val[k] = scratch_[k].second;
    }
    return true;
  }

  // The label's position in the chunk's list of distinct labels. Past three
  // the file is in error anyway (a third class or an earlier syntax error).
  int TrackLabel(double label, int64_t line, int64_t col) {
    for (int k = 0; k < out_->num_distinct; ++k) {
      if (out_->distinct[k].value == label) return k;
    }
    if (out_->num_distinct == 3) return 2;
    out_->distinct[out_->num_distinct] = {label, line, col};
    return out_->num_distinct++;
  }

  const bool regression_;
  const bool track_labels_;
  const double threshold_;
  const uint64_t index_limit_;
  const int64_t num_features_;
  ChunkResult* const out_;
  int64_t* const row_end_;
  float* const y_;
  uint32_t* const ind_;
  float* const val_;
  std::size_t rows_ = 0;
  std::size_t nnz_ = 0;
  std::vector<std::pair<uint32_t, float>> scratch_;
};

}  // namespace

void ParseChunk(const LibsvmOptions& options, uint64_t index_limit, ChunkResult* out,
                const Output& dst) {
  ChunkParser parser(options, index_limit, out, dst);
  parser.Parse();
}

}  // namespace dml::internal::libsvm
