#pragma once
// The four losses of the model family as functions of the label y in
// {-1,+1} (real for squared) and the margin input z = x.w: value, derivative
// in z (a subgradient for hinge) and second derivative (0 where undefined).
// Header-only so solvers inline them. Numerically stable for |z| large.

#include <algorithm>
#include <cmath>

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
