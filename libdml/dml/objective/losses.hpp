#pragma once
// The four losses of the model family as functions of the label y in
// {-1,+1} (real for squared) and the margin input z = x.w: value, derivative
// in z (a subgradient for hinge) and second derivative (0 where undefined).
// Header-only so solvers inline them. Numerically stable for |z| large.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "dml/objective/host_device.hpp"

namespace dml::loss {

/// log1p(a) for a > -1 to a few ulps through the faster log (glibc's log1p
/// was a fifth of newGLMNET's run on w8a and a sixth of Newton's):
/// log(u) a / (u - 1), u = 1 + a (Goldberg, "What every computer scientist
/// should know about floating-point arithmetic", Theorem 4).
DML_HD inline double FastLog1p(double a) {
  const double u = 1.0 + a;
  if (!(u < HUGE_VAL)) return log1p(a);  // inf (and NaN): as log1p
  return u == 1.0 ? a : log(u) * a / (u - 1.0);
}

/// log(x) for normal x (DBL_MIN <= x <= DBL_MAX) within an ulp: fdlibm's
/// e_log.c (x = 2^k m, m in [sqrt(2)/2, sqrt(2)), f = m - 1, s = f/(2+f),
/// its degree-14 polynomial in s), without its branches, so that a loop of
/// it vectorises; glibc's log is a call a value. Other x give garbage:
/// callers check the range. Host only.
inline double LogOfNormal(double x) {
  constexpr std::uint64_t kSqrtHalf = 0x3fe6a09e667f3bcdull;  // sqrt(2)/2
  std::uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  // Adding 1 - sqrt(2)/2 (in bits) carries into the exponent from m = sqrt(2) on.
  const std::uint64_t t = bits + (0x3ff0000000000000ull - kSqrtHalf);
  const std::uint64_t m_bits = (t & 0x000fffffffffffffull) + kSqrtHalf;
  // k as a double without an int64 conversion (which SSE2 and AVX2 lack):
  // the exponent field as the low bits of 2^52.
  const std::uint64_t e_bits = (t >> 52) | 0x4330000000000000ull;
  double m, e;
  std::memcpy(&m, &m_bits, sizeof m);
  std::memcpy(&e, &e_bits, sizeof e);
  const double k = e - (4503599627370496.0 + 1023.0);
  const double f = m - 1.0;
  const double s = f / (2.0 + f);
  const double z = s * s, w = z * z;
  const double t1 = w * (3.999999999940941908e-01 +
                         w * (2.222219843214978396e-01 + w * 1.531383769920937332e-01));
  const double t2 = z * (6.666666666666735130e-01 +
                         w * (2.857142874366239149e-01 +
                              w * (1.818357216161805012e-01 + w * 1.479819860511658591e-01)));
  const double hfsq = 0.5 * f * f;
  return k * 6.93147180369123816490e-01 -
         ((hfsq - (s * (hfsq + (t1 + t2)) + k * 1.90821492927058770002e-10)) - f);
}

/// exp(x) for x <= 0 within an ulp where x >= -708 (fdlibm's e_exp.c:
/// x = k ln2 + r, |r| <= ln2/2, its rational approximation of e^r, 2^k
/// added to the exponent), 0 below (values under 3.3e-308, subnormal from
/// -708.4 on), NaN for NaN, without branches so that a loop of it
/// vectorises. Host only.
inline double ExpNonPositive(double x) {
  const double xc = x < -708.0 ? -708.0 : x;
  // k = round(x / ln2): 1.5 2^52 puts it in the low bits.
  constexpr double kShifter = 6755399441055744.0;
  const double shifted = xc * 1.44269504088896338700e+00 + kShifter;
  std::uint64_t k_bits;
  std::memcpy(&k_bits, &shifted, sizeof k_bits);
  const double k = shifted - kShifter;
  const double hi = xc - k * 6.93147180369123816490e-01;
  const double lo = k * 1.90821492927058770002e-10;
  const double r = hi - lo;
  const double t = r * r;
  const double c =
      r - t * (1.66666666666666019037e-01 +
               t * (-2.77777777770155933842e-03 +
                    t * (6.61375632143793436117e-05 +
                         t * (-1.65339022054652515390e-06 + t * 4.13813679705723846039e-08))));
  const double y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi);
  // k in [-1021, 0]: y 2^k stays normal for x >= -708.
  std::uint64_t y_bits;
  std::memcpy(&y_bits, &y, sizeof y_bits);
  std::uint64_t kbits_shifted;
  std::memcpy(&kbits_shifted, &kShifter, sizeof kbits_shifted);
  y_bits += (k_bits - kbits_shifted) << 52;
  double out;
  std::memcpy(&out, &y_bits, sizeof out);
  return x < -708.0 ? 0.0 : x == x ? out : x;  // a NaN's payload would reach the exponent
}

/// log1p(a) as FastLog1p, through LogOfNormal: for a > -1 with 1 + a
/// normal, branch-free. Host only.
inline double Log1pOfNormal(double a) {
  const double u = 1.0 + a;
  const double r = LogOfNormal(u) * a / (u - 1.0);
  return u == 1.0 ? a : r;
}

/// (y - z)^2 / 2: Value, Derivative and Second in z.
struct Squared {
  DML_HD static double Value(double y, double z) { return 0.5 * (y - z) * (y - z); }
  DML_HD static double Derivative(double y, double z) { return z - y; }
  DML_HD static double Second(double, double) { return 1.0; }
};

/// log(1 + exp(-y z)): Value, Derivative and Second in z.
struct Logistic {
  DML_HD static double Value(double y, double z) {
    const double m = y * z;
    return m > 0 ? std::log1p(std::exp(-m)) : -m + std::log1p(std::exp(m));
  }
  /// -y * sigmoid(-y z)
  DML_HD static double Derivative(double y, double z) {
    const double m = y * z;
    const double s = m > 0 ? std::exp(-m) / (1.0 + std::exp(-m)) : 1.0 / (1.0 + std::exp(m));
    return -y * s;
  }
  DML_HD static double Second(double y, double z) {
    const double m = y * z;
    const double e = std::exp(-std::abs(m));
    return e / ((1.0 + e) * (1.0 + e));
  }
};

/// max(0, 1 - y z): Value, a subgradient in z (-y where y z < 1, else 0),
/// and Second = 0.
struct Hinge {
  DML_HD static double Value(double y, double z) { return std::max(0.0, 1.0 - y * z); }
  DML_HD static double Derivative(double y, double z) { return y * z < 1.0 ? -y : 0.0; }
  DML_HD static double Second(double, double) { return 0.0; }
};

/// max(0, 1 - y z)^2: Value, Derivative and Second in z (labels -1/+1).
struct SquaredHinge {
  DML_HD static double Value(double y, double z) {
    const double t = std::max(0.0, 1.0 - y * z);
    return t * t;
  }
  DML_HD static double Derivative(double y, double z) {
    return -2.0 * y * std::max(0.0, 1.0 - y * z);
  }
  DML_HD static double Second(double y, double z) { return y * z < 1.0 ? 2.0 : 0.0; }
};

}  // namespace dml::loss
