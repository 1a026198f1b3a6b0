#pragma once
// L2-regularised squared-hinge SVM in the dual (dual coordinate descent:
// Hsieh et al., ICML 2008, the L2-loss case with D_ii = 1/(2C); SDCA:
// Shalev-Shwartz & Zhang, JMLR 2013).
//
//   primal  P(w)     = (1/n) sum_i max(0, 1 - y_i x_i.w)^2 + lambda/2 ||w||^2
//   dual    D(alpha) = (1/n) sum_i (b_i - b_i^2/4) - lambda/2 ||w(alpha)||^2
//           subject to b_i = alpha_i y_i >= 0
//   variables: alpha in R^n, w(alpha) = A^T alpha / (lambda n).
// LIBLINEAR's (-s 1) dual variable is C * b_i with C = 1/(lambda n).
// Optimality: b_i = 2 max(0, 1 - y_i x_i.w).

#include <algorithm>
#include <cmath>
#include <limits>

#include "dml/objective/host_device.hpp"
#include "dml/objective/losses.hpp"

namespace dml {

/// Per-example pieces of the squared-hinge-SVM dual for the dual solvers
/// (templates over it) and EvaluateDual; stateless. Arguments: a = alpha_i,
/// z = x_i.w, q = ||x_i||^2 / (lambda n) (scaled by sigma' in CoCoA+).
struct SquaredHingeSvmObjective {
  /// The primal loss.
  using LossType = loss::SquaredHinge;
  /// Constraint b >= 0 (no upper bound): LIBLINEAR-style shrinking applies.
  static constexpr bool kShrinkable = true;
  /// No upper bound on b = a y.
  static constexpr double kUpper = std::numeric_limits<double>::infinity();

  /// loss(y, z) = max(0, 1 - y z)^2.
  DML_HD static double Loss(double y, double z) { return loss::SquaredHinge::Value(y, z); }
  /// -loss*(-a) = b - b^2/4 for b = a y >= 0.
  DML_HD static double NegConj(double y, double a) {
    const double b = a * y;
    return b - 0.25 * b * b;
  }
  /// Whether a is dual-feasible: a y >= 0 and finite.
  DML_HD static bool InDomain(double y, double a) {
    const double b = a * y;
    return b >= 0.0 && std::isfinite(b);
  }
  /// Starting point of the solvers: 0.
  DML_HD static double Initial(double y, double lambda_n) { return 0.0; }
  /// LIBLINEAR's G = y z - 1 + b/2: derivative in b of the negated coordinate dual.
  DML_HD static double Gradient(double y, double a, double z) { return y * z - 1.0 + 0.5 * a * y; }
  /// argmax over b' >= 0: b' = max(0, b - G/(q + 1/2)).
  DML_HD static double Step(double y, double a, double z, double q) {
    const double b = a * y;
    const double g = y * z - 1.0 + 0.5 * b;
    return std::max(0.0, b - g / (q + 0.5)) * y;
  }
  /// loss + loss*(-a) + a z, factored: (1 - m - b/2)^2 for m < 1,
  /// b^2/4 + b(m-1) otherwise (m = y z); >= 0 for b >= 0.
  DML_HD static double CoordinateGap(double y, double a, double z) {
    const double b = a * y;
    const double m = y * z;
    if (m < 1.0) {
      const double t = 1.0 - m - 0.5 * b;
      return t * t;
    }
    return b * (0.25 * b + (m - 1.0));
  }
  /// Loss(y, z) and CoordinateGap(y, a, z) together (certificates).
  DML_HD static void LossAndGap(double y, double a, double z, double* loss, double* gap) {
    *loss = Loss(y, z);
    *gap = CoordinateGap(y, a, z);
  }
};

}  // namespace dml
