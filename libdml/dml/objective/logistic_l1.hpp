#pragma once
// L1-regularised logistic regression, solved in the primal by coordinate
// descent over features.
//
// Problem:   min_w  P(w) = (1/n) sum_i log(1 + exp(-y_i a^i.w)) + lambda ||w||_1,
//            y_i in {-1,+1}, A = data.x, no intercept; LIBLINEAR's -s 6 with
//            C = 1/(lambda n).
// Variables: w (one per feature). The solvers keep e_i = exp(v_i), v = A w
//            (LIBLINEAR's exp_wTx), so that with t_i = 1/(1+e_i)
//              loss_i = log(1 + e_i) - [y_i = +1] v_i,
//              d loss_i / d v_i = (1 - t_i) - [y_i = +1],
//              d^2 loss_i / d v_i^2 = (1 - t_i) t_i,
//            and a step w_j += d multiplies e_i by exp(d x_ij): no label in
//            the hot loops (the label sums are per-column constants).
// Step:      CDN (Yuan, Chang, Hsieh, Lin, "A comparison of optimization
//            methods and software for large-scale L1-regularized linear
//            classification", JMLR 2010, Sec. 4.1.2): one Newton direction
//            on the coordinate with the L1 term kept exact,
//              d = SoftThreshold(h_j w_j - g_j, lambda) / h_j - w_j,
//              g_j = a_j^T u, h_j = max(a_j^T diag(loss'') a_j / n, 1e-12 lambda),
//            then Armijo backtracking (beta = 1/2, sigma = 0.01, at most 20
//            halvings) on the true objective restricted to the coordinate,
//              phi(d) - phi(0) <= sigma (g_j d + lambda (|w_j + d| - |w_j|)).
//            For a column with nonnegative values the loss change is first
//            bounded from above in O(1), by convexity of exp in x_ij and
//            concavity of log (the test LIBLINEAR's CDN calls appxcond); only
//            when that bound does not already prove the Armijo condition is
//            the exact change summed over the column, term by term without
//            cancellation. exp(d x_ij) is cached across equal consecutive
//            values, and columns whose values are all equal (binary, one-hot)
//            skip the multiplications by x: one exp per step. A failed search
//            leaves w_j unchanged.
//            For the CoCoA+ local subproblem (1/s) f(v + s A_k dw) the column
//            is scaled by s and the loss change by 1/s.
// Speed:     the gradient pass is bound by the divisions t = 1/(1+e): it
//            runs four rows per packed division with AVX2, selected at run
//            time (CPU support, no concurrent writers), else two rows per
//            SSE2/NEON division through vector extensions.
// Gap:       (Duenner, Forte, Takac, Jaggi, "Primal-dual rates and
//            certificates", ICML 2016) u = grad f(v), u_i = loss'_i / n,
//              gap_j = gbar(w_j) + gbar*(-a_j^T u) + w_j a_j^T u,
//            with the bounded-support L1 term gbar*(s) = B max(0, |s| - lambda),
//            B = P(0)/lambda = log(2)/lambda (raised to max_j |w_j| for an
//            iterate outside that ball; see lasso.hpp).
//
// Labels must be -1/+1 (Train, EvaluatePrimal and MakeLocalSolver check).
// Header-only; see lasso.hpp for the Access policy and thread-safety.

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdint>
#include <cstring>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

#include "dml/data/sparse.hpp"
#include "dml/objective/host_device.hpp"
#include "dml/objective/logistic_l2.hpp"
#include "dml/objective/losses.hpp"
#include "dml/objective/model.hpp"
#include "dml/objective/regularizers.hpp"

namespace dml {

namespace logistic_internal {

/// log 2: turns the binary exponents of SumLog1p into a natural log.
constexpr double kLn2 = 0.69314718055994530942;

/// For a normal x >= 1: scales x into [1, 2) and returns the power of two
/// removed (exact).
inline int64_t SplitExponent(double& x) {
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const int64_t e = static_cast<int64_t>((bits >> 52) & 0x7ff) - 1023;
  bits = (bits & ~(uint64_t{0x7ff} << 52)) | (uint64_t{1023} << 52);
  std::memcpy(&x, &bits, sizeof bits);
  return e;
}

/// sum_i log(1 + e_i), as the log of the product of the (1 + e_i),
/// renormalised into [1, 2) by its binary exponent after every factor:
/// n multiplications instead of n logarithms, with a relative error of the
/// product of about n 2^-53, i.e. 2^-53 per example in the mean loss. Exact
/// enough for a running estimate; +inf if some e_i is within a factor 2 of
/// overflow (never after InitState, which keeps e_i <= exp(700)).
inline double SumLog1p(const double* e, int64_t n) {
  constexpr int kLanes = 4;
  double prod[kLanes] = {1.0, 1.0, 1.0, 1.0};
  int64_t exps[kLanes] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      prod[l] *= 1.0 + e[i + l];
      exps[l] += SplitExponent(prod[l]);
    }
  }
  for (; i < n; ++i) {
    prod[0] *= 1.0 + e[i];
    exps[0] += SplitExponent(prod[0]);
  }
  double s = 0.0;
  for (int l = 0; l < kLanes; ++l) s += std::log(prod[l]) + static_cast<double>(exps[l]) * kLn2;
  return s;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define DML_LOGISTIC_L1_AVX2 1
/// Whether the AVX2 gradient pass may run on this CPU.
inline bool CpuHasAvx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/// The gradient pass of LogisticL1Objective::Step with AVX2 packed
/// divisions, four rows at a time in two independent lanes:
/// g = sum_k x_k s_k, h = sum_k x_k^2 s_k t_k, t = 1/(1+e), s = 1 - t
/// (x taken as 1 when kUnit). Compiled for AVX2 whatever the build flags;
/// called only after CpuHasAvx2(). Plain loads: not for concurrently
/// written e.
template <bool kUnit>
__attribute__((target("avx2,fma"))) inline void SumDerivativesAvx2(const uint32_t* idx,
                                                                   const float* val,
                                                                   std::size_t m,
                                                                   const double* e, double* g_out,
                                                                   double* h_out) {
  const __m256d one = _mm256_set1_pd(1.0);
  __m256d ga = _mm256_setzero_pd(), gb = _mm256_setzero_pd();
  __m256d ha = _mm256_setzero_pd(), hb = _mm256_setzero_pd();
  std::size_t k = 0;
  for (; k + 8 <= m; k += 8) {
    // Scalar loads: vgatherdpd was slower on the AMD EPYC we measured.
    const __m256d ea = _mm256_set_pd(e[idx[k + 3]], e[idx[k + 2]], e[idx[k + 1]], e[idx[k]]);
    const __m256d eb =
        _mm256_set_pd(e[idx[k + 7]], e[idx[k + 6]], e[idx[k + 5]], e[idx[k + 4]]);
    const __m256d ta = _mm256_div_pd(one, _mm256_add_pd(one, ea));
    const __m256d tb = _mm256_div_pd(one, _mm256_add_pd(one, eb));
    const __m256d sa = _mm256_sub_pd(one, ta);
    const __m256d sb = _mm256_sub_pd(one, tb);
    if (kUnit) {
      ga = _mm256_add_pd(ga, sa);
      gb = _mm256_add_pd(gb, sb);
      ha = _mm256_fmadd_pd(sa, ta, ha);
      hb = _mm256_fmadd_pd(sb, tb, hb);
    } else {
      const __m256d xa = _mm256_cvtps_pd(_mm_loadu_ps(val + k));
      const __m256d xb = _mm256_cvtps_pd(_mm_loadu_ps(val + k + 4));
      const __m256d xsa = _mm256_mul_pd(xa, sa);
      const __m256d xsb = _mm256_mul_pd(xb, sb);
      ga = _mm256_add_pd(ga, xsa);
      gb = _mm256_add_pd(gb, xsb);
      ha = _mm256_fmadd_pd(_mm256_mul_pd(xa, xsa), ta, ha);
      hb = _mm256_fmadd_pd(_mm256_mul_pd(xb, xsb), tb, hb);
    }
  }
  alignas(32) double gl[4], hl[4];
  _mm256_store_pd(gl, _mm256_add_pd(ga, gb));
  _mm256_store_pd(hl, _mm256_add_pd(ha, hb));
  double g = (gl[0] + gl[1]) + (gl[2] + gl[3]);
  double h = (hl[0] + hl[1]) + (hl[2] + hl[3]);
  for (; k < m; ++k) {
    const double t = 1.0 / (1.0 + e[idx[k]]);
    const double s = 1.0 - t;
    const double x = kUnit ? 1.0 : static_cast<double>(val[k]);
    g += x * s;
    h += x * x * s * t;
  }
  *g_out = g;
  *h_out = h;
}

/// SumLog1p with AVX2: eight running products in two registers, the exponent
/// bits moved into integer lanes after every factor.
__attribute__((target("avx2,fma"))) inline double SumLog1pAvx2(const double* e, int64_t n) {
  const __m256d one = _mm256_set1_pd(1.0);
  const __m256i mantissa = _mm256_set1_epi64x(0x000fffffffffffffLL);
  const __m256i unit_exp = _mm256_set1_epi64x(0x3ff0000000000000LL);
  __m256d pa = one, pb = one;
  __m256i xa = _mm256_setzero_si256(), xb = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    pa = _mm256_mul_pd(pa, _mm256_add_pd(one, _mm256_loadu_pd(e + i)));
    pb = _mm256_mul_pd(pb, _mm256_add_pd(one, _mm256_loadu_pd(e + i + 4)));
    const __m256i ba = _mm256_castpd_si256(pa);
    const __m256i bb = _mm256_castpd_si256(pb);
    xa = _mm256_add_epi64(xa, _mm256_srli_epi64(ba, 52));  // sign bit is 0
    xb = _mm256_add_epi64(xb, _mm256_srli_epi64(bb, 52));
    pa = _mm256_castsi256_pd(_mm256_or_si256(_mm256_and_si256(ba, mantissa), unit_exp));
    pb = _mm256_castsi256_pd(_mm256_or_si256(_mm256_and_si256(bb, mantissa), unit_exp));
  }
  alignas(32) double p[8];
  alignas(32) int64_t x[8];
  _mm256_store_pd(p, pa);
  _mm256_store_pd(p + 4, pb);
  _mm256_store_si256(reinterpret_cast<__m256i*>(x), xa);
  _mm256_store_si256(reinterpret_cast<__m256i*>(x + 4), xb);
  // Each lane took i / 8 factors, each renormalisation removing a bias of 1023.
  double s = 0.0;
  for (int l = 0; l < 8; ++l) {
    s += std::log(p[l]) + static_cast<double>(x[l] - 1023 * (i / 8)) * kLn2;
  }
  return s + SumLog1p(e + i, n - i);
}
#endif
}  // namespace logistic_internal

/// newGLMNET's constants (glmnet_l1.cpp says why): the bound of one inner
/// step for a feature of unit scale (10 / min(max_i |x_ij|, 1) for feature
/// j), the Hessian-diagonal floor per lambda (LIBLINEAR's nu), and the most
/// inner cycles of one outer iteration.
inline constexpr double kGlmnetMaxStep = 10.0;
inline constexpr double kGlmnetNuPerLambda = 1e-12;
inline constexpr int kGlmnetMaxInnerCycles = 1000;

/// newGLMNET's inner coordinate step (Yuan, Ho, Lin 2012; the CPU solver
/// glmnet_l1.cpp and the GPU's newGLMNET share it): argmin_z g z + h z^2 / 2
/// + lambda |wpd + z| for the quadratic model's gradient g and curvature h at
/// wpd = w_j + d_j, clipped to |z| <= step_max; 0 where that z is not finite
/// or does not change wpd.
DML_HD inline double GlmnetInnerStep(double g, double h, double wpd, double lambda, double step_max) {
  const double gp = g + lambda, gn = g - lambda;
  double z;
  if (gp < h * wpd) {
    z = -gp / h;
  } else if (gn > h * wpd) {
    z = -gn / h;
  } else {
    z = -wpd;
  }
  if (!std::isfinite(z) || wpd + z == wpd) return 0.0;
  return z < -step_max ? -step_max : (z > step_max ? step_max : z);
}

/// How far z = 0 is from optimal for that model's coordinate: the distance
/// of -g from the subdifferential of lambda |.| at wpd.
DML_HD inline double GlmnetViolation(double g, double wpd, double lambda) {
  const double gp = g + lambda, gn = g - lambda;
  if (wpd == 0.0) return gp < 0.0 ? -gp : (gn > 0.0 ? gn : 0.0);
  return wpd > 0.0 ? std::abs(gp) : std::abs(gn);
}

/// lambda ||w||_1 with the logistic loss; see the file comment.
struct LogisticL1Objective {
  /// The primal loss.
  using Loss = loss::Logistic;

  /// Per-column constants of CDN.
  struct Column {
    double x_sum = 0.0;  ///< sum_i x_ij
    double x_pos = 0.0;  ///< sum_{i: y_i = +1} x_ij
    double x_max = 0.0;  ///< max_i x_ij (used when nonneg)
    double nnz = 0.0;    ///< nonzeros in the column
    bool nonneg = true;  ///< every x_ij >= 0: the O(1) line-search bound applies
    /// Every x_ij equals `value` (binary / one-hot features): the hot loops
    /// skip the multiplications by x and need one exp per step.
    bool constant = false;
    double value = 0.0;  ///< the column's first value (all of them if constant)
  };
  /// What one Step did.
  struct StepResult {
    double w = 0.0;     ///< the new w_j
    double grad = 0.0;  ///< g_j = a_j^T u before the step
    int64_t nnz = 0;    ///< nonzeros read or written
    /// The multiplicative state left [kStateMin, kStateMax] on this column: a
    /// factor underflowed or overflowed (e = 0 stays 0 forever), so the
    /// caller must rebuild the state from the exact v = A w before the next
    /// step. Seen on news20 (raw counts): a large early step drove margins
    /// below -709, and every later line search then used e = 0.
    bool resync = false;
  };
  /// The state is trusted while it is a normal double: a subnormal, zero or
  /// infinite e has lost v.
  static constexpr double kStateMin = std::numeric_limits<double>::min();
  static constexpr double kStateMax = std::numeric_limits<double>::max();

  /// Armijo's sigma and the most halvings of the line search.
  static constexpr double kSigma = 0.01;
  static constexpr int kMaxLineSearch = 20;
  /// |v_i| is clamped here when e = exp(v) is rebuilt, so e stays finite.
  static constexpr double kMaxExponent = 700.0;

  /// The model's lambda, 1/n, and B of the bounded-support modification.
  double lambda = 0.0;
  double inv_n = 0.0;
  double bound = 0.0;
  const float* y = nullptr;  ///< labels; borrowed, must outlive the objective
  /// The AVX2 kernels may be used (the CPU has AVX2 and FMA).
  bool avx2 = false;

  /// For labels `y` (n of them, kept by pointer). `w_max` = max_j |w_j| of
  /// the iterate to certify (0 for a solver).
  static LogisticL1Objective Make(const ModelSpec& model, const std::vector<float>& y,
                                  double w_max = 0.0) {
    LogisticL1Objective o;
    o.lambda = model.lambda;
    o.inv_n = y.empty() ? 0.0 : 1.0 / static_cast<double>(y.size());
    o.bound = std::max(PrimalAtZero(y) / model.lambda, w_max);
    o.y = y.data();
#ifdef DML_LOGISTIC_L1_AVX2
    o.avx2 = logistic_internal::CpuHasAvx2();
#endif
    return o;
  }
  /// P(0) = log 2.
  static double PrimalAtZero(const std::vector<float>&) { return std::log(2.0); }

  /// The Column constants of every column of `a`, for labels `y`.
  static std::vector<Column> PrepareColumns(const CscMatrix& a, const std::vector<float>& y) {
    std::vector<Column> cols(static_cast<std::size_t>(a.cols()));
    for (int64_t j = 0; j < a.cols(); ++j) {
      const SparseView col = a.outer(j);
      Column& c = cols[j];
      c.nnz = static_cast<double>(col.size);
      if (col.size == 0) continue;
      // Branch-free (labels are +-1 in random order): [y > 0] = (1 + y) / 2.
      const float first = col.value[0];
      double sum = 0.0, pos = 0.0;
      float lo = first, hi = first;
      bool constant = true;
      for (std::size_t k = 0; k < col.size; ++k) {
        const float x = col.value[k];
        sum += x;
        pos += static_cast<double>(x) * (0.5 + 0.5 * y[col.index[k]]);
        lo = std::min(lo, x);
        hi = std::max(hi, x);
        constant &= x == first;
      }
      c.x_sum = sum;
      c.x_pos = pos;
      c.x_max = std::max(0.0f, hi);
      c.nonneg = lo >= 0.0f;
      c.constant = constant;
      c.value = first;
    }
    return cols;
  }

  /// state = e = exp(v), the exponent clamped to +-kMaxExponent.
  static void InitState(const std::vector<double>& v, const std::vector<float>&, double* e) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      e[i] = v[i] == 0.0 ? 1.0 : std::exp(std::clamp(v[i], -kMaxExponent, kMaxExponent));
    }
  }

  /// loss(y, z) and its derivative in z together (one exp), for the
  /// certificate: log1p(exp(-|m|)) + max(-m, 0) and -y sigmoid(-m), m = y z.
  DML_HD static void ValueAndDerivative(double y, double z, double* value, double* derivative) {
    const double m = y * z;
    const double ex = std::exp(-std::abs(m));
    *value = std::log1p(ex) + std::max(-m, 0.0);
    const double inv = 1.0 / (1.0 + ex);
    *derivative = -y * (m > 0 ? ex * inv : inv);
  }

  /// loss*(a) = b log b + (1 - b) log(1 - b), b = -y a in [0, 1], which is
  /// -NegConj(y, -a) of the L2 model's dual; +inf outside (the scaled dual,
  /// evaluate_primal.cpp).
  static double LossConjugate(double y, double a) {
    if (!LogisticL2Objective::InDomain(y, -a)) return std::numeric_limits<double>::infinity();
    return -LogisticL2Objective::NegConj(y, -a);
  }

  /// f(v) = (1/n) [sum_i log(1 + e_i) - sum_j w_j x_pos_j] from the state,
  /// without a pass over the data (see logistic_internal::SumLog1p).
  double LossFromState(const double* e, int64_t n, const std::vector<Column>& cols,
                       const std::vector<double>& w) const {
    double s;
#ifdef DML_LOGISTIC_L1_AVX2
    if (avx2) {
      s = logistic_internal::SumLog1pAvx2(e, n);
    } else  // NOLINT(readability/braces)
#endif
    s = logistic_internal::SumLog1p(e, n);
    double pos = 0.0;
    for (std::size_t j = 0; j < w.size(); ++j) {
      if (w[j] != 0.0) pos += w[j] * cols[j].x_pos;
    }
    return (s - pos) * inv_n;
  }

  /// As LassoObjective: the penalty as an elastic net with eta = 1, the L1
  /// weight, lambda |w|, gbar*(s), the clamped gap_j, and the distance of
  /// -grad from the subdifferential of lambda|.| at w.
  reg::ElasticNet Reg() const { return {lambda, 1.0}; }
  DML_HD double L1() const { return lambda; }
  DML_HD double Regularizer(double w) const { return lambda * std::abs(w); }
  DML_HD double Conjugate(double s) const { return bound * std::max(0.0, std::abs(s) - lambda); }
  DML_HD double CoordinateGap(double w, double grad) const {
    return std::max(0.0, Regularizer(w) + Conjugate(-grad) + w * grad);
  }
  double Violation(double w, double grad) const {
    if (w > 0) return std::abs(grad + lambda);
    if (w < 0) return std::abs(grad - lambda);
    return std::max(0.0, std::abs(grad) - lambda);
  }

  /// One CDN step on w_j (current value `w`) against e = exp(v); `scratch`
  /// holds at least col.size doubles. `scale` = 1 for plain CD, sigma' for
  /// the CoCoA+ local subproblem. Multiplies e_i by exp(scale d x_ij).
  template <typename Access>
  StepResult Step(SparseView col, const Column& c, double* e, double* scratch, double w,
                  double scale) const {
    const std::size_t m = col.size;
    StepResult out{w, 0.0, static_cast<int64_t>(m)};
    if (m == 0) {  // only lambda |w_j| depends on w_j
      out.w = 0.0;
      return out;
    }
    double g_sum, h_sum;  // sum_i x_ij e_i t_i, sum_i x_ij^2 e_i t_i^2
#ifdef DML_LOGISTIC_L1_AVX2
    if (Access::kPlain && avx2) {
      if (c.constant) {
        logistic_internal::SumDerivativesAvx2<true>(col.index, col.value, m, e, &g_sum, &h_sum);
      } else {
        logistic_internal::SumDerivativesAvx2<false>(col.index, col.value, m, e, &g_sum, &h_sum);
      }
    } else  // NOLINT(readability/braces)
#endif
    if (c.constant) {
      SumDerivatives<Access, true>(col, e, &g_sum, &h_sum);
    } else {
      SumDerivatives<Access, false>(col, e, &g_sum, &h_sum);
    }
    if (c.constant) {
      g_sum *= c.value;
      h_sum *= c.value * c.value;
    }
    out.grad = (g_sum - c.x_pos) * inv_n;
    const double g = out.grad;
    const double h = std::max(scale * h_sum * inv_n, 1e-12 * lambda);
    double d = reg::SoftThreshold(h * w - g, lambda) / h - w;
    if (d == 0.0 || !std::isfinite(d)) return out;

    const uint32_t* idx = col.index;
    const float* val = col.value;
    const double reg_w = lambda * std::abs(w);
    double delta = g * d + lambda * std::abs(w + d) - reg_w;
    const double inv_ns = inv_n / scale;
    for (int ls = 0; ls < kMaxLineSearch; ++ls) {
      const double base = lambda * std::abs(w + d) - reg_w - kSigma * delta;
      const double sd = scale * d;
      if (c.nonneg && c.x_max > 0.0) {
        // sum_i log(1 + e_i t_i (exp(sd x_i) - 1)) - sd x_pos with
        // exp(sd x) - 1 <= (x / x_max) (exp(sd x_max) - 1) and Jensen on log;
        // and the same from the other side, t_i (exp(-sd x_i) - 1).
        const double mm = c.nnz * c.x_max;
        const double b1 = c.nnz * std::log1p(std::expm1(sd * c.x_max) * g_sum / mm) - sd * c.x_pos;
        const double b2 = c.nnz * std::log1p(std::expm1(-sd * c.x_max) * (c.x_sum - g_sum) / mm) +
                          sd * (c.x_sum - c.x_pos);
        if (std::min(b1, b2) * inv_ns + base <= 0.0) {
          if (c.constant) {
            const double f = std::exp(sd * c.value);
            std::size_t k = 0;
            for (; k + 4 <= m; k += 4) {
              Access::Mul(e + idx[k], f);
              Access::Mul(e + idx[k + 1], f);
              Access::Mul(e + idx[k + 2], f);
              Access::Mul(e + idx[k + 3], f);
            }
            for (; k < m; ++k) Access::Mul(e + idx[k], f);
          } else {
            float last_x = val[0];
            double last_f = std::exp(sd * last_x);
            for (std::size_t k = 0; k < m; ++k) {
              if (val[k] != last_x) {
                last_x = val[k];
                last_f = std::exp(sd * last_x);
              }
              Access::Mul(e + idx[k], last_f);
            }
          }
          out.w = w + d;
          out.nnz += static_cast<int64_t>(m);
          out.resync = LeftRange<Access>(col, e);
          return out;
        }
      }
      // Exact: loss_i changes by log1p(e t (E - 1)) for y = -1 and by
      // log1p(t (1/E - 1)) for y = +1, E = exp(sd x): no cancellation.
      double change = 0.0;
      float last_x = val[0];
      double em1 = std::expm1(sd * last_x);
      double em1_neg = std::expm1(-sd * last_x);
      for (std::size_t k = 0; k < m; ++k) {
        if (val[k] != last_x) {
          last_x = val[k];
          em1 = std::expm1(sd * last_x);
          em1_neg = std::expm1(-sd * last_x);
        }
        const double ei = Access::Load(e + idx[k]);
        const double t = 1.0 / (1.0 + ei);
        change += y[idx[k]] > 0 ? std::log1p(t * em1_neg) : std::log1p((1.0 - t) * em1);
        scratch[k] = 1.0 + em1;
      }
      out.nnz += static_cast<int64_t>(m);
      if (change * inv_ns + base <= 0.0) {
        for (std::size_t k = 0; k < m; ++k) Access::Mul(e + idx[k], scratch[k]);
        out.w = w + d;
        out.nnz += static_cast<int64_t>(m);
        out.resync = LeftRange<Access>(col, e);
        return out;
      }
      d *= 0.5;
      delta *= 0.5;
    }
    return out;
  }

 private:
  /// Whether the step pushed a state entry of the column out of [kStateMin,
  /// kStateMax] (one pass over lines the update just wrote).
  template <typename Access>
  static bool LeftRange(SparseView col, const double* e) {
    for (std::size_t k = 0; k < col.size; ++k) {
      const double v = Access::Load(e + col.index[k]);
      if (!(v >= kStateMin && v <= kStateMax)) return true;
    }
    return false;
  }

  /// The gradient pass: sum_k x_k s_k and sum_k x_k^2 s_k t_k over the
  /// column, t = 1/(1+e), s = 1 - t = e t (x taken as 1 when kUnit); 1 - t
  /// keeps s right for e = inf and is off by at most 2^-53 absolutely. The division
  /// dominates, so four elements go through two packed divisions per
  /// iteration (GCC/Clang vector extensions: SSE2 on any x86-64, NEON on
  /// AArch64), with independent accumulators.
  template <typename Access, bool kUnit>
  static void SumDerivatives(SparseView col, const double* e, double* g_out, double* h_out) {
    const uint32_t* idx = col.index;
    const float* val = col.value;
    const std::size_t m = col.size;
    std::size_t k = 0;
    double g = 0.0, h = 0.0;
#if defined(__GNUC__)
    typedef double V2 __attribute__((vector_size(16)));
    V2 ga = {0.0, 0.0}, gb = {0.0, 0.0}, ha = {0.0, 0.0}, hb = {0.0, 0.0};
    const V2 one = {1.0, 1.0};
    for (; k + 4 <= m; k += 4) {
      const V2 ea = {Access::Load(e + idx[k]), Access::Load(e + idx[k + 1])};
      const V2 eb = {Access::Load(e + idx[k + 2]), Access::Load(e + idx[k + 3])};
      const V2 ta = one / (one + ea);
      const V2 tb = one / (one + eb);
      const V2 sa = one - ta;
      const V2 sb = one - tb;
      if (kUnit) {
        ga += sa;
        gb += sb;
        ha += sa * ta;
        hb += sb * tb;
      } else {
        const V2 xa = {static_cast<double>(val[k]), static_cast<double>(val[k + 1])};
        const V2 xb = {static_cast<double>(val[k + 2]), static_cast<double>(val[k + 3])};
        const V2 xsa = xa * sa;
        const V2 xsb = xb * sb;
        ga += xsa;
        gb += xsb;
        ha += xa * xsa * ta;
        hb += xb * xsb * tb;
      }
    }
    const V2 gs = ga + gb;
    const V2 hs = ha + hb;
    g = gs[0] + gs[1];
    h = hs[0] + hs[1];
#endif
    for (; k < m; ++k) {
      const double e0 = Access::Load(e + idx[k]);
      const double t0 = 1.0 / (1.0 + e0);
      const double s0 = 1.0 - t0;
      const double x0 = kUnit ? 1.0 : static_cast<double>(val[k]);
      g += x0 * s0;
      h += x0 * x0 * s0 * t0;
    }
    *g_out = g;
    *h_out = h;
  }
};

}  // namespace dml
