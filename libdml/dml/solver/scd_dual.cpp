// Sequential stochastic dual coordinate ascent (SDCA) for the L2-regularised
// models: ridge, logistic, hinge SVM, squared-hinge SVM.
//
//   max_alpha D(alpha) = (1/n) sum_i -loss_i*(-alpha_i) - lambda/2 ||w(alpha)||^2,
//   w(alpha) = A^T alpha / (lambda n),
// the dual of P(w) = (1/n) sum_i loss(y_i, x_i.w) + lambda/2 ||w||^2.
// Variables: alpha (one per example) and the maintained w. Each epoch visits
// the (active) examples in a fresh random permutation and maximises D exactly
// in one coordinate (closed form; a safeguarded Newton step for logistic),
// then updates w. For hinge and squared hinge, coordinates stuck at a bound
// are shrunk as in LIBLINEAR.
// Stopping: StopRule; a gap or target stop only on an exact certificate
// (w rebuilt from alpha, all margins recomputed), see DriveDualScd.
// Threads: one for the epochs; with options.threads > 1 (on data of at least
// kBesideMinNnz nonzeros) the certificates run on a second one, beside them
// (scd_dual_beside.hpp), each of a snapshot of alpha that the run returns if
// its certificate stops it. The epochs are those of one thread; which of
// them is certified depends on the threads' timing, so such runs are not
// bitwise reproducible (one thread is).
// Papers: Shalev-Shwartz & Zhang, "Stochastic dual coordinate ascent methods
// for regularized loss minimization", JMLR 2013; Hsieh, Chang, Lin, Keerthi,
// Sundararajan, "A dual coordinate descent method for large-scale linear
// SVM", ICML 2008 (Algorithm 3, shrinking); Yu, Huang, Lin, "Dual coordinate
// descent methods for logistic regression ...", Machine Learning 2011.
#include <memory>
#include <numeric>
#include <optional>

#include "dml/solver/internal/scd_dual_beside.hpp"
#include "dml/solver/internal/scd_dual_kernel.hpp"
#include "dml/solver/internal/solvers.hpp"

namespace dml::internal {
namespace {

/// Certificates go beside the epochs only where one costs far more than
/// handing it to the other thread (a wake-up, tens of microseconds): from
/// this many nonzeros (two passes over them).
constexpr int64_t kBesideMinNnz = int64_t{1} << 16;

template <typename Obj>
class SequentialEngine {
 public:
  SequentialEngine(const Dataset& data, const ModelSpec& model, const SolverOptions& opt)
      : x_(data.x),
        lambda_(model.lambda),
        inv_ln_(1.0 / (model.lambda * static_cast<double>(data.x.rows()))),
        shrink_(opt.shrinking),
        coords_(MakeDualCoords<Obj>(data, model.lambda)),
        w_(static_cast<std::size_t>(data.x.cols()), 0.0) {
    blk_.order.resize(coords_.size());
    std::iota(blk_.order.begin(), blk_.order.end(), int64_t{0});
    blk_.active = blk_.size();
    blk_.rng = Rng(opt.seed);
    const DualExact e = DualStartState(x_, coords_.data(), lambda_, w_.data());
    negconj_sum_ = e.negconj_sum;
    wsq_ = e.wsq;
    if (opt.threads > 1 && x_.nnz() >= kBesideMinNnz) {
      beside_ = std::make_unique<BesideCertifier<Obj>>(x_, data.y, lambda_);
    }
  }

  DualEpochSums RunEpoch() {
    if (beside_) beside_->EpochStarts(blk_.active);
    const uint32_t* idx = x_.indices().data();
    const float* val = x_.values().data();
    return RunDualEpochMaybeShrink<Obj, false>(shrink_, idx, val, coords_.data(), w_.data(),
                                               inv_ln_, blk_);
  }
  DualExact Certify() { return CertifyDualCoords<Obj>(x_, coords_.data(), lambda_, w_.data()); }
  /// Sequential steps: a fall is rounding; nothing to change.
  void DualFell(int /*epoch*/) {}
  void Stalled(int /*since*/, int /*epoch*/) {}
  double NegConjSum() const { return negconj_sum_; }
  double WSq() const { return wsq_; }
  int64_t Nnz() const { return x_.nnz(); }
  void Unshrink() { blk_.Unshrink(); }
  std::vector<double> Alpha() const {
    if (adopted_) return beside_->alpha();
    std::vector<double> a(coords_.size());
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = coords_[i].alpha;
    return a;
  }
  std::vector<double> W() const { return adopted_ ? beside_->w() : w_; }

  // Certificates beside the epochs (options.threads > 1; DriveDualScd).
  bool BesideOn() const { return beside_ != nullptr; }
  bool BesideIdle() const { return beside_->Idle(); }
  bool BesideStart(int epoch, int64_t nnz) {
    if (beside_->Snapshot(coords_.data(), blk_.order.data(), epoch, nnz)) {
      beside_used_ = true;
      return true;
    }
    beside_.reset();  // no second thread: this one certifies from now on
    return false;
  }
  std::optional<BesideDone> BesidePoll() { return beside_->Poll(); }
  std::optional<BesideDone> BesideWait() { return beside_->Wait(); }
  void BesideAbandon() { beside_->Abandon(); }
  DualExact BesideResync() { return DualStartState(x_, coords_.data(), lambda_, w_.data()); }
  /// A certificate ran on the second thread.
  bool BesideUsed() const { return beside_used_; }
  void BesideAdopt() { adopted_ = true; }

 private:
  const CsrMatrix& x_;
  double lambda_;
  double inv_ln_;
  bool shrink_;  // options.shrinking (used only where the objective has bounds)
  std::vector<DualCoord> coords_;
  std::vector<double> w_;
  DualBlock blk_;
  double negconj_sum_ = 0.0;
  double wsq_ = 0.0;
  std::unique_ptr<BesideCertifier<Obj>> beside_;
  bool adopted_ = false;
  bool beside_used_ = false;
};

}  // namespace

absl::StatusOr<TrainResult> TrainScdDual(const Dataset& data, const ModelSpec& model,
                                         const SolverOptions& options) {
  if (FormulationOf(model.kind) != Formulation::kDual) {
    return absl::InvalidArgumentError("TrainScdDual needs a dual model");
  }
  return VisitDualObjective(model.kind, [&](auto obj) -> absl::StatusOr<TrainResult> {
    using Obj = decltype(obj);
    StopChecker checker(options.stop, options.on_epoch);  // times include the setup
    SequentialEngine<Obj> engine(data, model, options);
    TrainResult r = DriveDualScd<Obj>(options, model.lambda, data.x.rows(), engine, checker);
    if (engine.BesideUsed()) {
      r.threads = 2;
      r.note = "its exact certificates ran on a second thread, beside the epochs";
    }
    return r;
  });
}

}  // namespace dml::internal
