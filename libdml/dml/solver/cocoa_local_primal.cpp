// CoCoA+ local solver for the primal models (lasso, elastic net,
// L1-logistic): worker k owns a block of features (columns) of A.
//
// Problem:   for the shared v = A w sent by the coordinator, approximately
//              min_dw  (1/sigma') f(v + sigma' A_[k] dw) + sum_{j in k} g_j(w_j + dw_j)
//            by `steps` coordinate steps (Ma, Smith, Jaggi et al., "Adding
//            vs. averaging in distributed primal-dual optimization", ICML
//            2015; Smith et al., "CoCoA: A general framework for
//            communication-efficient distributed optimization", JMLR 2018,
//            primal setting). With sigma' = gamma K the sum of the K local
//            objectives bounds the global one: for gamma = 1, by convexity of
//            f, f(v + sum_k A_[k] dw_k) <= (1/K) sum_k f(v + K A_[k] dw_k),
//            so every local decrease is a global one. For the squared loss
//            this is exactly the quadratic CoCoA+ subproblem.
// Variables: w of this block's columns (kept here), and the local state of
//            v_local = v + sigma' delta_v (residual or exp(v_local)), rebuilt
//            from `shared` at every Solve.
// Steps:     the objectives' coordinate steps (closed-form prox for the
//            squared loss; CDN for the logistic loss) with the column scaled
//            by sigma': gradient a_j^T grad f(v_local), curvature sigma' times
//            the coordinate's curvature at v_local. Random order, without
//            replacement within each pass over the block; passes continue
//            across Solve calls.
// Result:    w_block += gamma dw, and delta_shared = delta_v = A_[k] dw, NOT
//            multiplied by gamma: the coordinator applies v += gamma * sum_k
//            delta_v_k, keeping v = A w.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dml/objective/elastic_net.hpp"
#include "dml/objective/lasso.hpp"
#include "dml/objective/logistic_l1.hpp"
#include "dml/solver/internal/primal_cd.hpp"
#include "dml/solver/internal/solvers.hpp"
#include "dml/util/rng.hpp"
#include "dml/util/status.hpp"

namespace dml::internal {
namespace {

template <typename Obj>
class PrimalLocalSolver final : public LocalSolver {
 public:
  PrimalLocalSolver(LocalBlock block, const ModelSpec& model, uint64_t seed)
      : model_(model),
        loss_begin_(block.loss_row_begin),
        loss_end_(block.loss_row_end),
        cols_(std::move(block.cols)),
        y_(std::move(block.y)),
        obj_(Obj::Make(model, y_)),
        stats_(Obj::PrepareColumns(cols_, y_)),
        w_(static_cast<std::size_t>(cols_.cols()), 0.0),
        order_(static_cast<std::size_t>(cols_.cols())),
        rng_(seed) {
    std::iota(order_.begin(), order_.end(), 0u);
    next_ = order_.size();  // shuffle before the first step
    std::size_t max_col = 1;
    for (int64_t j = 0; j < cols_.cols(); ++j) max_col = std::max(max_col, cols_.outer(j).size);
    scratch_.resize(max_col);
  }
  PrimalLocalSolver(const PrimalLocalSolver&) = delete;  // obj_ points into y_
  PrimalLocalSolver& operator=(const PrimalLocalSolver&) = delete;

  absl::StatusOr<LocalUpdate> Solve(const std::vector<double>& shared, double sigma_prime,
                                    double gamma, int64_t steps,
                                    const std::atomic<bool>* interrupt) override {
    const int64_t n = cols_.rows();
    DML_RETURN_IF_ERROR(CheckPrimalSolve(shared, n, sigma_prime, gamma, steps));

    std::vector<double> state(static_cast<std::size_t>(n));
    Obj::InitState(shared, y_, state.data());
    const std::size_t d = w_.size();
    std::vector<double> dw(d, 0.0);
    LocalUpdate update;
    int64_t s = 0;
    for (; s < steps; ++s) {
      if (Interrupted(interrupt, s)) break;
      if (next_ == d) {
        rng_.Shuffle(order_);
        next_ = 0;
      }
      const uint32_t j = order_[next_++];
      const double current = w_[j] + dw[j];
      const auto step = obj_.template Step<PlainAccess>(cols_.outer(j), stats_[j], state.data(),
                                                        scratch_.data(), current, sigma_prime);
      dw[j] = step.w - w_[j];
      update.nnz_touched += step.nnz;
      if (step.resync) {  // rebuild v_local = shared + sigma' A_[k] dw exactly
        std::vector<double> v = ColumnTimes(cols_, dw);
        for (int64_t i = 0; i < n; ++i) v[i] = shared[i] + sigma_prime * v[i];
        Obj::InitState(v, y_, state.data());
      }
    }
    update.steps = s;

    // delta_v = A_[k] dw exactly (not from the drifting local state).
    update.delta_shared = ColumnTimes(cols_, dw);
    for (std::size_t j = 0; j < d; ++j) w_[j] += gamma * dw[j];
    return update;
  }

  const std::vector<double>& coordinates() const override { return w_; }

  absl::Status set_coordinates(std::vector<double> c) override {
    if (c.size() != w_.size()) {
      return absl::InvalidArgumentError(absl::StrCat("primal local solver: ", c.size(),
                                                     " coordinates for a block of ", w_.size(),
                                                     " features"));
    }
    for (std::size_t j = 0; j < c.size(); ++j) {
      if (!std::isfinite(c[j])) {
        return absl::InvalidArgumentError(
            absl::StrCat("primal local solver: coordinate ", j, " is not finite"));
      }
    }
    w_ = std::move(c);
    return absl::OkStatus();
  }

  absl::StatusOr<BlockCertificate> Certify(const std::vector<double>& shared) const override {
    const int64_t n = cols_.rows();
    if (static_cast<int64_t>(shared.size()) != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("certify: shared v has ", shared.size(), " entries, expected ", n));
    }
    double w_max = 0.0;
    for (double wj : w_) w_max = std::max(w_max, std::abs(wj));
    const Obj obj = Obj::Make(model_, y_, w_max);
    const double inv_n = 1.0 / static_cast<double>(n);
    BlockCertificate c;
    // u = grad f(v) over all rows (each block needs all of it for its own
    // columns); the loss only over this block's share of the rows.
    std::vector<double> u(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      double value, derivative;
      Obj::ValueAndDerivative(y_[i], shared[i], &value, &derivative);
      if (i >= loss_begin_ && i < loss_end_) c.loss_sum += value;
      u[i] = derivative * inv_n;
    }
    for (int64_t j = 0; j < cols_.cols(); ++j) {
      const SparseView col = cols_.outer(j);
      double s = 0.0;
      for (std::size_t k = 0; k < col.size; ++k) s += static_cast<double>(col.value[k]) * u[col.index[k]];
      c.reg_sum += obj.Regularizer(w_[j]);
      c.gap_sum += obj.CoordinateGap(w_[j], s);
    }
    return c;
  }

 private:
  ModelSpec model_;
  int64_t loss_begin_;
  int64_t loss_end_;
  CscMatrix cols_;
  std::vector<float> y_;
  Obj obj_;  // after y_: keeps a pointer to its labels
  std::vector<typename Obj::Column> stats_;
  std::vector<double> w_;
  std::vector<uint32_t> order_;
  std::size_t next_ = 0;
  std::vector<double> scratch_;
  Rng rng_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<LocalSolver>> MakePrimalLocalSolver(LocalBlock block,
                                                                   const ModelSpec& model,
                                                                   uint64_t seed) {
  DML_RETURN_IF_ERROR(CheckPrimalBlock(block, model));
  switch (model.kind) {
    case ModelKind::kLasso:
      return std::unique_ptr<LocalSolver>(
          new PrimalLocalSolver<LassoObjective>(std::move(block), model, seed));
    case ModelKind::kElasticNet:
      return std::unique_ptr<LocalSolver>(
          new PrimalLocalSolver<ElasticNetObjective>(std::move(block), model, seed));
    case ModelKind::kLogisticL1:
      return std::unique_ptr<LocalSolver>(
          new PrimalLocalSolver<LogisticL1Objective>(std::move(block), model, seed));
    default: break;
  }
  return absl::InvalidArgumentError("primal local solver: not a primal model");
}

}  // namespace dml::internal

namespace dml {

absl::Status CheckPrimalBlock(const LocalBlock& block, const ModelSpec& model) {
  DML_RETURN_IF_ERROR(Validate(model));
  if (FormulationOf(model.kind) != Formulation::kPrimal) {
    return absl::InvalidArgumentError(absl::StrCat(
        "primal local solver: model ", AsAbsl(ModelName(model.kind)), " is solved in the dual"));
  }
  if (block.cols.cols() == 0) {
    return absl::InvalidArgumentError("primal local solver: the block has no columns");
  }
  if (block.cols.rows() == 0) {
    return absl::InvalidArgumentError("primal local solver: the block has no rows");
  }
  if (static_cast<int64_t>(block.y.size()) != block.cols.rows()) {
    return absl::InvalidArgumentError(absl::StrCat("primal local solver: the block has ",
                                                   block.cols.rows(), " rows but ", block.y.size(),
                                                   " labels (primal blocks hold all n labels)"));
  }
  if (block.n_global != 0 && block.n_global != block.cols.rows()) {
    return absl::InvalidArgumentError(absl::StrCat("primal local solver: n_global is ",
                                                   block.n_global, " but the block has ",
                                                   block.cols.rows(), " rows"));
  }
  if (block.loss_row_begin < 0 || block.loss_row_begin > block.loss_row_end ||
      block.loss_row_end > block.cols.rows()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "primal local solver: loss rows [", block.loss_row_begin, ", ", block.loss_row_end,
        ") are not a range inside [0, ", block.cols.rows(), ")"));
  }
  const bool classification = TaskOf(model.kind) == Task::kClassification;
  for (std::size_t i = 0; i < block.y.size(); ++i) {
    const float y = block.y[i];
    if (!std::isfinite(y) || (classification && y != 1.0f && y != -1.0f)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "primal local solver: label of example ", i, " is ", y, "; model ",
          AsAbsl(ModelName(model.kind)),
          classification ? " needs labels in {-1,+1}" : " needs finite labels"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPrimalSolve(const std::vector<double>& shared, int64_t n, double sigma_prime,
                              double gamma, int64_t steps) {
  if (static_cast<int64_t>(shared.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("primal local solver: shared v has ",
                                                   shared.size(), " entries, expected ", n));
  }
  if (!(sigma_prime > 0.0) || !std::isfinite(sigma_prime)) {
    return absl::InvalidArgumentError(
        absl::StrCat("primal local solver: sigma' must be positive and finite, got ", sigma_prime));
  }
  if (!(gamma > 0.0 && gamma <= 1.0)) {  // CoCoA+'s aggregation, as the dual solver's
    return absl::InvalidArgumentError(
        absl::StrCat("primal local solver: gamma must be in (0, 1], got ", gamma));
  }
  if (steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("primal local solver: steps must be >= 0, got ", steps));
  }
  for (std::size_t i = 0; i < shared.size(); ++i) {
    if (!std::isfinite(shared[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("primal local solver: shared v[", i, "] is not finite"));
    }
  }
  return absl::OkStatus();
}

}  // namespace dml
