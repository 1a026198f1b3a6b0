#pragma once
// Separable regularisers lambda * R(w), per coordinate: value, a
// (sub)gradient, and the proximal step used by coordinate descent.
// Header-only so solvers inline them.

#include <algorithm>
#include <cmath>

#include "dml/objective/host_device.hpp"

namespace dml::reg {

/// Shrinks x toward 0 by t >= 0: argmin_u (u - x)^2 / 2 + t|u|.
DML_HD inline double SoftThreshold(double x, double t) {
  return x > t ? x - t : (x < -t ? x + t : 0.0);
}

/// eta*|w| + (1-eta)/2*w^2, scaled by lambda. eta = 0: L2 (R = w^2/2);
/// eta = 1: L1 (R = |w|).
struct ElasticNet {
  double lambda;  ///< Overall weight.
  double eta;     ///< L1 share, in [0, 1].
  /// lambda * R(w) for one coordinate.
  DML_HD double Value(double w) const {
    return lambda * (eta * std::abs(w) + 0.5 * (1.0 - eta) * w * w);
  }
  /// The minimum-norm subgradient direction's representative at 0 is 0.
  DML_HD double Subgradient(double w) const {
    const double s = w > 0 ? 1.0 : (w < 0 ? -1.0 : 0.0);
    return lambda * (eta * s + (1.0 - eta) * w);
  }
  /// argmin_u  a/2 (u - c)^2 + lambda R(u): the coordinate step given the
  /// quadratic model of the loss (curvature a > 0, unconstrained minimiser c).
  DML_HD double Prox(double c, double a) const {
    return SoftThreshold(a * c, lambda * eta) / (a + lambda * (1.0 - eta));
  }
};

}  // namespace dml::reg
