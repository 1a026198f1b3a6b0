// newGLMNET for L1-regularised logistic regression.
//
// Problem:   min_w P(w) = (1/n) sum_i log(1 + exp(-y_i x_i.w)) + lambda ||w||_1,
//            y_i in {-1,+1}, no intercept: LIBLINEAR's -s 6 (C sum_i loss_i +
//            ||w||_1) divided by C n, C = 1/(lambda n), so the same minimiser.
//            Follows Yuan, Ho, Lin, "An improved GLMNET for L1-regularized
//            logistic regression", JMLR 2012 (LIBLINEAR's solve_l1r_lr).
// Variables: w and the trial point w + d (one per feature, over the CSC copy
//            of data.x built once); per example the margin m_i = y_i x_i.w,
//            b_i = -y_i sigma(-m_i) (loss'_i, so grad_j = (1/n) a_j^T b) and
//            D_i = sigma(m_i) sigma(-m_i) (loss''_i), both from one exp of
//            -|m_i|; (X d)_i of the direction being built.
// Steps:     outer (quasi-Newton) iteration at w:
//              1. grad_j and H_jj = (1/n) a_j^T diag(D) a_j + nu over every
//                 feature (one pass over the nonzeros), nu = 1e-12 lambda;
//              2. inner CD over the quadratic model
//                   q(d) = grad^T d + (1/2n) d^T X^T D X d + nu/2 |d|^2
//                          + lambda ||w + d||_1,
//                 one soft-thresholded exact minimisation per coordinate
//                 (clipped to 10 / min(max_i |x_ij|, 1), and the trial
//                 point kept within a radius of w over the whole inner
//                 CD: a trust region, from that clip, doubled for a
//                 feature held at its edge by a direction the line search
//                 took whole), random
//                 permutation per cycle, X d kept up to date, until its
//                 summed violation is below inner_eps times that of the
//                 first iteration at w = 0 (or a cycle moved nothing);
//                 inner_eps (from 1) is quartered whenever one cycle was
//                 enough;
//                 where it stalls, a Newton step on the support with the
//                 signs fixed (PolishOnSupport: explicit Hessian,
//                 Cholesky; SupportCg where the support is too large:
//                 truncated conjugate gradients, backing off where they
//                 do not pay);
//              2'. where the active features are few and their explicit
//                 Hessian H = (1/n) X^T D X is cheap to form (from the
//                 start, or once the column CD of 2 stalled or read 8
//                 passes), the same CD runs over H instead: a step costs
//                 O(active) flops, the model is solved to 1/100 of w's
//                 violation, with a Newton step on the support (signs
//                 fixed) every 10 cycles for nearly collinear columns;
//                 the outer iterations then converge as proximal Newton
//                 does (a9a: 41 -> 6-8, tab-4601x57: 20 -> 8);
//              3. Armijo backtracking on the whole direction (sigma = 0.01,
//                 halvings, at most 20):
//                   P(w + t d) - P(w) <= sigma t (grad^T d + lambda
//                                         (||w + d||_1 - ||w||_1)),
//                 the loss change of each example summed as
//                 log1p(sigma(-m_i) expm1(-t y_i (Xd)_i)), without
//                 cancellation (the difference of the two losses where that
//                 argument is below -1/2 or not finite). A failed search
//                 keeps w and rebuilds the margins from v = X w.
//            The primal value is carried from P(0) = log 2 by the accepted
//            changes (the line search computes them exactly).
// Shrinking: as LIBLINEAR: in step 1 a feature at 0 with
//            |grad_j| < lambda - M/n, M the largest violation of the previous
//            outer iteration, is left out of the inner CD; inside it, the
//            same rule with the previous cycle's violation, and the whole
//            outer active set is put back before the inner CD may stop.
// Epochs:    one outer iteration is one epoch (Progress.round,
//            TrainResult.epochs and rounds, StopRule.max_epochs): it reads
//            every nonzero once for step 1 and those of the inner CD's
//            columns once per visit (twice when X d is updated), all counted
//            in Progress.nnz_touched. It costs a few CD epochs and gains far
//            more. The time budget and cancellation are also polled after
//            every inner cycle (every 10 over the explicit Hessian, every 4
//            CG iterations).
// Stopping:  StopChecker. The gradient of step 1 is the exact one of w (up
//            to the rounding of the margins), so sum_j gap_j(w_j, grad_j),
//            with the bounded-support L1 conjugate of logistic_l1.hpp, is the
//            certificate's separable gap, and the carried primal its primal;
//            where that is not good enough, the scaled dual (the rows' loss'
//            times min(1, lambda / max_j |grad_j|), EvaluatePrimal's) is
//            summed too, one pass over the examples. An exact
//            certificate (EvaluatePrimal, from w alone) is taken every
//            options.eval_every outer iterations, and whenever those
//            estimates satisfy the gap or target rule (the target is tested
//            right after the line search, before step 1 is paid for); the
//            gap and target rules stop only on a certificate. A certificate
//            that refutes its estimate rebuilds the margins from v = X w.
//            The result's primal/dual/gap are exact for the final w.
// Threads:   options.threads share the per-example passes (margins,
//            line-search sums) and the gradient pass (features split by
//            nonzeros), each thread taking at least 16384 examples or
//            131072 nonzeros unless options.fit_threads is false
//            (TrainResult::threads and ::note say what ran). The inner CD
//            visits one feature at a time; where its columns are long (on
//            average kGlmnetSplitColumnNnz nonzeros or more: dense-ish data) two
//            threads share every visit, each over its own half of the rows
//            (its half of (X d) too): the helper hands its partial sum to
//            the caller, which takes the step and hands back z, both by
//            spinning on one atomic each (a few hundred nanoseconds against
//            microseconds of work per column); shorter columns stay on one
//            thread. Partial sums are added in a fixed order, so a run is
//            reproducible for a given thread count.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dml/objective/evaluate.hpp"
#include "dml/objective/logistic_l1.hpp"
#include "dml/objective/logistic_rows.hpp"
#include "dml/objective/losses.hpp"
#include "dml/solver/internal/chunks.hpp"
#include "dml/solver/internal/cholesky.hpp"
#include "dml/solver/internal/primal_cd.hpp"
#include "dml/solver/internal/solvers.hpp"
#include "dml/solver/internal/stopping.hpp"
#include "dml/util/rng.hpp"
#include "dml/util/status.hpp"

namespace dml::internal {
namespace {

constexpr double kSigma = 0.01;          // Armijo
constexpr int kMaxLineSearch = 20;       // halvings
constexpr int kMaxInnerCycles = kGlmnetMaxInnerCycles;  // per outer iteration, as LIBLINEAR
/// Inner cycles over which the violation must fall by a fifth (InnerCd).
constexpr int kStallCycles = 8;
/// PolishOnSupport: at most this many features in the support (a Cholesky
/// factor costs m^3 / 6), and forming the support's Hessian (sum_i of
/// m_i (m_i + 1) / 2 multiply-adds, m_i the row's support nonzeros) at most
/// this many passes' worth of nonzeros (about what the stalled inner
/// cycles cost; tab-4601x57, 57 dense features, needs 26).
constexpr std::size_t kPolishMaxFeatures = 512;
constexpr double kPolishFormPasses = 32.0;
/// SupportCg: at most this many CG iterations (two passes over the
/// support's columns each), done at this fraction of the first residual.
constexpr int kCgIterations = 20;
constexpr double kCgRel = 0.05;
/// ... and it is worth its cost where it lowers the model by at least this
/// fraction of what the CD did.
constexpr double kCgWorth = 0.1;
/// DenseInnerCd: at most this many active features (H is m^2 doubles a
/// thread while formed), and forming H at most this many passes' worth of
/// nonzeros (the column CD's stalled cycles cost 20-30 passes an outer
/// iteration on a9a's one-hot groups).
constexpr std::size_t kDenseModelMaxFeatures = 1024;
constexpr double kDenseFormPasses = 16.0;
/// What a multiply-add of a row holding every active feature costs against
/// one of a sparse row (contiguous, on SIMD lanes: about a third, measured
/// on 16-300 dense features).
constexpr double kDenseRowPairCost = 0.4;
/// Where forming H costs at most this many passes at the start, step 2 is
/// DenseInnerCd from the first outer iteration on.
constexpr double kDenseEagerPasses = 4.0;
/// Its CD cycles: at most this many passes' worth of flops an outer
/// iteration, and done once the model's violation is this fraction of w's.
constexpr double kDenseCdPasses = 32.0;
constexpr double kDenseInnerRel = 0.01;
/// Its CD cycles between Newton steps on the support.
constexpr int kDenseCdCyclesPerNewton = 10;
/// The column CD's reads in one outer iteration (in passes) from which
/// the next ones take DenseInnerCd (as does a stall): below, its few cycles
/// cost less than forming H.
constexpr double kDenseTriggerPasses = 8.0;
/// LIBLINEAR clips one inner step to |z| <= 10, meant for features of unit
/// scale; feature j's bound is 10 / min(s_j, 1), s_j = max_i |x_ij|, as a
/// tiny-valued feature may need a huge weight. LIBLINEAR also drops steps
/// below 1e-12; we drop only those that do not change w_j + d_j: on a
/// feature with values ~1e3 that floor stalled the violation (and the
/// bounded-support gap, B = log 2 / lambda times it) above a 1e-9 gap.
constexpr double kMaxCoordinateStep = kGlmnetMaxStep;
/// A trust region's radius grows to at most this many times the step clip.
constexpr double kMaxRadiusGrowth = 1e6;
constexpr double kNuPerLambda = kGlmnetNuPerLambda;  // Hessian-diagonal floor, LIBLINEAR's nu
/// Per-example passes give each thread at least this many rows, the gradient
/// pass this many nonzeros: below that a thread costs more than it saves.
constexpr std::size_t kRowGrain = 16384;
constexpr std::size_t kNnzGrain = 131072;

/// Per example, what the inner CD reads and writes: D_i and (X d)_i.
struct QuadTerms {
  double dd = 0.0;
  double xd = 0.0;
};

class GlmnetL1 {
 public:
  GlmnetL1(const Dataset& data, const ModelSpec& model, const SolverOptions& options)
      : data_(data),
        model_(model),
        options_(options),
        stop_(options.stop, options.on_epoch),
        a_(data.x.Convert(options.threads)),
        n_(static_cast<std::size_t>(a_.rows())),
        d_(static_cast<std::size_t>(a_.cols())),
        y_(data.y.data()),
        obj_(LogisticL1Objective::Make(model, data.y)),
        lambda_(model.lambda),
        inv_n_(1.0 / static_cast<double>(n_)),
        nu_(kNuPerLambda * model.lambda),
        bound0_(obj_.bound),
        rng_(options.seed) {
    const int threads = std::max(1, options.threads);
    // fit_threads = false: every thread gets a share however small (tests).
    row_bounds_ = EvenBounds(n_, threads, options.fit_threads ? kRowGrain : 1);
    col_bounds_ = NnzBounds(a_, threads, options.fit_threads ? kNnzGrain : 1);
    if (threads >= 2 && n_ >= 2) {
      split_.resize(d_);
      const uint32_t half = static_cast<uint32_t>(n_ / 2);
      for (std::size_t j = 0; j < d_; ++j) {
        const SparseView col = a_.outer(static_cast<int64_t>(j));
        split_[j] = static_cast<uint32_t>(std::lower_bound(col.index, col.index + col.size, half) -
                                          col.index);
      }
    }
  }

  absl::StatusOr<TrainResult> Run();

 private:
  /// Per example, what the gradient pass reads (b_i, D_i), the pair on one
  /// cache line (QuadTerms: the inner CD's).
  struct GradTerms {
    double b = 0.0;
    double dd = 0.0;
  };

  /// The per-example terms of rows [b, e) from their margins m_: gt_[i].b
  /// = loss'(m_i) in z, gt_[i].dd = qt_[i].dd = loss''(m_i).
  void SetRows(std::size_t b, std::size_t e);
  void RebuildMargins();
  void Gradient();
  void InnerCd();
  /// Where the inner CD stalled (nearly collinear columns): the quadratic
  /// model's exact minimiser over the trial point's support with its signs
  /// fixed (explicit Hessian, Cholesky), projected back onto that orthant,
  /// taken where it lowers the model. Small d only (kPolishMaxFeatures).
  /// False where the support is too large for it (kPolishMaxFeatures,
  /// kPolishFormPasses): SupportCg instead.
  bool PolishOnSupport();
  /// PolishOnSupport's orthant Newton step with the Hessian applied by two
  /// passes over the support's columns and the system solved by
  /// preconditioned conjugate gradients: for wide data, whose support is
  /// too large to factor and whose coupled columns stall the CD as well
  /// (news20's).
  void SupportCg();
  /// The quadratic model's change at the trial point: grad.d + d H d / 2
  /// + lambda (||w + d||_1 - ||w||_1), from (X d)_i and the moved features.
  double ModelChange() const;
  /// The best step over the support `sup` of the model whose Hessian there
  /// is h (m x m, full, nu on the diagonal) and smooth gradient at the
  /// trial point gs: Newton on the orthant of wpd's signs (see the body).
  /// Empty where no step lowers the model.
  std::vector<double> SupportNewton(const std::vector<uint32_t>& sup, const std::vector<double>& h,
                                    const std::vector<double>& gs) const;
  /// Step 2 over an explicit Hessian of the active features, where it is
  /// small and cheap to form (kDenseModelMaxFeatures, kDenseFormPasses):
  /// a CD cycle then costs O(active^2) flops and no pass over the data, so
  /// the model is solved far tighter than the column CD can afford, and the
  /// outer iterations converge as a proximal Newton method does. False
  /// (nothing done) where it does not apply; InnerCd runs instead.
  bool DenseInnerCd();
  /// DenseInnerCd's H over the active features (dfeat_, dpos_, dh_). False
  /// (and no H) where forming it costs more than kDenseFormPasses passes.
  bool FormDenseHessian();
  /// Sets dfeat_ and dpos_ to the active features and returns what forming
  /// their H costs (HessianFormCost, kDenseRowPairCost).
  double DenseFormCost();
  /// What forming H over the m features with pos[j] >= 0 costs, in
  /// multiply-adds: k (k + 1) / 2 a row holding k of them, at
  /// `full_row_cost` a pair in rows holding all m. One pass over the row
  /// indices.
  double HessianFormCost(const std::vector<int>& pos, std::size_t m,
                         double full_row_cost) const;
  /// H = (1/n) sum_i D_i x_i x_i^T + nu over the m features with
  /// pos[j] >= 0 (positions increasing with j), m x m, full: the lower
  /// triangle summed per thread over its rows (each thread at least
  /// kNnzGrain of the `form` multiply-adds), then mirrored.
  std::vector<double> FormHessian(const std::vector<int>& pos, std::size_t m, double form);
  /// The features nonzero at the trial point, in index order.
  std::vector<uint32_t> TrialSupport() const;
  /// Whether the inner CD's active columns are long enough to share.
  bool SplitInnerCd() const;
  bool LineSearch();
  /// The carried primal minus the scaled dual at w (EvaluatePrimal's
  /// tighter certificate), from step 1's gradient and the rows' loss'.
  double ScaledGapEstimate() const;
  /// EvaluatePrimal's certificate of w_ from the margins, per-example terms
  /// and gradient, which must have just been rebuilt from w_
  /// (RebuildMargins, Gradient). Its sums are split as the threads' rows
  /// are, so its last bits depend on the thread count.
  absl::StatusOr<Certificate> StateCertificate();

  const Dataset& data_;
  const ModelSpec& model_;
  const SolverOptions& options_;
  StopChecker stop_;
  const CscMatrix a_;
  const std::size_t n_;
  const std::size_t d_;
  const float* y_;
  const LogisticL1Objective obj_;  // Violation
  const double lambda_;
  const double inv_n_;
  const double nu_;
  const double bound0_;
  Rng rng_;
  std::vector<std::size_t> row_bounds_;
  std::vector<std::size_t> col_bounds_;

  std::vector<double> w_, wpd_, dir_;  // w, the trial point, its direction
  std::vector<double> grad_, hdiag_;
  std::vector<double> step_max_;  // per feature, see kMaxCoordinateStep
  /// Per feature, the trust region's radius (BoundedStep): step_max_ at
  /// first, doubled for a feature held at its edge by a direction the line
  /// search took whole, halved (not below step_max_) by one it cut; the
  /// features held at the edge this outer iteration.
  std::vector<double> radius_;
  std::vector<uint32_t> blocked_;
  std::vector<char> is_blocked_;
  void MarkBlocked(uint32_t j) {
    if (!is_blocked_[j]) {
      is_blocked_[j] = 1;
      blocked_.push_back(j);
    }
  }
  /// After step 3: resizes the blocked features' regions (t: the step the
  /// line search took, 0 where it failed) and forgets them.
  void ResizeTrustRegion(double t);
  double last_step_ = 0.0;  // LineSearch's accepted t
  std::vector<double> m_;              // margins y_i x_i.w
  std::vector<GradTerms> gt_;
  std::vector<QuadTerms> qt_;
  std::vector<uint32_t> index_;        // features; [0, active_) in the inner CD
  std::size_t active_ = 0;
  std::vector<uint32_t> moved_;        // features the inner CD moved
  std::vector<char> is_moved_;
  void MarkMoved(uint32_t j) {
    if (!is_moved_[j]) {
      is_moved_[j] = 1;
      moved_.push_back(j);
    }
  }
  std::vector<char> keep_;             // per feature: not shrunk by step 1
  /// Per feature: the first of its nonzeros in the second half of the rows
  /// (rows n / 2 on, the inner CD's helper thread's); empty with one thread.
  std::vector<uint32_t> split_;
  // DenseInnerCd: per feature its position among the active ones (-1: not
  // active), the active features, their Hessian, H (wpd - w) over them.
  std::vector<int> dpos_;
  std::vector<uint32_t> dfeat_;
  std::vector<double> dh_, dr_;
  /// Step 2 runs DenseInnerCd (once the column CD struggled).
  bool dense_ = false;
  /// SupportCg calls in a row that were not worth their cost (kCgWorth),
  /// and the stalls still to go without it.
  int cg_misses_ = 0, cg_skip_ = 0;
  int dense_threads_ = 1;  // the most threads FormDenseHessian used
  /// FormDenseHessian refused this many active features (too costly).
  std::size_t dense_refused_at_ = std::numeric_limits<std::size_t>::max();

  double primal_ = 0.0;  // carried P(w)
  double gap_est_ = 0.0;  // the bounded-support gap at w (step 1)
  // Nonzeros read by all outer iterations, and since the last certificate
  // (SolverOptions::eval_pacing).
  double work_total_ = 0.0, work_since_cert_ = 0.0;
  double grad_abs_max_ = 0.0;  // max_j |grad_j| (step 1)
  double gnorm1_ = 0.0, gnorm1_init_ = -1.0;
  double gmax_ = 0.0, gmax_old_ = std::numeric_limits<double>::infinity();
  double inner_eps_ = 1.0;
  int inner_cycles_ = 0;
  int outer_ = 0;          // outer iterations (epochs) started
  int64_t inner_nnz_ = 0;  // nonzeros the current inner CD read
  bool inner_split_ = false;  // an inner CD ran on two threads
  bool inner_stalled_ = false;  // the last inner CD stopped on a stall or the cap
  // Last: destroyed first, its workers joined before what their passes read.
  mutable ChunkRunner runner_;  // const passes run on it too
};

void GlmnetL1::SetRows(std::size_t b, std::size_t e) {
  // The exps as vectors (LogisticSigmoidTerms), a block at a time.
  constexpr std::size_t kBlock = 512;
  double q[kBlock], dd[kBlock];
  for (std::size_t bb = b; bb < e; bb += kBlock) {
    const std::size_t ee = std::min(e, bb + kBlock);
    LogisticSigmoidTerms(m_.data() + bb, ee - bb, q, dd);
    for (std::size_t i = bb; i < ee; ++i) {
      gt_[i].b = -static_cast<double>(y_[i]) * q[i - bb];
      gt_[i].dd = dd[i - bb];
      qt_[i].dd = dd[i - bb];
    }
  }
}

void GlmnetL1::RebuildMargins() {
  const std::vector<double> v = ColumnTimes(a_, w_);
  for (std::size_t i = 0; i < n_; ++i) m_[i] = static_cast<double>(y_[i]) * v[i];
  runner_.Run(row_bounds_, [&](std::size_t, std::size_t b, std::size_t e) { SetRows(b, e); });
}

// Step 1 over every feature: grad_, hdiag_, the gap and violation sums, and
// which features the inner CD takes (index_[0, active_)).
void GlmnetL1::Gradient() {
  const std::size_t chunks = col_bounds_.size() - 1;
  // gap_j = lambda |w_j| + w_j grad_j + B max(0, |grad_j| - lambda) is >= 0
  // once B >= max_j |w_j| (the certificate's B), so the sum is S1 + B S2
  // with B known at the end.
  struct Partial {
    double s1 = 0.0, s2 = 0.0, w_max = 0.0, gnorm1 = 0.0, gmax = 0.0, g_abs_max = 0.0;
  };
  std::vector<Partial> part(chunks);
  const double margin = gmax_old_ * inv_n_;
  const bool shrinking = options_.shrinking;
  runner_.Run(col_bounds_, [&](std::size_t c, std::size_t jb, std::size_t je) {
    Partial p;
    const GradTerms* gt = gt_.data();
    for (std::size_t j = jb; j < je; ++j) {
      const SparseView col = a_.outer(static_cast<int64_t>(j));
      double g0 = 0.0, g1 = 0.0, h0 = 0.0, h1 = 0.0;
      std::size_t k = 0;
      for (; k + 2 <= col.size; k += 2) {
        const double x0 = col.value[k], x1 = col.value[k + 1];
        const GradTerms& r0 = gt[col.index[k]];
        const GradTerms& r1 = gt[col.index[k + 1]];
        g0 += x0 * r0.b;
        g1 += x1 * r1.b;
        h0 += x0 * x0 * r0.dd;
        h1 += x1 * x1 * r1.dd;
      }
      if (k < col.size) {
        const double x0 = col.value[k];
        const GradTerms& r0 = gt[col.index[k]];
        g0 += x0 * r0.b;
        h0 += x0 * x0 * r0.dd;
      }
      const double g = (g0 + g1) * inv_n_;
      grad_[j] = g;
      hdiag_[j] = (h0 + h1) * inv_n_ + nu_;
      const double wj = w_[j];
      const double excess = std::abs(g) - lambda_;
      p.g_abs_max = std::max(p.g_abs_max, std::abs(g));
      if (wj != 0.0) {
        p.s1 += lambda_ * std::abs(wj) + wj * g;
        p.w_max = std::max(p.w_max, std::abs(wj));
      }
      if (excess > 0.0) p.s2 += excess;
      // LIBLINEAR's outer shrinking: at 0 and well inside [-lambda, lambda].
      const bool shrink = shrinking && wj == 0.0 && excess < -margin;
      keep_[j] = !shrink;
      if (shrink) continue;
      const double viol = obj_.Violation(wj, g);
      p.gnorm1 += viol;
      p.gmax = std::max(p.gmax, viol);
    }
    part[c] = p;
  });
  double s1 = 0.0, s2 = 0.0, w_max = 0.0;
  gnorm1_ = 0.0;
  gmax_ = 0.0;
  grad_abs_max_ = 0.0;
  for (const Partial& p : part) {
    grad_abs_max_ = std::max(grad_abs_max_, p.g_abs_max);
    s1 += p.s1;
    s2 += p.s2;
    w_max = std::max(w_max, p.w_max);
    gnorm1_ += p.gnorm1;
    gmax_ = std::max(gmax_, p.gmax);
  }
  gap_est_ = s1 + std::max(bound0_, w_max) * s2;
  // Kept features first, in index order; the inner CD shuffles them.
  std::size_t lo = 0, hi = d_;
  for (std::size_t j = 0; j < d_; ++j) {
    if (keep_[j]) {
      index_[lo++] = static_cast<uint32_t>(j);
    } else {
      index_[--hi] = static_cast<uint32_t>(j);
    }
  }
  active_ = lo;
}

// Whether two threads share the inner CD: always where told not to fit
// threads (tests), else where the active columns average
// kGlmnetSplitColumnNnz nonzeros or more.
bool GlmnetL1::SplitInnerCd() const {
  if (split_.empty() || active_ == 0) return false;
  std::size_t nnz = 0;
  for (std::size_t s = 0; s < active_; ++s) nnz += a_.outer(index_[s]).size;
  return !options_.fit_threads || nnz >= kGlmnetSplitColumnNnz * active_;
}

namespace {

/// sum_k x_k D_i (X d)_i over nonzeros [kb, ke) of a column.
double QuadDot(const SparseView& col, std::size_t kb, std::size_t ke, const QuadTerms* qt) {
  if (col.size != 0 && col.index[col.size - 1] == col.size - 1) {
    // Dense: a column's indices strictly increase (FromArrays checks it,
    // Convert keeps it), so ending at size-1 they are 0..size-1. Rows in
    // order, no index reads, four sums.
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    std::size_t k = kb;
    for (; k + 4 <= ke; k += 4) {
      s0 += static_cast<double>(col.value[k]) * qt[k].dd * qt[k].xd;
      s1 += static_cast<double>(col.value[k + 1]) * qt[k + 1].dd * qt[k + 1].xd;
      s2 += static_cast<double>(col.value[k + 2]) * qt[k + 2].dd * qt[k + 2].xd;
      s3 += static_cast<double>(col.value[k + 3]) * qt[k + 3].dd * qt[k + 3].xd;
    }
    for (; k < ke; ++k) s0 += static_cast<double>(col.value[k]) * qt[k].dd * qt[k].xd;
    return (s0 + s1) + (s2 + s3);
  }
  double s0 = 0.0, s1 = 0.0;
  std::size_t k = kb;
  for (; k + 2 <= ke; k += 2) {
    const QuadTerms& r0 = qt[col.index[k]];
    const QuadTerms& r1 = qt[col.index[k + 1]];
    s0 += static_cast<double>(col.value[k]) * r0.dd * r0.xd;
    s1 += static_cast<double>(col.value[k + 1]) * r1.dd * r1.xd;
  }
  if (k < ke) {
    const QuadTerms& r0 = qt[col.index[k]];
    s0 += static_cast<double>(col.value[k]) * r0.dd * r0.xd;
  }
  return s0 + s1;
}

/// (X d)_i += z x_k over nonzeros [kb, ke) of a column.
void QuadAxpy(const SparseView& col, std::size_t kb, std::size_t ke, double z, QuadTerms* qt) {
  if (col.size != 0 && col.index[col.size - 1] == col.size - 1) {
    for (std::size_t k = kb; k < ke; ++k) qt[k].xd += z * static_cast<double>(col.value[k]);
    return;
  }
  for (std::size_t k = kb; k < ke; ++k) qt[col.index[k]].xd += z * static_cast<double>(col.value[k]);
}

/// GlmnetInnerStep (each step clipped to `step`) within the direction's
/// trust region: the trial point wpd + z stays within `radius` of w over
/// the whole inner CD, not only per step. Where a feature's rows are far on
/// the wrong side (loss'' ~ 0, news20: h ~ 1e-13 on a 2-row column), the
/// quadratic model is unbounded along it: per-step clips of 10 added up to
/// 310 in one inner CD, and the line search halved the whole direction 11
/// times. *blocked: the step was cut to nothing at the region's edge, where
/// the bounded model is optimal in that coordinate (its violation counts 0).
double BoundedStep(double g, double h, double wpd, double w, double lambda, double step,
                   double radius, bool* blocked) {
  const double z = GlmnetInnerStep(g, h, wpd, lambda, step);
  const double next = std::clamp(wpd + z, w - radius, w + radius);
  *blocked = z != 0.0 && next == wpd;
  return next - wpd;
}

/// Waits (spinning, then yielding: the other thread may have lost its
/// core) until `flag` holds `want` or more (counters only grow).
void SpinUntil(const std::atomic<uint64_t>& flag, uint64_t want) {
  internal::SpinUntil([&] { return flag.load(std::memory_order_acquire) >= want; }, 4096);
}

}  // namespace

// Step 2: the trial point wpd_ = w_ + d over index_[0, active_), with
// qt_[i].xd = (X d)_i and moved_ listing every feature it changed.
void GlmnetL1::InnerCd() {
  inner_stalled_ = false;
  for (QuadTerms& q : qt_) q.xd = 0.0;
  for (uint32_t j : moved_) is_moved_[j] = 0;
  moved_.clear();
  const bool shrinking = options_.shrinking;
  std::size_t qp_active = active_;
  double qp_gmax_old = std::numeric_limits<double>::infinity();
  int cycle = 0;
  QuadTerms* qt = qt_.data();
  // The violation of each of the last kStallCycles cycles (a ring).
  double recent[kStallCycles] = {};

  // Two threads share each column (SplitInnerCd): the helper owns rows
  // [n/2, n). Handshake per visit: `job` = visit number (feature in
  // job_feature), helper answers `partial` and sets `summed`; the caller
  // sets `step` and `stepped` (z == 0: nothing to add). `job` = kExit ends it.
  constexpr uint64_t kExit = ~uint64_t{0};
  std::atomic<uint64_t> job{0}, summed{0}, stepped{0};
  uint32_t job_feature = 0;
  double partial = 0.0, step = 0.0;
  std::thread helper;
  if (SplitInnerCd()) {
    try {
      helper = std::thread([&] {
        for (uint64_t seen = 1;; ++seen) {
          SpinUntil(job, seen);
          if (job.load(std::memory_order_acquire) == kExit) return;
          const uint32_t j = job_feature;
          const SparseView col = a_.outer(j);
          partial = QuadDot(col, split_[j], col.size, qt);
          summed.store(seen, std::memory_order_release);
          SpinUntil(stepped, seen);
          if (step != 0.0) QuadAxpy(col, split_[j], col.size, step, qt);
        }
      });
    } catch (const std::system_error&) {
      // No second thread: the visits run whole on this one.
    }
  }
  const bool split = helper.joinable();
  inner_split_ = inner_split_ || split;
  // Ends the helper however this function is left (an exception mid-visit
  // included: then it is released from either wait and stops).
  struct Stop {
    std::thread& t;
    std::atomic<uint64_t>& job;
    std::atomic<uint64_t>& stepped;
    ~Stop() {
      if (!t.joinable()) return;
      stepped.store(~uint64_t{0}, std::memory_order_release);
      job.store(~uint64_t{0}, std::memory_order_release);
      t.join();  // after its last step: X d is whole
    }
  } stop_helper{helper, job, stepped};
  uint64_t visit = 0;
  // The helper may still be adding the previous step to its half when
  // `job` moves on: it reads `job` only after that, so the next visit's
  // sum sees it.
  auto finish_visit = [&](double z) {
    if (!split) return;
    step = z;
    stepped.store(visit, std::memory_order_release);
  };

  while (cycle < kMaxInnerCycles) {
    ShufflePrefix(index_, qp_active, rng_);
    double qp_gmax = 0.0, qp_gnorm1 = 0.0;
    int64_t updates = 0;
    const double margin = qp_gmax_old * inv_n_;
    for (std::size_t s = 0; s < qp_active; ++s) {
      const uint32_t j = index_[s];
      const SparseView col = a_.outer(j);
      const std::size_t mine = split ? split_[j] : col.size;
      double sum;
      if (split) {
        ++visit;
        job_feature = j;
        job.store(visit, std::memory_order_release);
        sum = QuadDot(col, 0, mine, qt);
        SpinUntil(summed, visit);
        sum += partial;
      } else {
        sum = QuadDot(col, 0, col.size, qt);
      }
      inner_nnz_ += static_cast<int64_t>(col.size);
      const double wpd = wpd_[j];
      const double g = grad_[j] + (wpd - w_[j]) * nu_ + sum * inv_n_;
      const double h = hdiag_[j];
      const double gp = g + lambda_;
      const double gn = g - lambda_;
      double viol = 0.0;
      if (wpd == 0.0) {
        if (gp < 0.0) {
          viol = -gp;
        } else if (gn > 0.0) {
          viol = gn;
        } else if (shrinking && gp > margin && gn < -margin) {
          finish_visit(0.0);
          std::swap(index_[s], index_[--qp_active]);
          --s;
          continue;
        }
      } else {
        viol = wpd > 0.0 ? std::abs(gp) : std::abs(gn);
      }
      bool blocked = false;
      const double z = BoundedStep(g, h, wpd, w_[j], lambda_, step_max_[j], radius_[j], &blocked);
      if (blocked) {
        viol = 0.0;
        MarkBlocked(j);
      }
      qp_gmax = std::max(qp_gmax, viol);
      qp_gnorm1 += viol;
      if (z == 0.0) {
        finish_visit(0.0);
        continue;
      }
      finish_visit(z);
      ++updates;
      MarkMoved(j);
      wpd_[j] = wpd + z;
      QuadAxpy(col, 0, mine, z, qt);
      inner_nnz_ += static_cast<int64_t>(col.size);
    }
    ++cycle;
    // A cycle that moved nothing leaves X d as it was: another one would
    // see the same gradients (w is at the resolution of the steps).
    if (updates == 0 && qp_active == active_) break;
    if (qp_gnorm1 <= inner_eps_ * gnorm1_init_) {
      if (qp_active == active_) break;
      // Put the outer active set back before stopping.
      qp_active = active_;
      qp_gmax_old = std::numeric_limits<double>::infinity();
      continue;
    }
    // Stalled: the violation not cut by a fifth over the last
    // kStallCycles cycles (summed over the cycles' active sets, which
    // shrinking changes; a stall ends the inner CD without putting the
    // outer active set back: step 1 of the next iteration looks at every
    // feature anyway). On nearly collinear columns (a9a's one-hot groups)
    // the model's CD crawls along the flat directions, and the cap of 1000
    // cycles cost 1770 passes an outer iteration; the direction so far is a
    // descent direction, PolishOnSupport finishes it where it can, and the
    // next outer iteration (a fresh quadratic model) gains more than those
    // cycles.
    double& oldest = recent[cycle % kStallCycles];
    if (cycle > kStallCycles && qp_gnorm1 > 0.8 * oldest) {
      inner_stalled_ = true;
      break;
    }
    oldest = qp_gnorm1;
    qp_gmax_old = qp_gmax;
    // Time budget and cancellation, so one long inner CD cannot overrun them.
    if (stop_.BeforeEpoch(outer_)) break;
  }
  inner_cycles_ = cycle;
  if (cycle >= kMaxInnerCycles) inner_stalled_ = true;
}

std::vector<double> GlmnetL1::SupportNewton(const std::vector<uint32_t>& sup,
                                            const std::vector<double>& h,
                                            const std::vector<double>& gs) const {
  const std::size_t m = sup.size();
  std::vector<double> scale(m);
  for (std::size_t a = 0; a < m; ++a) scale[a] = 1.0 / std::sqrt(h[a * m + a]);
  // The model's change for a step s on the support: gs.s + s H s / 2 +
  // lambda (|wpd + s|_1 - |wpd|_1).
  auto change = [&](const std::vector<double>& st) {
    double lin = 0.0, quad = 0.0;
    for (std::size_t a = 0; a < m; ++a) {
      if (st[a] == 0.0) continue;
      const double wj = wpd_[sup[a]];
      lin += gs[a] * st[a] + lambda_ * (std::abs(wj + st[a]) - std::abs(wj));
      quad += st[a] * DotN(h.data() + a * m, st.data(), m);
    }
    return lin + 0.5 * quad;
  };
  // Newton on the orthant of wpd's signs: (S H S + mu) y = -S (gs + lambda
  // sign), step S y, projected onto the orthant (a coordinate that would
  // cross 0 stops at 0), halved up to 6 times. Where columns are exactly
  // collinear (one-hot groups) H is singular and the L1 term's slope along
  // its null space is not: mu (a Levenberg-Marquardt damping, several
  // tried) bounds the step there. The best step by the model's change.
  std::vector<double> l(m * m), y(m), st(m), best(m, 0.0);
  double best_change = 0.0;
  for (const double mu : {1e-6, 1e-4, 1e-2}) {
    for (std::size_t a = 0; a < m; ++a) {
      for (std::size_t k = 0; k <= a; ++k) l[a * m + k] = h[a * m + k] * scale[a] * scale[k];
      l[a * m + a] += mu;
    }
    if (!CholeskyInPlace(l.data(), m, 1e-13)) continue;
    for (std::size_t i = 0; i < m; ++i) {
      const double sign = wpd_[sup[i]] > 0.0 ? lambda_ : -lambda_;
      y[i] = -(gs[i] + sign) * scale[i];
    }
    CholeskySolveInPlace(l.data(), m, y.data());
    for (double t = 1.0; t >= 1.0 / 64; t *= 0.5) {
      bool finite = true;
      for (std::size_t a = 0; a < m; ++a) {
        // The inner CD's trust region (|d_j| <= kMaxCoordinateStep /
        // scale), the orthant, then the step taken.
        const double wj = wpd_[sup[a]];
        const double w0 = w_[sup[a]];
        const double lim = radius_[sup[a]];
        const double next = std::clamp(wj + t * y[a] * scale[a], w0 - lim, w0 + lim);
        finite = finite && std::isfinite(next);
        st[a] = ((next > 0.0) == (wj > 0.0) ? next : 0.0) - wj;
      }
      if (!finite) continue;
      const double c = change(st);
      if (c < best_change) {
        best_change = c;
        best = st;
      }
    }
  }
  if (!(best_change < 0.0)) return {};
  return best;
}

std::vector<uint32_t> GlmnetL1::TrialSupport() const {
  std::vector<uint32_t> sup;
  for (std::size_t j = 0; j < d_; ++j) {
    if (wpd_[j] != 0.0) sup.push_back(static_cast<uint32_t>(j));
  }
  return sup;
}

double GlmnetL1::HessianFormCost(const std::vector<int>& pos, std::size_t m,
                                 double full_row_cost) const {
  const CsrMatrix& x = data_.x;
  double form = 0.0;
  for (int64_t i = 0; i < x.rows(); ++i) {
    const SparseView r = x.outer(i);
    std::size_t mi = 0;
    for (std::size_t k = 0; k < r.size; ++k) mi += pos[r.index[k]] >= 0 ? 1 : 0;
    const double pairs = 0.5 * static_cast<double>(mi) * static_cast<double>(mi + 1);
    form += mi == m ? pairs * full_row_cost : pairs;
  }
  return form;
}

std::vector<double> GlmnetL1::FormHessian(const std::vector<int>& pos, std::size_t m,
                                          double form) {
  const CsrMatrix& x = data_.x;
  const std::size_t per_row = static_cast<std::size_t>(form / static_cast<double>(n_)) + 1;
  const std::vector<std::size_t> bounds =
      EvenBounds(n_, std::max(1, options_.threads), options_.fit_threads ? kNnzGrain / per_row + 1 : 1);
  const std::size_t chunks = bounds.size() - 1;
  dense_threads_ = std::max(dense_threads_, static_cast<int>(chunks));
  std::vector<std::vector<double>> part(chunks);
  runner_.Run(bounds, [&](std::size_t c, std::size_t b, std::size_t e) {
    std::vector<double>& h = part[c];
    h.assign(m * m, 0.0);
    std::vector<uint32_t> at;
    std::vector<float> val;
    for (std::size_t i = b; i < e; ++i) {
      const double di = qt_[i].dd;
      if (di == 0.0) continue;
      const SparseView r = x.outer(static_cast<int64_t>(i));
      at.clear();
      val.clear();
      for (std::size_t k = 0; k < r.size; ++k) {
        const int p = pos[r.index[k]];
        if (p < 0) continue;
        at.push_back(static_cast<uint32_t>(p));
        val.push_back(r.value[k]);
      }
      // Indices increase along a row and positions with them: at[k] <=
      // at[a] for k <= a, the lower triangle. Every active feature of a row
      // (positions 0..m-1) is a run: the loop on SIMD lanes.
      AddRowProducts(h.data(), m, at.data(), val.data(), at.size(), di);
    }
  });
  std::vector<double> h = std::move(part[0]);
  for (std::size_t c = 1; c < chunks; ++c) {
    for (std::size_t k = 0; k < m * m; ++k) h[k] += part[c][k];
  }
  for (std::size_t a = 0; a < m; ++a) {
    for (std::size_t k = 0; k < a; ++k) {
      h[a * m + k] *= inv_n_;
      h[k * m + a] = h[a * m + k];
    }
    h[a * m + a] = h[a * m + a] * inv_n_ + nu_;
  }
  return h;
}

double GlmnetL1::DenseFormCost() {
  const std::size_t m = active_;
  if (dpos_.size() != d_) dpos_.assign(d_, -1);
  for (uint32_t j : dfeat_) dpos_[j] = -1;
  // Index order: a row's active entries then come in increasing position.
  dfeat_.assign(index_.begin(), index_.begin() + static_cast<std::ptrdiff_t>(m));
  std::sort(dfeat_.begin(), dfeat_.end());
  for (std::size_t a = 0; a < m; ++a) dpos_[dfeat_[a]] = static_cast<int>(a);
  inner_nnz_ += data_.x.nnz();
  return HessianFormCost(dpos_, m, kDenseRowPairCost);
}

bool GlmnetL1::FormDenseHessian() {
  const std::size_t m = active_;
  const double form = DenseFormCost();
  if (form > kDenseFormPasses * static_cast<double>(data_.x.nnz())) {
    // More active features cost more, so those are not scanned again.
    dense_refused_at_ = m;
    for (uint32_t j : dfeat_) dpos_[j] = -1;
    dfeat_.clear();
    return false;
  }
  inner_nnz_ += static_cast<int64_t>(form);
  dh_ = FormHessian(dpos_, m, form);
  return true;
}

bool GlmnetL1::DenseInnerCd() {
  if (active_ == 0 || active_ > kDenseModelMaxFeatures || active_ >= dense_refused_at_) {
    return false;
  }
  if (!FormDenseHessian()) return false;
  const double nnz = static_cast<double>(data_.x.nnz());
  const std::size_t m = dfeat_.size();
  // CD over the model, H d kept in dr_.
  for (uint32_t j : moved_) is_moved_[j] = 0;
  moved_.clear();
  dr_.assign(m, 0.0);
  std::vector<uint32_t> order(m);
  for (std::size_t a = 0; a < m; ++a) order[a] = static_cast<uint32_t>(a);
  const double tol = std::min(inner_eps_ * gnorm1_init_, kDenseInnerRel * gnorm1_);
  const double budget = kDenseCdPasses * nnz;
  double work = 0.0;
  int cycle = 0;
  bool solved = false;
  while (cycle < kMaxInnerCycles && work < budget) {
    ShufflePrefix(order, m, rng_);
    double viol_sum = 0.0;
    int64_t updates = 0;
    for (std::size_t s = 0; s < m; ++s) {
      const std::size_t a = order[s];
      const uint32_t j = dfeat_[a];
      const double g = grad_[j] + dr_[a];
      const double wpd = wpd_[j];
      bool blocked = false;
      const double z =
          BoundedStep(g, dh_[a * m + a], wpd, w_[j], lambda_, step_max_[j], radius_[j], &blocked);
      if (blocked) {
        MarkBlocked(j);
      } else {
        viol_sum += GlmnetViolation(g, wpd, lambda_);
      }
      if (z == 0.0) continue;
      ++updates;
      wpd_[j] = wpd + z;
      const double* col = dh_.data() + a * m;  // symmetric: row a is column a
      for (std::size_t k = 0; k < m; ++k) dr_[k] += z * col[k];
      MarkMoved(j);
    }
    ++cycle;
    work += static_cast<double>(m) * static_cast<double>(updates + 1);
    if (updates == 0 || viol_sum <= tol) {
      solved = true;
      break;
    }
    if (cycle % kDenseCdCyclesPerNewton != 0) continue;
    // Time budget and cancellation, as InnerCd polls them.
    if (stop_.BeforeEpoch(outer_)) break;
    // The CD crawls along nearly collinear columns; the cycles so far have
    // settled which features are nonzero and their signs: Newton there.
    std::vector<uint32_t> sup, at;
    for (std::size_t a = 0; a < m; ++a) {
      if (wpd_[dfeat_[a]] != 0.0) {
        sup.push_back(dfeat_[a]);
        at.push_back(static_cast<uint32_t>(a));
      }
    }
    const std::size_t ms = sup.size();
    // Up to three Cholesky factors of ms^3 / 6, within what is left.
    const double newton_cost = 0.5 * static_cast<double>(ms) * static_cast<double>(ms) *
                               static_cast<double>(ms);
    if (ms == 0 || ms > kPolishMaxFeatures || newton_cost > budget - work) continue;
    std::vector<double> h(ms * ms), gs(ms);
    for (std::size_t a = 0; a < ms; ++a) {
      gs[a] = grad_[sup[a]] + dr_[at[a]];
      for (std::size_t k = 0; k < ms; ++k) h[a * ms + k] = dh_[at[a] * m + at[k]];
    }
    const std::vector<double> best = SupportNewton(sup, h, gs);
    work += newton_cost;
    for (std::size_t a = 0; a < best.size(); ++a) {
      if (best[a] == 0.0) continue;
      wpd_[sup[a]] += best[a];
      const double* col = dh_.data() + at[a] * m;
      for (std::size_t k = 0; k < m; ++k) dr_[k] += best[a] * col[k];
      MarkMoved(sup[a]);
    }
    work += static_cast<double>(m) * static_cast<double>(ms);
  }
  inner_cycles_ = cycle;
  inner_nnz_ += static_cast<int64_t>(work);
  inner_stalled_ = !solved;
  // X d over the moved columns.
  for (QuadTerms& q : qt_) q.xd = 0.0;
  for (uint32_t j : moved_) {
    const double z = wpd_[j] - w_[j];
    if (z == 0.0) continue;
    const SparseView col = a_.outer(j);
    QuadAxpy(col, 0, col.size, z, qt_.data());
    inner_nnz_ += static_cast<int64_t>(col.size);
  }
  return true;
}

bool GlmnetL1::PolishOnSupport() {
  if (d_ > kPolishMaxFeatures * 64) return false;  // the scan below stays cheap
  const std::vector<uint32_t> sup = TrialSupport();
  const std::size_t m = sup.size();
  if (m == 0) return true;
  if (m > kPolishMaxFeatures) return false;
  std::vector<int> pos(d_, -1);
  for (std::size_t a = 0; a < m; ++a) pos[sup[a]] = static_cast<int>(a);
  const CsrMatrix& x = data_.x;
  const double form = HessianFormCost(pos, m, 1.0);
  if (form > kPolishFormPasses * static_cast<double>(x.nnz())) return false;
  // The scans, the Hessian's forming and the QuadDot pass, taken or not.
  inner_nnz_ += static_cast<int64_t>(form) + 2 * x.nnz();
  const std::vector<double> h = FormHessian(pos, m, form);
  // The model's smooth gradient on the support at d0 = wpd - w: grad +
  // H d0 + nu d0.
  const QuadTerms* qt = qt_.data();
  std::vector<double> gs(m);
  for (std::size_t a = 0; a < m; ++a) {
    const uint32_t j = sup[a];
    const SparseView col = a_.outer(j);
    gs[a] = grad_[j] + QuadDot(col, 0, col.size, qt) * inv_n_ + nu_ * (wpd_[j] - w_[j]);
  }
  const std::vector<double> best = SupportNewton(sup, h, gs);
  if (best.empty()) return true;
  for (std::size_t a = 0; a < m; ++a) {
    if (best[a] == 0.0) continue;
    const SparseView col = a_.outer(sup[a]);
    QuadAxpy(col, 0, col.size, best[a], qt_.data());
    wpd_[sup[a]] += best[a];
  }
  for (uint32_t j : sup) MarkMoved(j);
  inner_nnz_ += x.nnz();  // the X d update
  return true;
}

double GlmnetL1::ModelChange() const {
  double quad = 0.0;
  for (const QuadTerms& q : qt_) quad += q.dd * q.xd * q.xd;
  quad *= inv_n_;
  double lin = 0.0;
  for (uint32_t j : moved_) {
    const double dj = wpd_[j] - w_[j];
    lin += grad_[j] * dj + lambda_ * (std::abs(wpd_[j]) - std::abs(w_[j]));
    quad += nu_ * dj * dj;
  }
  return lin + 0.5 * quad;
}

void GlmnetL1::SupportCg() {
  const std::vector<uint32_t> sup = TrialSupport();
  const std::size_t m = sup.size();
  if (m == 0) return;
  double sup_nnz = 0.0;
  for (uint32_t j : sup) sup_nnz += static_cast<double>(a_.outer(j).size);
  const QuadTerms* qt = qt_.data();
  // The model's smooth gradient on the support at the trial point, the
  // signs' L1 slope, and H's diagonal (the preconditioner).
  std::vector<double> gs(m), slope(m), diag(m);
  for (std::size_t a = 0; a < m; ++a) {
    const uint32_t j = sup[a];
    const SparseView col = a_.outer(j);
    slope[a] = wpd_[j] > 0.0 ? lambda_ : -lambda_;
    gs[a] = grad_[j] + QuadDot(col, 0, col.size, qt) * inv_n_ + nu_ * (wpd_[j] - w_[j]);
    diag[a] = hdiag_[j];
  }
  inner_nnz_ += static_cast<int64_t>(sup_nnz);
  std::vector<double> u(n_, 0.0);
  // out = H v = X_S^T D X_S v / n + nu v.
  auto hv = [&](const std::vector<double>& v, std::vector<double>& out) {
    std::fill(u.begin(), u.end(), 0.0);
    for (std::size_t a = 0; a < m; ++a) {
      if (v[a] == 0.0) continue;
      const SparseView col = a_.outer(sup[a]);
      for (std::size_t k = 0; k < col.size; ++k) u[col.index[k]] += v[a] * col.value[k];
    }
    for (std::size_t a = 0; a < m; ++a) {
      const SparseView col = a_.outer(sup[a]);
      double sum = 0.0;
      for (std::size_t k = 0; k < col.size; ++k) {
        const uint32_t i = col.index[k];
        sum += col.value[k] * qt[i].dd * u[i];
      }
      out[a] = sum * inv_n_ + nu_ * v[a];
    }
    inner_nnz_ += static_cast<int64_t>(2.0 * sup_nnz);
  };
  auto dot = [m](const std::vector<double>& p, const std::vector<double>& q) {
    return DotN(p.data(), q.data(), m);
  };
  // H p = -(gs + slope) by Jacobi-preconditioned CG.
  std::vector<double> p(m, 0.0), r(m), z(m), dir(m), hd(m);
  for (std::size_t a = 0; a < m; ++a) r[a] = -(gs[a] + slope[a]);
  const double r0 = std::sqrt(dot(r, r));
  if (!(r0 > 0.0)) return;
  for (std::size_t a = 0; a < m; ++a) dir[a] = z[a] = r[a] / diag[a];
  double rz = dot(r, z);
  for (int it = 0; it < kCgIterations; ++it) {
    hv(dir, hd);
    const double curv = dot(dir, hd);
    if (!(curv > 0.0)) break;
    const double alpha = rz / curv;
    for (std::size_t a = 0; a < m; ++a) {
      p[a] += alpha * dir[a];
      r[a] -= alpha * hd[a];
    }
    if (std::sqrt(dot(r, r)) <= kCgRel * r0) break;
    if (it % 4 == 3 && stop_.BeforeEpoch(outer_)) break;  // as InnerCd polls
    for (std::size_t a = 0; a < m; ++a) z[a] = r[a] / diag[a];
    const double rz_next = dot(r, z);
    const double beta = rz_next / rz;
    rz = rz_next;
    for (std::size_t a = 0; a < m; ++a) dir[a] = z[a] + beta * dir[a];
  }

  // The inner CD's trust region, the orthant, halved twice at most; the
  // best by the model's exact change (one product each).
  std::vector<double> st(m), best, hs(m);
  double best_change = 0.0;
  for (double t = 1.0; t >= 0.25; t *= 0.5) {
    bool finite = true;
    for (std::size_t a = 0; a < m; ++a) {
      const uint32_t j = sup[a];
      const double next = std::clamp(wpd_[j] + t * p[a], w_[j] - radius_[j], w_[j] + radius_[j]);
      finite = finite && std::isfinite(next);
      st[a] = ((next > 0.0) == (wpd_[j] > 0.0) ? next : 0.0) - wpd_[j];
    }
    if (!finite) continue;
    hv(st, hs);
    double change = 0.5 * dot(st, hs);
    for (std::size_t a = 0; a < m; ++a) {
      const double wj = wpd_[sup[a]];
      change += gs[a] * st[a] + lambda_ * (std::abs(wj + st[a]) - std::abs(wj));
    }
    if (change < best_change) {
      best_change = change;
      best = st;
    }
  }
  // Where the system is too ill-conditioned for 20 iterations to find a
  // step worth a tenth of the CD's (a near-separable wide set: none in 600
  // outer iterations, each then costing twice as much), the next calls back
  // off exponentially (the run's caller); where it is, they are not.
  if (best_change < -kCgWorth * std::abs(ModelChange())) {
    cg_misses_ = 0;
  } else {
    cg_misses_ = std::min(cg_misses_ + 1, 16);
    cg_skip_ = (1 << cg_misses_) - 1;
  }
  if (best.empty()) return;
  for (std::size_t a = 0; a < m; ++a) {
    if (best[a] == 0.0) continue;
    const uint32_t j = sup[a];
    const SparseView col = a_.outer(j);
    QuadAxpy(col, 0, col.size, best[a], qt_.data());
    wpd_[j] += best[a];
    MarkMoved(j);
  }
  inner_nnz_ += static_cast<int64_t>(sup_nnz);
}

void GlmnetL1::ResizeTrustRegion(double t) {
  for (uint32_t j : blocked_) {
    is_blocked_[j] = 0;
    if (t == 1.0) {
      radius_[j] = std::min(2.0 * radius_[j], kMaxRadiusGrowth * step_max_[j]);
    } else if (t < 1.0) {
      radius_[j] = std::max(0.5 * radius_[j], step_max_[j]);
    }
  }
  blocked_.clear();
}

// Step 3. On success w_, m_, the per-example terms and primal_ are those of
// the accepted point.
bool GlmnetL1::LineSearch() {
  double delta = 0.0;
  double norm_change = 0.0;
  for (uint32_t j : moved_) {
    dir_[j] = wpd_[j] - w_[j];
    delta += grad_[j] * dir_[j];
    norm_change += std::abs(wpd_[j]) - std::abs(w_[j]);
  }
  delta += lambda_ * norm_change;
  const std::size_t chunks = row_bounds_.size() - 1;
  std::vector<double> part(chunks);
  double t = 1.0;
  for (int ls = 0; ls < kMaxLineSearch; ++ls) {
    runner_.Run(row_bounds_, [&](std::size_t c, std::size_t b, std::size_t e) {
      // The change of m_i is t y_i (X d)_i. The rows X d touches are
      // gathered in order, a block at a time, for LogisticLossChangeSum
      // (its exps and logs as vectors).
      constexpr std::size_t kBlock = 512;
      double m[kBlock], sigma[kBlock], u[kBlock];
      double sum = 0.0;
      std::size_t k = 0;
      for (std::size_t i = b; i < e; ++i) {
        const double xd = qt_[i].xd;
        if (xd == 0.0) continue;
        const double y = y_[i];
        m[k] = m_[i];
        sigma[k] = -y * gt_[i].b;
        u[k] = y * xd;
        if (++k == kBlock) {
          sum += LogisticLossChangeSum(m, sigma, u, t, k);
          k = 0;
        }
      }
      if (k > 0) sum += LogisticLossChangeSum(m, sigma, u, t, k);
      part[c] = sum;
    });
    double loss_change = 0.0;
    for (double p : part) loss_change += p;
    loss_change *= inv_n_;
    if (loss_change + lambda_ * norm_change <= kSigma * delta) {
      for (uint32_t j : moved_) w_[j] = wpd_[j];
      runner_.Run(row_bounds_, [&](std::size_t, std::size_t b, std::size_t e) {
        // Every row's terms anew (a row whose margin kept gets the same
        // bits): the loop vectorises.
        for (std::size_t i = b; i < e; ++i) m_[i] += static_cast<double>(y_[i]) * t * qt_[i].xd;
        SetRows(b, e);
      });

      primal_ += loss_change + lambda_ * norm_change;
      last_step_ = t;
      return true;
    }
    t *= 0.5;
    delta *= 0.5;
    norm_change = 0.0;
    for (uint32_t j : moved_) {
      wpd_[j] = w_[j] + t * dir_[j];
      norm_change += std::abs(wpd_[j]) - std::abs(w_[j]);
    }
  }
  for (uint32_t j : moved_) wpd_[j] = w_[j];
  return false;
}

absl::StatusOr<Certificate> GlmnetL1::StateCertificate() {
  const std::size_t chunks = row_bounds_.size() - 1;
  std::vector<double> part(chunks);
  std::vector<double> derivative(n_);
  runner_.Run(row_bounds_, [&](std::size_t c, std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) derivative[i] = gt_[i].b;
    part[c] = LogisticLossSum(m_.data() + b, e - b);
  });
  double loss_sum = 0.0;
  for (double p : part) loss_sum += p;
  return CertifyPrimalFromSums(model_, data_.y, w_, loss_sum, grad_, derivative);
}

double GlmnetL1::ScaledGapEstimate() const {
  const double t = grad_abs_max_ > lambda_ ? lambda_ / grad_abs_max_ : 1.0;
  const std::size_t chunks = row_bounds_.size() - 1;
  std::vector<double> part(chunks);
  runner_.Run(row_bounds_, [&](std::size_t c, std::size_t b, std::size_t e) {
    constexpr std::size_t kBlock = 512;
    double a[kBlock];
    double sum = 0.0;
    for (std::size_t bb = b; bb < e; bb += kBlock) {
      const std::size_t ee = std::min(e, bb + kBlock);
      for (std::size_t i = bb; i < ee; ++i) a[i - bb] = gt_[i].b;
      sum += LogisticConjugateSum(y_ + bb, a, t, ee - bb);
    }
    part[c] = sum;
  });
  double conj = 0.0;
  for (double p : part) conj += p;
  const double gap = primal_ + conj * inv_n_;
  return std::isfinite(gap) ? std::max(0.0, gap) : std::numeric_limits<double>::infinity();
}

absl::StatusOr<TrainResult> GlmnetL1::Run() {
  w_.assign(d_, 0.0);
  wpd_.assign(d_, 0.0);
  dir_.assign(d_, 0.0);
  grad_.assign(d_, 0.0);
  hdiag_.assign(d_, 0.0);
  step_max_.assign(d_, kMaxCoordinateStep);
  is_blocked_.assign(d_, 0);
  for (std::size_t j = 0; j < d_; ++j) {
    const SparseView col = a_.outer(static_cast<int64_t>(j));
    double scale = 0.0;
    for (std::size_t k = 0; k < col.size; ++k) {
      scale = std::max(scale, std::abs(static_cast<double>(col.value[k])));
    }
    if (scale > 0.0 && scale < 1.0) step_max_[j] = kMaxCoordinateStep / scale;
  }
  radius_ = step_max_;
  index_.assign(d_, 0);
  is_moved_.assign(d_, 0);
  keep_.assign(d_, 1);
  m_.assign(n_, 0.0);
  gt_.assign(n_, GradTerms{});
  qt_.assign(n_, QuadTerms{});
  SetRows(0, n_);
  primal_ = std::log(2.0);  // P(0)
  Gradient();
  gnorm1_init_ = gnorm1_;
  dense_ = active_ > 0 && active_ <= kDenseModelMaxFeatures &&
           DenseFormCost() <= kDenseEagerPasses * static_cast<double>(a_.nnz());

  std::optional<Certificate> cert;  // of the current w, when computed
  StopReason reason = StopReason::kMaxEpochs;
  for (;;) {
    if (auto r = stop_.BeforeEpoch(outer_ + 1)) {
      reason = *r;
      break;
    }
    ++outer_;
    cert.reset();
    gmax_old_ = gmax_;
    inner_nnz_ = 0;
    if (!dense_ || !DenseInnerCd()) {
      InnerCd();
      dense_ = inner_stalled_ ||
               static_cast<double>(inner_nnz_) >= kDenseTriggerPasses * static_cast<double>(a_.nnz());
      if (inner_stalled_ && !PolishOnSupport()) {
        // After k calls in a row not worth their cost, the next 2^k - 1
        // stalls go without.
        if (cg_skip_ > 0) {
          --cg_skip_;
        } else {
          SupportCg();
        }
      }
    }
    const int64_t outer_nnz = a_.nnz() + inner_nnz_;
    work_total_ += static_cast<double>(outer_nnz);
    if (inner_cycles_ == 1) inner_eps_ *= 0.25;

    bool moved = !moved_.empty();
    const bool stepped = moved && LineSearch();
    if (moved && !stepped) {
      // Kept w; as LIBLINEAR, the margins are rebuilt (their drift may be
      // what failed the search).
      RebuildMargins();
    }
    ResizeTrustRegion(stepped ? last_step_ : 0.0);
    // The target rule needs only the primal, known now.
    bool check = false;
    bool estimated = false;
    // A periodic certificate is of w at margins rebuilt from it (for the
    // gradient the next iteration needs anyway): from the solver's sums
    // (StateCertificate), without EvaluatePrimal's pass over the rows.
    bool rebuilt = false;
    if (stop_.Satisfied(primal_, std::numeric_limits<double>::infinity())) {
      check = estimated = true;
    } else {
      work_since_cert_ += static_cast<double>(outer_nnz);
      check = options_.eval_every > 0 && outer_ % options_.eval_every == 0 &&
              CertificatePaced(work_since_cert_, options_.eval_pacing, work_total_);
      if (check) {
        if (stepped || !moved) RebuildMargins();  // else rebuilt after the failed search
        rebuilt = true;
      }
      if (moved || rebuilt) Gradient();
      // The scaled estimate (a pass with logs over the examples) only
      // where a positive gap can meet the rule: with gap_rel and gap_abs 0
      // (target runs, benchmarks) it could not, and ran every iteration.
      if (!check && (stop_.Satisfied(primal_, gap_est_) ||
                     (GapTarget(options_.stop, primal_) > 0.0 &&
                      stop_.Satisfied(primal_, ScaledGapEstimate())))) {
        check = estimated = true;
      }
    }
    if (!check) continue;

    DML_ASSIGN_OR_RETURN(Certificate c,
                         rebuilt ? StateCertificate() : EvaluatePrimal(data_, model_, w_));
    work_since_cert_ = 0.0;
    const Progress report = CertifiedProgress(outer_, c.primal, c.dual, c.gap, outer_nnz);
    primal_ = c.primal;
    cert = std::move(c);
    if (auto r = stop_.AfterEpoch(report)) {
      reason = *r;
      break;
    }
    if (estimated) {
      // The estimate was wrong (or only the target held): drop the drift of
      // the margins and take the gradient of w afresh.
      RebuildMargins();
      Gradient();
    }
  }

  TrainResult result;
  if (!cert) {
    DML_ASSIGN_OR_RETURN(cert, EvaluatePrimal(data_, model_, w_));
    if (outer_ > 0) {  // the result's certificate is the last progress entry too
      stop_.AfterEpoch(CertifiedProgress(outer_, cert->primal, cert->dual, cert->gap));
    }
  }
  result.w = std::move(w_);
  result.primal = cert->primal;
  result.dual = cert->dual;
  result.gap = cert->gap;
  result.epochs = outer_;
  result.rounds = outer_;
  result.seconds = stop_.Elapsed();
  result.threads = static_cast<int>(std::max(row_bounds_.size(), col_bounds_.size()) - 1);
  if (inner_split_) result.threads = std::max(result.threads, 2);
  result.threads = std::max(result.threads, dense_threads_);
  if (result.threads < options_.threads) {
    result.note = absl::StrCat("newGLMNET ran ", result.threads, " thread(s) of ",
                               options_.threads, ": its passes need ", kRowGrain,
                               " examples or ", kNnzGrain, " nonzeros a thread, its inner CD ",
                               kGlmnetSplitColumnNnz, " nonzeros a column (2 threads at most); ", n_,
                               " examples, ", a_.nnz(), " nonzeros");
  }
  result.reason = reason;
  result.history = stop_.TakeHistory();
  return result;
}

}  // namespace

absl::StatusOr<TrainResult> TrainGlmnetL1(const Dataset& data, const ModelSpec& model,
                                          const SolverOptions& options) {
  if (model.kind != ModelKind::kLogisticL1) {
    return absl::InvalidArgumentError("newGLMNET solves the L1-regularised logistic model only");
  }
  return GlmnetL1(data, model, options).Run();
}

}  // namespace dml::internal
