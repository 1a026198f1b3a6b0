#pragma once
// L2-regularised hinge-loss SVM in the dual (dual coordinate descent: Hsieh,
// Chang, Lin, Keerthi, Sundararajan, "A dual coordinate descent method for
// large-scale linear SVM", ICML 2008, Algorithm 1 with shrinking (Algorithm 3);
// SDCA: Shalev-Shwartz & Zhang, JMLR 2013).
//
//   primal  P(w)     = (1/n) sum_i max(0, 1 - y_i x_i.w) + lambda/2 ||w||^2
//   dual    D(alpha) = (1/n) sum_i alpha_i y_i - lambda/2 ||w(alpha)||^2
//           subject to 0 <= alpha_i y_i <= 1
//   variables: alpha in R^n, b_i = alpha_i y_i in [0, 1],
//              w(alpha) = A^T alpha / (lambda n).
// LIBLINEAR's (-s 3) dual variable is C * b_i with C = 1/(lambda n).
// Optimality: b_i = 0 where y_i x_i.w > 1, b_i = 1 where y_i x_i.w < 1.

#include <algorithm>
#include <cmath>

#include "dml/objective/host_device.hpp"
#include "dml/objective/losses.hpp"

namespace dml {

/// Per-example pieces of the hinge-SVM dual for the dual solvers (templates
/// over it) and EvaluateDual; stateless. Arguments: a = alpha_i, z = x_i.w,
/// q = ||x_i||^2 / (lambda n) (scaled by sigma' in CoCoA+).
struct HingeSvmObjective {
  /// The primal loss.
  using LossType = loss::Hinge;
  /// Box constraint 0 <= b <= kUpper: LIBLINEAR-style shrinking applies.
  static constexpr bool kShrinkable = true;
  /// Upper end of the box on b = a y.
  static constexpr double kUpper = 1.0;

  /// loss(y, z) = max(0, 1 - y z).
  DML_HD static double Loss(double y, double z) { return loss::Hinge::Value(y, z); }
  /// -loss*(-a) = a y on the box (loss*(u) = u y for u y in [-1, 0]).
  DML_HD static double NegConj(double y, double a) { return a * y; }
  /// Whether a is dual-feasible: 0 <= a y <= 1.
  DML_HD static bool InDomain(double y, double a) {
    const double b = a * y;
    return b >= 0.0 && b <= 1.0;
  }
  /// Starting point of the solvers: 0.
  DML_HD static double Initial(double y, double lambda_n) { return 0.0; }
  /// LIBLINEAR's G: the derivative in b of the negated coordinate dual,
  /// y z - 1. Used for the projected-gradient shrinking rule.
  DML_HD static double Gradient(double y, double a, double z) { return y * z - 1.0; }
  /// argmax over the box: b' = clip(b + (1 - y z)/q, 0, 1); for an empty row
  /// (q = 0) the objective is linear and the maximiser is a bound.
  DML_HD static double Step(double y, double a, double z, double q) {
    const double b = a * y;
    const double g = 1.0 - y * z;
    double bn;
    if (q > 0.0) {
      bn = std::min(1.0, std::max(0.0, b + g / q));
    } else {
      bn = g > 0.0 ? 1.0 : (g < 0.0 ? 0.0 : b);
    }
    return bn * y;
  }
  /// loss + loss*(-a) + a z, factored: (1-m)(1-b) for m < 1, b(m-1) otherwise
  /// (m = y z); >= 0 on the box, without cancellation.
  DML_HD static double CoordinateGap(double y, double a, double z) {
    const double b = a * y;
    const double m = y * z;
    return m < 1.0 ? (1.0 - m) * (1.0 - b) : b * (m - 1.0);
  }
  /// Loss(y, z) and CoordinateGap(y, a, z) together (certificates).
  DML_HD static void LossAndGap(double y, double a, double z, double* loss, double* gap) {
    *loss = Loss(y, z);
    *gap = CoordinateGap(y, a, z);
  }
};

}  // namespace dml
