#pragma once
// Minibatch building blocks of proximal SGD on the primal
//   P(w) = (1/n) sum_i loss(y_i, x_i.w) + lambda * R(w)
// for the parameter-server modes, whose workers own a dense w (or a copy of
// the server's) and process one minibatch of row indices at a time. They are
// the same update as Train() with SolverKind::kSgd (solver/sgd.cpp), which
// applies it lazily on a scaled sparse representation instead of densely.
//
// All functions cost O(nnz of the batch + d) and are pure apart from the
// caller-owned `w` of SgdStep / ProximalRegularizerStep. Thread-safety: the
// dataset is only read, so any number of threads may call them concurrently
// on distinct `w`.
//
// Errors (InvalidArgument): invalid model (see Validate), w's length not the
// data's column count, labels and rows disagreeing in number, an empty batch,
// a row index outside [0, rows) (named by its position in the batch), a
// classification model with a batch label not in {-1,+1}, or a step that is
// not positive and finite.

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "dml/data/sparse.hpp"
#include "dml/objective/model.hpp"

namespace dml {

/// (1/|rows|) sum_{i in rows} loss'(y_i, x_i.w) x_i, plus lambda times a
/// subgradient of R at w when `include_regularizer` (the minimum-norm one for
/// the L1 part: 0 where w_j = 0; hinge uses the subgradient -y where
/// y z < 1, else 0). Length d. A row listed twice counts twice. Servers that
/// apply the regulariser themselves, by its proximal step, pass false and
/// then call ProximalRegularizerStep.
absl::StatusOr<std::vector<double>> MinibatchGradient(const Dataset& data,
                                                      const ModelSpec& model,
                                                      const std::vector<int64_t>& rows,
                                                      const std::vector<double>& w,
                                                      bool include_regularizer = true);

/// One proximal SGD step on the minibatch `batch_rows` with step size `step`:
///   w <- prox_{step * lambda * R}(w - step * (1/|B|) sum_{i in B} loss'(y_i, x_i.w) x_i),
/// the loss gradient taken at the incoming w for every row (a true minibatch,
/// not a sequence of single-example steps). The prox of the elastic net is
///   prox(u)_j = SoftThreshold(u_j, step*lambda*eta) / (1 + step*lambda*(1-eta)),
/// so L2 models shrink w implicitly (stable for any step) and L1 models
/// soft-threshold (exact zeros). With per-feature `factors`
/// (FeatureStepFactors; empty: all 1) feature j steps by step * factors[j],
/// its prox too: a diagonal preconditioner, with the same fixed points. On
/// error (also factors neither empty nor d positive values) w is left
/// unchanged.
absl::Status SgdStep(const Dataset& data, const ModelSpec& model,
                     const std::vector<int64_t>& batch_rows, double step,
                     std::vector<double>& w, const std::vector<double>& factors = {});

/// SgdStep's steps on a model held lazily (w = a_g * SoftThreshold(v, U_g -
/// u_j), one scale and threshold sum per group of features with equal step
/// factors): a step costs O(nnz of the batch + groups) instead of O(d), so
/// a worker that steps its own model many times between exchanges pays the
/// O(d) of Store/Load once per exchange. The same iterates as SgdStep up to
/// rounding. Keeps `data` by reference. Not thread-safe.
class LazySgdModel {
 public:
  virtual ~LazySgdModel() = default;
  /// The model <- w (O(d)); w has d entries.
  virtual void Load(const std::vector<double>& w) = 0;
  /// w <- the model (O(d)).
  virtual void Store(std::vector<double>& w) const = 0;
  /// SgdStep(data, model, rows, step, w, factors) on the held model.
  /// Errors: SgdStep's; more rows than max_batch.
  virtual absl::Status Step(const std::vector<int64_t>& rows, double step) = 0;
};
/// Errors: invalid model, factors neither empty nor d positive values,
/// max_batch 0.
absl::StatusOr<std::unique_ptr<LazySgdModel>> MakeLazySgdModel(
    const Dataset& data, const ModelSpec& model, std::size_t max_batch,
    const std::vector<double>& factors = {});

/// w <- prox_{step * lambda * R}(w), the regulariser half of SgdStep, for a
/// server that applies aggregated loss gradients itself (per feature
/// step * factors[j] when factors are given). Errors: invalid model, a step
/// that is not positive and finite, factors of another length than w.
absl::Status ProximalRegularizerStep(const ModelSpec& model, double step, std::vector<double>& w,
                                     const std::vector<double>& factors = {});

/// Per column j of `data`: sum_i x_ij^2 (entries [0, d)), then its count
/// of nonzeros (entries [d, 2d)): a row partition's share of
/// FeatureStepFactors' input (shares add). O(nnz).
std::vector<double> ColumnSquareSums(const Dataset& data);

/// Per-feature step factors (SgdOptions::feature_steps), a diagonal
/// preconditioner: f_j = k / (q_j + lambda), q_j the feature's mean square
/// over the rows where it is nonzero (its units squared: a feature in
/// units s times larger gets a step s^2 times smaller, so the model does
/// not depend on the units; over all rows, a rare feature of a sparse set
/// would get a step as large as it is rare, and noise to match), k such
/// that sum_j f_j c_j = sum_j c_j with c_j the mean square over all rows
/// (a row's expected squared norm in the steps' metric stays what it was,
/// so a calibrated step0 keeps its meaning); each rounded to the nearest
/// power of two (lazy L2 shrinks by groups of equal factors). A column
/// without nonzeros gets 1. `column_sums` is ColumnSquareSums' layout (2 d
/// entries). Only where the units differ: empty (no scaling) unless the
/// 95th percentile of q over the columns with 10 nonzeros or more is more
/// than kFeatureStepSpread times the 5th (tf-idf news20: 10, one step was better there; binary
/// a9a: 1; unscaled tabular sets: 1e8 to 1e9); also empty for no rows, an
/// all-empty matrix or an odd length.
inline constexpr double kFeatureStepSpread = 100.0;
std::vector<double> FeatureStepFactors(const std::vector<double>& column_sums, int64_t rows,
                                       const ModelSpec& model);

/// OK for no factors (all 1) or d positive, finite ones; else
/// InvalidArgument naming the length or the first bad factor. Every
/// function here taking factors checks them with it.
absl::Status CheckFeatureStepFactors(const std::vector<double>& factors, std::size_t d);

/// Features grouped by equal step factor (FeatureStepFactors rounds them to
/// powers of two), so that a lazy L2 shrink keeps one scale per group
/// instead of per feature: `of` maps each of the d features to its group,
/// `factor` is each group's factor (one group of 1 for no factors; past
/// 65535 distinct factors the last group takes the rest).
struct FeatureStepGroups {
  std::vector<uint16_t> of;
  std::vector<double> factor;
};
FeatureStepGroups GroupFeatureSteps(const std::vector<double>& factors, std::size_t d);

/// For Hogwild's sparse steps: 1 / P(a minibatch of `batch_size` rows drawn
/// with replacement touches column j), from the column's frequency in
/// `data`; 0 for columns no row has. O(nnz + d).
std::vector<double> InverseTouchProbabilities(const Dataset& data, int batch_size);

/// Reusable buffers of HogwildStep (one per thread).
struct HogwildScratch {
  std::vector<double> g;          ///< dense gradient, zero outside `touched`
  std::vector<double> deriv;      ///< loss' / |batch| per batch row
  std::vector<uint32_t> touched;  ///< columns the batch touches
};

/// One Hogwild step (Niu, Recht, Re, Wright, NIPS 2011) on the shared model
/// w[0, d) that other threads update concurrently: the minibatch's loss
/// gradient, and the regulariser only on the columns the batch touches,
/// each with strength scaled by inv_touch[j] (so the regulariser's
/// expected step is the full one), as the prox
///   w_j <- prox_{step inv_touch[j] lambda R}(w_j - step g_j),
/// added to w_j with an atomic compare-and-swap; w is read with relaxed
/// loads. O(nnz of the batch): no dense pass over w. Feature j's step is
/// step * factors[j] where factors are given. Errors as SgdStep's, or
/// inv_touch's length not d; w is then unchanged.
absl::Status HogwildStep(const Dataset& data, const ModelSpec& model,
                         const std::vector<int64_t>& rows, double step,
                         const std::vector<double>& inv_touch, std::atomic<double>* w,
                         std::size_t d, HogwildScratch& scratch,
                         const std::vector<double>& factors = {});

/// loss'(y_i, x_i.w) for every row of `data` (hinge: -y where y z < 1, else
/// 0): an SVRG snapshot's per-row derivatives. Errors: as MinibatchGradient.
absl::StatusOr<std::vector<double>> LossDerivatives(const Dataset& data, const ModelSpec& model,
                                                    const std::vector<double>& w);

/// SVRG's minibatch estimate of the loss gradient (Johnson & Zhang, NIPS
/// 2013; with the regulariser's prox applied by the caller, Prox-SVRG, Xiao
/// & Zhang 2014):
///   (1/|B|) sum_{i in B} (loss'(y_i, x_i.w) - anchor[i]) x_i + mu,
/// anchor = LossDerivatives at the snapshot, mu the full loss gradient
/// there (of every worker's rows). Unbiased, and its variance vanishes as w
/// and the snapshot approach the optimum. Length d, dense (mu). Errors: as
/// MinibatchGradient, or anchor / mu of the wrong length.
absl::StatusOr<std::vector<double>> SvrgGradient(const Dataset& data, const ModelSpec& model,
                                                 const std::vector<int64_t>& rows,
                                                 const std::vector<double>& w,
                                                 const std::vector<double>& anchor,
                                                 const std::vector<double>& mu);

/// SAGA's part of a minibatch step that its worker computes (Defazio, Bach,
/// Lacoste-Julien, NIPS 2014; asynchronous: ASAGA, Leblond, Pedregosa,
/// Lacoste-Julien, JMLR 2018): with `memory` the loss' each row had when
/// last drawn (0 before),
///   (1/|B|) sum_{i in B} (loss'(y_i, x_i.w) - memory[i]) x_i,
/// then memory[i] = loss'(y_i, x_i.w) (a row drawn twice counts once).
/// The caller adds the mean of every row's memory times its x_i (a
/// parameter shard keeps it: it changes by this vector times |B| / n) and
/// applies the regulariser's prox. Length d, nonzero only on the batch's
/// columns. Errors: as MinibatchGradient, or memory of another length than
/// the rows (memory is then unchanged).
absl::StatusOr<std::vector<double>> SagaGradient(const Dataset& data, const ModelSpec& model,
                                                 const std::vector<int64_t>& rows,
                                                 const std::vector<double>& w,
                                                 std::vector<double>& memory);

/// step0 for SGD on `data` when none is given (SgdOptions::step0 == 0):
/// Bottou's calibration ("Stochastic gradient descent tricks", 2012). On a
/// seeded sample of at most 1000 rows, five passes of minibatch SGD (batch
/// min(batch_size, rows / 4), the decaying schedule of that step0) from
/// w = 0 are run for step0 = 1, then doubled while the sample's objective
/// falls, else halved while it falls (2^-40 .. 2^20); the best is returned.
/// A candidate that diverges, or ends above the objective at w = 0, counts
/// as diverged, and halving goes on through those. The trials step with
/// `factors` (SgdStep), as training will. Errors: those of SgdStep;
/// FailedPrecondition when no step in the range lowers the objective.
absl::StatusOr<double> CalibrateStep(const Dataset& data, const ModelSpec& model, int batch_size,
                                     uint64_t seed, const std::vector<double>& factors = {});

/// SgdOptions::step_decay resolved: itself if >= 0, else lambda * step0.
double ResolveStepDecay(const ModelSpec& model, double step0, double step_decay);

/// The Polyak-Ruppert average of the last iterates handed to Add: those
/// since the last power of two but one (2^(k-1) <= i <= added, so always at
/// least the last half: the early iterates of a decaying schedule would
/// otherwise weigh on it forever). O(d) per Add, 3 d doubles. Not
/// thread-safe.
class IterateAverage {
 public:
  /// Adds w (every w must have the same length).
  void Add(const std::vector<double>& w);
  /// The average; empty before the first Add.
  const std::vector<double>& Value() const { return avg_; }
  /// Iterates in the average.
  int Count() const { return prev_count_ + cur_count_; }
  /// Iterates added in all.
  int Added() const { return added_; }

 private:
  std::vector<double> prev_, cur_, avg_;  // blocks [2^(k-1), 2^k), [2^k, added]; the mix
  int prev_count_ = 0;
  int cur_count_ = 0;
  int added_ = 0;
};

}  // namespace dml
