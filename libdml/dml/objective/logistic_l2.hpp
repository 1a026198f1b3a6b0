#pragma once
// L2-regularised logistic regression in the dual (Yu, Huang, Lin, "Dual
// coordinate descent methods for logistic regression and maximum entropy
// models", Machine Learning 85, 2011; SDCA: Shalev-Shwartz & Zhang, JMLR 2013).
//
//   primal  P(w)     = (1/n) sum_i log(1 + exp(-y_i x_i.w)) + lambda/2 ||w||^2
//   dual    D(alpha) = (1/n) sum_i H(b_i) - lambda/2 ||w(alpha)||^2,
//           H(b) = -b log b - (1-b) log(1-b), b_i = alpha_i y_i in [0, 1]
//   variables: alpha in R^n, w(alpha) = A^T alpha / (lambda n).
// LIBLINEAR's (-s 7) dual variable is C * b_i with C = 1/(lambda n).
// Optimality: b_i = sigmoid(-y_i x_i.w).
//
// The coordinate step has no closed form: it is a safeguarded 1-D Newton
// method in the logit t = log(b/(1-b)) (where the optimality condition is
// smooth and its derivative is bounded away from 0), inside a bracket of
// width q, with bisection as the fallback. Like LIBLINEAR, the iterate is kept
// strictly inside (0, 1): |logit(b)| <= 36.74, i.e. b in about
// [2^-53, 1 - 2^-53], the closest double precision allows on the upper side.

#include <algorithm>
#include <cmath>
#include <limits>

#include "dml/objective/host_device.hpp"
#include "dml/objective/losses.hpp"

namespace dml {

/// Per-example pieces of the logistic dual for the dual solvers (templates
/// over it) and EvaluateDual; stateless. Arguments: a = alpha_i, z = x_i.w,
/// q = ||x_i||^2 / (lambda n) (scaled by sigma' in CoCoA+).
struct LogisticL2Objective {
  /// The primal loss.
  using LossType = loss::Logistic;
  /// The domain is open in practice (the step never reaches 0 or 1):
  /// shrinking is a no-op.
  static constexpr bool kShrinkable = false;
  /// Smallest distance of b from 0 and 1 kept by Initial (Step keeps
  /// |logit(b)| <= kMaxLogit, about the same).
  static constexpr double kMargin = 0x1.0p-53;

  /// loss(y, z) = log(1 + exp(-y z)).
  DML_HD static double Loss(double y, double z) { return loss::Logistic::Value(y, z); }
  /// log(1 + exp(x)) without overflow.
  DML_HD static double Softplus(double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::abs(x))); }
  /// log1p(e) for e in [0, 1] as 2 atanh(e / (2 + e)) by its series (13
  /// terms, relative error < 2e-14): about twice as fast as std::log1p. Used
  /// only for the entropy H kept with the iterate (running estimates), never
  /// for the iterate itself or a certificate.
  DML_HD static double Log1pUnit(double e) {
    const double z = e / (2.0 + e);  // in [0, 1/3]
    const double y = z * z;          // in [0, 1/9]
    const double y2 = y * y, y4 = y2 * y2, y8 = y4 * y4;
    const double s = ((1.0 + y * (1.0 / 3)) + y2 * ((1.0 / 5) + y * (1.0 / 7))) +
                     y4 * (((1.0 / 9) + y * (1.0 / 11)) + y2 * ((1.0 / 13) + y * (1.0 / 15))) +
                     y8 * (((1.0 / 17) + y * (1.0 / 19)) + y2 * ((1.0 / 21) + y * (1.0 / 23)) +
                           y4 * (1.0 / 25));
    return 2.0 * z * s;
  }
  /// -loss*(-a) = H(a y), the binary entropy (0 at the ends of [0, 1]).
  DML_HD static double NegConj(double y, double a) {
    const double b = a * y;
    double h = 0.0;
    if (b > 0.0) h -= b * std::log(b);
    // log(1 - b) through the faster log (a few ulps; glibc's log1p was a
    // fifth of a9a's Newton run, in its certificates' conjugates).
    if (b < 1.0) h -= (1.0 - b) * loss::FastLog1p(-b);
    return h;
  }
  /// sums[k] += NegConj(y, -scales[k] g) for k < count, g = loss'(y, z):
  /// b = s_k b0 with b0 = -y g in (0, 1), so log b = log s_k + log b0 and a
  /// row costs one log and `count` log1p instead of 2 count logs (the
  /// Newton solver's plain certificate; log_scales[k] = log scales[k]).
  static void AddNegConjAtScales(double y, double g, const double* scales,
                                 const double* log_scales, int count, double* sums) {
    const double b0 = -y * g;
    if (!(b0 > 0.0 && b0 < 1.0)) {  // the general formula at the ends
      for (int k = 0; k < count; ++k) sums[k] += NegConj(y, -scales[k] * g);
      return;
    }
    const double log_b0 = std::log(b0);
    for (int k = 0; k < count; ++k) {
      const double bk = scales[k] * b0;
      sums[k] -= bk * (log_scales[k] + log_b0) + (1.0 - bk) * loss::FastLog1p(-bk);
    }
  }
  /// Whether a is dual-feasible: 0 <= a y <= 1.
  DML_HD static bool InDomain(double y, double a) {
    const double b = a * y;
    return b >= 0.0 && b <= 1.0;
  }
  /// LIBLINEAR's start, min(0.001 C, 1e-8) in its units: b = min(1e-3, 1e-8 lambda n),
  /// so that w(alpha) starts near 0.
  DML_HD static double Initial(double y, double lambda_n) {
    return y * std::max(+kMargin, std::min(1e-3, 1e-8 * lambda_n));  // +: no ODR-use (device code)
  }

  /// argmax over b' in (0,1) of H(b') - (b'-b) m - (b'-b)^2 q/2 (m = y z),
  /// i.e. the root of g(t) = -t - m - q (sigmoid(t) - b) in t = logit(b').
  /// g decreases with slope in [-(1 + q/4), -1], and the root lies in
  /// [-m - q(1-b), -m + q b].
  DML_HD static double Step(double y, double a, double z, double q) {
    const double b = a * y;
    const double t0 = std::log(b / (1.0 - b));  // -inf at b = 0: clamped into the bracket
    return StepFromLogit(y * z, q, t0, b, 0.0, /*rel_tol=*/0.0).b * y;
  }

  /// A point in the solvers' variables: the logit t, b = sigmoid(t) and the
  /// entropy h = H(b) (= NegConj), kept together so that a step needs no log
  /// to find where it starts.
  struct LogitPoint {
    double t;  ///< logit(b)
    double b;  ///< a y
    double h;  ///< H(b)
  };
  /// logit(1 - 2^-53): the step keeps |t| <= kMaxLogit.
  static constexpr double kMaxLogit = 36.736800569677101;

  /// Newton on g(t), safeguarded by the bracket, bisecting where Newton
  /// leaves it. |g''| <= q/(6 sqrt 3) and |g'| >= 1, so after a Newton step
  /// dt from g(t) the distance to the root is at most 0.0481 q dt^2: the step
  /// is taken without a new evaluation once that bound is below
  /// kTol (1 + |t|), or below rel_tol times the step's length (solvers pass
  /// kRel; Step passes 0). An error e in t costs about b(1-b) e^2 / 2 of the
  /// coordinate objective, ~1e-16 relative at kTol: the maximiser to double
  /// precision in value. (g from the Taylor series below is off by at most
  /// q 3.4e-10 b(1-b), which moves the root by less than 3.4e-10.)
  ///
  /// Cost: sigmoid and H are needed at points near t0, where sigmoid(t0) =
  /// b0 and H(b0) = h0 are known. Within kTaylor of t0 they come from their
  /// Taylor series about t0 (to 6th and 7th order; truncation <= 3.4e-10
  /// b(1-b)), so a coordinate that moves by less than kTaylor in the logit,
  /// the common case once the solver is under way, costs no exp or log at
  /// all; otherwise one exp per Newton iteration and one Log1pUnit for H.
  static constexpr double kTol = 1e-8;
  /// A long step need not be solved to kTol: an error of kRel times the
  /// step's length still gains all but ~kRel^2 of the coordinate's increase
  /// (inexact coordinate ascent, as LIBLINEAR's inner tolerance; near the
  /// optimum the steps, and so the error, vanish).
  static constexpr double kRel = 0.1;
  /// Largest |t - t0| at which an Anchor's Taylor series stand in for
  /// sigmoid and H.
  static constexpr double kTaylor = 0.1;
  /// max |sigmoid''| = 1/(6 sqrt 3).
  static constexpr double kMaxSigma2 = 0.0962250448649376;

  struct Anchor;
  /// The coordinate step (method above kTol) for m = y z from the point
  /// t0 = logit(b0), h0 = H(b0); returns the new point.
  DML_HD static LogitPoint StepFromLogit(double m, double q, double t0, double b0, double h0,
                                  double rel_tol = kRel) {
    return StepFromAnchor(m, q, Anchor(t0, b0, h0), rel_tol);
  }
  /// The same from an Anchor at the current point (solvers build it once per
  /// step and also use it for the gap estimate).
  DML_HD static LogitPoint StepFromAnchor(double m, double q, const Anchor& an, double rel_tol = kRel) {
    const double t0 = an.t0, b0 = an.b0;
    double lo = -m - q * (1.0 - b0);
    double hi = -m + q * b0;
    if (!(hi > lo)) return FromLogit(std::min(+kMaxLogit, std::max(-kMaxLogit, lo)));  // q = 0
    const double curv = 0.0481 * q;
    const double g0 = -t0 - m;  // g(t0): sigmoid(t0) = b0
    // Fast path for short steps, branch-free but for one test: the root of
    // the Taylor model g0 - d - q Ds(d) = 0 by series reversion to third
    // order, u = g0/A, A = 1 + q v:
    //   d = u - B2 u^2 + (2 B2^2 - B3) u^3, B_k = q p_k / A,
    // then one chord step with the residual r = g(t0 + d), dc = r/A. The
    // chord's error is at most |dc| (rho + 0.1 q |dc|) with
    // rho = q |sigmoid'(t0 + d) - v| / A <= q kMaxSigma2 |d| / A.
    {
      const double inv_a = 1.0 / (1.0 + q * an.c1);  // independent of m: off the critical path
      const double u = g0 * inv_a;
      if (std::abs(u) <= 0.05) {
        const double b2 = q * an.p2 * inv_a;
        const double b3 = q * an.p3 * inv_a;
        const double d = u * (1.0 + u * (-b2 + u * (2.0 * b2 * b2 - b3)));
        const double r = g0 - d - q * an.Ds(d);
        const double dc = r * inv_a;
        const double rho = q * kMaxSigma2 * std::abs(d) * inv_a;  // |sigmoid''| <= kMaxSigma2
        const double dn = d + dc;
        const double tn = t0 + dn;
        if (std::abs(dc) * (rho + 0.1 * q * std::abs(dc)) <=
                std::max(kTol * (1.0 + std::abs(t0)), rel_tol * std::abs(dn)) &&
            tn >= lo && tn <= hi && std::abs(dn) <= kTaylor && std::abs(tn) <= kMaxLogit) {
          return an.Point(tn);
        }
      }
    }
    double t = t0;
    double s = b0, s1 = 1.0 - b0;  // sigmoid(t), 1 - sigmoid(t)
    double e = -1.0;               // exp(-|t|) where evaluated exactly, else -1
    if (!(t >= lo && t <= hi)) {
      t = std::min(hi, std::max(lo, t));
      e = an.At(t, &s, &s1);
    }
    double dt_old = std::numeric_limits<double>::infinity();
    for (int it = 0; it < 200; ++it) {
      const double g = -t - m - q * (s - b0);
      if (g > 0.0) {
        lo = t;
      } else if (g < 0.0) {
        hi = t;
      }
      const double v = s * s1;
      const double dt = g / (1.0 + q * v);
      double tn = t + dt;
      if ((tn >= lo && tn <= hi) &&
          curv * dt * dt <= std::max(kTol * (1.0 + std::abs(t)), rel_tol * std::abs(tn - t0))) {
        if (std::abs(tn) > kMaxLogit) return FromLogit(tn < 0 ? -kMaxLogit : kMaxLogit);
        if (std::abs(tn - t0) <= kTaylor) return an.Point(tn);
        if (e >= 0.0 && std::abs(dt) <= kTaylor) {  // expand about the evaluated t
          return Anchor(t, s, Log1pUnit(e) + std::max(-t, 0.0) + s1 * t).Point(tn);
        }
        return FromLogit(tn);
      }
      // Bisect where Newton leaves the bracket or does not at least halve
      // its step (it can cycle across an inflection of g; Numerical Recipes'
      // rtsafe rule).
      if (!(tn > lo && tn < hi) || std::abs(dt) > 0.5 * dt_old) {
        tn = 0.5 * (lo + hi);
        if (!(tn > lo && tn < hi)) break;  // the bracket is two adjacent doubles
        dt_old = std::abs(tn - t);
      } else {
        dt_old = std::abs(dt);
      }
      t = tn;
      e = an.At(t, &s, &s1);
    }
    return FromLogit(std::min(+kMaxLogit, std::max(-kMaxLogit, t)));
  }

  /// sigmoid and H near a point t0 where they are known, by Taylor series in
  /// d = t - t0 with the derivatives of sigmoid at t0 (v = b(1-b)):
  /// c1 = v, c2 = v(1-2b), c3 = v(1-6v), c4 = c2(1-12v),
  /// c5 = v(1-30v+120v^2), c6 = c2(1-60v+360v^2); H' = -t sigmoid'.
  /// Truncated after d^6: |error| <= ~17 v d^7/7! <= 3.4e-10 v for |d| <= 0.1.
  struct Anchor {
    /// The point (t0, b0 = sigmoid(t0), h0 = H(b0)) and the coefficients
    /// c1 and p_k = c_k / k!.
    double t0, b0, h0, c1, p2, p3, p4, p5, p6;
    /// Precomputes the coefficients at t (b = sigmoid(t), h = H(b)).
    DML_HD Anchor(double t, double b, double h) : t0(t), b0(b), h0(h) {
      const double v = b * (1.0 - b);
      const double c2 = v * (1.0 - 2.0 * b);
      c1 = v;
      p2 = 0.5 * c2;
      p3 = v * (1.0 - 6.0 * v) * (1.0 / 6.0);
      p4 = c2 * (1.0 - 12.0 * v) * (1.0 / 24.0);
      p5 = v * (1.0 + v * (-30.0 + 120.0 * v)) * (1.0 / 120.0);
      p6 = c2 * (1.0 + v * (-60.0 + 360.0 * v)) * (1.0 / 720.0);
    }
    // The polynomials are evaluated by Estrin's scheme: this sits on the
    // critical path of every step, and without FMA Horner's latency doubles.
    /// sigmoid(t0 + d) - b0.
    DML_HD double Ds(double d) const {
      const double d2 = d * d;
      return d * ((c1 + p2 * d) + d2 * ((p3 + p4 * d) + d2 * (p5 + p6 * d)));
    }
    /// softplus(t0 + d) - softplus(t0) - b0 d = KL(b0 || sigmoid(t0 + d)),
    /// the coordinate gap when d = -m - t0: sum_k sigmoid^(k-1)(t0) d^k / k!.
    /// Relative truncation error below 1e-3 for |d| <= 1.
    DML_HD double Bregman(double d) const {
      const double d2 = d * d;
      return d2 * ((0.5 * c1 + (1.0 / 3.0) * p2 * d) +
                   d2 * ((0.25 * p3 + 0.2 * p4 * d) + d2 * ((1.0 / 6.0) * p5 + (1.0 / 7.0) * p6 * d)));
    }
    /// sigmoid and 1 - sigmoid at t; returns exp(-|t|) if it had to be
    /// computed (|t - t0| > kTaylor), else -1.
    DML_HD double At(double t, double* s, double* s1) const {
      const double d = t - t0;
      if (std::abs(d) <= kTaylor) {
        const double ds = Ds(d);
        *s = b0 + ds;
        *s1 = (1.0 - b0) - ds;
        return -1.0;
      }
      double e;
      Eval(t, &e, s, s1);
      return e;
    }
    /// (t, sigmoid(t), H) for |t - t0| <= kTaylor:
    /// H(t0 + d) = h0 - t0 (sigmoid(t0 + d) - b0) - int_0^d u sigmoid'(t0 + u) du.
    DML_HD LogitPoint Point(double t) const {
      const double d = t - t0;
      const double ds = Ds(d);
      // int_0^d u sum_k c_k u^(k-1)/(k-1)! du = sum_k k p_k d^(k+1)/(k+1).
      const double d2 = d * d;
      const double h =
          h0 - t0 * ds -
          d2 * ((0.5 * c1 + (2.0 / 3.0) * p2 * d) +
                d2 * ((0.75 * p3 + 0.8 * p4 * d) + d2 * ((5.0 / 6.0) * p5 + (6.0 / 7.0) * p6 * d)));
      return {t, b0 + ds, h};
    }
  };

  /// exp(-|t|), sigmoid(t) and 1 - sigmoid(t), with one exp and one division.
  DML_HD static void Eval(double t, double* e, double* s, double* s1) {
    *e = std::exp(-std::abs(t));
    const double r = 1.0 / (1.0 + *e);
    *s = t >= 0.0 ? r : *e * r;
    *s1 = t >= 0.0 ? *e * r : r;
  }

  /// The point b = sigmoid(t) with its entropy H(b) = softplus(-t) + (1-b) t.
  DML_HD static LogitPoint FromLogit(double t) {
    const double e = std::exp(-std::abs(t));
    const double b = t >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
    const double b1 = t >= 0.0 ? e / (1.0 + e) : 1.0 / (1.0 + e);
    return {t, b, Log1pUnit(e) + std::max(-t, 0.0) + b1 * t};
  }

  /// loss + loss*(-a) + a z = KL(b || sigmoid(-m)), written as
  /// b (log b + softplus(m)) + (1-b)(log(1-b) + softplus(-m)): no overflow,
  /// and clamped at 0 against rounding.
  DML_HD static double CoordinateGap(double y, double a, double z) {
    double loss, gap;
    LossAndGap(y, a, z, &loss, &gap);
    return gap;
  }
  /// Loss and CoordinateGap together, sharing log1p(exp(-|m|)): four
  /// transcendental calls in all (certificates).
  DML_HD static void LossAndGap(double y, double a, double z, double* loss, double* gap) {
    const double b = a * y;
    const double m = y * z;
    const double l1 = std::log1p(std::exp(-std::abs(m)));
    const double sp_pos = std::max(m, 0.0) + l1;   // softplus(m)
    const double sp_neg = std::max(-m, 0.0) + l1;  // softplus(-m) = loss
    double g = 0.0;
    if (b > 0.0) g += b * (std::log(b) + sp_pos);
    if (b < 1.0) g += (1.0 - b) * (std::log1p(-b) + sp_neg);
    *loss = sp_neg;
    *gap = std::max(0.0, g);
  }
};

}  // namespace dml
