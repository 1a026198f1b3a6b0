// LIBSVM / SVMlight reader and writer.
//
// Reading: the whole (decompressed) file is in memory and is split into one
// chunk per thread at line boundaries. Pass 1 counts each chunk's lines and
// ':' bytes, upper bounds on its rows and pairs, which lay the chunks out in
// the final CSR arrays. Pass 2 has every thread parse its chunk straight into
// its slot: a hand-written integer parser for indices, Clinger's exact fast
// path for plain decimals and std::from_chars (fast_float in libstdc++ 12)
// for the rest. The merge closes the gaps between slots (none unless there
// are blank, comment or qid lines) and rebases the row offsets. Nothing is
// allocated per token or per line; the big arrays ask for huge pages, since
// first touches of fresh 4 KiB pages cost more than the parse itself on a VM.
//
// Each chunk counts its lines, so an error found by thread k gets its global
// line number from the line counts of chunks 0..k-1 (which finished, since
// they had no earlier error). Errors are rare, so their slow paths (token
// echo, duplicate search, out-of-range floats) may re-scan the line.
//
// Error columns are 1-based byte offsets in the line: the label token for
// label errors, the `index:value` token for index errors (negative, zero,
// overflow, missing ':', duplicate, wider than num_features), and the first
// byte after ':' for value errors.

#include "dml/data/libsvm.hpp"

#include <algorithm>
#include <cerrno>
#include <cfloat>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <sys/mman.h>
#include <sys/stat.h>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

#if defined(DML_HAVE_ZLIB)
#include <zlib.h>
#endif
#if defined(DML_HAVE_BZIP2)
#include <bzlib.h>
#endif
#if defined(DML_HAVE_LZMA)
#include <lzma.h>
#endif

namespace dml {
namespace {

// ---------------------------------------------------------------------------
// Character classes.

enum : uint8_t { kOther = 0, kSpace = 1, kHash = 2, kDigit = 4 };

struct CharTable {
  uint8_t c[256];
  constexpr CharTable() : c() {
    c[static_cast<uint8_t>(' ')] = kSpace;
    c[static_cast<uint8_t>('\t')] = kSpace;
    c[static_cast<uint8_t>('\r')] = kSpace;
    c[static_cast<uint8_t>('\v')] = kSpace;
    c[static_cast<uint8_t>('\f')] = kSpace;
    c[static_cast<uint8_t>('#')] = kHash;
    for (int d = '0'; d <= '9'; ++d) c[d] = kDigit;
  }
};
constexpr CharTable kChars;

inline uint8_t Class(char ch) { return kChars.c[static_cast<uint8_t>(ch)]; }
inline bool IsDigit(char ch) { return Class(ch) == kDigit; }
// A token ends at whitespace, at a comment or at the end of the line.
inline bool EndsToken(const char* p, const char* e) {
  return p == e || (Class(*p) & (kSpace | kHash)) != 0;
}
inline const char* SkipSpace(const char* p, const char* e) {
  while (p < e && Class(*p) == kSpace) ++p;
  return p;
}
inline const char* TokenEnd(const char* p, const char* e) {
  while (!EndsToken(p, e)) ++p;
  return p;
}

// The token at p quoted for an error message: escaped, and cut if long.
std::string Quote(const char* p, const char* e) {
  constexpr std::ptrdiff_t kMax = 40;
  const char* end = TokenEnd(p, e);
  const bool cut = end - p > kMax;
  absl::string_view tok(p, static_cast<std::size_t>(cut ? kMax : end - p));
  return absl::StrCat("\"", absl::CHexEscape(tok), cut ? "...\"" : "\"");
}

// The digits of an index token, cut if long (the token is known to start with
// `digits` decimal digits).
std::string Digits(const char* p, const char* e) {
  const char* q = p;
  while (q < e && IsDigit(*q)) ++q;
  constexpr std::ptrdiff_t kMax = 40;
  if (q - p > kMax) return absl::StrCat(absl::string_view(p, kMax), "...");
  return std::string(p, static_cast<std::size_t>(q - p));
}

// ---------------------------------------------------------------------------
// Memory. The parser writes straight into the final arrays; first touches of
// fresh pages are what a large load pays most for (about 10 us per 4 KiB
// page on a virtual machine), so big arrays ask for transparent huge pages.

void AdviseHugePages(const void* p, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (bytes < 4 * kHuge) return;
  const uintptr_t b = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t e = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
  if (e > b) madvise(reinterpret_cast<void*>(b), e - b, MADV_HUGEPAGE);  // a hint only
#else
  (void)p;
  (void)bytes;
#endif
}

// Sizes a fresh vector to n elements, backed by huge pages where possible.
template <typename V>
void ResizeFresh(V* v, std::size_t n) {
  v->reserve(n);
  AdviseHugePages(v->data(), n * sizeof(*v->data()));
  v->resize(n);
}

// Counts ':' (an upper bound on the pairs) and '\n' in [p, p + n).
void CountColonsAndNewlines(const char* p, std::size_t n, std::size_t* colons,
                            std::size_t* newlines) {
  std::size_t c = 0, l = 0;
  constexpr std::size_t kBlock = 4096;  // per-block 32-bit counters vectorise
  for (std::size_t i = 0; i < n; i += kBlock) {
    const std::size_t e = std::min(n, i + kBlock);
    uint32_t cc = 0, ll = 0;
    for (std::size_t j = i; j < e; ++j) {
      cc += p[j] == ':';
      ll += p[j] == '\n';
    }
    c += cc;
    l += ll;
  }
  *colons = c;
  *newlines = l;
}

// ---------------------------------------------------------------------------
// Number parsing.

enum class FloatResult { kOk, kSyntax, kNonFinite, kOutOfRange };

// For a decimal number that from_chars found out of range: whether it is too
// large (rather than too small). Its decimal exponent is computed from the
// position of the first significant digit and the (saturated) exponent part;
// no locale-dependent strtod.
bool TooLarge(const char* p, const char* e) {
  if (p < e && (*p == '-' || *p == '+')) ++p;
  int64_t int_digits = 0;  // significant digits before the point
  int64_t frac_zeros = 0;  // zeros after the point before the first significant digit
  bool seen = false;
  for (; p < e && IsDigit(*p); ++p) {
    seen = seen || *p != '0';
    int_digits += seen;
  }
  if (p < e && *p == '.') {
    for (++p; p < e && IsDigit(*p); ++p) {
      if (seen) continue;
      if (*p == '0') {
        ++frac_zeros;
      } else {
        seen = true;
      }
    }
  }
  int64_t exp = 0;
  if (p < e && (*p == 'e' || *p == 'E')) {
    ++p;
    bool neg = false;
    if (p < e && (*p == '-' || *p == '+')) neg = *p++ == '-';
    for (; p < e && IsDigit(*p); ++p) exp = std::min<int64_t>(exp * 10 + (*p - '0'), int64_t{1} << 40);
    if (neg) exp = -exp;
  }
  const int64_t magnitude = int_digits > 0 ? int_digits - 1 + exp : -frac_zeros - 1 + exp;
  return magnitude >= 0;
}

// Clinger's fast path for the plain decimals that fill most files ("1",
// "-0.320755"): when the digits, read as an integer m, and 10^f (f digits
// after the point) are both exact in T, m / 10^f in T is one correctly
// rounded IEEE division, i.e. exactly what from_chars returns. Anything else
// (exponents, long mantissas) returns false and goes to from_chars.
template <typename T>
struct FastLimits;
template <>
struct FastLimits<float> {
  static constexpr uint64_t kMaxMantissa = uint64_t{1} << 24;
  static constexpr int kMaxFrac = 10;  // 10^10 = 2^10 * 5^10, 5^10 < 2^24
};
template <>
struct FastLimits<double> {
  static constexpr uint64_t kMaxMantissa = uint64_t{1} << 53;
  static constexpr int kMaxFrac = 22;  // 5^22 < 2^53
};
constexpr double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                             1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                             1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

template <typename T>
inline bool FastDecimal(const char* p, const char* e, T* out, const char** end) {
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0  // no excess precision (x87)
  const bool neg = p < e && *p == '-';
  p += neg;
  uint64_t m = 0;
  int digits = 0, frac = 0;
  for (; p < e && IsDigit(*p) && digits < 19; ++p, ++digits) m = m * 10 + static_cast<uint64_t>(*p - '0');
  if (p < e && *p == '.') {
    for (++p; p < e && IsDigit(*p) && digits < 19; ++p, ++digits, ++frac) {
      m = m * 10 + static_cast<uint64_t>(*p - '0');
    }
  }
  if (digits == 0 || !EndsToken(p, e) || m > FastLimits<T>::kMaxMantissa ||
      frac > FastLimits<T>::kMaxFrac) {
    return false;
  }
  // Both operands are exact in T (powers of ten up to kMaxFrac are).
  const T v = static_cast<T>(m) / static_cast<T>(kPow10[frac]);
  *out = neg ? -v : v;
  *end = p;
  return true;
#else
  (void)p;
  (void)e;
  (void)out;
  (void)end;
  return false;
#endif
}

// Parses a float or double token at [p, e) that must end at a token boundary;
// accepts a leading '+'. On success *end is past the number.
template <typename T>
inline FloatResult ParseReal(const char* p, const char* e, T* out, const char** end) {
  const char* q = p;
  if (q < e && *q == '+') {
    ++q;
    if (q < e && (*q == '-' || *q == '+')) return FloatResult::kSyntax;
  }
  if (FastDecimal(q, e, out, end)) return FloatResult::kOk;
  T v;
  auto r = std::from_chars(q, e, v);
  if (r.ec == std::errc()) {
    if (!EndsToken(r.ptr, e)) return FloatResult::kSyntax;
    if (!std::isfinite(v)) return FloatResult::kNonFinite;
    *out = v;
    *end = r.ptr;
    return FloatResult::kOk;
  }
  if (r.ec != std::errc::result_out_of_range || !EndsToken(r.ptr, e)) {
    return FloatResult::kSyntax;
  }
  // Out of range for T: overflow is an error, underflow rounds to zero.
  if (TooLarge(q, r.ptr)) return FloatResult::kOutOfRange;
  *out = *q == '-' ? -T(0) : T(0);
  *end = r.ptr;
  return FloatResult::kOk;
}

// ---------------------------------------------------------------------------
// Chunk parser.

struct Error {
  int64_t line = 0;  // chunk-local while parsing, global after the merge
  int64_t col = 0;
  std::string what;  // the explanation after "name:line:col: "
};

struct LabelSeen {
  double value;
  int64_t line;  // chunk-local
  int64_t col;
};

// One thread's share of the input. The thread writes its rows at
// [row_at, row_at + rows) and its pairs at [nnz_at, nnz_at + nnz) of the
// final arrays, where row_at/nnz_at are upper bounds from the line and ':'
// counts of the chunks before it; the merge closes the gaps.
struct ChunkResult {
  const char* begin = nullptr;
  const char* end = nullptr;
  std::size_t row_at = 0, row_cap = 0;  // rows: at most one per line
  std::size_t nnz_at = 0, nnz_cap = 0;  // pairs: at most one per ':'
  std::size_t rows = 0;
  std::size_t nnz = 0;
  int64_t lines = 0;
  int64_t max_index = -1;  // 0-based
  // First-seen distinct labels (classification without threshold), up to 3;
  // y holds each row's position in this list until the merge maps it.
  LabelSeen distinct[3];
  int num_distinct = 0;
  bool has_error = false;
  Error error;
};

// The final arrays the chunks write into.
struct Output {
  int64_t* row_end;  // offsets + 1: chunk-local nnz after each row
  float* y;
  uint32_t* indices;
  float* values;
};

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

  bool ParseLine(const char* lb, const char* le, int64_t line) {
    const char* p = SkipSpace(lb, le);
    if (p == le || *p == '#') return true;  // blank or comment line

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
      if (p == le || *p == '#') break;
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

// Runs fn(0..n-1) on n threads (the calling thread takes part); falls back to
// running inline if a thread cannot be started.
template <typename Fn>
void RunParallel(int n, Fn fn) {
  if (n <= 1) {
    if (n == 1) fn(0);
    return;
  }
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(n - 1));
  int started = 1;
  for (; started < n; ++started) {
    try {
      threads.emplace_back(fn, started);
    } catch (const std::system_error&) {
      break;
    }
  }
  for (int k = started; k < n; ++k) fn(k);
  fn(0);
  for (auto& t : threads) t.join();
}

std::string Position(std::string_view name, int64_t line, int64_t col) {
  return absl::StrCat(absl::string_view(name.data(), name.size()), ":", line, ":", col, ": ");
}

std::string FormatLabel(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// ---------------------------------------------------------------------------
// File reading and decompression.

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

absl::StatusOr<std::string> ReadRaw(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return absl::ErrnoToStatus(errno, path);
  struct stat st {};
  if (fstat(fileno(f), &st) != 0) {
    const int err = errno;
    std::fclose(f);
    return absl::ErrnoToStatus(err, path);
  }
  if (S_ISDIR(st.st_mode)) {
    std::fclose(f);
    return absl::ErrnoToStatus(EISDIR, path);
  }
  std::string out;
  // Regular files are read in one call; pipes and growing files by blocks.
  if (S_ISREG(st.st_mode) && st.st_size > 0) {
    ResizeFresh(&out, static_cast<std::size_t>(st.st_size));
    out.resize(std::fread(out.data(), 1, out.size(), f));
  }
  char buf[1 << 16];
  while (!std::ferror(f)) {
    const std::size_t got = std::fread(buf, 1, sizeof buf, f);
    if (got == 0) break;
    out.append(buf, got);
  }
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) return absl::ErrnoToStatus(err != 0 ? err : EIO, absl::StrCat(path, ": read failed"));
  return out;
}

// Output growth for the decompressors: start at 4x the input.
void Grow(std::string* out, std::size_t used) {
  std::size_t cap = std::max<std::size_t>(out->size() * 2, 1 << 20);
  out->resize(std::max(cap, used + (1 << 20)));
}

#if defined(DML_HAVE_ZLIB)
absl::StatusOr<std::string> Gunzip(const std::string& in, const std::string& path) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 32) != Z_OK) return absl::InternalError("inflateInit2 failed");
  std::string out(std::max<std::size_t>(in.size() * 4, 1 << 16), '\0');
  std::size_t used = 0, pos = 0;
  while (true) {
    if (used == out.size()) Grow(&out, used);
    const std::size_t in_avail = std::min<std::size_t>(in.size() - pos, 1u << 30);
    const std::size_t out_avail = std::min<std::size_t>(out.size() - used, 1u << 30);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + pos));
    z.avail_in = static_cast<uInt>(in_avail);
    z.next_out = reinterpret_cast<Bytef*>(out.data() + used);
    z.avail_out = static_cast<uInt>(out_avail);
    const int rc = inflate(&z, Z_NO_FLUSH);
    pos += in_avail - z.avail_in;
    used += out_avail - z.avail_out;
    if (rc == Z_STREAM_END) {
      // Concatenated gzip members (e.g. from pigz) follow each other.
      if (pos < in.size()) {
        inflateReset(&z);
        continue;
      }
      break;
    }
    if (rc == Z_BUF_ERROR && pos == in.size() && z.avail_out > 0) {
      inflateEnd(&z);
      return absl::InvalidArgumentError(absl::StrCat(path, ": truncated gzip stream"));
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      std::string msg = z.msg ? z.msg : "corrupt data";
      inflateEnd(&z);
      return absl::InvalidArgumentError(absl::StrCat(path, ": gzip: ", msg));
    }
  }
  inflateEnd(&z);
  out.resize(used);
  return out;
}
#endif

#if defined(DML_HAVE_BZIP2)
absl::StatusOr<std::string> Bunzip2(const std::string& in, const std::string& path) {
  std::string out(std::max<std::size_t>(in.size() * 5, 1 << 16), '\0');
  std::size_t used = 0, pos = 0;
  while (pos < in.size()) {  // one pass per concatenated stream (pbzip2)
    bz_stream b{};
    if (BZ2_bzDecompressInit(&b, 0, 0) != BZ_OK) return absl::InternalError("BZ2_bzDecompressInit failed");
    int rc = BZ_OK;
    while (true) {
      if (used == out.size()) Grow(&out, used);
      const std::size_t in_avail = std::min<std::size_t>(in.size() - pos, 1u << 30);
      const std::size_t out_avail = std::min<std::size_t>(out.size() - used, 1u << 30);
      b.next_in = const_cast<char*>(in.data() + pos);
      b.avail_in = static_cast<unsigned>(in_avail);
      b.next_out = out.data() + used;
      b.avail_out = static_cast<unsigned>(out_avail);
      rc = BZ2_bzDecompress(&b);
      pos += in_avail - b.avail_in;
      used += out_avail - b.avail_out;
      if (rc == BZ_STREAM_END) break;
      if (rc != BZ_OK) break;
      if (pos == in.size() && b.avail_out > 0) {
        rc = BZ_UNEXPECTED_EOF;
        break;
      }
    }
    BZ2_bzDecompressEnd(&b);
    if (rc != BZ_STREAM_END) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, rc == BZ_UNEXPECTED_EOF ? ": truncated bzip2 stream"
                                                     : ": corrupt bzip2 data"));
    }
  }
  out.resize(used);
  return out;
}
#endif

#if defined(DML_HAVE_LZMA)
absl::StatusOr<std::string> Unxz(const std::string& in, const std::string& path) {
  lzma_stream s = LZMA_STREAM_INIT;
  if (lzma_stream_decoder(&s, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK) {
    return absl::InternalError("lzma_stream_decoder failed");
  }
  std::string out(std::max<std::size_t>(in.size() * 6, 1 << 16), '\0');
  std::size_t used = 0;
  s.next_in = reinterpret_cast<const uint8_t*>(in.data());
  s.avail_in = in.size();
  lzma_ret rc = LZMA_OK;
  while (true) {
    if (used == out.size()) Grow(&out, used);
    s.next_out = reinterpret_cast<uint8_t*>(out.data() + used);
    s.avail_out = out.size() - used;
    const std::size_t before = s.avail_out;
    rc = lzma_code(&s, LZMA_FINISH);  // all input is present
    used += before - s.avail_out;
    if (rc == LZMA_STREAM_END) break;
    if (rc != LZMA_OK) break;
  }
  lzma_end(&s);
  if (rc == LZMA_BUF_ERROR) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": truncated xz stream"));
  }
  if (rc != LZMA_STREAM_END) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": corrupt xz data (lzma error ", static_cast<int>(rc), ")"));
  }
  out.resize(used);
  return out;
}
#endif

}  // namespace

// ---------------------------------------------------------------------------

absl::StatusOr<Dataset> ParseLibsvm(std::string_view text, const LibsvmOptions& options,
                                    std::string_view name) {
  if (options.num_features < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_features must be >= 0, got ", options.num_features));
  }
  constexpr uint64_t kMaxCols = uint64_t{1} << 32;
  const uint64_t index_limit =
      options.num_features > 0 ? std::min<uint64_t>(static_cast<uint64_t>(options.num_features), kMaxCols)
                               : kMaxCols;

  // Chunks: explicit thread counts are honoured; the automatic count keeps
  // at least 1 MiB per thread.
  int threads = options.threads;
  if (threads <= 0) {
    const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    threads = static_cast<int>(std::min<std::size_t>(hw, text.size() / (1 << 20) + 1));
  }
  threads = static_cast<int>(std::min<std::size_t>(threads, std::max<std::size_t>(text.size(), 1)));
  threads = std::min(threads, 1024);
  std::vector<std::size_t> starts(static_cast<std::size_t>(threads) + 1);
  starts[0] = 0;
  for (int k = 1; k < threads; ++k) {
    std::size_t pos = std::max(text.size() / threads * k, starts[k - 1]);
    const void* nl = pos < text.size() ? std::memchr(text.data() + pos, '\n', text.size() - pos) : nullptr;
    starts[k] = nl ? static_cast<std::size_t>(static_cast<const char*>(nl) - text.data()) + 1 : text.size();
  }
  starts[threads] = text.size();

  // Pass 1: bound each chunk's rows (lines) and pairs (':'), and lay the
  // chunks out at those bounds in the final arrays.
  std::vector<ChunkResult> chunks(static_cast<std::size_t>(threads));
  RunParallel(threads, [&](int k) {
    ChunkResult& c = chunks[k];
    c.begin = text.data() + starts[k];
    c.end = text.data() + starts[k + 1];
    std::size_t newlines = 0;
    CountColonsAndNewlines(c.begin, starts[k + 1] - starts[k], &c.nnz_cap, &newlines);
    c.row_cap = newlines + 1;
  });
  std::size_t row_cap = 0, nnz_cap = 0;
  for (ChunkResult& c : chunks) {
    c.row_at = row_cap;
    c.nnz_at = nnz_cap;
    row_cap += c.row_cap;
    nnz_cap += c.nnz_cap;
  }
  std::vector<int64_t> offsets;
  std::vector<float> y;
  std::vector<uint32_t> indices;
  std::vector<float> values;
  ResizeFresh(&offsets, row_cap + 1);
  ResizeFresh(&y, row_cap);
  ResizeFresh(&indices, nnz_cap);
  ResizeFresh(&values, nnz_cap);
  const Output dst{offsets.data() + 1, y.data(), indices.data(), values.data()};

  // Pass 2: parse.
  RunParallel(threads, [&](int k) {
    ChunkParser parser(options, index_limit, &chunks[k], dst);
    parser.Parse();
  });

  // Merge: global line numbers, the first error, the label classes.
  bool have_error = false;
  Error err;
  int64_t line_base = 0;
  LabelSeen classes[2];
  int num_classes = 0;
  const bool track = options.task == Task::kClassification && !options.binarize_threshold;
  for (int k = 0; k < threads; ++k) {
    ChunkResult& c = chunks[k];
    if (track) {
      for (int d = 0; d < c.num_distinct && !have_error; ++d) {
        const LabelSeen& s = c.distinct[d];
        bool known = false;
        for (int q = 0; q < num_classes; ++q) known = known || classes[q].value == s.value;
        if (known) continue;
        if (num_classes < 2) {
          classes[num_classes++] = {s.value, line_base + s.line, s.col};
          continue;
        }
        // A third class. A syntax error earlier in this chunk wins.
        if (c.has_error && (c.error.line < s.line || (c.error.line == s.line && c.error.col < s.col))) {
          break;
        }
        have_error = true;
        err.line = line_base + s.line;
        err.col = s.col;
        err.what = absl::StrCat(
            "label ", FormatLabel(s.value), " is a third distinct value (after ",
            FormatLabel(std::min(classes[0].value, classes[1].value)), " and ",
            FormatLabel(std::max(classes[0].value, classes[1].value)),
            "); classification takes two classes: set binarize_threshold or use regression");
      }
    }
    if (have_error) break;
    if (c.has_error) {
      have_error = true;
      err = std::move(c.error);
      err.line += line_base;
      break;
    }
    line_base += c.lines;
  }
  if (have_error) {
    return absl::InvalidArgumentError(absl::StrCat(Position(name, err.line, err.col), err.what));
  }

  // Close the gaps between chunks (in order: a chunk only moves down, over
  // space its predecessors left free), then rebase the row ends and map the
  // label codes, in parallel.
  std::vector<std::size_t> row_base(static_cast<std::size_t>(threads));
  std::vector<std::size_t> nnz_base(static_cast<std::size_t>(threads));
  std::size_t rows = 0, nnz = 0;
  int64_t max_index = -1;
  for (int k = 0; k < threads; ++k) {
    const ChunkResult& c = chunks[k];
    if (c.row_at != rows && c.rows > 0) {
      std::memmove(offsets.data() + rows + 1, offsets.data() + c.row_at + 1, c.rows * sizeof(int64_t));
      std::memmove(y.data() + rows, y.data() + c.row_at, c.rows * sizeof(float));
    }
    if (c.nnz_at != nnz && c.nnz > 0) {
      std::memmove(indices.data() + nnz, indices.data() + c.nnz_at, c.nnz * sizeof(uint32_t));
      std::memmove(values.data() + nnz, values.data() + c.nnz_at, c.nnz * sizeof(float));
    }
    row_base[k] = rows;
    nnz_base[k] = nnz;
    rows += c.rows;
    nnz += c.nnz;
    max_index = std::max(max_index, c.max_index);
  }
  if (rows == 0) {
    return absl::InvalidArgumentError(absl::StrCat(Position(name, 1, 1), "empty file: no examples"));
  }
  const int64_t cols = options.num_features > 0 ? options.num_features : max_index + 1;
  // Classification without a threshold: two classes map smaller -> -1, one
  // class maps by sign (<= 0 -> -1).
  const double lo = num_classes == 2 ? std::min(classes[0].value, classes[1].value) : 0.0;
  RunParallel(threads, [&](int k) {
    const ChunkResult& c = chunks[k];
    const int64_t base = static_cast<int64_t>(nnz_base[k]);
    int64_t* const ends = offsets.data() + row_base[k] + 1;
    if (base != 0) {
      for (std::size_t r = 0; r < c.rows; ++r) ends[r] += base;
    }
    if (track) {
      float map[3] = {0, 0, 0};
      for (int d = 0; d < c.num_distinct; ++d) {
        const double v = c.distinct[d].value;
        map[d] = (num_classes == 2 ? v == lo : v <= 0) ? -1.0f : 1.0f;
      }
      float* const yk = y.data() + row_base[k];
      for (std::size_t r = 0; r < c.rows; ++r) yk[r] = map[static_cast<int>(yk[r])];
    }
  });
  // Shrink; give slack back only when it is large (comments full of ':').
  offsets.resize(rows + 1);
  y.resize(rows);
  indices.resize(nnz);
  values.resize(nnz);
  if (offsets.capacity() > 2 * offsets.size()) {
    offsets.shrink_to_fit();
    y.shrink_to_fit();
  }
  if (indices.capacity() > 2 * indices.size() + 1024) {
    indices.shrink_to_fit();
    values.shrink_to_fit();
  }

  Dataset out;
  out.x = CsrMatrix::FromArraysUnchecked(static_cast<int64_t>(rows), cols, std::move(offsets),
                                         std::move(indices), std::move(values));
  out.y = std::move(y);
  out.task = options.task;
  return out;
}

absl::StatusOr<std::string> ReadFileContents(const std::string& path) {
  const bool gz = EndsWith(path, ".gz");
  const bool bz2 = EndsWith(path, ".bz2");
  const bool xz = EndsWith(path, ".xz");
#if !defined(DML_HAVE_ZLIB)
  if (gz) {
    return absl::UnimplementedError(
        absl::StrCat(path, ": reading .gz files needs zlib, and libdml was built without it"));
  }
#endif
#if !defined(DML_HAVE_BZIP2)
  if (bz2) {
    return absl::UnimplementedError(
        absl::StrCat(path, ": reading .bz2 files needs libbz2, and libdml was built without it"));
  }
#endif
#if !defined(DML_HAVE_LZMA)
  if (xz) {
    return absl::UnimplementedError(
        absl::StrCat(path, ": reading .xz files needs liblzma, and libdml was built without it"));
  }
#endif
  auto raw = ReadRaw(path);
  if (!raw.ok()) return raw.status();
#if defined(DML_HAVE_ZLIB)
  if (gz) return Gunzip(*raw, path);
#endif
#if defined(DML_HAVE_BZIP2)
  if (bz2) return Bunzip2(*raw, path);
#endif
#if defined(DML_HAVE_LZMA)
  if (xz) return Unxz(*raw, path);
#endif
  (void)gz;
  (void)bz2;
  (void)xz;
  return raw;
}

absl::StatusOr<Dataset> ReadLibsvm(const std::string& path, const LibsvmOptions& options) {
  auto text = ReadFileContents(path);
  if (!text.ok()) return text.status();
  return ParseLibsvm(*text, options, path);
}

absl::Status WriteLibsvm(const Dataset& data, const std::string& path) {
  const CsrMatrix& x = data.x;
  if (static_cast<int64_t>(data.y.size()) != x.rows()) {
    return absl::InvalidArgumentError(absl::StrCat("WriteLibsvm: ", data.y.size(), " labels for ",
                                                   x.rows(), " rows"));
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return absl::ErrnoToStatus(errno, path);

  constexpr std::size_t kBuf = 1 << 20;
  constexpr std::size_t kSlack = 64;  // one `index:value ` entry fits
  std::unique_ptr<char[]> buf(new char[kBuf + 4 * kSlack]);
  char* p = buf.get();
  bool io_error = false;
  auto flush = [&] {
    const std::size_t n = static_cast<std::size_t>(p - buf.get());
    if (n > 0 && std::fwrite(buf.get(), 1, n, f) != n) io_error = true;
    p = buf.get();
  };
  absl::Status status;
  for (int64_t r = 0; r < x.rows() && status.ok() && !io_error; ++r) {
    const float label = data.y[r];
    if (!std::isfinite(label)) {
      status = absl::InvalidArgumentError(absl::StrCat("WriteLibsvm: row ", r, ": non-finite label"));
      break;
    }
    p = std::to_chars(p, p + kSlack, label).ptr;
    const SparseView row = x.outer(r);
    for (std::size_t k = 0; k < row.size; ++k) {
      if (!std::isfinite(row.value[k])) {
        status = absl::InvalidArgumentError(
            absl::StrCat("WriteLibsvm: row ", r, ", column ", row.index[k], ": non-finite value"));
        break;
      }
      *p++ = ' ';
      p = std::to_chars(p, p + kSlack, uint64_t{row.index[k]} + 1).ptr;
      *p++ = ':';
      p = std::to_chars(p, p + kSlack, row.value[k]).ptr;
      if (static_cast<std::size_t>(p - buf.get()) >= kBuf) flush();
    }
    *p++ = '\n';
    if (static_cast<std::size_t>(p - buf.get()) >= kBuf) flush();
  }
  if (status.ok() && !io_error) flush();
  const int werr = errno;
  if (std::fclose(f) != 0 && status.ok() && !io_error) {
    return absl::ErrnoToStatus(errno, absl::StrCat(path, ": close failed"));
  }
  if (!status.ok()) return status;
  if (io_error) return absl::ErrnoToStatus(werr != 0 ? werr : EIO, absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

}  // namespace dml
