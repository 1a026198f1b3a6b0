#pragma once
// A trained linear model and its text file format.
//
// Format (UTF-8 text, one item per line, '#' starts a comment line):
//   dml-model 1                 format name and version
//   model <name>                ModelName(), e.g. logistic
//   lambda <float>
//   l1_ratio <float>            elastic net's eta (written for every model)
//   [labels <neg> <pos>]        optional: the data's label values that were -1 and +1
//   [binarize <t>]              optional: trained with labels > t as +1 (--binarize t)
//   [bias <b>]                  optional (b >= 0): the last feature is the constant b (-B b)
//   features <d>                length of w
//   weights <k>                 number of nonzero weights that follow
//   <index> <value>             k lines, 1-based feature index (as in LIBSVM), increasing
// Values use the shortest text that reads back to the same double.
//
// Errors: ReadModelText returns InvalidArgument "path:line: ..." naming the
// field that is wrong. Thread-safety: reentrant.

#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dml/objective/model.hpp"

namespace dml {

/// A trained model: what was solved and the primal weights.
struct LinearModel {
  ModelSpec spec;         ///< kind, lambda, l1_ratio
  std::vector<double> w;  ///< One weight per feature.
  /// Classification: the data's label values that were -1 and +1, or empty
  /// (unknown: the data was generated, cached or already -1/+1).
  std::vector<double> classes;
  /// >= 0: the last weight belongs to a constant feature of this value that
  /// the trainer appended to every example (LIBLINEAR's -B); -1: none.
  double bias = -1.0;
  /// Classification read with a threshold (LibsvmOptions::binarize_threshold):
  /// label > it was +1. A test file is read the same way. Finite, or NaN: none.
  double binarize = std::numeric_limits<double>::quiet_NaN();
};

/// Writes `model` to `path` in the format above: through
/// TemporaryPathFor(path), renamed over `path` once complete (in place for a
/// device, a FIFO, a symbolic link or an unwritable directory).
/// Errors: InvalidArgument (nothing written) for a model ReadModelText
/// would refuse (an invalid spec, a weight that is not finite);
/// Unavailable if the file cannot be opened or written.
absl::Status WriteModelText(const LinearModel& model, const std::string& path);
/// The temporary file the model and checkpoint writers (WriteModelText,
/// WriteLiblinearModel, the Cap'n Proto files of dml/net) fill before
/// renaming it over `path`: `path`.tmp.<pid>. A caller that must clean up
/// after an interrupted write removes it.
std::string TemporaryPathFor(const std::string& path);
/// Reads a file written by WriteModelText. Errors: NotFound if it cannot be
/// opened; InvalidArgument "path:line: ..." for a malformed one.
absl::StatusOr<LinearModel> ReadModelText(const std::string& path);

}  // namespace dml
