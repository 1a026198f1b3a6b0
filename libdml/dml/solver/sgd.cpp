// Minibatch proximal stochastic gradient descent on the primal, for all seven
// models.
//
// Problem: min_w P(w) = (1/n) sum_i loss(y_i, x_i.w) + lambda * R(w),
//   R(w) = eta ||w||_1 + (1-eta)/2 ||w||^2, with eta = 0 (L2) for ridge,
//   logistic, svm and svm-squared, eta = 1 (L1) for lasso and logistic-l1,
//   eta = l1_ratio for the elastic net. Variables: w in R^d only; SGD keeps
//   no dual, so TrainResult::alpha stays empty.
//
// Update (forward-backward / proximal SGD: FOBOS, Duchi & Singer, JMLR 2009;
// step schedule and the sparse tricks after Bottou, "Large-scale machine
// learning with stochastic gradient descent", COMPSTAT 2010, and "Stochastic
// gradient descent tricks", Neural Networks: Tricks of the Trade, 2012):
//   B_t  = the next batch_size examples of this epoch's random permutation
//          (Rng(seed); a Fisher-Yates shuffle of the previous epoch's order;
//          the last batch of an epoch may be smaller)
//   g_t  = (1/|B_t|) sum_{i in B_t} loss'(y_i, x_i.w_t) x_i  (hinge: the
//          subgradient -y x where y z < 1, else 0), all at the same w_t
//   w_{t+1} = prox_{gamma_t lambda R}(w_t - gamma_t g_t),
//   prox(u)_j = SoftThreshold(u_j, gamma lambda eta) / (1 + gamma lambda (1-eta)),
//   gamma_t = step0 / (1 + step_decay * t), t = minibatches since the start.
// The whole regulariser goes through its proximal operator. For the L1 part
// that is the soft-threshold after the gradient step (exact zeros, no
// oscillation about 0 as with a subgradient), chosen over the cumulative
// penalty of Tsuruoka, Tsujii & Ananiadou (ACL 2009) because it is the exact
// prox and its lazy form below is exact too. For the L2 part it is the
// implicit shrink 1/(1 + gamma lambda), which unlike the explicit
// (1 - gamma lambda) never changes sign for gamma lambda >= 1.
//
// Sparse updates: a minibatch costs O(nnz(B_t)), not O(d). w = a * v with a
// scalar a (the scaled-vector trick of Pegasos, Shalev-Shwartz et al., ICML
// 2007, and Bottou's svmsgd), and the soft-thresholds a coordinate missed
// while no batch touched it are applied just in time, when it is next read.
// In v's units the prox of step t is
//   v <- SoftThreshold(v, tau_t / a_t),  a_{t+1} = a_t / (1 + gamma_t lambda (1-eta)),
// with tau_t = gamma_t lambda eta, and soft-thresholds compose additively,
// S(S(v, s), r) = S(v, s + r), so with the running sum U_t = sum_{s<t}
// tau_s / a_s and u_j = U when coordinate j was last brought up to date,
// reading v_j first applies v_j <- S(v_j, U - u_j): exactly the dense update.
// When a drops below 1e-6 every coordinate is brought up to date and a is
// folded into v (O(d), once every ~14 / (gamma lambda (1-eta)) minibatches).
//
// Momentum (heavy ball, Polyak 1964, in the proximal form of iPiano, Ochs et
// al., SIAM J. Imaging Sci. 2014):
//   w_{t+1} = prox_{gamma_t lambda R}(w_t - gamma_t g_t + momentum (w_t - w_{t-1})).
// The velocity is dense, so this mode drops the lazy representation and
// costs O(nnz(B_t) + d) per minibatch: use it for small d or large batches.
// It shares its dense step with the public SgdStep (momentum 0).
//
// Stopping: after every eval_every-th epoch (every epoch when eval_every is 0
// or 1), and after the last allowed one, the certificate of the iterate by a
// full pass (IterateShareOf + CertifyIterate, evaluate.hpp: a dual point from
// the margins for the L2 models, the bounded-support dual for the L1 ones),
// for ridge, logistic and squared hinge refined by a Newton step
// (newton_certificate.hpp: certificate_cg_steps + 2 more passes),
// so SGD stops on the gap rule as the other solvers do, or on target_primal,
// max_epochs, max_seconds or cancel; the last two are also polled every 64
// minibatches, so a cancelled or timed-out run may end mid-epoch (`epochs`
// then counts the completed ones). A non-finite P (step0 too large for the
// data) is an InvalidArgument error rather than a model.

#include "dml/solver/sgd.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numeric>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dml/objective/evaluate.hpp"
#include "dml/objective/losses.hpp"
#include "dml/objective/newton_certificate.hpp"
#include "dml/objective/regularizers.hpp"
#include "dml/solver/internal/solvers.hpp"
#include "dml/solver/internal/stopping.hpp"
#include "dml/util/rng.hpp"
#include "dml/util/status.hpp"

namespace dml {
namespace {

reg::ElasticNet RegularizerOf(const ModelSpec& m) {
  switch (m.kind) {
    case ModelKind::kLasso:
    case ModelKind::kLogisticL1: return {m.lambda, 1.0};
    case ModelKind::kElasticNet: return {m.lambda, m.l1_ratio};
    case ModelKind::kRidge:
    case ModelKind::kLogisticL2:
    case ModelKind::kHingeSvm:
    case ModelKind::kSquaredHingeSvm: return {m.lambda, 0.0};
  }
  return {m.lambda, 0.0};
}

/// Calls f with a value of the model's (stateless) loss type.
template <typename F>
auto WithLoss(ModelKind kind, F&& f) {
  switch (kind) {
    case ModelKind::kRidge:
    case ModelKind::kLasso:
    case ModelKind::kElasticNet: return f(loss::Squared{});
    case ModelKind::kLogisticL2:
    case ModelKind::kLogisticL1: return f(loss::Logistic{});
    case ModelKind::kHingeSvm: return f(loss::Hinge{});
    case ModelKind::kSquaredHingeSvm: return f(loss::SquaredHinge{});
  }
  return f(loss::Squared{});
}

/// prox_{step lambda R}(u)_j = shrink * SoftThreshold(u_j, threshold).
struct Prox {
  double threshold;
  double shrink;
};
Prox ProxOf(const reg::ElasticNet& r, double step) {
  return {step * r.lambda * r.eta, 1.0 / (1.0 + step * r.lambda * (1.0 - r.eta))};
}

/// deriv[k] = loss'(y, x.w) for row rows[k], all at the same iterate;
/// weight(j) reads w_j.
template <typename Loss, typename Weight>
void BatchDerivatives(const Dataset& data, const int64_t* rows, std::size_t b, Weight&& weight,
                      double* deriv) {
  for (std::size_t k = 0; k < b; ++k) {
    const SparseView r = data.x.outer(rows[k]);
    double z = 0.0;
    for (std::size_t p = 0; p < r.size; ++p) z += r.value[p] * weight(r.index[p]);
    deriv[k] = Loss::Derivative(data.y[rows[k]], z);
  }
}

/// add(j, coef[k] * x_kj) for every nonzero of every batch row.
template <typename Add>
void AddRows(const CsrMatrix& x, const int64_t* rows, std::size_t b, const double* coef,
             Add&& add) {
  for (std::size_t k = 0; k < b; ++k) {
    if (coef[k] == 0.0) continue;  // e.g. hinge outside the margin
    const SparseView r = x.outer(rows[k]);
    for (std::size_t p = 0; p < r.size; ++p) add(r.index[p], coef[k] * r.value[p]);
  }
}

/// The dense step shared by SgdStep and the momentum mode:
///   w <- prox(w - step F g + momentum (w - w_prev)),  w_prev <- the old w,
/// F the per-feature factors (null: all 1; the prox of feature j then has
/// step step F_j). w_prev may be null when momentum is 0. deriv has room
/// for b entries.
template <typename Loss>
void DenseStep(const Dataset& data, const reg::ElasticNet& r, const int64_t* rows, std::size_t b,
               double step, double momentum, std::vector<double>& w, std::vector<double>* w_prev,
               double* deriv, const double* factors) {
  BatchDerivatives<Loss>(data, rows, b, [&w](uint32_t j) { return w[j]; }, deriv);
  const double scale = -step / static_cast<double>(b);
  for (std::size_t k = 0; k < b; ++k) deriv[k] *= scale;
  if (w_prev != nullptr) {
    for (std::size_t j = 0; j < w.size(); ++j) {
      const double old = w[j];
      w[j] += momentum * (old - (*w_prev)[j]);
      (*w_prev)[j] = old;
    }
  }
  if (factors == nullptr) {
    AddRows(data.x, rows, b, deriv, [&w](uint32_t j, double delta) { w[j] += delta; });
    const Prox p = ProxOf(r, step);
    for (double& wj : w) wj = p.shrink * reg::SoftThreshold(wj, p.threshold);
    return;
  }
  AddRows(data.x, rows, b, deriv,
          [&w, factors](uint32_t j, double delta) { w[j] += factors[j] * delta; });
  for (std::size_t j = 0; j < w.size(); ++j) {
    const Prox p = ProxOf(r, step * factors[j]);
    w[j] = p.shrink * reg::SoftThreshold(w[j], p.threshold);
  }
}

/// Plain proximal SGD with w = a_g * v and just-in-time soft-thresholds
/// (see the file comment), one scale a_g and threshold sum U_g per group
/// of features with equal step factors: O(nnz(batch) + groups) per step.
template <typename Loss>
class LazyStepper {
 public:
  LazyStepper(const Dataset& data, const reg::ElasticNet& r, std::size_t max_batch,
              const std::vector<double>& factors)
      : data_(data),
        reg_(r),
        groups_(GroupFeatureSteps(factors, static_cast<std::size_t>(data.x.cols()))),
        a_(groups_.factor.size(), 1.0),
        big_u_(groups_.factor.size(), 0.0),
        v_(static_cast<std::size_t>(data.x.cols()), 0.0),
        u_(v_.size(), 0.0),
        deriv_(max_batch) {}

  void Step(const int64_t* rows, std::size_t b, double step) {
    BatchDerivatives<Loss>(
        data_, rows, b,
        [this](uint32_t j) {
          Sync(j);
          return a_[groups_.of[j]] * v_[j];
        },
        deriv_.data());
    // Every coordinate of the batch is now up to date (u_j == U), so the
    // gradient step may go straight into v.
    const double scale = -step / static_cast<double>(b);
    for (std::size_t k = 0; k < b; ++k) deriv_[k] *= scale;
    AddRows(data_.x, rows, b, deriv_.data(), [this](uint32_t j, double dv) {
      const uint16_t g = groups_.of[j];
      v_[j] += dv * groups_.factor[g] / a_[g];
    });
    bool small = false;
    for (std::size_t g = 0; g < a_.size(); ++g) {
      const Prox p = ProxOf(reg_, step * groups_.factor[g]);
      big_u_[g] += p.threshold / a_[g];
      a_[g] *= p.shrink;
      small |= a_[g] < kMinScale;
    }
    if (small) Normalize();
  }

  std::vector<double> Weights() const {
    std::vector<double> w(v_.size());
    Store(w);
    return w;
  }
  // w <- the model (O(d)).
  void Store(std::vector<double>& w) const {
    w.resize(v_.size());
    for (std::size_t j = 0; j < v_.size(); ++j) {
      const uint16_t g = groups_.of[j];
      w[j] = a_[g] * reg::SoftThreshold(v_[j], big_u_[g] - u_[j]);
    }
  }
  // The model <- w, nothing pending (O(d)).
  void Load(const std::vector<double>& w) {
    v_ = w;
    std::fill(u_.begin(), u_.end(), 0.0);
    std::fill(a_.begin(), a_.end(), 1.0);
    std::fill(big_u_.begin(), big_u_.end(), 0.0);
  }

 private:
  static constexpr double kMinScale = 1e-6;

  void Sync(uint32_t j) {
    const double big_u = big_u_[groups_.of[j]];
    v_[j] = reg::SoftThreshold(v_[j], big_u - u_[j]);
    u_[j] = big_u;
  }
  void Normalize() {
    for (std::size_t j = 0; j < v_.size(); ++j) {
      const uint16_t g = groups_.of[j];
      v_[j] = a_[g] * reg::SoftThreshold(v_[j], big_u_[g] - u_[j]);
      u_[j] = 0.0;
    }
    std::fill(a_.begin(), a_.end(), 1.0);
    std::fill(big_u_.begin(), big_u_.end(), 0.0);
  }

  const Dataset& data_;
  reg::ElasticNet reg_;
  FeatureStepGroups groups_;
  std::vector<double> a_;      // per group: w = a * v after the pending soft-thresholds
  std::vector<double> big_u_;  // per group: U, the sum of tau_s / a_s over the steps so far
  std::vector<double> v_;
  std::vector<double> u_;  // U of its group when each coordinate was last brought up to date
  std::vector<double> deriv_;
};

template <typename Loss>
class LazyModel final : public LazySgdModel {
 public:
  LazyModel(const Dataset& data, const reg::ElasticNet& r, std::size_t max_batch,
            const std::vector<double>& factors, const ModelSpec& model)
      : stepper_(data, r, max_batch, factors), data_(data), model_(model), max_batch_(max_batch) {}
  void Load(const std::vector<double>& w) override { stepper_.Load(w); }
  void Store(std::vector<double>& w) const override { stepper_.Store(w); }
  absl::Status Step(const std::vector<int64_t>& rows, double step) override;

 private:
  LazyStepper<Loss> stepper_;
  const Dataset& data_;
  ModelSpec model_;
  std::size_t max_batch_;
};

/// Proximal heavy ball on a dense w: O(nnz(batch) + d) per step.
template <typename Loss>
class MomentumStepper {
 public:
  MomentumStepper(const Dataset& data, const reg::ElasticNet& r, double momentum,
                  std::size_t max_batch, const std::vector<double>& factors)
      : data_(data),
        reg_(r),
        momentum_(momentum),
        factors_(factors),
        w_(static_cast<std::size_t>(data.x.cols()), 0.0),
        w_prev_(w_.size(), 0.0),
        deriv_(max_batch) {}

  void Step(const int64_t* rows, std::size_t b, double step) {
    DenseStep<Loss>(data_, reg_, rows, b, step, momentum_, w_, &w_prev_, deriv_.data(),
                    factors_.empty() ? nullptr : factors_.data());
  }
  std::vector<double> Weights() const { return w_; }

 private:
  const Dataset& data_;
  reg::ElasticNet reg_;
  double momentum_;
  std::vector<double> factors_;
  std::vector<double> w_;
  std::vector<double> w_prev_;
  std::vector<double> deriv_;
};

absl::StatusOr<Certificate> ExactCertificate(const Dataset& data, const ModelSpec& model,
                                             const std::vector<double>& w, double step0,
                                             int epoch) {
  for (double wj : w) {
    if (!std::isfinite(wj)) {
      return absl::InvalidArgumentError(absl::StrCat("sgd diverged: a weight is ", wj,
                                                     " after epoch ", epoch, "; sgd step0 = ",
                                                     step0, " is too large for this data"));
    }
  }
  DML_ASSIGN_OR_RETURN(const IterateShare share, IterateShareOf(data, model, w));
  DML_ASSIGN_OR_RETURN(const Certificate c, CertifyIterate(model, w, share));
  if (!std::isfinite(c.primal)) {
    return absl::InvalidArgumentError(absl::StrCat("sgd diverged: the primal is ", c.primal,
                                                   " after epoch ", epoch, "; sgd step0 = ",
                                                   step0, " is too large for this data"));
  }
  return c;
}

template <typename Stepper>
absl::StatusOr<TrainResult> RunEpochs(const Dataset& data, const ModelSpec& model,
                                      const SolverOptions& options,
                                      const std::vector<double>& factors, Stepper& stepper) {
  internal::StopChecker checker(options.stop, options.on_epoch);
  const int64_t n = data.x.rows();
  const int batch_size = ResolveBatch(options.sgd.batch_size, n, 1);
  const int64_t batch = std::min<int64_t>(batch_size, n);
  const int every = std::max(1, options.eval_every);
  double step0 = options.sgd.step0;
  if (step0 == 0.0) {
    DML_ASSIGN_OR_RETURN(step0, CalibrateStep(data, model, batch_size, options.seed, factors));
  }
  const double decay = ResolveStepDecay(model, step0, options.sgd.step_decay);
  IterateAverage average;
  const bool averaging = AveragesIterates(options.sgd, model);
  // The better certified of the iterate and the average, by primal (its
  // model into model_out).
  auto certify = [&](int epoch, std::vector<double>& model_out) -> absl::StatusOr<Certificate> {
    std::vector<double> w = stepper.Weights();
    DML_ASSIGN_OR_RETURN(Certificate c, ExactCertificate(data, model, w, step0, epoch));
    if (averaging && average.Count() > 1) {
      DML_ASSIGN_OR_RETURN(const Certificate a,
                           ExactCertificate(data, model, average.Value(), step0, epoch));
      if (a.primal < c.primal) {
        c = a;
        w = average.Value();
      }
    }
    if (options.sgd.certificate_cg_steps >= 0 && RefinesIterateCertificate(model.kind)) {
      DML_ASSIGN_OR_RETURN(c, CertifyIterateNewton(data, model, w, options.sgd.certificate_cg_steps));
    }
    model_out = std::move(w);
    return c;
  };
  std::vector<int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  Rng rng(options.seed);
  int64_t t = 0;  // minibatches so far
  int completed = 0;
  StopReason reason = StopReason::kMaxEpochs;
  std::optional<Certificate> cert;  // of the model in cert_w, while no step has run since
  std::vector<double> cert_w;
  for (int epoch = 1;; ++epoch) {
    if (auto r = checker.BeforeEpoch(epoch)) {
      reason = *r;
      break;
    }
    cert.reset();
    rng.Shuffle(order);
    int64_t nnz = 0;
    std::optional<StopReason> interrupted;
    for (int64_t begin = 0; begin < n; begin += batch) {
      const int64_t b = std::min(batch, n - begin);
      const int64_t* rows = order.data() + begin;
      for (int64_t k = 0; k < b; ++k) nnz += data.x.outer_nnz(rows[k]);
      stepper.Step(rows, static_cast<std::size_t>(b), step0 / (1.0 + decay * static_cast<double>(t)));
      ++t;
      if (t % 64 == 0 && begin + b < n) {
        if (checker.Cancelled()) {
          interrupted = StopReason::kCancelled;
        } else if (checker.Elapsed() >= options.stop.max_seconds) {
          interrupted = StopReason::kTimeBudget;
        }
        if (interrupted) break;
      }
    }
    if (interrupted) {
      reason = *interrupted;
      break;
    }
    completed = epoch;
    if (epoch % every == 0 || epoch == options.stop.max_epochs) {
      if (averaging) average.Add(stepper.Weights());
      DML_ASSIGN_OR_RETURN(const Certificate c, certify(epoch, cert_w));
      cert = c;
      Progress report;
      report.round = epoch;
      report.epochs = epoch;
      report.primal = c.primal;
      report.dual = c.dual;
      report.gap = c.gap;
      report.nnz_touched = nnz;
      if (auto r = checker.AfterEpoch(report)) {
        reason = *r;
        break;
      }
    }
  }

  TrainResult result;
  if (!cert) {
    DML_ASSIGN_OR_RETURN(cert, certify(completed, cert_w));
  }
  const Certificate& c = *cert;
  result.w = std::move(cert_w);
  result.primal = c.primal;
  result.dual = c.dual;
  result.gap = c.gap;
  result.epochs = completed;
  result.rounds = completed;
  result.reason = reason;
  result.seconds = checker.Elapsed();
  result.history = checker.TakeHistory();
  return result;
}

absl::Status CheckStep(double step) {
  if (!(step > 0) || !std::isfinite(step)) {
    return absl::InvalidArgumentError(absl::StrCat("sgd step must be positive and finite, got ", step));
  }
  return absl::OkStatus();
}

absl::Status CheckBatch(const Dataset& data, const ModelSpec& model,
                        const std::vector<int64_t>& rows, std::size_t d) {
  DML_RETURN_IF_ERROR(Validate(model));
  if (static_cast<int64_t>(d) != data.x.cols()) {
    return absl::InvalidArgumentError(absl::StrCat("model has ", d,
                                                   " weights but the data has ", data.x.cols(),
                                                   " features"));
  }
  if (static_cast<int64_t>(data.y.size()) != data.x.rows()) {
    return absl::InvalidArgumentError(
        absl::StrCat("data has ", data.x.rows(), " rows but ", data.y.size(), " labels"));
  }
  if (rows.empty()) return absl::InvalidArgumentError("empty minibatch");
  const bool classification = TaskOf(model.kind) == Task::kClassification;
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const int64_t i = rows[k];
    if (i < 0 || i >= data.x.rows()) {
      return absl::InvalidArgumentError(absl::StrCat("minibatch entry ", k, " is row ", i,
                                                     ", outside [0, ", data.x.rows(), ")"));
    }
    if (classification && data.y[i] != 1.0f && data.y[i] != -1.0f) {
      return absl::InvalidArgumentError(absl::StrCat("model ", AsAbsl(ModelName(model.kind)),
                                                     " needs labels in {-1,+1}; row ", i,
                                                     " has label ", data.y[i]));
    }
  }
  return absl::OkStatus();
}

// loss'(y_i, x_i.w) of each listed row (checked by the caller).
std::vector<double> RowDerivatives(const Dataset& data, const ModelSpec& model,
                                   const std::vector<int64_t>& rows, const std::vector<double>& w) {
  std::vector<double> deriv(rows.size());
  WithLoss(model.kind, [&](auto loss) {
    using Loss = decltype(loss);
    BatchDerivatives<Loss>(data, rows.data(), rows.size(), [&w](uint32_t j) { return w[j]; },
                           deriv.data());
  });
  return deriv;
}

}  // namespace

absl::StatusOr<std::vector<double>> MinibatchGradient(const Dataset& data, const ModelSpec& model,
                                                      const std::vector<int64_t>& rows,
                                                      const std::vector<double>& w,
                                                      bool include_regularizer) {
  DML_RETURN_IF_ERROR(CheckBatch(data, model, rows, w.size()));
  std::vector<double> deriv = RowDerivatives(data, model, rows, w);
  const double inv_b = 1.0 / static_cast<double>(rows.size());
  for (double& dk : deriv) dk *= inv_b;
  std::vector<double> g(w.size(), 0.0);
  AddRows(data.x, rows.data(), rows.size(), deriv.data(),
          [&g](uint32_t j, double delta) { g[j] += delta; });
  if (include_regularizer) {
    const reg::ElasticNet r = RegularizerOf(model);
    for (std::size_t j = 0; j < w.size(); ++j) g[j] += r.Subgradient(w[j]);
  }
  return g;
}

absl::StatusOr<std::vector<double>> LossDerivatives(const Dataset& data, const ModelSpec& model,
                                                    const std::vector<double>& w) {
  std::vector<int64_t> rows(static_cast<std::size_t>(data.x.rows()));
  std::iota(rows.begin(), rows.end(), int64_t{0});
  if (rows.empty()) return std::vector<double>{};
  DML_RETURN_IF_ERROR(CheckBatch(data, model, rows, w.size()));
  return RowDerivatives(data, model, rows, w);
}

absl::StatusOr<std::vector<double>> SvrgGradient(const Dataset& data, const ModelSpec& model,
                                                 const std::vector<int64_t>& rows,
                                                 const std::vector<double>& w,
                                                 const std::vector<double>& anchor,
                                                 const std::vector<double>& mu) {
  DML_RETURN_IF_ERROR(CheckBatch(data, model, rows, w.size()));
  if (static_cast<int64_t>(anchor.size()) != data.x.rows() || mu.size() != w.size()) {
    return absl::InvalidArgumentError(absl::StrCat("SvrgGradient: ", anchor.size(),
                                                   " anchor derivatives for ", data.x.rows(),
                                                   " rows, ", mu.size(), " mean-gradient entries for ",
                                                   w.size(), " weights"));
  }
  std::vector<double> deriv = RowDerivatives(data, model, rows, w);
  const double inv_b = 1.0 / static_cast<double>(rows.size());
  for (std::size_t k = 0; k < rows.size(); ++k) deriv[k] = (deriv[k] - anchor[rows[k]]) * inv_b;
  std::vector<double> g = mu;
  AddRows(data.x, rows.data(), rows.size(), deriv.data(),
          [&g](uint32_t j, double delta) { g[j] += delta; });
  return g;
}

absl::StatusOr<std::vector<double>> SagaGradient(const Dataset& data, const ModelSpec& model,
                                                 const std::vector<int64_t>& rows,
                                                 const std::vector<double>& w,
                                                 std::vector<double>& memory) {
  DML_RETURN_IF_ERROR(CheckBatch(data, model, rows, w.size()));
  if (static_cast<int64_t>(memory.size()) != data.x.rows()) {
    return absl::InvalidArgumentError(absl::StrCat("SagaGradient: ", memory.size(),
                                                   " remembered derivatives for ", data.x.rows(),
                                                   " rows"));
  }
  std::vector<double> deriv = RowDerivatives(data, model, rows, w);
  const double inv_b = 1.0 / static_cast<double>(rows.size());
  for (std::size_t k = 0; k < rows.size(); ++k) {
    double& kept = memory[static_cast<std::size_t>(rows[k])];
    const double now = deriv[k];
    deriv[k] = (now - kept) * inv_b;  // a second draw of the row finds now - now
    kept = now;
  }
  std::vector<double> g(w.size(), 0.0);
  AddRows(data.x, rows.data(), rows.size(), deriv.data(),
          [&g](uint32_t j, double delta) { g[j] += delta; });
  return g;
}

template <typename Loss>
absl::Status LazyModel<Loss>::Step(const std::vector<int64_t>& rows, double step) {
  DML_RETURN_IF_ERROR(CheckStep(step));
  DML_RETURN_IF_ERROR(CheckBatch(data_, model_, rows, static_cast<std::size_t>(data_.x.cols())));
  if (rows.size() > max_batch_) {
    return absl::InvalidArgumentError(
        absl::StrCat("a batch of ", rows.size(), " rows; the lazy model takes at most ", max_batch_));
  }
  stepper_.Step(rows.data(), rows.size(), step);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<LazySgdModel>> MakeLazySgdModel(const Dataset& data,
                                                              const ModelSpec& model,
                                                              std::size_t max_batch,
                                                              const std::vector<double>& factors) {
  DML_RETURN_IF_ERROR(Validate(model));
  DML_RETURN_IF_ERROR(
      CheckFeatureStepFactors(factors, static_cast<std::size_t>(data.x.cols())));
  if (max_batch < 1) return absl::InvalidArgumentError("lazy SGD model: max_batch is 0");
  const reg::ElasticNet r = RegularizerOf(model);
  return WithLoss(model.kind, [&](auto loss) -> std::unique_ptr<LazySgdModel> {
    using Loss = decltype(loss);
    return std::make_unique<LazyModel<Loss>>(data, r, max_batch, factors, model);
  });
}

absl::Status SgdStep(const Dataset& data, const ModelSpec& model,
                     const std::vector<int64_t>& batch_rows, double step,
                     std::vector<double>& w, const std::vector<double>& factors) {
  DML_RETURN_IF_ERROR(CheckStep(step));
  DML_RETURN_IF_ERROR(CheckBatch(data, model, batch_rows, w.size()));
  DML_RETURN_IF_ERROR(CheckFeatureStepFactors(factors, w.size()));
  std::vector<double> deriv(batch_rows.size());
  const reg::ElasticNet r = RegularizerOf(model);
  WithLoss(model.kind, [&](auto loss) {
    using Loss = decltype(loss);
    DenseStep<Loss>(data, r, batch_rows.data(), batch_rows.size(), step, 0.0, w, nullptr,
                    deriv.data(), factors.empty() ? nullptr : factors.data());
  });
  return absl::OkStatus();
}

absl::Status ProximalRegularizerStep(const ModelSpec& model, double step, std::vector<double>& w,
                                     const std::vector<double>& factors) {
  DML_RETURN_IF_ERROR(Validate(model));
  DML_RETURN_IF_ERROR(CheckStep(step));
  DML_RETURN_IF_ERROR(CheckFeatureStepFactors(factors, w.size()));
  const reg::ElasticNet r = RegularizerOf(model);
  if (factors.empty()) {
    const Prox p = ProxOf(r, step);
    for (double& wj : w) wj = p.shrink * reg::SoftThreshold(wj, p.threshold);
    return absl::OkStatus();
  }
  for (std::size_t j = 0; j < w.size(); ++j) {
    const Prox p = ProxOf(r, step * factors[j]);
    w[j] = p.shrink * reg::SoftThreshold(w[j], p.threshold);
  }
  return absl::OkStatus();
}

std::vector<double> ColumnSquareSums(const Dataset& data) {
  const auto d = static_cast<std::size_t>(data.x.cols());
  std::vector<double> c(2 * d, 0.0);
  const auto& idx = data.x.indices();
  const auto& val = data.x.values();
  for (std::size_t k = 0; k < idx.size(); ++k) {
    const double v = val[k];
    c[idx[k]] += v * v;
    c[d + idx[k]] += 1.0;
  }
  return c;
}

std::vector<double> FeatureStepFactors(const std::vector<double>& column_sums, int64_t rows,
                                       const ModelSpec& model) {
  if (rows <= 0 || !(model.lambda > 0) || column_sums.size() % 2 != 0) return {};
  const std::size_t d = column_sums.size() / 2;
  const double n = static_cast<double>(rows);
  // q_j, the mean square over the rows where j is nonzero (0: an empty
  // column, never stepped); c_j = q_j count_j / n over all rows.
  std::vector<double> q(d, 0.0);
  double plain = 0.0, scaled = 0.0;  // sum_j c_j, sum_j c_j / (q_j + lambda)
  // Only where the units differ: the 95th percentile of q over the 5th,
  // among the columns with 10 nonzeros or more (a rarer column's q is a
  // sample of a few squares: its spread says nothing of units).
  std::vector<double> qs;
  for (std::size_t j = 0; j < d; ++j) {
    const double s = column_sums[j], count = column_sums[d + j];
    if (!(s > 0) || !(count > 0) || !std::isfinite(s)) continue;
    q[j] = s / count;
    const double c = s / n;
    plain += c;
    scaled += c / (q[j] + model.lambda);
    if (count >= 10) qs.push_back(q[j]);
  }
  if (!(scaled > 0) || !std::isfinite(plain) || qs.empty()) return {};
  const auto at = [&qs](double p) {
    auto it = qs.begin() + static_cast<std::ptrdiff_t>(p * static_cast<double>(qs.size() - 1));
    std::nth_element(qs.begin(), it, qs.end());
    return *it;
  };
  const double low = at(0.05), high = at(0.95);
  if (!(high > kFeatureStepSpread * low)) return {};
  const double k = plain / scaled;
  std::vector<double> f(d, 1.0);
  for (std::size_t j = 0; j < d; ++j) {
    if (q[j] == 0.0) continue;
    const double raw = k / (q[j] + model.lambda);
    // The nearest power of two in log scale, within 2^-60 .. 2^60.
    const int e = std::clamp(static_cast<int>(std::lround(std::log2(raw))), -60, 60);
    f[j] = std::ldexp(1.0, e);
  }
  return f;
}

absl::Status CheckFeatureStepFactors(const std::vector<double>& factors, std::size_t d) {
  if (factors.empty()) return absl::OkStatus();
  if (factors.size() != d) {
    return absl::InvalidArgumentError(absl::StrCat("feature step factors: ", factors.size(),
                                                   " for a model of ", d));
  }
  for (std::size_t j = 0; j < d; ++j) {
    if (!(factors[j] > 0) || !std::isfinite(factors[j])) {
      return absl::InvalidArgumentError(
          absl::StrCat("feature step factor ", j, " is ", factors[j], "; must be positive"));
    }
  }
  return absl::OkStatus();
}

FeatureStepGroups GroupFeatureSteps(const std::vector<double>& factors, std::size_t d) {
  FeatureStepGroups g;
  g.of.assign(d, 0);
  if (factors.empty()) {
    g.factor.assign(1, 1.0);
    return g;
  }
  for (std::size_t j = 0; j < d; ++j) {
    auto it = std::find(g.factor.begin(), g.factor.end(), factors[j]);
    if (it == g.factor.end() && g.factor.size() < 65535) it = g.factor.insert(g.factor.end(), factors[j]);
    g.of[j] = static_cast<uint16_t>(it == g.factor.end() ? g.factor.size() - 1 : it - g.factor.begin());
  }
  return g;
}

std::vector<double> InverseTouchProbabilities(const Dataset& data, int batch_size) {
  const auto d = static_cast<std::size_t>(data.x.cols());
  const std::vector<double> sums = ColumnSquareSums(data);  // [d, 2d): nonzeros per column
  const double* count = sums.data() + d;
  const double n = static_cast<double>(std::max<int64_t>(data.x.rows(), 1));
  const double b = static_cast<double>(std::max(batch_size, 1));
  std::vector<double> inv(d, 0.0);
  for (std::size_t j = 0; j < d; ++j) {
    if (count[j] == 0.0) continue;  // never touched: never updated
    // 1 - (1 - f)^b without cancellation for small f.
    const double touch = -std::expm1(b * std::log1p(-count[j] / n));
    inv[j] = 1.0 / touch;
  }
  return inv;
}

absl::Status HogwildStep(const Dataset& data, const ModelSpec& model,
                         const std::vector<int64_t>& rows, double step,
                         const std::vector<double>& inv_touch, std::atomic<double>* w,
                         std::size_t d, HogwildScratch& scratch,
                         const std::vector<double>& factors) {
  DML_RETURN_IF_ERROR(CheckStep(step));
  DML_RETURN_IF_ERROR(CheckBatch(data, model, rows, d));
  DML_RETURN_IF_ERROR(CheckFeatureStepFactors(factors, d));
  if (inv_touch.size() != d) {
    return absl::InvalidArgumentError(absl::StrCat("inv_touch has ", inv_touch.size(),
                                                   " entries for a model of ", d));
  }
  if (scratch.g.size() != d) scratch.g.assign(d, 0.0);
  scratch.touched.clear();
  std::vector<double>& g = scratch.g;
  scratch.deriv.resize(rows.size());
  WithLoss(model.kind, [&](auto loss) {
    using Loss = decltype(loss);
    BatchDerivatives<Loss>(
        data, rows.data(), rows.size(),
        [w](uint32_t j) { return w[j].load(std::memory_order_relaxed); }, scratch.deriv.data());
  });
  const double inv_b = 1.0 / static_cast<double>(rows.size());
  for (double& dk : scratch.deriv) dk *= inv_b;
  // Every nonzero of the batch marks its column, even where the loss
  // derivative is 0 (hinge): the regulariser's share still applies there.
  for (int64_t i : rows) {
    const SparseView r = data.x.outer(i);
    for (std::size_t p = 0; p < r.size; ++p) {
      double& gj = g[r.index[p]];
      if (gj == 0.0 && !std::signbit(gj)) {
        gj = -0.0;  // marker: a negative zero says "listed"
        scratch.touched.push_back(r.index[p]);
      }
    }
  }
  AddRows(data.x, rows.data(), rows.size(), scratch.deriv.data(),
          [&g](uint32_t j, double delta) { g[j] += delta; });
  const reg::ElasticNet r = RegularizerOf(model);
  for (uint32_t j : scratch.touched) {
    const double wj = w[j].load(std::memory_order_relaxed);
    const double step_j = factors.empty() ? step : step * factors[j];
    const Prox p = ProxOf(r, step_j * inv_touch[j]);
    const double u = p.shrink * reg::SoftThreshold(wj - step_j * g[j], p.threshold);
    // Lock-free: the change is added atomically, so concurrent workers'
    // updates interleave and are never overwritten.
    const double delta = u - wj;
    if (delta != 0.0) {
      double cur = w[j].load(std::memory_order_relaxed);
      while (!w[j].compare_exchange_weak(cur, cur + delta, std::memory_order_relaxed)) {
      }
    }
    g[j] = 0.0;
  }
  return absl::OkStatus();
}

namespace internal {

absl::StatusOr<TrainResult> TrainSgd(const Dataset& data, const ModelSpec& model,
                                     const SolverOptions& options) {
  const reg::ElasticNet r = RegularizerOf(model);
  const auto max_batch = static_cast<std::size_t>(
      std::min<int64_t>(ResolveBatch(options.sgd.batch_size, data.x.rows(), 1),
                        std::max<int64_t>(data.x.rows(), 1)));
  const std::vector<double> factors =
      options.sgd.feature_steps
          ? FeatureStepFactors(ColumnSquareSums(data), data.x.rows(), model)
          : std::vector<double>{};
  return WithLoss(model.kind, [&](auto loss) -> absl::StatusOr<TrainResult> {
    using Loss = decltype(loss);
    if (options.sgd.momentum > 0.0) {
      MomentumStepper<Loss> stepper(data, r, options.sgd.momentum, max_batch, factors);
      return RunEpochs(data, model, options, factors, stepper);
    }
    LazyStepper<Loss> stepper(data, r, max_batch, factors);
    return RunEpochs(data, model, options, factors, stepper);
  });
}

}  // namespace internal

absl::StatusOr<double> CalibrateStep(const Dataset& data, const ModelSpec& model, int batch_size,
                                     uint64_t seed, const std::vector<double>& factors) {
  DML_RETURN_IF_ERROR(Validate(model));
  DML_RETURN_IF_ERROR(CheckFeatureStepFactors(factors, static_cast<std::size_t>(data.x.cols())));
  const int64_t n = data.x.rows();
  if (n == 0) return absl::InvalidArgumentError("CalibrateStep: data has no examples");
  // A uniform sample (without replacement, sorted: files are often sorted
  // by label, so a prefix would not do).
  Rng rng(seed ^ 0xca11b4a7e5eedULL);
  std::vector<int64_t> rows(static_cast<std::size_t>(n));
  std::iota(rows.begin(), rows.end(), int64_t{0});
  const int64_t m = std::min<int64_t>(n, 1000);
  for (int64_t i = 0; i < m; ++i) {
    std::swap(rows[i], rows[i + static_cast<int64_t>(rng.Below(static_cast<uint64_t>(n - i)))]);
  }
  rows.resize(static_cast<std::size_t>(m));
  std::sort(rows.begin(), rows.end());
  Dataset sample;
  sample.task = data.task;
  {
    std::vector<int64_t> off{0};
    std::vector<uint32_t> idx;
    std::vector<float> val;
    for (int64_t i : rows) {
      const SparseView r = data.x.outer(i);
      idx.insert(idx.end(), r.index, r.index + r.size);
      val.insert(val.end(), r.value, r.value + r.size);
      off.push_back(static_cast<int64_t>(idx.size()));
      sample.y.push_back(data.y[i]);
    }
    DML_ASSIGN_OR_RETURN(sample.x, CsrMatrix::FromArrays(m, data.x.cols(), off, idx, val));
  }
  const int batch = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(batch_size, m / 4)));
  // The sample's objective after five passes from w = 0 at step0 = eta
  // (+inf where it diverged).
  auto trial = [&](double eta) -> absl::StatusOr<double> {
    const double decay = ResolveStepDecay(model, eta, -1.0);
    std::vector<double> w(static_cast<std::size_t>(data.x.cols()), 0.0);
    std::vector<int64_t> order(static_cast<std::size_t>(m));
    std::iota(order.begin(), order.end(), int64_t{0});
    Rng pass_rng(seed);
    double t = 0.0;
    for (int pass = 0; pass < 5; ++pass) {
      pass_rng.Shuffle(order);
      for (int64_t b = 0; b < m; b += batch) {
        std::vector<int64_t> batch_rows(order.begin() + b,
                                        order.begin() + std::min<int64_t>(m, b + batch));
        DML_RETURN_IF_ERROR(
            SgdStep(sample, model, batch_rows, eta / (1.0 + decay * t), w, factors));
        t += 1.0;
      }
      for (double wj : w) {
        if (!std::isfinite(wj)) return std::numeric_limits<double>::infinity();
      }
    }
    auto p = PrimalValue(sample, model, w);
    if (!p.ok() || !std::isfinite(*p)) return std::numeric_limits<double>::infinity();
    return *p;
  };
  // A trial that ends above the objective at w = 0 moved the wrong way as a
  // whole: on unscaled features a step far above the stable one leaves a
  // bounded loss (logistic, hinge) oscillating at huge values whose order
  // over the steps is noise, so such a trial counts as diverged and the
  // walk down goes on through it rather than stopping at its first bump.
  // Ending at P(0) is no divergence: where 0 is the optimum (an L1 model
  // with lambda past its largest useful value) every step stays there.
  DML_ASSIGN_OR_RETURN(const double origin,
                       PrimalValue(sample, model, std::vector<double>(
                                                      static_cast<std::size_t>(data.x.cols()), 0.0)));
  auto scored = [&](double eta) -> absl::StatusOr<double> {
    DML_ASSIGN_OR_RETURN(const double p, trial(eta));
    return p <= origin ? p : std::numeric_limits<double>::infinity();
  };
  constexpr int kMaxExponent = 20, kMinExponent = -40;
  double best_eta = 1.0;
  DML_ASSIGN_OR_RETURN(double best, scored(best_eta));
  if (std::isfinite(best)) {
    // Up while the objective falls.
    for (int e = 1; e <= kMaxExponent; ++e) {
      const double eta = std::ldexp(1.0, e);
      DML_ASSIGN_OR_RETURN(const double p, scored(eta));
      if (!(p < best)) break;
      best = p;
      best_eta = eta;
    }
    if (best_eta > 1.0) return best_eta;
  }
  // Down: through diverged trials, then while the objective falls.
  for (int e = -1; e >= kMinExponent; --e) {
    const double eta = std::ldexp(1.0, e);
    DML_ASSIGN_OR_RETURN(const double p, scored(eta));
    if (p < best) {
      best = p;
      best_eta = eta;
    } else if (std::isfinite(best)) {
      break;
    }
  }
  if (!std::isfinite(best)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CalibrateStep: no step in 2^", kMinExponent, " .. 2^", kMaxExponent,
        " lowers the sample's objective below its value at w = 0 (", origin,
        "); set the step by hand"));
  }
  return best_eta;
}

int AutoBatch(int64_t rows, int workers) {
  const int64_t per = rows / (32 * static_cast<int64_t>(std::max(workers, 1)));
  return static_cast<int>(std::clamp<int64_t>(per, 1, kMaxAutoBatch));
}

double ResolveStepDecay(const ModelSpec& model, double step0, double step_decay) {
  return step_decay >= 0 ? step_decay : model.lambda * step0;
}

void IterateAverage::Add(const std::vector<double>& w) {
  ++added_;
  if ((added_ & (added_ - 1)) == 0) {  // a power of two: a new block
    prev_ = std::move(cur_);
    prev_count_ = cur_count_;
    cur_count_ = 0;
  }
  if (cur_count_ == 0) {
    cur_ = w;
  } else {
    const double f = 1.0 / static_cast<double>(cur_count_ + 1);
    for (std::size_t j = 0; j < cur_.size(); ++j) cur_[j] += (w[j] - cur_[j]) * f;
  }
  ++cur_count_;
  // The blocks [2^(k-1), 2^k) and [2^k, added] together: at least the last
  // half of the iterates.
  const double total = static_cast<double>(prev_count_ + cur_count_);
  avg_ = cur_;
  if (prev_count_ > 0) {
    const double a = static_cast<double>(prev_count_) / total;
    for (std::size_t j = 0; j < avg_.size(); ++j) avg_[j] += (prev_[j] - avg_[j]) * a;
  }
}

}  // namespace dml
