#pragma once
// Pieces shared by the primal coordinate-descent drivers (sequential, async,
// CoCoA+ local): how a sequential driver touches the objective's state, the
// exact v = A w the state is rebuilt from, and the per-epoch shuffle of the
// active set. Internal: included by solver/*.cpp only.

#include <cstdint>
#include <utility>
#include <vector>

#include "dml/data/sparse.hpp"
#include "dml/util/rng.hpp"

namespace dml::internal {

/// The state arrays of a single-threaded driver: plain loads and stores.
struct PlainAccess {
  static constexpr bool kPlain = true;
  static double Load(const double* p) { return *p; }
  static void Add(double* p, double x) { *p += x; }
  static void Mul(double* p, double x) { *p *= x; }
};

/// v = A w from the columns, skipping w_j == 0.
inline std::vector<double> ColumnTimes(const CscMatrix& a, const std::vector<double>& w) {
  std::vector<double> v(static_cast<std::size_t>(a.rows()), 0.0);
  for (int64_t j = 0; j < a.cols(); ++j) {
    if (w[j] == 0.0) continue;
    const SparseView col = a.outer(j);
    for (std::size_t k = 0; k < col.size; ++k) v[col.index[k]] += w[j] * col.value[k];
  }
  return v;
}

/// Fisher-Yates over the first `size` entries (the active, unshrunk set).
inline void ShufflePrefix(std::vector<uint32_t>& v, std::size_t size, Rng& rng) {
  for (std::size_t i = size; i > 1; --i) std::swap(v[i - 1], v[rng.Below(i)]);
}

}  // namespace dml::internal
