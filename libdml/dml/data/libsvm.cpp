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
//
// Files: this one splits the text into chunks, lays them out and merges
// them (ParseLibsvm); libsvm_chunk.cpp parses one chunk; libsvm_text.cpp and
// internal/libsvm_text.hpp tokenize and parse numbers; libsvm_read.cpp reads
// and decompresses files; libsvm_write.cpp writes.

#include "dml/data/libsvm.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <sys/mman.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dml/data/internal/libsvm.hpp"

namespace dml {
namespace internal::libsvm {

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

}  // namespace internal::libsvm

namespace {

using internal::libsvm::ChunkResult;
using internal::libsvm::Error;
using internal::libsvm::LabelSeen;
using internal::libsvm::Output;
using internal::libsvm::ParseChunk;
using internal::libsvm::ResizeFresh;

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

// Chunk boundaries, one chunk per thread, at line starts: explicit thread
// counts are honoured; the automatic count keeps at least 1 MiB per thread.
// Returns threads + 1 offsets, the last one text.size().
std::vector<std::size_t> ChunkStarts(std::string_view text, int requested) {
  int threads = requested;
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
  return starts;
}

// The final arrays: sized at the chunks' bounds while parsing, then closed
// up and shrunk to the rows and pairs found.
struct Arrays {
  std::vector<int64_t> offsets;
  std::vector<float> y;
  std::vector<uint32_t> indices;
  std::vector<float> values;
};

// Pass 1: bound each chunk's rows (lines) and pairs (':'), and lay the
// chunks out at those bounds in the final arrays.
Arrays LayOutChunks(std::string_view text, const std::vector<std::size_t>& starts,
                    std::vector<ChunkResult>* chunks) {
  const int threads = static_cast<int>(chunks->size());
  RunParallel(threads, [&](int k) {
    ChunkResult& c = (*chunks)[k];
    c.begin = text.data() + starts[k];
    c.end = text.data() + starts[k + 1];
    std::size_t newlines = 0;
    CountColonsAndNewlines(c.begin, starts[k + 1] - starts[k], &c.nnz_cap, &newlines);
    c.row_cap = newlines + 1;
  });
  std::size_t row_cap = 0, nnz_cap = 0;
  for (ChunkResult& c : *chunks) {
    c.row_at = row_cap;
    c.nnz_at = nnz_cap;
    row_cap += c.row_cap;
    nnz_cap += c.nnz_cap;
  }
  Arrays a;
  ResizeFresh(&a.offsets, row_cap + 1);
  ResizeFresh(&a.y, row_cap);
  ResizeFresh(&a.indices, nnz_cap);
  ResizeFresh(&a.values, nnz_cap);
  return a;
}

// The label classes seen so far, in the order first seen.
struct LabelClasses {
  LabelSeen seen[2];
  int num = 0;
};

// Merge: global line numbers, the first error, the label classes. Returns
// the first error (its line global), if any.
std::optional<Error> FirstError(std::vector<ChunkResult>* chunks, bool track, bool fixed,
                                LabelClasses* classes_out) {
  bool have_error = false;
  Error err;
  int64_t line_base = 0;
  LabelSeen* const classes = classes_out->seen;
  int& num_classes = classes_out->num;
  for (ChunkResult& c : *chunks) {
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
        err.what =
            fixed ? absl::StrCat("label ", FormatLabel(s.value),
                                 " is neither of the model's classes ", FormatLabel(classes[0].value),
                                 " (-1) and ", FormatLabel(classes[1].value), " (+1)")
                  : absl::StrCat("label ", FormatLabel(s.value),
                                 " is a third distinct value (after ",
                                 FormatLabel(std::min(classes[0].value, classes[1].value)),
                                 " and ", FormatLabel(std::max(classes[0].value, classes[1].value)),
                                 "); classification takes two classes: set binarize_threshold or "
                                 "use regression");
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
  if (!have_error) return std::nullopt;
  return err;
}

// Where each chunk's rows and pairs start once the gaps are closed, and the
// totals.
struct Packed {
  std::vector<std::size_t> row_base;
  std::vector<std::size_t> nnz_base;
  std::size_t rows = 0, nnz = 0;
  int64_t max_index = -1;
};

// Close the gaps between chunks (in order: a chunk only moves down, over
// space its predecessors left free).
Packed CloseGaps(const std::vector<ChunkResult>& chunks, Arrays* a) {
  Packed p;
  p.row_base.resize(chunks.size());
  p.nnz_base.resize(chunks.size());
  for (std::size_t k = 0; k < chunks.size(); ++k) {
    const ChunkResult& c = chunks[k];
    if (c.row_at != p.rows && c.rows > 0) {
      std::memmove(a->offsets.data() + p.rows + 1, a->offsets.data() + c.row_at + 1, c.rows * sizeof(int64_t));
      std::memmove(a->y.data() + p.rows, a->y.data() + c.row_at, c.rows * sizeof(float));
    }
    if (c.nnz_at != p.nnz && c.nnz > 0) {
      std::memmove(a->indices.data() + p.nnz, a->indices.data() + c.nnz_at, c.nnz * sizeof(uint32_t));
      std::memmove(a->values.data() + p.nnz, a->values.data() + c.nnz_at, c.nnz * sizeof(float));
    }
    p.row_base[k] = p.rows;
    p.nnz_base[k] = p.nnz;
    p.rows += c.rows;
    p.nnz += c.nnz;
    p.max_index = std::max(p.max_index, c.max_index);
  }
  return p;
}

// Rebase the row ends and map the label codes, in parallel.
// Classification without a threshold: two classes map `lo` -> -1, one
// class maps by sign (<= 0 -> -1).
void RebaseRowsAndLabels(const std::vector<ChunkResult>& chunks, const Packed& packed, bool track,
                         const LabelClasses& classes, double lo, Arrays* a) {
  RunParallel(static_cast<int>(chunks.size()), [&](int k) {
    const ChunkResult& c = chunks[k];
    const int64_t base = static_cast<int64_t>(packed.nnz_base[k]);
    int64_t* const ends = a->offsets.data() + packed.row_base[k] + 1;
    if (base != 0) {
      for (std::size_t r = 0; r < c.rows; ++r) ends[r] += base;
    }
    if (track) {
      float map[3] = {0, 0, 0};
      for (int d = 0; d < c.num_distinct; ++d) {
        const double v = c.distinct[d].value;
        map[d] = (classes.num == 2 ? v == lo : v <= 0) ? -1.0f : 1.0f;
      }
      float* const yk = a->y.data() + packed.row_base[k];
      for (std::size_t r = 0; r < c.rows; ++r) yk[r] = map[static_cast<int>(yk[r])];
    }
  });
}

// Shrink; give slack back only when it is large (comments full of ':').
void Shrink(std::size_t rows, std::size_t nnz, Arrays* a) {
  a->offsets.resize(rows + 1);
  a->y.resize(rows);
  a->indices.resize(nnz);
  a->values.resize(nnz);
  if (a->offsets.capacity() > 2 * a->offsets.size()) {
    a->offsets.shrink_to_fit();
    a->y.shrink_to_fit();
  }
  if (a->indices.capacity() > 2 * a->indices.size() + 1024) {
    a->indices.shrink_to_fit();
    a->values.shrink_to_fit();
  }
}

}  // namespace

// ---------------------------------------------------------------------------

absl::StatusOr<Dataset> ParseLibsvm(std::string_view text, const LibsvmOptions& options,
                                    std::string_view name) {
  if (options.num_features < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_features must be >= 0, got ", options.num_features));
  }
  if (!options.classes.empty() &&
      (options.classes.size() != 2 || !std::isfinite(options.classes[0]) ||
       !std::isfinite(options.classes[1]) || options.classes[0] == options.classes[1])) {
    return absl::InvalidArgumentError(
        absl::StrCat("classes must be two distinct finite label values (-1's, then +1's), got ",
                     options.classes.size(), " values"));
  }
  constexpr uint64_t kMaxCols = uint64_t{1} << 32;
  const uint64_t index_limit =
      options.num_features > 0 ? std::min<uint64_t>(static_cast<uint64_t>(options.num_features), kMaxCols)
                               : kMaxCols;

  const std::vector<std::size_t> starts = ChunkStarts(text, options.threads);
  const int threads = static_cast<int>(starts.size()) - 1;
  std::vector<ChunkResult> chunks(static_cast<std::size_t>(threads));
  Arrays a = LayOutChunks(text, starts, &chunks);
  const Output dst{a.offsets.data() + 1, a.y.data(), a.indices.data(), a.values.data()};

  // Pass 2: parse.
  RunParallel(threads, [&](int k) { ParseChunk(options, index_limit, &chunks[k], dst); });

  const bool track = options.task == Task::kClassification && !options.binarize_threshold;
  LabelClasses classes;
  // Given classes: both are known from the start (-1 first), so any other
  // label is the error FirstError reports.
  const bool fixed = track && !options.classes.empty();
  if (fixed) {
    classes.seen[0].value = options.classes[0];
    classes.seen[1].value = options.classes[1];
    classes.num = 2;
  }
  if (std::optional<Error> err = FirstError(&chunks, track, fixed, &classes)) {
    return absl::InvalidArgumentError(absl::StrCat(Position(name, err->line, err->col), err->what));
  }

  // Close the gaps, then rebase the row ends and map the label codes.
  const Packed packed = CloseGaps(chunks, &a);
  if (packed.rows == 0) {
    return absl::InvalidArgumentError(absl::StrCat(Position(name, 1, 1), "empty file: no examples"));
  }
  const int64_t cols = options.num_features > 0 ? options.num_features : packed.max_index + 1;
  // The -1 class: the given one, else the smaller of the two.
  const double lo = fixed             ? options.classes[0]
                    : classes.num == 2 ? std::min(classes.seen[0].value, classes.seen[1].value)
                                       : 0.0;
  RebaseRowsAndLabels(chunks, packed, track, classes, lo, &a);
  Shrink(packed.rows, packed.nnz, &a);

  Dataset out;
  out.x = CsrMatrix::FromArraysUnchecked(static_cast<int64_t>(packed.rows), cols,
                                         std::move(a.offsets), std::move(a.indices),
                                         std::move(a.values));
  out.y = std::move(a.y);
  out.task = options.task;
  if (fixed) {
    out.classes = options.classes;
  } else if (track && classes.num == 2) {
    out.classes = {std::min(classes.seen[0].value, classes.seen[1].value),
                   std::max(classes.seen[0].value, classes.seen[1].value)};
  }
  return out;
}

}  // namespace dml
