// CoCoA+ local subproblem solver for the dual (SDCA) models: ridge, logistic,
// hinge SVM, squared-hinge SVM (Ma, Smith, Jaggi, Jordan, Richtarik, Takac,
// "Adding vs. averaging in distributed primal-dual optimization", ICML 2015,
// Eq. (10); Smith et al., "CoCoA: A general framework for
// communication-efficient distributed optimization", JMLR 2018).
//
// Worker k owns the examples of its block (alpha_[k], global n examples) and,
// given the shared w = A^T alpha / (lambda n), approximately maximises the
// local subproblem in delta_alpha_[k]
//   G_k(dA) = (1/n) sum_{i in k} NegConj(alpha_i + dA_i) - (1/n) w.(A_k^T dA)
//             - (sigma'/2) lambda ||A_k^T dA / (lambda n)||^2   (+ const)
// by `steps` exact coordinate steps in random order (passes without
// replacement) against u = w + sigma' * delta_w, delta_w = A_k^T dA/(lambda n),
// i.e. the SCD step of scd_dual.cpp with z = x_i.u and q' = sigma' ||x_i||^2/(lambda n).
// At the end alpha_[k] += gamma * dA and Solve returns delta_shared = delta_w,
// NOT scaled by gamma. The coordinator must apply
//   w += gamma * sum_k delta_w_k,
// which keeps w = A^T alpha / (lambda n) (CoCoA+ adding: gamma = 1,
// sigma' = K; averaging: gamma = 1/K, sigma' = 1).
// alpha starts at 0 for every objective, so the coordinator starts at w = 0.
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "dml/solver/internal/scd_dual_kernel.hpp"
#include "dml/solver/internal/solvers.hpp"
#include "dml/util/status.hpp"

namespace dml::internal {
namespace {

template <typename Obj>
class DualLocalSolver final : public LocalSolver {
 public:
  DualLocalSolver(LocalBlock block, const ModelSpec& model, uint64_t seed)
      : block_(std::move(block)),
        inv_ln_(1.0 / (model.lambda * static_cast<double>(block_.n_global))),
        xx_(block_.rows.OuterSquaredNorms()),
        alpha_(static_cast<std::size_t>(block_.rows.rows()), 0.0),
        local_(alpha_.size(), 0.0),
        order_(alpha_.size()),
        rng_(seed) {
    std::iota(order_.begin(), order_.end(), int64_t{0});
  }

  absl::StatusOr<LocalUpdate> Solve(const std::vector<double>& shared, double sigma_prime,
                                    double gamma, int64_t steps,
                                    const std::atomic<bool>* interrupt) override {
    const CsrMatrix& x = block_.rows;
    DML_RETURN_IF_ERROR(CheckDualSolve(shared, x.cols(), sigma_prime, gamma, steps));
    const int64_t nk = x.rows();
    const uint32_t* idx = x.indices().data();
    const float* val = x.values().data();
    const int64_t* off = x.offsets().data();
    u_ = shared;
    local_ = alpha_;  // alpha + dA, the working point
    const double sigma_inv_ln = sigma_prime * inv_ln_;
    LocalUpdate up;
    int64_t pos = nk;
    int64_t s = 0;
    for (; s < steps; ++s) {
      if (Interrupted(interrupt, s)) break;
      if (pos == nk) {
        rng_.Shuffle(order_);
        pos = 0;
      }
      const int64_t i = order_[pos++];
      const uint32_t len = static_cast<uint32_t>(off[i + 1] - off[i]);
      const uint32_t* ix = idx + off[i];
      const float* vx = val + off[i];
      const double z = SparseDot<false>(ix, vx, len, u_.data());
      up.nnz_touched += len;
      const double y = block_.y[i];
      const double a = local_[i];
      const double an = Obj::Step(y, a, z, xx_[i] * sigma_inv_ln);
      const double d = an - a;
      if (d != 0.0) {
        local_[i] = an;
        SparseAxpy<false>(ix, vx, len, d * sigma_inv_ln, u_.data());
      }
    }
    up.steps = s;
    // delta_w exactly from dA (u - w would lose digits), then the commit.
    up.delta_shared.assign(static_cast<std::size_t>(x.cols()), 0.0);
    for (int64_t i = 0; i < nk; ++i) {
      const double da = local_[i] - alpha_[i];
      if (da == 0.0) continue;
      for (int64_t k = off[i]; k < off[i + 1]; ++k) {
        up.delta_shared[idx[k]] += da * static_cast<double>(val[k]);
      }
      double next = gamma == 1.0 ? local_[i] : alpha_[i] + gamma * da;
      if (!Obj::InDomain(y(i), next)) next = gamma >= 0.5 ? local_[i] : alpha_[i];  // rounding
      alpha_[i] = next;
    }
    for (double& v : up.delta_shared) v *= inv_ln_;
    return up;
  }

  absl::StatusOr<BlockCertificate> Certify(const std::vector<double>& shared) const override {
    const CsrMatrix& x = block_.rows;
    if (static_cast<int64_t>(shared.size()) != x.cols()) {
      return absl::InvalidArgumentError(absl::StrCat("certify: shared w has ", shared.size(),
                                                     " entries but the block has ", x.cols(),
                                                     " features"));
    }
    BlockCertificate c;
    for (int64_t i = 0; i < x.rows(); ++i) {
      const SparseView r = x.outer(i);
      double z = 0.0;
      for (std::size_t k = 0; k < r.size; ++k) z += static_cast<double>(r.value[k]) * shared[r.index[k]];
      c.loss_sum += Obj::Loss(y(i), z);
      c.gap_sum += Obj::CoordinateGap(y(i), alpha_[i], z);
    }
    return c;
  }

  const std::vector<double>& coordinates() const override { return alpha_; }

  absl::Status set_coordinates(std::vector<double> c) override {
    if (c.size() != alpha_.size()) {
      return absl::InvalidArgumentError(absl::StrCat("block has ", alpha_.size(),
                                                     " examples but ", c.size(),
                                                     " coordinates were given"));
    }
    for (std::size_t i = 0; i < c.size(); ++i) {
      if (!Obj::InDomain(y(static_cast<int64_t>(i)), c[i])) {
        return absl::InvalidArgumentError(absl::StrCat(
            "coordinate ", i, " = ", c[i], " is outside the dual domain (label ", y(i), ")"));
      }
    }
    alpha_ = std::move(c);
    return absl::OkStatus();
  }

 private:
  double y(int64_t i) const { return block_.y[i]; }

  LocalBlock block_;
  double inv_ln_;
  std::vector<double> xx_;
  std::vector<double> alpha_;
  std::vector<double> local_;
  std::vector<double> u_;
  std::vector<int64_t> order_;
  Rng rng_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<LocalSolver>> MakeDualLocalSolver(LocalBlock block,
                                                                 const ModelSpec& model,
                                                                 uint64_t seed) {
  if (FormulationOf(model.kind) != Formulation::kDual) {
    return absl::InvalidArgumentError(absl::StrCat("MakeDualLocalSolver needs a dual model; got ",
                                                   AsAbsl(ModelName(model.kind))));
  }
  DML_RETURN_IF_ERROR(CheckDualBlock(block, model));
  return VisitDualObjective(
      model.kind, [&](auto obj) -> absl::StatusOr<std::unique_ptr<LocalSolver>> {
        using Obj = decltype(obj);
        return std::unique_ptr<LocalSolver>(
            std::make_unique<DualLocalSolver<Obj>>(std::move(block), model, seed));
      });
}

}  // namespace dml::internal

namespace dml {

absl::Status CheckDualBlock(const LocalBlock& block, const ModelSpec& model) {
  DML_RETURN_IF_ERROR(Validate(model));
  const int64_t nk = block.rows.rows();
  if (nk == 0) return absl::InvalidArgumentError("empty block: no examples");
  if (static_cast<int64_t>(block.y.size()) != nk) {
    return absl::InvalidArgumentError(
        absl::StrCat("block has ", nk, " rows but ", block.y.size(), " labels"));
  }
  if (block.n_global < nk) {
    return absl::InvalidArgumentError(absl::StrCat(
        "n_global = ", block.n_global, " is smaller than the block's ", nk, " examples"));
  }
  const bool classification = TaskOf(model.kind) == Task::kClassification;
  for (int64_t i = 0; i < nk; ++i) {
    const float y = block.y[i];
    if (!std::isfinite(y)) {
      return absl::InvalidArgumentError(absl::StrCat("label of block row ", i, " is not finite"));
    }
    if (classification && y != 1.0f && y != -1.0f) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model ", AsAbsl(ModelName(model.kind)), " needs labels in {-1,+1}; block row ", i,
          " has label ", y));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckDualSolve(const std::vector<double>& shared, int64_t features,
                            double sigma_prime, double gamma, int64_t steps) {
  if (static_cast<int64_t>(shared.size()) != features) {
    return absl::InvalidArgumentError(absl::StrCat("shared w has ", shared.size(),
                                                   " entries but the block has ", features,
                                                   " features"));
  }
  if (!(sigma_prime > 0.0) || !std::isfinite(sigma_prime)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sigma' must be positive and finite, got ", sigma_prime));
  }
  if (!(gamma > 0.0 && gamma <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("gamma must be in (0, 1], got ", gamma));
  }
  if (steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat("steps must be >= 0, got ", steps));
  }
  for (std::size_t j = 0; j < shared.size(); ++j) {
    if (!std::isfinite(shared[j])) {
      return absl::InvalidArgumentError(absl::StrCat("shared w[", j, "] is not finite"));
    }
  }
  return absl::OkStatus();
}

}  // namespace dml
