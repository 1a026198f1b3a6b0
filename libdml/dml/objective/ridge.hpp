#pragma once
// Ridge regression in the dual (SDCA: Shalev-Shwartz & Zhang, "Stochastic
// dual coordinate ascent methods for regularized loss minimization", JMLR 2013).
//
//   primal  P(w)     = (1/n) sum_i (y_i - x_i.w)^2 / 2 + lambda/2 ||w||^2
//   dual    D(alpha) = (1/n) sum_i (alpha_i y_i - alpha_i^2 / 2) - lambda/2 ||w(alpha)||^2
//   variables: alpha in R^n (one per example, unconstrained),
//              w(alpha) = A^T alpha / (lambda n).
// Optimality: alpha_i = y_i - x_i.w. The coordinate step is closed form.

#include <cmath>

#include "dml/objective/host_device.hpp"
#include "dml/objective/losses.hpp"

namespace dml {

/// Per-example pieces of the ridge dual for the dual solvers (templates over
/// it) and EvaluateDual; stateless. Arguments: a = alpha_i, z = x_i.w,
/// q = ||x_i||^2 / (lambda n) (scaled by sigma' in CoCoA+).
struct RidgeObjective {
  /// The primal loss.
  using LossType = loss::Squared;
  /// No bound constraints: shrinking is a no-op.
  static constexpr bool kShrinkable = false;

  /// loss(y, z) = (y - z)^2 / 2.
  DML_HD static double Loss(double y, double z) { return loss::Squared::Value(y, z); }
  /// -loss*(-a) with loss*(u) = u y + u^2/2.
  DML_HD static double NegConj(double y, double a) { return a * y - 0.5 * a * a; }
  /// Whether a is dual-feasible: any finite value.
  DML_HD static bool InDomain(double y, double a) { return std::isfinite(a); }
  /// Starting point of the solvers: 0.
  DML_HD static double Initial(double y, double lambda_n) { return 0.0; }
  /// argmax_a' NegConj(a') - (a'-a) z - (a'-a)^2 q/2 = a + (y - z - a)/(1 + q).
  DML_HD static double Step(double y, double a, double z, double q) { return a + (y - z - a) / (1.0 + q); }
  /// loss(y,z) + loss*(-a) + a z = (y - z - a)^2 / 2, in the cancellation-free form.
  DML_HD static double CoordinateGap(double y, double a, double z) {
    const double r = y - z - a;
    return 0.5 * r * r;
  }
  /// Loss(y, z) and CoordinateGap(y, a, z) together (certificates).
  DML_HD static void LossAndGap(double y, double a, double z, double* loss, double* gap) {
    *loss = Loss(y, z);
    *gap = CoordinateGap(y, a, z);
  }
};

}  // namespace dml
