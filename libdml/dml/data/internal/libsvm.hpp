#pragma once
// What the LIBSVM reader's files share: how a chunk of the input is laid out
// in the final CSR arrays and what its parse reports (libsvm.cpp splits and
// merges, libsvm_chunk.cpp parses), and the allocation of big arrays
// (libsvm.cpp, libsvm_read.cpp). Internal: included by dml/data/libsvm*.cpp
// only.

#include <cstddef>
#include <cstdint>
#include <string>

#include "dml/data/libsvm.hpp"

namespace dml::internal::libsvm {

// ---------------------------------------------------------------------------
// Memory. The parser writes straight into the final arrays; first touches of
// fresh pages are what a large load pays most for (about 10 us per 4 KiB
// page on a virtual machine), so big arrays ask for transparent huge pages.

void AdviseHugePages(const void* p, std::size_t bytes);

// Sizes a fresh vector to n elements, backed by huge pages where possible.
template <typename V>
void ResizeFresh(V* v, std::size_t n) {
  v->reserve(n);
  AdviseHugePages(v->data(), n * sizeof(*v->data()));
  v->resize(n);
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

// Parses [out->begin, out->end) into dst at out's slots; fills out's counts,
// labels and first error (then stops). index_limit: indices must be in
// [1, index_limit]. Touches nothing outside out and its slots of dst, so the
// chunks parse in parallel.
void ParseChunk(const LibsvmOptions& options, uint64_t index_limit, ChunkResult* out,
                const Output& dst);

}  // namespace dml::internal::libsvm
