#pragma once
// LIBSVM / SVMlight text reader.
//
// Format, one example per line: `<label> [qid:<n>] <index>:<value> ... [# comment]`.
// Indices are 1-based on disk and 0-based in memory; a line may hold its
// indices in any order (sorted on load), but not the same index twice.
// Blank lines, comment lines, CRLF and trailing spaces are accepted. Files
// ending in .gz, .bz2 or .xz are decompressed when libdml was built with the
// matching library.
//
// Errors: every malformed input yields InvalidArgument (NotFound for a
// missing file) whose message starts with `file:line:column: ` (1-based, the
// column of the offending token) and says what was expected. Thread-safety:
// the functions are reentrant; they start and join their own threads.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "dml/data/sparse.hpp"

namespace dml {

/// How ParseLibsvm, ReadLibsvm and LoadWithCache read labels and features.
struct LibsvmOptions {
  /// Classification maps two distinct label values to -1/+1 (the smaller to
  /// -1); a third distinct value is an error unless `binarize_threshold` is
  /// set. Regression keeps labels as read.
  Task task = Task::kClassification;
  /// Classification only: label > threshold becomes +1, else -1 (e.g. 10.5
  /// to split news20's classes 1-10 vs 11-20).
  std::optional<double> binarize_threshold;
  /// Classification without a threshold: the two label values that become
  /// -1 and +1, in that order (a model's classes, e.g. the training set's
  /// Dataset::classes), so a test file of one class, or of the other class
  /// first, maps as the model does. A label that is neither is an error at
  /// its line and column. Empty: as the file's labels come (above).
  std::vector<double> classes;
  /// Declared feature count: widens the matrix; data with a larger index is
  /// an error. 0 = as many columns as the largest index.
  int64_t num_features = 0;
  /// Parser threads; 0 = hardware concurrency.
  int threads = 0;
};

/// Parses an in-memory buffer; `name` is used in error positions.
absl::StatusOr<Dataset> ParseLibsvm(std::string_view text, const LibsvmOptions& options,
                                    std::string_view name = "<memory>");

/// Reads and parses a file (decompressing .gz/.bz2/.xz).
absl::StatusOr<Dataset> ReadLibsvm(const std::string& path, const LibsvmOptions& options = {});

/// Reads a whole file of LIBSVM text into memory, decompressing by
/// extension. Errors: the errno of a failed open or read (NotFound for a
/// missing file); InvalidArgument for a corrupt compressed stream, or a NUL
/// byte in decompressed output or in a stream that is not a regular file
/// (binary data: the read stops there, with the byte's line and column);
/// Unimplemented for a compression libdml was built without.
absl::StatusOr<std::string> ReadFileContents(const std::string& path);

/// Writes a dataset in LIBSVM format (1-based indices, shortest round-trip
/// float text), so that ReadLibsvm gives back the same matrix and labels.
/// Errors: InvalidArgument for a label count that differs from the rows or a
/// non-finite value (naming the row; nothing is written, `path` is left as
/// it was); the errno of a failed open, write or close.
absl::Status WriteLibsvm(const Dataset& data, const std::string& path);

}  // namespace dml
