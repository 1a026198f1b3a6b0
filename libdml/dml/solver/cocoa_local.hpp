#pragma once
// CoCoA+ local subproblem solver (Ma, Smith, Jaggi et al., "Adding vs.
// averaging in distributed primal-dual optimization", ICML 2015; Smith et al.,
// "CoCoA: A general framework ...", JMLR 2018).
//
// Worker k owns a block of coordinates (rows for dual models, columns for
// primal ones) and solves, for H coordinate steps, the local quadratic
// subproblem built against the shared vector s (w for dual, v = A x for
// primal) plus sigma' times its own accumulated change:
//   s_local = s + sigma' * delta_s.
// It returns delta_s, which the coordinator adds with weight gamma (and
// sigma' = gamma * K makes the sum safe).
//
// Thread-safety: one LocalSolver per worker; not shared between threads.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "dml/data/sparse.hpp"
#include "dml/objective/model.hpp"

namespace dml {

struct LocalBlock {
  /// Dual models: this worker's rows (CSR, all d columns) and their labels.
  /// Primal models: this worker's columns as a CSC over all n rows; `y` then
  /// holds all n labels.
  CsrMatrix rows;
  CscMatrix cols;
  std::vector<float> y;
  int64_t n_global = 0;  ///< total examples across all workers
};

struct LocalUpdate {
  std::vector<double> delta_shared;  ///< change of the shared vector (d for dual, n for primal)
  int64_t steps = 0;
  int64_t nnz_touched = 0;
};

class LocalSolver {
 public:
  virtual ~LocalSolver() = default;
  /// Runs `steps` coordinate steps (random order, without replacement within
  /// each pass over the block) against `shared`, updating this block's own
  /// coordinates (alpha or w_block) and returning the change of the shared
  /// vector. `gamma` scales the local coordinates' commit, as in CoCoA+.
  virtual absl::StatusOr<LocalUpdate> Solve(const std::vector<double>& shared,
                                            double sigma_prime, double gamma,
                                            int64_t steps) = 0;
  /// This block's coordinates: alpha of its rows, or w of its columns.
  virtual const std::vector<double>& coordinates() const = 0;
  /// Replaces them (checkpoint restore, re-partition).
  virtual absl::Status set_coordinates(std::vector<double> c) = 0;
};

/// Errors: invalid model, empty block, labels not in {-1,+1} for a
/// classification model.
absl::StatusOr<std::unique_ptr<LocalSolver>> MakeLocalSolver(LocalBlock block,
                                                             const ModelSpec& model,
                                                             uint64_t seed);

}  // namespace dml
