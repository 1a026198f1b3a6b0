#pragma once
// Compressed sparse matrices: CSR (row-major) for dual methods, CSC
// (column-major) for primal methods. float32 values, 32-bit inner indices,
// 64-bit offsets so a matrix may hold more than 2^32 nonzeros.
//
// Ownership: a matrix owns its three arrays. Thread-safety: const methods may
// be called concurrently; mutation needs external synchronisation.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace dml {

/// One compressed row (of a CSR) or column (of a CSC): parallel arrays of
/// sorted inner indices and values. Points into the matrix; valid while the
/// matrix is alive and unmodified.
struct SparseView {
  const uint32_t* index = nullptr;
  const float* value = nullptr;
  std::size_t size = 0;
};

/// Which dimension is compressed: rows (CSR) or columns (CSC).
enum class Layout { kRowMajor, kColMajor };

template <Layout L>
class CompressedMatrix;
/// Row-compressed: one outer slot per example (dual methods).
using CsrMatrix = CompressedMatrix<Layout::kRowMajor>;
/// Column-compressed: one outer slot per feature (primal methods).
using CscMatrix = CompressedMatrix<Layout::kColMajor>;

/// A sparse matrix compressed along `L`; owns its offsets, indices and values.
/// Const methods are thread-safe; mutation needs external synchronisation.
template <Layout L>
class CompressedMatrix {
 public:
  /// The compressed dimension.
  static constexpr Layout kLayout = L;
  /// The type Convert() returns: the other layout.
  using Transposed = CompressedMatrix<L == Layout::kRowMajor ? Layout::kColMajor
                                                             : Layout::kRowMajor>;

  /// A 0 x 0 matrix.
  CompressedMatrix() : offsets_(1, 0) {}
  /// An empty rows x cols matrix (all zeros).
  CompressedMatrix(int64_t rows, int64_t cols);

  /// Takes ownership of the arrays and checks every invariant: offsets start
  /// at 0, are non-decreasing and end at nnz; inner indices are in range and
  /// strictly increasing within each outer slot; values are finite. Errors:
  /// InvalidArgument naming the first offending outer slot and position.
  static absl::StatusOr<CompressedMatrix> FromArrays(int64_t rows, int64_t cols,
                                                     std::vector<int64_t> offsets,
                                                     std::vector<uint32_t> indices,
                                                     std::vector<float> values);
  /// Same, without the checks: for producers that guarantee the invariants.
  static CompressedMatrix FromArraysUnchecked(int64_t rows, int64_t cols,
                                              std::vector<int64_t> offsets,
                                              std::vector<uint32_t> indices,
                                              std::vector<float> values);

  /// Shape and number of stored entries.
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t nnz() const { return static_cast<int64_t>(indices_.size()); }
  /// Number of rows (CSR) or columns (CSC).
  int64_t outer_size() const { return L == Layout::kRowMajor ? rows_ : cols_; }
  /// Number of columns (CSR) or rows (CSC): the range of inner indices.
  int64_t inner_size() const { return L == Layout::kRowMajor ? cols_ : rows_; }

  /// Row i of a CSR, column i of a CSC. No bounds check (our invariant).
  SparseView outer(int64_t i) const {
    const int64_t b = offsets_[i];
    return {indices_.data() + b, values_.data() + b,
            static_cast<std::size_t>(offsets_[i + 1] - b)};
  }
  /// Stored entries in outer slot i. No bounds check.
  int64_t outer_nnz(int64_t i) const { return offsets_[i + 1] - offsets_[i]; }

  /// The raw arrays: outer_size()+1 offsets into nnz() indices and values.
  const std::vector<int64_t>& offsets() const { return offsets_; }
  const std::vector<uint32_t>& indices() const { return indices_; }
  const std::vector<float>& values() const { return values_; }

  /// Outer slots [begin, end) as a new matrix (rows of a CSR, columns of a
  /// CSC); the inner dimension is kept. Requires 0 <= begin <= end <= outer_size().
  CompressedMatrix SliceOuter(int64_t begin, int64_t end) const;
  /// Keeps only inner indices in [begin, end), renumbered from 0 (columns of
  /// a CSR, rows of a CSC).
  CompressedMatrix SliceInner(int64_t begin, int64_t end) const;
  /// Gathers the listed outer slots in the given order.
  CompressedMatrix GatherOuter(const std::vector<int64_t>& which) const;

  /// The same matrix in the other layout (CSR <-> CSC), by a counting sort:
  /// O(nnz + rows + cols), inner indices come out sorted. `threads` > 1
  /// share the scatter where the matrix is large enough to pay for them
  /// (the result is the same); a thread that cannot start leaves its share
  /// to the caller's.
  Transposed Convert(int threads = 1) const;

  /// Grows the inner dimension (e.g. a declared feature count wider than the
  /// data). Errors: InvalidArgument for shrinking or for more than 2^32.
  absl::Status ResizeInner(int64_t inner);

  /// Squared L2 norm of every outer slot (row norms of a CSR): what SCD needs.
  std::vector<double> OuterSquaredNorms() const;

  /// Same shape and identical arrays (exact float comparison).
  friend bool operator==(const CompressedMatrix& a, const CompressedMatrix& b) {
    return a.rows_ == b.rows_ && a.cols_ == b.cols_ && a.offsets_ == b.offsets_ &&
           a.indices_ == b.indices_ && a.values_ == b.values_;
  }

 private:
  int64_t rows_ = 0;
  int64_t cols_ = 0;
  std::vector<int64_t> offsets_;
  std::vector<uint32_t> indices_;
  std::vector<float> values_;
};

/// `x` cut to its first `column` columns, plus column `column` holding
/// `value` in every row (LIBLINEAR's -B bias feature; 0 adds the column with
/// no entries). `column` = x.cols() keeps every feature; a smaller one drops
/// the features a model does not have, as liblinear-predict ignores them.
CsrMatrix WithConstantColumn(const CsrMatrix& x, float value, int64_t column);

/// What the labels mean.
enum class Task { kClassification, kRegression };

/// A design matrix with one label per row. Classification labels are -1/+1.
struct Dataset {
  CsrMatrix x;                    ///< One row per example.
  std::vector<float> y;           ///< One label per row of x.
  Task task = Task::kRegression;  ///< How to read y.
  /// Classification read from a file with two label values: the values that
  /// became -1 and +1, in that order (so a model can name them, as
  /// LIBLINEAR's do). Empty otherwise (one class, a threshold, generated data).
  std::vector<double> classes;
};

}  // namespace dml
