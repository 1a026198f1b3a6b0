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

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "dml/data/sparse.hpp"
#include "dml/objective/model.hpp"

namespace dml {

/// The data a LocalSolver owns (moved into MakeLocalSolver).
struct LocalBlock {
  /// Dual models: this worker's rows (CSR, all d columns) and their labels.
  /// Primal models: this worker's columns as a CSC over all n rows; `y` then
  /// holds all n labels.
  CsrMatrix rows;
  CscMatrix cols;
  std::vector<float> y;  ///< labels, as above
  int64_t n_global = 0;  ///< total examples across all workers
  /// Primal models: the rows [loss_row_begin, loss_row_end) whose loss this
  /// block reports in Certify, so that K blocks holding all n labels count
  /// each example once. Ignored by dual blocks (they report their own rows).
  int64_t loss_row_begin = 0;
  int64_t loss_row_end = 0;
};

/// A block's share of the global certificate at the shared vector, so a
/// coordinator can certify the whole model from K small replies without
/// seeing any data. With n examples and the blocks' sums added up:
///   dual models:   P = loss_sum / n + lambda/2 ||w||^2,  gap = gap_sum / n
///   primal models: P = loss_sum / n + reg_sum,           gap = gap_sum
/// and D = P - gap in both. Dual gaps are the cancellation-free
/// per-example gaps (exact when w = A^T alpha / (lambda n), which the shared
/// w is up to the rounding of its accumulated deltas); primal gaps use the
/// bounded-support conjugate with B = max(P(0)/lambda, max_j in block |w_j|),
/// valid per block because every feasible box gives a valid dual.
struct BlockCertificate {
  double loss_sum = 0.0;  ///< sum of the block's example losses
  double gap_sum = 0.0;   ///< sum of its coordinate gaps
  double reg_sum = 0.0;   ///< primal: lambda R(w) over its features; dual: 0
};

/// What one Solve returns.
struct LocalUpdate {
  std::vector<double> delta_shared;  ///< change of the shared vector (d for dual, n for primal)
  int64_t steps = 0;                 ///< coordinate steps taken (fewer if interrupted)
  int64_t nnz_touched = 0;           ///< nonzeros read or written
};

/// A worker's CoCoA+ subproblem solver over its own block; owns the block
/// and its coordinates. Not thread-safe: one per worker.
class LocalSolver {
 public:
  virtual ~LocalSolver() = default;
  /// Runs `steps` coordinate steps (random order, without replacement within
  /// each pass over the block) against `shared`, updating this block's own
  /// coordinates (alpha or w_block) and returning the change of the shared
  /// vector. `gamma` scales the local coordinates' commit, as in CoCoA+.
  /// `interrupt` (optional, set by another thread) ends the solve early,
  /// within kInterruptCheck steps: fewer local steps are still a valid
  /// CoCoA+ update (LocalUpdate::steps says how many ran). Errors:
  /// InvalidArgument for `shared` of the wrong length or a bad sigma_prime,
  /// gamma or steps.
  virtual absl::StatusOr<LocalUpdate> Solve(const std::vector<double>& shared,
                                            double sigma_prime, double gamma, int64_t steps,
                                            const std::atomic<bool>* interrupt = nullptr) = 0;
  /// How often Solve looks at its interrupt flag (coordinate steps).
  static constexpr int64_t kInterruptCheck = 256;
  /// This block's share of the certificate at `shared` (w for dual models,
  /// v = A w for primal ones), for the block's current coordinates. Errors:
  /// InvalidArgument for `shared` of the wrong length.
  virtual absl::StatusOr<BlockCertificate> Certify(const std::vector<double>& shared) const = 0;
  /// This block's coordinates: alpha of its rows, or w of its columns.
  virtual const std::vector<double>& coordinates() const = 0;
  /// Replaces them (checkpoint restore, re-partition). Errors:
  /// InvalidArgument for the wrong count or a value outside the domain.
  virtual absl::Status set_coordinates(std::vector<double> c) = 0;
  /// Replaces the block by `block` (DuHL's next block on a device that
  /// holds part of the data): kept[k] >= 0 says that outer slot k of
  /// `block` is slot kept[k] of the block held now, whose data this solver
  /// already holds, so only the others are copied in. The coordinates are
  /// then set with set_coordinates. Returns the bytes copied in (a device
  /// solver: host to device, everything it uploads). Default: Unimplemented
  /// (DuHL then makes a new solver per block).
  virtual absl::StatusOr<int64_t> Reload(LocalBlock block, const std::vector<int64_t>& kept) {
    (void)block;
    (void)kept;
    return absl::UnimplementedError("this local solver cannot reload its block");
  }

 protected:
  /// For Solve's loop: whether to stop before step `step` (the flag is read
  /// once every kInterruptCheck steps).
  static bool Interrupted(const std::atomic<bool>* interrupt, int64_t step) {
    return interrupt != nullptr && step % kInterruptCheck == 0 &&
           interrupt->load(std::memory_order_relaxed);
  }
};

/// MakeLocalSolver's checks of a dual model's block (rows, labels,
/// n_global), for every local solver of such blocks (the GPU's too).
/// Errors: InvalidArgument naming the field or the block row.
absl::Status CheckDualBlock(const LocalBlock& block, const ModelSpec& model);

/// A dual local solver's checks of Solve's arguments for a block of
/// `features` columns. Errors: InvalidArgument naming the argument.
absl::Status CheckDualSolve(const std::vector<double>& shared, int64_t features,
                            double sigma_prime, double gamma, int64_t steps);

/// MakeLocalSolver's checks of a primal model's block (columns over all n
/// rows, all n labels, the loss rows), for every local solver of such
/// blocks (the GPU's too). Errors: InvalidArgument naming the field.
absl::Status CheckPrimalBlock(const LocalBlock& block, const ModelSpec& model);

/// A primal local solver's checks of Solve's arguments for a block over
/// `n` rows (shared v finite, of n entries). Errors: InvalidArgument.
absl::Status CheckPrimalSolve(const std::vector<double>& shared, int64_t n, double sigma_prime,
                              double gamma, int64_t steps);

/// A LocalSolver (dual or primal by the model) that owns `block`, with its
/// coordinates at 0 and its step order seeded by `seed`. Errors:
/// InvalidArgument for an invalid model, an empty block, or labels not in
/// {-1,+1} for a classification model.
absl::StatusOr<std::unique_ptr<LocalSolver>> MakeLocalSolver(LocalBlock block,
                                                             const ModelSpec& model,
                                                             uint64_t seed);

}  // namespace dml
