// Truncated Newton on the primal of the smooth L2 models: ridge,
// L2-logistic, squared hinge (LIBLINEAR's -s 0 and -s 2 solve the same
// problems by a truncated Newton method: Lin, Weng, Keerthi, JMLR 2008;
// Galli & Lin, "A study on truncated Newton methods for linear
// classification", IEEE TNNLS 2021, whose line-search variant LIBLINEAR 2.40+
// uses and this follows).
//
// Why beside dual coordinate descent: SCD's rate depends on the data's
// conditioning. On unscaled features (units over several decades, as
// tabular data comes) dual CD, ours and LIBLINEAR's -s 7 and -s 1 alike,
// ends 1000 epochs with a gap of the order of the objective itself, while
// a Newton method with a diagonal preconditioner is unaffected by the
// features' scales and converges in a few tens of Hessian products.
//
// Hinge (not differentiable): Newton runs on the hinge smoothed within mu
// of the margin (SmoothedHingeAt: r^2 / (2 mu) for r = 1 - y z in (0, mu),
// r - mu / 2 beyond), a continuation from mu = 10 cut tenfold whenever the
// smoothed problem is solved as far as its smoothing lets the hinge gap go
// (RunSmoothed). Its loss' is -y times a point b of the hinge's dual box,
// so every iterate has a hinge certificate (IterateShare's); at a stage's
// optimum w = A^T (y b) / (lambda n) and the hinge gap is
// (1/n) sum_i (hinge_i - b_i r_i), at most mu / 4 per row inside the
// zone. Where a small mu's line search finds no decrease, Levenberg-
// Marquardt damping; a stage that stalls ends, and at the smallest mu,
// 1e-6, so does the run (the tabular sets: relative gaps of 1e-8 to 2e-8).
// tab-4601x57 (bench/): dual CD, ours and LIBLINEAR's, ended 1000 epochs
// at primal 0.676; this certified 0.2593 (gap 2e-5) in 15 ms.
//
// Problem:   min_w P(w) = (1/n) sum_i loss(y_i, x_i.w) + lambda/2 ||w||^2.
// Variables: w (d doubles); per example the margin z_i = x_i.w, loss'_i and
//            loss''_i at it (squared hinge: its generalised second
//            derivative, 2 where y_i z_i < 1); the direction d and A d.
// Steps:     iteration k at w:
//              1. a pass over the rows: P(w), g = A^T loss' / n + lambda w,
//                 loss'', the Jacobi preconditioner
//                 M_j = sum_i loss''_i x_ij^2 / n + lambda, and the
//                 certificate's sums (below);
//              2. where d is small and rows short (kExplicitMaxFeatures,
//                 kExplicitFormPasses), H formed explicitly, Jacobi-scaled
//                 and factored by Cholesky: the exact Newton direction;
//                 otherwise preconditioned CG on H d = -g,
//                 H = A^T diag(loss'') A / n
//                 + lambda I, each step one Hessian product (a pass: x_i.p,
//                 then loss''_i (x_i.p) x_i), until the M^-1-norm of the
//                 residual is eta_k that of g, eta_k = min(0.1,
//                 sqrt(|g_k| / |g_0|)) in that norm (superlinear near the
//                 optimum), at most kMaxCgSteps products;
//              3. A d (a pass), the refined certificate (below), then the
//                 step t: bracketed 1-D Newton on phi(t) = P(w + t d) from
//                 t = 1 until |phi'(t)| <= kWolfe |phi'(0)| with Armijo's
//                 decrease (sigma = 0.01), each trial O(n) from z + t A d
//                 and ||w + t d||^2. The margins are carried as z + t A d.
// Stopping:  StopChecker, on the certificate of the margins' dual point
//            (alpha_i = -loss'_i at the best of kIterateDualScales, as
//            IterateShare: evaluate.hpp), computed in step 1 of every
//            iteration, raised by the Newton-refined dual point of
//            newton_certificate.hpp with this iteration's direction (q =
//            -d: one more pass); it bounds P(w) - P* with its gap. The
//            final result's certificate is recomputed from w (and the
//            direction computed at it, if any). max_epochs
//            counts Newton iterations (the rounds); TrainResult::epochs
//            counts passes over the data. Cancellation and the time
//            budget are polled at every Hessian product.
// Threads:   options.threads share every pass by rows, split by nonzeros
//            into chunks of at least kNnzGrain of them unless
//            options.fit_threads is false; the sums over d of the chunks'
//            partial vectors, and CG's vector updates and dot products, are
//            split by columns (their sums added in chunk order). Partial sums are added
//            in a fixed order, so a run is reproducible for a given chunk
//            count: max(threads, 2) where fitting (a thread runs chunks t,
//            t + T, ...), so one and two threads give the same bits.
// Memory:    a d-vector per thread per pass and five more for w, g, M, d
//            and CG's residual and search directions; three n-vectors.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dml/objective/evaluate.hpp"
#include "dml/objective/hinge_svm.hpp"
#include "dml/objective/logistic_l2.hpp"
#include "dml/objective/logistic_conj.hpp"
#include "dml/objective/losses.hpp"
#include "dml/objective/newton_certificate.hpp"
#include "dml/objective/ridge.hpp"
#include "dml/objective/squared_hinge_svm.hpp"
#include "dml/solver/internal/chunks.hpp"
#include "dml/solver/internal/cholesky.hpp"
#include "dml/solver/internal/dense_run.hpp"
#include "dml/solver/internal/solvers.hpp"
#include "dml/solver/internal/stopping.hpp"
#include "dml/util/status.hpp"

namespace dml::internal {
namespace {

constexpr double kArmijo = 0.01;
constexpr int kMaxLineSearch = 30;
/// The line search ends once |phi'(t)| <= kWolfe |phi'(0)|: phi is
/// (piecewise) quadratic for ridge and squared hinge, where a few 1-D
/// Newton steps find its minimiser; squared hinge on news20 took 19.7k
/// passes so against 22.8k with Armijo's backtracking from 1 alone.
constexpr double kWolfe = 0.01;
/// Products per Newton iteration at most. Ridge's Hessian is constant, so
/// a cut CG is a restart that loses its Krylov space: on news20 (lambda
/// 6e-5) ridge took 26 s with 250, 9.8 s with 1000, 8.8 s with 5000.
constexpr int kMaxCgSteps = 1000;
constexpr double kMaxForcing = 0.1;  // LIBLINEAR's CG tolerance
/// A due certificate is refined where the Newton decrement is within this
/// factor of the gap target (Run).
constexpr double kRefineWithin = 10.0;
// The largest second derivative in z of the losses Newton minimises
// (squared hinge's 2; logistic's 1/4, squared loss's 1), whatever y.
constexpr double kLossCurvatureBound = 2.0;
/// The explicit Hessian (Newton::ExplicitDirection) for at most this many
/// features (its Cholesky factor costs d^3 / 6), where forming it (sum_i
/// nnz_i (nnz_i + 1) / 2 multiply-adds) costs at most kExplicitFormPasses
/// times nnz, i.e. half as many Hessian products (2 nnz each), a row of
/// consecutive features counting a quarter (kDenseRunLanes); a9a, w8a
/// and the tabular sets qualify (4601x57 by that quarter: 4 CG iterations
/// of 14 products each had cost twice the explicit form's 3 iterations),
/// news20, real-sim-like and the dense 30000 x 300 set do not.
constexpr std::size_t kExplicitMaxFeatures = 512;
constexpr double kExplicitFormPasses = 16.0;
/// What a row of consecutive features costs to form, as a fraction of the
/// indexed products: AddRowProducts' contiguous loops take four doubles an
/// instruction (AVX2).
constexpr double kDenseRunLanes = 4.0;
/// A thread's share of a pass: below this many nonzeros it costs more
/// than it saves.
constexpr std::size_t kNnzGrain = 65536;
/// The column-split work: the reduction of the threads' partial vectors and
/// CG's vector updates. news20's 62k columns ran them on one thread; split,
/// two threads' CG step went from 1.45 to 1.29-1.33 ms (one thread's 1.9-2.0).
constexpr std::size_t kColumnGrain = 8192;

double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (std::size_t j = 0; j < a.size(); ++j) s += a[j] * b[j];
  return s;
}

/// Hinge (kSmoothed): the smoothing mu starts here and is cut by
/// kSmoothingCut whenever the smoothed problem's own gap is at most
/// kSmoothingSwitch times the smoothing's share of the hinge gap (then
/// Newton steps on this mu could not shrink the hinge gap much), down to
/// kMinSmoothing.
constexpr double kInitialSmoothing = 10.0;
constexpr double kSmoothingSwitch = 0.5;
constexpr double kSmoothingCut = 0.1;
constexpr double kMinSmoothing = 1e-6;
constexpr double kStageShare = 0.01;
/// Hinge: the Levenberg-Marquardt damping (a share of H's diagonal) after
/// a failed line search, raised per failure up to kMaxDamping, lowered
/// per accepted step.
constexpr double kFirstDamping = 1e-6;
constexpr double kDampingRaise = 100.0;
constexpr double kMaxDamping = 1e2;
constexpr double kDampingLower = 0.1;
/// Hinge: a stage whose P_mu fell by less than kStallDecrease of itself
/// over kStallIterations iterations is done.
constexpr int kStallIterations = 10;
constexpr double kStallDecrease = 1e-12;

/// The hinge smoothed by mu > 0 (a Huber-like loss): with r = 1 - y z,
/// 0 for r <= 0, r^2 / (2 mu) for 0 < r < mu, r - mu / 2 beyond; its
/// derivative -y min(1, max(0, r) / mu) is -y times a point of hinge's
/// dual box [0, 1], and its second derivative is 1 / mu inside (0, mu).
inline void SmoothedHingeAt(double y, double z, double mu, double* value, double* first,
                            double* second) {
  const double r = 1.0 - y * z;
  if (r <= 0.0) {
    *value = *first = *second = 0.0;
  } else if (r >= mu) {
    *value = r - 0.5 * mu;
    *first = -y;
    *second = 0.0;
  } else {
    *value = 0.5 * r * r / mu;
    *first = -y * (r / mu);
    *second = 1.0 / mu;
  }
}

/// loss, loss' and loss'' at (y, z) together: logistic's from one exp
/// (three exps and a log1p apart were most of a pass on a9a).
template <typename Loss>
struct Pieces {
  static void At(double y, double z, double* value, double* first, double* second) {
    *value = Loss::Value(y, z);
    *first = Loss::Derivative(y, z);
    *second = Loss::Second(y, z);
  }
};
template <>
struct Pieces<loss::Logistic> {
  static void At(double y, double z, double* value, double* first, double* second) {
    const double m = y * z;
    const double e = std::exp(-std::abs(m));  // in (0, 1]
    const double inv = 1.0 / (1.0 + e);
    *value = loss::FastLog1p(e) + std::max(-m, 0.0);
    const double s = m > 0 ? e * inv : inv;  // sigmoid(-m)
    *first = -y * s;
    *second = e * inv * inv;
  }
};

template <typename Obj>
class Newton {
  using Loss = typename Obj::LossType;
  /// Hinge: Newton runs on the hinge smoothed by mu_ (SmoothedHingeAt),
  /// the certificates are of the hinge problem itself.
  static constexpr bool kSmoothed = std::is_same_v<Obj, HingeSvmObjective>;

 public:
  Newton(const Dataset& data, const ModelSpec& model, const SolverOptions& options)
      : data_(data),
        model_(model),
        options_(options),
        stop_(options.stop, options.on_epoch),
        n_(static_cast<std::size_t>(data.x.rows())),
        d_(static_cast<std::size_t>(data.x.cols())),
        inv_n_(1.0 / static_cast<double>(data.x.rows())),
        w_(d_, 0.0),
        z_(n_, 0.0),
        zd_(n_, 0.0),
        derivative_(n_, 0.0),
        second_(n_, 0.0) {
    const int threads = std::max(1, options.threads);
    // Sums split in at least two where the data has nonzeros for two
    // threads, on one thread too: one and two threads then give the same
    // bits (news20 logistic -s 0 at --tol 1e-1 stopped at primal 0.044373 on
    // one and 0.045218 on two, the partial sums changing CG's directions).
    rows_ = NnzBounds(data.x, options.fit_threads ? std::max(threads, 2) : threads,
                      options.fit_threads ? kNnzGrain : 1);
    cols_ = EvenBounds(d_, static_cast<int>(rows_.size() - 1),
                       options.fit_threads ? kColumnGrain : 1);
    partial_.resize(rows_.size() - 1);
    threads_ = std::min(threads, static_cast<int>(rows_.size() - 1));
    runner_.LimitThreads(static_cast<std::size_t>(threads_));
    // The explicit Hessian where forming it costs less than a few Hessian
    // products and its Cholesky factor is cheap (kExplicitMaxFeatures).
    if (d_ <= kExplicitMaxFeatures) {
      double form = 0.0;
      for (int64_t i = 0; i < data.x.rows(); ++i) {
        const SparseView r = data.x.outer(i);
        const double len = static_cast<double>(r.size);
        // A dense run's products take vector lanes (AddRowProducts).
        form += 0.5 * len * (len + 1.0) / (IsOneRun(r.index, r.size) ? kDenseRunLanes : 1.0);
      }
      explicit_ = form <= kExplicitFormPasses * static_cast<double>(data.x.nnz());
    }
  }

  absl::StatusOr<TrainResult> Run();
  /// kSmoothed: start from w (margins computed here) on the smoothing mu
  /// (clamped to [kMinSmoothing, kInitialSmoothing]) instead of w = 0 on
  /// kInitialSmoothing. Before Run.
  void WarmStart(const std::vector<double>& w, double mu) {
    w_ = w;
    Margins(w_, z_);
    mu_ = std::clamp(mu, kMinSmoothing, kInitialSmoothing);
  }

 private:
  /// Run for ridge, logistic and squared hinge.
  absl::StatusOr<TrainResult> RunSmooth();
  /// Run for the hinge (kSmoothed): Newton on the hinge smoothed by mu_,
  /// mu_ cut at the end of each stage, certificates of the hinge at the
  /// smoothed loss' dual point (PlainCertificate).
  absl::StatusOr<TrainResult> RunSmoothed();
  /// The result: w_ with the certificate of it, the reason (converged or
  /// target reached only where cert meets the rule), the notes (first_note,
  /// the threads', trouble).
  TrainResult Finish(const Certificate& cert, StopReason reason, int iter, std::string trouble,
                     std::string first_note);
  /// The loss Newton minimises at (y, z) and its first two derivatives.
  void At(double y, double z, double* value, double* first, double* second) const {
    if constexpr (kSmoothed) {
      SmoothedHingeAt(y, z, mu_, value, first, second);
    } else {
      Pieces<Loss>::At(y, z, value, first, second);
    }
  }
  /// Step 1 at w (margins z_): P (primal_) and what Newton minimises
  /// (phi0_), g, M, loss' and loss''; kSmoothed: also smooth_gap_ and
  /// smooth_bias_.
  void GradientPass();
  /// The progress entry of iteration `iter` certified by `cert` (epochs:
  /// the passes so far).
  Progress IterationProgress(int iter, const Certificate& cert) const {
    Progress p;
    p.round = iter;
    p.epochs = static_cast<double>(passes_);
    p.primal = cert.primal;
    p.dual = cert.dual;
    p.gap = cert.gap;
    p.nnz_touched = passes_ * data_.x.nnz();
    return p;
  }
  /// |g| in the M^-1 norm (of the last GradientPass).
  double GradientNorm() const {
    double s = 0.0;
    for (std::size_t j = 0; j < d_; ++j) s += g_[j] * g_[j] / m_[j];
    return std::sqrt(s);
  }
  /// The certificate of the margins' dual point at the last GradientPass
  /// (CertifyIterate of its sums): O(n), no pass over the data.
  absl::StatusOr<Certificate> PlainCertificate();
  /// `last`, a certificate of w_ whose primal was summed over the carried
  /// margins z_, moved to the margins recomputed from w_ (into zd_, which
  /// it overwrites; *margins_fresh then says so): its primal summed over
  /// them, its gap widened by what that primal rose. Nothing where the
  /// carried margins may have moved the primal by more than last.gap /
  /// 1000, or that gap is 0 or not finite.
  std::optional<Certificate> OnFreshMargins(const Certificate& last, bool* margins_fresh);
  /// A certificate with P only (dual -inf): what the target rule needs.
  Certificate PrimalOnly() const;
  /// out = H v (+ damping_ diag(M) v); returns v . out, summed by the
  /// column chunks in order.
  double HessianProduct(const std::vector<double>& v, std::vector<double>& out);
  /// zd_ = A v.
  void Margins(const std::vector<double>& v, std::vector<double>& into);
  /// phi(t) = P(w + t d) and its first two derivatives in t, from the
  /// margins z + t A d (squared hinge: the generalised second one).
  struct Line {
    double value = 0.0, slope = 0.0, curvature = 0.0;
  };
  Line LineAt(double t, double wsq, double wd, double dd);
  /// The step along dir_: bracketed Newton on phi' (exact for ridge, finite
  /// for squared hinge) until phi'(t) is within kWolfe of phi'(0) and the
  /// Armijo rule holds; nullopt if no decrease was found.
  std::optional<double> LineSearch();
  /// out[j] += part(c)[j] for every chunk c >= 1 (chunk 0 wrote into out),
  /// split by columns.
  template <typename Part>
  void Reduce(std::vector<double>& out, Part part);
  /// H d = -g by preconditioned CG; false if cancelled or out of time.
  bool Direction(double forcing);
  /// H d = -g exactly: H formed from the rows (one pass of outer
  /// products) and factored by Cholesky; false where H is not numerically
  /// positive definite (the caller falls back to CG).
  bool ExplicitDirection();
  /// `plain` (of the last GradientPass) refined by the direction whose
  /// margins are in zd_: the Newton-refined certificate
  /// (newton_certificate.hpp) with q = -d, one pass.
  absl::StatusOr<Certificate> Refine(const Certificate& plain);

  const Dataset& data_;
  const ModelSpec model_;
  const SolverOptions& options_;
  StopChecker stop_;
  const std::size_t n_, d_;
  const double inv_n_;
  std::vector<double> w_, z_, zd_, derivative_, second_;
  std::vector<double> loss_grad_;  // sum_i loss'_i x_i of the last GradientPass
  std::vector<double> g_, m_, dir_;
  std::vector<std::size_t> rows_, cols_;
  std::vector<std::vector<double>> partial_;
  double primal_ = 0.0;
  double phi0_ = 0.0;      // the objective Newton minimises at w (kSmoothed: P_mu)
  double loss_sum_ = 0.0;  // sum_i loss_i of the last GradientPass
  // kSmoothed: the smoothing, and at the last GradientPass the smoothed
  // problem's gap P_mu(w) - D_mu(alpha) and what the smoothing adds to it
  // in the hinge gap, (P - P_mu)(w) - mu |alpha|^2 / (2 n) (the two sum to
  // the hinge gap at alpha's scale 1).
  double mu_ = kInitialSmoothing;
  double smooth_gap_ = 0.0, smooth_bias_ = 0.0;
  // kSmoothed: H + damping_ diag(H) for the direction (Levenberg-Marquardt)
  // after a failed line search: the smoothed zone's curvature, 1 / mu,
  // starts right beside rows outside it, so on a small mu the model can
  // be off by that much a nanometre along the Newton step.
  double damping_ = 0.0;
  int smoothing_cuts_ = 0;
  bool explicit_ = false;  // ExplicitDirection instead of CG (small d)
  int threads_ = 1;        // that run the chunks of rows_
  int64_t passes_ = 0;
  int cg_steps_ = 0;
  // Last: destroyed first, its workers joined before what their passes read.
  ChunkRunner runner_;
};

template <typename Obj>
template <typename Part>
void Newton<Obj>::Reduce(std::vector<double>& out, Part part) {
  const std::size_t chunks = rows_.size() - 1;
  if (chunks == 1) return;
  runner_.Run(cols_, [&](std::size_t, std::size_t jb, std::size_t je) {
    for (std::size_t c = 1; c < chunks; ++c) {
      const double* p = part(c);
      for (std::size_t j = jb; j < je; ++j) out[j] += p[j];
    }
  });
}

template <typename Obj>
void Newton<Obj>::GradientPass() {
  g_.assign(d_, 0.0);
  m_.assign(d_, 0.0);
  std::vector<std::vector<double>> curvature(partial_.size());
  // Per chunk: the loss Newton minimises; kSmoothed also the hinge, and
  // the sums of b and b^2 over the dual point b_i = -y_i loss'_i.
  std::vector<std::array<double, 4>> sums(partial_.size());
  runner_.Run(rows_, [&](std::size_t c, std::size_t b, std::size_t e) {
    std::vector<double>& grad = c == 0 ? g_ : partial_[c];
    std::vector<double>& curv = c == 0 ? m_ : curvature[c];
    if (c != 0) {
      grad.assign(d_, 0.0);
      curv.assign(d_, 0.0);
    }
    std::array<double, 4> sum{};
    for (std::size_t i = b; i < e; ++i) {
      const SparseView r = data_.x.outer(static_cast<int64_t>(i));
      double value, gi, hi;
      At(data_.y[i], z_[i], &value, &gi, &hi);
      sum[0] += value;
      if constexpr (kSmoothed) {
        const double bi = -data_.y[i] * gi;
        sum[1] += loss::Hinge::Value(data_.y[i], z_[i]);
        sum[2] += bi;
        sum[3] += bi * bi;
      }
      derivative_[i] = gi;
      second_[i] = hi;
      if (gi == 0.0 && hi == 0.0) continue;
      for (std::size_t k = 0; k < r.size; ++k) {
        const double v = r.value[k];
        grad[r.index[k]] += gi * v;
        curv[r.index[k]] += hi * v * v;
      }
    }
    sums[c] = sum;
  });
  Reduce(g_, [this](std::size_t c) { return partial_[c].data(); });
  Reduce(m_, [&curvature](std::size_t c) { return curvature[c].data(); });
  loss_grad_ = g_;
  ++passes_;
  std::array<double, 4> total{};
  for (const auto& s : sums) {
    for (int k = 0; k < 4; ++k) total[k] += s[k];
  }
  const double reg = 0.5 * model_.lambda * Dot(w_, w_);
  phi0_ = total[0] * inv_n_ + reg;
  loss_sum_ = total[0];
  if constexpr (kSmoothed) {
    // The certificates are of the hinge (its loss; b is in its dual box).
    loss_sum_ = total[1];
    // D(b) = sum_i b_i / n - |A^T (y b)|^2 / (2 lambda n^2), A^T (y b) =
    // -loss_grad_; D_mu(b) = D(b) - mu |b|^2 / (2 n).
    const double quad = 0.5 * Dot(loss_grad_, loss_grad_) * inv_n_ * inv_n_ / model_.lambda;
    const double smoothing = 0.5 * mu_ * total[3] * inv_n_;
    smooth_gap_ = phi0_ - (total[2] * inv_n_ - quad - smoothing);
    smooth_bias_ = (total[1] - total[0]) * inv_n_ - smoothing;
  }
  primal_ = loss_sum_ * inv_n_ + reg;
  for (std::size_t j = 0; j < d_; ++j) {
    g_[j] = g_[j] * inv_n_ + model_.lambda * w_[j];
    m_[j] = m_[j] * inv_n_ + model_.lambda;
  }
}

template <typename Obj>
Certificate Newton<Obj>::PrimalOnly() const {
  Certificate c;
  c.primal = primal_;
  c.dual = -std::numeric_limits<double>::infinity();
  c.gap = std::numeric_limits<double>::infinity();
  return c;
}

template <typename Obj>
absl::StatusOr<Certificate> Newton<Obj>::PlainCertificate() {
  std::vector<std::array<double, kIterateDualScaleCount>> sums(rows_.size() - 1);
  runner_.Run(rows_, [&](std::size_t c, std::size_t b, std::size_t e) {
    std::array<double, kIterateDualScaleCount> s{};
    if constexpr (std::is_same_v<Obj, LogisticL2Objective>) {
      // One log a row and eight log1p as one vector (the certificates' logs
      // were a third of a9a's Newton run).
      static_assert(kIterateDualScaleCount == 8);
      std::array<double, kIterateDualScaleCount> log_s{};
      for (int k = 0; k < kIterateDualScaleCount; ++k) log_s[k] = std::log(kIterateDualScales[k]);
      AddLogisticNegConjAtScales(data_.y.data() + b, derivative_.data() + b, e - b,
                                 kIterateDualScales, log_s.data(), s.data());
    } else {
      for (std::size_t i = b; i < e; ++i) {
        for (int k = 0; k < kIterateDualScaleCount; ++k) {
          s[k] += Obj::NegConj(data_.y[i], -kIterateDualScales[k] * derivative_[i]);
        }
      }
    }
    sums[c] = s;
  });
  // The sums of an IterateShare of all rows: CertifyIterate turns them
  // into P, D and the gap as for SGD's certificates.
  IterateShare share;
  share.rows = static_cast<int64_t>(n_);
  share.loss_sum = loss_sum_;
  for (const auto& s : sums) {
    for (int k = 0; k < kIterateDualScaleCount; ++k) share.negconj_sums[k] += s[k];
  }
  share.grad = loss_grad_;
  return CertifyIterate(model_, w_, share);
}

template <typename Obj>
std::optional<Certificate> Newton<Obj>::OnFreshMargins(const Certificate& last,
                                                       bool* margins_fresh) {
  if (!(last.gap > 0.0) || !std::isfinite(last.gap)) return std::nullopt;
  Margins(w_, zd_);
  *margins_fresh = true;
  // |l(z + e) - l(z)| <= |l'(z)| |e| + kLossCurvatureBound e^2 / 2.
  double bound = 0.0;
  for (std::size_t i = 0; i < n_; ++i) {
    const double e = std::abs(zd_[i] - z_[i]);
    bound += std::abs(derivative_[i]) * e + 0.5 * kLossCurvatureBound * e * e;
  }
  if (!(bound * inv_n_ <= 1e-3 * last.gap)) return std::nullopt;
  // The primal over the fresh margins, summed as GradientPass and
  // CertifyIterate sum it: the same bits as a certificate from w alone.
  std::vector<double> loss(rows_.size() - 1, 0.0);
  runner_.Run(rows_, [&](std::size_t c, std::size_t b, std::size_t e) {
    double sum = 0.0;
    for (std::size_t i = b; i < e; ++i) {
      double value, gi, hi;
      Pieces<Loss>::At(data_.y[i], zd_[i], &value, &gi, &hi);
      sum += value;
    }
    loss[c] = sum;
  });
  double loss_sum = 0.0;
  for (double v : loss) loss_sum += v;
  Certificate c = last;
  c.primal = loss_sum / static_cast<double>(n_) + 0.5 * model_.lambda * Dot(w_, w_);
  // last.dual is a dual value (or below one): the gap grows by what the
  // primal rose, and never shrinks.
  c.gap = last.gap + std::max(0.0, c.primal - last.primal);
  c.dual = c.primal - c.gap;
  c.separable_gap = c.gap;
  return c;
}

template <typename Obj>
double Newton<Obj>::HessianProduct(const std::vector<double>& v, std::vector<double>& out) {
  out.assign(d_, 0.0);
  runner_.Run(rows_, [&](std::size_t c, std::size_t b, std::size_t e) {
    std::vector<double>& acc = c == 0 ? out : partial_[c];
    if (c != 0) acc.assign(d_, 0.0);
    for (std::size_t i = b; i < e; ++i) {
      const double h = second_[i];
      if (h == 0.0) continue;
      const SparseView r = data_.x.outer(static_cast<int64_t>(i));
      double xv = 0.0;
      for (std::size_t k = 0; k < r.size; ++k) xv += r.value[k] * v[r.index[k]];
      const double u = h * xv;
      for (std::size_t k = 0; k < r.size; ++k) acc[r.index[k]] += u * r.value[k];
    }
  });
  // The partial vectors' sum, the scale, lambda and damping, and v . out,
  // by column chunks (the sums in chunk order: the same bits on any thread
  // count).
  const std::size_t chunks = rows_.size() - 1;
  std::vector<double> dots(cols_.size() - 1, 0.0);
  runner_.Run(cols_, [&](std::size_t c, std::size_t jb, std::size_t je) {
    double dot = 0.0;
    for (std::size_t j = jb; j < je; ++j) {
      double o = out[j];
      for (std::size_t q = 1; q < chunks; ++q) o += partial_[q][j];
      o = o * inv_n_ + model_.lambda * v[j];
      if (damping_ > 0.0) o += damping_ * m_[j] * v[j];
      out[j] = o;
      dot += v[j] * o;
    }
    dots[c] = dot;
  });
  ++passes_;
  double dot = 0.0;
  for (double x : dots) dot += x;
  return dot;
}

template <typename Obj>
void Newton<Obj>::Margins(const std::vector<double>& v, std::vector<double>& into) {
  runner_.Run(rows_, [&](std::size_t, std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      const SparseView r = data_.x.outer(static_cast<int64_t>(i));
      double s = 0.0;
      for (std::size_t k = 0; k < r.size; ++k) s += r.value[k] * v[r.index[k]];
      into[i] = s;
    }
  });
  ++passes_;
}

template <typename Obj>
typename Newton<Obj>::Line Newton<Obj>::LineAt(double t, double wsq, double wd, double dd) {
  std::vector<Line> sums(rows_.size() - 1);
  runner_.Run(rows_, [&](std::size_t c, std::size_t b, std::size_t e) {
    Line s;
    for (std::size_t i = b; i < e; ++i) {
      const double v = zd_[i];
      double value, first, second;
      At(data_.y[i], z_[i] + t * v, &value, &first, &second);
      s.value += value;
      s.slope += first * v;
      s.curvature += second * v * v;
    }
    sums[c] = s;
  });
  Line l;
  for (const Line& s : sums) {
    l.value += s.value;
    l.slope += s.slope;
    l.curvature += s.curvature;
  }
  const double lambda = model_.lambda;
  l.value = l.value * inv_n_ + 0.5 * lambda * (wsq + 2.0 * t * wd + t * t * dd);
  l.slope = l.slope * inv_n_ + lambda * (wd + t * dd);
  l.curvature = l.curvature * inv_n_ + lambda * dd;
  return l;
}

template <typename Obj>
std::optional<double> Newton<Obj>::LineSearch() {
  const double gd = Dot(g_, dir_);
  if (!(gd < 0.0)) return std::nullopt;
  const double wsq = Dot(w_, w_), wd = Dot(w_, dir_), dd = Dot(dir_, dir_);
  double lo = 0.0, hi = std::numeric_limits<double>::infinity();
  double t = 1.0;
  std::optional<double> best;  // the lowest phi met that passes Armijo
  double best_value = std::numeric_limits<double>::infinity();
  // The lowest phi below phi(0) at all: a trial can fail Armijo while phi
  // still falls there (phi far from quadratic); with no Armijo point met,
  // that decrease is taken rather than none.
  std::optional<double> lower;
  double lower_value = phi0_;
  for (int k = 0; k < kMaxLineSearch; ++k) {
    const Line l = LineAt(t, wsq, wd, dd);
    const bool armijo = std::isfinite(l.value) && l.value <= phi0_ + kArmijo * t * gd;
    if (armijo && l.value < best_value) {
      best = t;
      best_value = l.value;
    }
    if (std::isfinite(l.value) && l.value < lower_value) {
      lower = t;
      lower_value = l.value;
    }
    if (armijo && std::abs(l.slope) <= kWolfe * -gd) break;
    // phi is convex: its slope's sign brackets the minimiser. A value
    // above phi(0) (or not finite) means t is past it.
    if (!std::isfinite(l.value) || l.value > phi0_ || l.slope > 0.0) {
      hi = t;
    } else {
      lo = t;
    }
    double next = l.curvature > 0.0 && std::isfinite(l.slope) ? t - l.slope / l.curvature : -1.0;
    if (!(next > lo && next < hi)) next = std::isfinite(hi) ? 0.5 * (lo + hi) : 2.0 * t;
    // (No upper end yet: the step doubles.)
    if (next == t || (std::isfinite(hi) && hi - lo <= 1e-12 * hi)) break;
    t = next;
  }
  return best ? best : lower;
}

template <typename Obj>
bool Newton<Obj>::ExplicitDirection() {
  const std::size_t d = d_;
  // Lower triangles of sum_i loss''_i x_i x_i^T, one per chunk.
  std::vector<std::vector<double>> parts(rows_.size() - 1);
  runner_.Run(rows_, [&](std::size_t c, std::size_t b, std::size_t e) {
    std::vector<double>& h = parts[c];
    h.assign(d * d, 0.0);
    for (std::size_t i = b; i < e; ++i) {
      const double hi = second_[i];
      if (hi == 0.0) continue;
      const SparseView r = data_.x.outer(static_cast<int64_t>(i));
      AddRowProducts(h.data(), d, r.index, r.value, r.size, hi);
    }
  });
  std::vector<double>& h = parts[0];
  for (std::size_t c = 1; c < parts.size(); ++c) {
    for (std::size_t k = 0; k < d * d; ++k) h[k] += parts[c][k];
  }
  ++passes_;
  // S H S with S = diag(H)^-1/2 (unit diagonal): Jacobi scaling, as CG's
  // preconditioner, so unscaled features do not ruin the factorisation.
  std::vector<double> scale(d);
  for (std::size_t a = 0; a < d; ++a) {
    scale[a] = 1.0 / std::sqrt(h[a * d + a] * inv_n_ + model_.lambda);
  }
  for (std::size_t a = 0; a < d; ++a) {
    for (std::size_t k = 0; k < a; ++k) h[a * d + k] *= inv_n_ * scale[a] * scale[k];
    h[a * d + a] = 1.0 + damping_;
  }
  // Cholesky S H S = L L^T, then L L^T y = -S g, dir = S y. A pivot at
  // the rounding floor: H is numerically singular here.
  if (!CholeskyInPlace(h.data(), d, 1e-12)) return false;
  dir_.resize(d);
  for (std::size_t i = 0; i < d; ++i) dir_[i] = -g_[i] * scale[i];
  CholeskySolveInPlace(h.data(), d, dir_.data());
  for (std::size_t i = 0; i < d; ++i) {
    dir_[i] *= scale[i];
    if (!std::isfinite(dir_[i])) return false;
  }
  return true;
}

template <typename Obj>
bool Newton<Obj>::Direction(double forcing) {
  dir_.assign(d_, 0.0);
  std::vector<double> r(d_), z(d_), p(d_), hp, sums(cols_.size() - 1);
  double rz = 0.0;
  for (std::size_t j = 0; j < d_; ++j) {
    r[j] = -g_[j];
    z[j] = r[j] / m_[j];
    rz += r[j] * z[j];
  }
  p = z;
  const double goal = forcing * forcing * rz;
  for (int step = 0; step < kMaxCgSteps && rz > goal; ++step) {
    if (stop_.Cancelled() || stop_.Elapsed() >= options_.stop.max_seconds) return false;
    const double php = HessianProduct(p, hp);
    ++cg_steps_;
    if (!(php > 0.0)) break;  // H >= lambda I: only rounding gets here
    const double a = rz / php;
    // The vector updates by column chunks, as the product's (parallel
    // where there are two; r . z summed in chunk order).
    runner_.Run(cols_, [&](std::size_t c, std::size_t jb, std::size_t je) {
      double s = 0.0;
      for (std::size_t j = jb; j < je; ++j) {
        dir_[j] += a * p[j];
        r[j] -= a * hp[j];
        z[j] = r[j] / m_[j];
        s += r[j] * z[j];
      }
      sums[c] = s;
    });
    double rz_next = 0.0;
    for (double x : sums) rz_next += x;
    const double beta = rz_next / rz;
    rz = rz_next;
    runner_.Run(cols_, [&](std::size_t, std::size_t jb, std::size_t je) {
      for (std::size_t j = jb; j < je; ++j) p[j] = z[j] + beta * p[j];
    });
  }
  // A CG that could not take a step leaves the preconditioned gradient.
  if (Dot(dir_, dir_) == 0.0) {
    for (std::size_t j = 0; j < d_; ++j) dir_[j] = -g_[j] / m_[j];
  }
  return true;
}

template <typename Obj>
absl::StatusOr<Certificate> Newton<Obj>::Refine(const Certificate& plain) {
  if (!RefinesIterateCertificate(model_.kind)) return plain;
  std::vector<NewtonDualShare> shares(rows_.size() - 1);
  std::vector<absl::Status> status(rows_.size() - 1);
  runner_.Run(rows_, [&](std::size_t c, std::size_t b, std::size_t e) {
    shares[c].step.assign(d_, 0.0);
    status[c] = AddNewtonDualRows(data_, model_, static_cast<int64_t>(b), static_cast<int64_t>(e),
                                  derivative_.data(), second_.data(), zd_.data(), -1.0,
                                  shares[c]);
  });
  for (const absl::Status& st : status) DML_RETURN_IF_ERROR(st);
  NewtonDualShare& total = shares[0];
  for (std::size_t c = 1; c < shares.size(); ++c) {
    for (int k = 0; k < kNewtonDualStepCount; ++k) {
      total.negconj_sums[k] += shares[c].negconj_sums[k];
    }
  }
  Reduce(total.step, [&shares](std::size_t c) { return shares[c].step.data(); });
  ++passes_;
  std::vector<double> a_t_alpha(d_);
  for (std::size_t j = 0; j < d_; ++j) a_t_alpha[j] = -loss_grad_[j];
  return RefineCertificate(model_, static_cast<int64_t>(n_), a_t_alpha, plain, total);
}

template <typename Obj>
absl::StatusOr<TrainResult> Newton<Obj>::RunSmoothed() {
  std::optional<StopReason> reason;
  std::string trouble;
  double g0 = 0.0;
  int iter = 0;
  const double nnz = static_cast<double>(data_.x.nnz());
  double work_since_cert = 0.0;
  // The w and mu of the smallest gap certified in the loop: a smaller mu
  // can end in a worse place (its stage cut short by the rounding floor
  // of the line search).
  std::vector<double> best_w;
  double best_mu = mu_, best_gap = std::numeric_limits<double>::infinity();
  int last_cert_iter = -1;
  std::vector<double> stage_phi;  // P_mu at each iteration of this stage
  for (;;) {
    const int64_t passes_before = passes_;
    GradientPass();
    const double gnorm = GradientNorm();
    if (iter == 0 && smoothing_cuts_ == 0) g0 = gnorm;
    if (!std::isfinite(phi0_) || !std::isfinite(gnorm)) {
      return absl::InternalError(absl::StrCat("truncated Newton: the smoothed hinge or its "
                                              "gradient is not finite at iteration ",
                                              iter));
    }
    if ((reason = stop_.BeforeEpoch(iter + 1))) break;
    const bool have_direction = gnorm > 0.0;
    if (have_direction) {
      const double forcing = std::min(kMaxForcing, std::sqrt(gnorm / g0));
      if (!((explicit_ && ExplicitDirection()) || Direction(forcing))) {
        reason = stop_.Cancelled() ? StopReason::kCancelled : StopReason::kTimeBudget;
        break;
      }
    }
    // The stage is done where the smoothed problem's gap is within
    // kSmoothingSwitch of what the smoothing adds to the hinge gap (the
    // hinge gap is then about the latter) and the Newton decrement, about
    // P_mu(w) - min P_mu, is a small share of P_mu (the next stage starts
    // from here: from w = 0 on a large mu the first test can hold at once).
    const double decrement = have_direction ? -0.5 * Dot(g_, dir_) : 0.0;
    // Or it stalled: P_mu fell by less than kStallDecrease of itself over
    // its last kStallIterations steps (the smoothed gap, 1/lambda times the
    // gradient's square, can stay above the bias at rounding level: w8a
    // from dual CD's w on a smoothing of 40x its gap ran 1000 iterations
    // without moving P).
    const bool stalled = stage_phi.size() > static_cast<std::size_t>(kStallIterations) &&
                         stage_phi[stage_phi.size() - 1 - kStallIterations] - phi0_ <=
                             kStallDecrease * phi0_;
    stage_phi.push_back(phi0_);
    const bool stage_done = stalled || (smooth_gap_ <= kSmoothingSwitch * smooth_bias_ &&
                                        decrement <= kStageShare * phi0_);
    work_since_cert += static_cast<double>(passes_ - passes_before) * nnz;
    const bool due = PeriodicCertificateDue(options_.eval_every, work_since_cert, data_.x.nnz(),
                                            options_.eval_pacing,
                                            static_cast<double>(passes_) * nnz);
    // (A due one waits for a step: after a cut the w is the one just
    // certified.)
    if (stage_done || !have_direction || (due && iter != last_cert_iter)) {
      DML_ASSIGN_OR_RETURN(const Certificate cert, PlainCertificate());
      work_since_cert = 0.0;
      last_cert_iter = iter;
      if ((reason = stop_.AfterEpoch(IterationProgress(iter, cert)))) break;
      if (cert.gap < best_gap) {
        best_gap = cert.gap;
        best_w = w_;
        best_mu = mu_;
      }
    }
    if ((stage_done || !have_direction) && mu_ > kMinSmoothing) {
      // A new problem: no damping yet. (Its forcing stays relative to
      // |g| at w = 0: restarting it per stage took the real-sim-shaped
      // set, rescaled, 20978 -> 23141 passes.)
      mu_ = std::max(kMinSmoothing, mu_ * kSmoothingCut);
      ++smoothing_cuts_;
      damping_ = 0.0;
      stage_phi.clear();
      continue;
    }
    if (stalled) {
      trouble = absl::StrCat("no progress over ", kStallIterations,
                             " iterations at the smallest smoothing: stopped at iteration ", iter);
      reason = StopReason::kConverged;  // the final certificate decides
      break;
    }
    if (!have_direction) {
      reason = StopReason::kConverged;  // the final certificate decides
      break;
    }
    Margins(dir_, zd_);
    const std::optional<double> step = LineSearch();
    if (!step && damping_ < kMaxDamping) {
      damping_ = damping_ == 0.0 ? kFirstDamping : damping_ * kDampingRaise;
      continue;
    }
    if (!step) {
      // A smaller mu would not do better: its Newton model is still worse
      // (rows whose margins cross into the smoothed zone along the step).
      trouble = absl::StrCat("the line search found no decrease at iteration ", iter + 1,
                             " (smoothing ", mu_, ": the rounding floor): stopped there");
      reason = StopReason::kConverged;
      break;
    }
    for (std::size_t j = 0; j < d_; ++j) w_[j] += *step * dir_[j];
    for (std::size_t i = 0; i < n_; ++i) z_[i] += *step * zd_[i];
    ++iter;
    damping_ = damping_ * kDampingLower >= kFirstDamping ? damping_ * kDampingLower : 0.0;
  }
  // The result's certificate from w alone: margins recomputed, not carried;
  // where it misses the stop rule and the loop certified a smaller gap
  // elsewhere, that w if its own certificate (recomputed the same way)
  // meets the rule or is still the smaller.
  Margins(w_, z_);
  GradientPass();
  DML_ASSIGN_OR_RETURN(Certificate cert, PlainCertificate());
  if (!stop_.Satisfied(cert.primal, cert.gap) && !best_w.empty() && best_gap < cert.gap &&
      (best_w != w_ || best_mu != mu_)) {
    std::swap(best_w, w_);
    std::swap(best_mu, mu_);
    Margins(w_, z_);
    GradientPass();
    DML_ASSIGN_OR_RETURN(Certificate other, PlainCertificate());
    if (stop_.Satisfied(other.primal, other.gap) || other.gap < cert.gap) {
      cert = other;
      trouble = absl::StrCat(trouble, trouble.empty() ? "" : "; ",
                             "the result is the iterate of the smoothing ", mu_,
                             ", whose certificate is the better");
    } else {
      std::swap(best_w, w_);
      std::swap(best_mu, mu_);
    }
  }
  return Finish(cert, *reason, iter, std::move(trouble),
                absl::StrCat("truncated Newton on the hinge smoothed within a margin of ", mu_,
                             " of 1 (", smoothing_cuts_ + 1, " stage(s) from ",
                             kInitialSmoothing, ")"));
}

template <typename Obj>
TrainResult Newton<Obj>::Finish(const Certificate& cert, StopReason reason, int iter,
                                std::string trouble, std::string first_note) {
  if ((reason == StopReason::kConverged || reason == StopReason::kTargetReached) &&
      !stop_.Satisfied(cert.primal, cert.gap)) {
    // Only the certificate of the final w (its margins recomputed, not
    // carried) may say converged or target reached. StopReason has no
    // "stalled": the note says what happened.
    reason = StopReason::kMaxEpochs;
    if (trouble.empty()) {
      trouble = absl::StrCat("the final certificate (primal ", cert.primal, ", gap ", cert.gap,
                             ") misses the rule that an earlier one met (rounding)");
    }
  }
  TrainResult result;
  result.w = std::move(w_);
  result.primal = cert.primal;
  result.dual = cert.dual;
  result.gap = cert.gap;
  result.epochs = static_cast<double>(passes_);
  result.rounds = iter;
  result.seconds = stop_.Elapsed();
  result.reason = reason;
  result.history = stop_.TakeHistory();
  result.threads = threads_;
  std::vector<std::string> notes;
  if (!first_note.empty()) notes.push_back(std::move(first_note));
  if (result.threads < options_.threads) {
    notes.push_back(absl::StrCat("truncated Newton ran ", result.threads, " thread(s) of ",
                                 options_.threads, ": a thread needs ", kNnzGrain,
                                 " nonzeros of a pass; the data has ", data_.x.nnz()));
  }
  if (!trouble.empty()) notes.push_back(trouble);
  result.note = absl::StrJoin(notes, "; ");
  return result;
}

template <typename Obj>
absl::StatusOr<TrainResult> Newton<Obj>::Run() {
  if constexpr (kSmoothed) {
    return RunSmoothed();
  } else {
    return RunSmooth();
  }
}

template <typename Obj>
absl::StatusOr<TrainResult> Newton<Obj>::RunSmooth() {
  std::optional<StopReason> reason;
  std::string trouble;
  double g0 = 0.0;  // |g_0| in the M^-1 norm
  int iter = 0;
  bool direction_at_w = false;  // dir_ was computed at the current w
  // The last iteration's certificate, of the w the loop ends at (w moves
  // only at the loop's end).
  Certificate last = PrimalOnly();
  bool last_certified = false, last_refined = false;
  for (;;) {
    GradientPass();
    direction_at_w = false;
    const double gnorm = GradientNorm();
    if (iter == 0) g0 = gnorm;
    if (!std::isfinite(primal_) || !std::isfinite(gnorm)) {
      return absl::InternalError(absl::StrCat("truncated Newton: the objective or its gradient is "
                                              "not finite at iteration ",
                                              iter));
    }
    // A certificate costs two O(n) evaluations of the conjugate (logs, for
    // logistic) and a pass: it is taken where an evaluation is due, or
    // where the Newton decrement -g.d / 2 (about P - P*) says the gap rule
    // may hold. It is refined by this iteration's direction, so the
    // direction comes first.
    const bool due = options_.eval_every > 0 && iter % options_.eval_every == 0;
    Certificate cert = PrimalOnly();
    bool certified = false, refined = false;
    if (due || iter == 0 || gnorm == 0.0) {
      // The plain certificate first: if it holds, the direction's CG (the
      // most expensive part of an iteration near the end) is not paid.
      DML_ASSIGN_OR_RETURN(cert, PlainCertificate());
      certified = true;
    }
    if (!stop_.Satisfied(primal_, cert.gap) && gnorm > 0.0 && !stop_.BeforeEpoch(iter + 1)) {
      const double forcing = std::min(kMaxForcing, std::sqrt(gnorm / g0));
      if ((explicit_ && ExplicitDirection()) || Direction(forcing)) {
        Margins(dir_, zd_);
        direction_at_w = true;
        const double decrement = -0.5 * Dot(g_, dir_);
        const double target = GapTarget(options_.stop, primal_);
        // Refined by the direction (the plain dual overstates the gap about
        // curvature / lambda times) where that can stop the run: the
        // decrement, about P - P*, within kRefineWithin times the target.
        // Farther out a due certificate stays the plain one: a refinement
        // costs a pass and 16 logs a row, and its gap could not stop the
        // run (a9a, --tol 3e-3: 2 of 4 refinements). No gap rule: always.
        if ((due && (target <= 0.0 || decrement <= kRefineWithin * target)) ||
            decrement <= target) {
          if (!certified) {
            DML_ASSIGN_OR_RETURN(cert, PlainCertificate());
          }
          DML_ASSIGN_OR_RETURN(cert, Refine(cert));
          certified = refined = true;
        }
      }
    }
    last = cert;
    last_certified = certified;
    last_refined = refined;
    reason = certified ? stop_.AfterEpoch(IterationProgress(iter, cert))
                       : stop_.Satisfied(cert.primal, cert.gap);
    if (reason) break;
    if (gnorm == 0.0) {  // w is the minimiser to the last bit
      reason = StopReason::kConverged;
      break;
    }
    reason = stop_.BeforeEpoch(iter + 1);
    if (reason) break;
    if (!direction_at_w) {  // CG was cut by the time budget or cancelled
      reason = stop_.Cancelled() ? StopReason::kCancelled : StopReason::kTimeBudget;
      break;
    }
    const std::optional<double> step = LineSearch();
    const bool accepted = step.has_value();
    const double t = step.value_or(0.0);
    if (!accepted) {
      // Only rounding stops a descent direction of a smooth convex P: w is
      // as good as double precision makes it.
      trouble = absl::StrCat("the line search found no decrease at iteration ", iter + 1,
                             " (P's rounding floor): stopped there");
      reason = StopReason::kConverged;
      break;
    }
    for (std::size_t j = 0; j < d_; ++j) w_[j] += t * dir_[j];
    for (std::size_t i = 0; i < n_; ++i) z_[i] += t * zd_[i];
    ++iter;
  }
  // The result's certificate from w alone (and the direction computed at
  // it, if any: any direction gives a valid dual point). The last
  // iteration's certificate is one of this w already, its primal summed
  // over margins carried through the line searches: its dual stands, with
  // the primal over margins recomputed from w, where the two sets of
  // margins are that close (OnFreshMargins); else the margins, gradient
  // and certificate are all recomputed (a9a: a fifth of the solve when
  // always done).
  std::optional<Certificate> fresh;
  bool margins_fresh = false;  // zd_ holds X w
  if (last_certified && (last_refined || !direction_at_w)) {
    fresh = OnFreshMargins(last, &margins_fresh);
    // Its widened gap must not undo a stop that the last one earned.
    if (fresh && stop_.Satisfied(last.primal, last.gap) &&
        !stop_.Satisfied(fresh->primal, fresh->gap)) {
      fresh.reset();
    }
  }
  Certificate cert;
  if (fresh) {
    cert = *fresh;
  } else {
    if (margins_fresh) {
      z_.swap(zd_);
    } else {
      Margins(w_, z_);
    }
    GradientPass();
    DML_ASSIGN_OR_RETURN(cert, PlainCertificate());
    if (direction_at_w) {
      Margins(dir_, zd_);
      DML_ASSIGN_OR_RETURN(cert, Refine(cert));
    }
  }
  return Finish(cert, *reason, iter, std::move(trouble), "");
}

}  // namespace

absl::StatusOr<TrainResult> TrainSmoothedHinge(const Dataset& data, const ModelSpec& model,
                                               const SolverOptions& options,
                                               const std::vector<double>& w, double mu) {
  if (model.kind != ModelKind::kHingeSvm ||
      w.size() != static_cast<std::size_t>(data.x.cols())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the smoothed hinge's warm start needs the svm model and a w of ", data.x.cols(),
        " features; got ", std::string(ModelName(model.kind)), " and ", w.size()));
  }
  Newton<HingeSvmObjective> newton(data, model, options);
  newton.WarmStart(w, mu);
  return newton.Run();
}

absl::StatusOr<TrainResult> TrainNewton(const Dataset& data, const ModelSpec& model,
                                        const SolverOptions& options) {
  switch (model.kind) {
    case ModelKind::kRidge: return Newton<RidgeObjective>(data, model, options).Run();
    case ModelKind::kLogisticL2: return Newton<LogisticL2Objective>(data, model, options).Run();
    case ModelKind::kSquaredHingeSvm:
      return Newton<SquaredHingeSvmObjective>(data, model, options).Run();
    case ModelKind::kHingeSvm: return Newton<HingeSvmObjective>(data, model, options).Run();
    case ModelKind::kLogisticL1: return TrainGlmnetL1(data, model, options);
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "solver newton needs a twice-differentiable loss (ridge, logistic, svm-squared; svm "
          "runs it on a smoothed hinge, logistic-l1 runs newGLMNET); model ",
          std::string(ModelName(model.kind)), " has none: use scd or async-scd"));
  }
}

}  // namespace dml::internal
