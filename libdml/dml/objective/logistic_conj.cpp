#include "dml/objective/logistic_conj.hpp"

#include <cfloat>

#include "dml/objective/internal/vector_loops.hpp"
#include "dml/objective/logistic_l2.hpp"
#include "dml/objective/losses.hpp"

namespace dml {
namespace {

constexpr int kPoints = 8;

}  // namespace

DML_SIMD_CLONES
void AddLogisticNegConjAtScales(const float* y, const double* g, std::size_t n,
                                const double* scales, const double* log_scales, double* sums) {
  double min_scale = 1.0, max_scale = 0.0;
  for (int k = 0; k < kPoints; ++k) {
    min_scale = scales[k] < min_scale ? scales[k] : min_scale;
    max_scale = scales[k] > max_scale ? scales[k] : max_scale;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const double yi = y[i];
    const double b0 = -yi * g[i];
    // The ends (and points a scale above 1 puts outside): the general formula.
    if (!(b0 * min_scale >= DBL_MIN && b0 * max_scale < 1.0)) {
      LogisticL2Objective::AddNegConjAtScales(yi, g[i], scales, log_scales, kPoints, sums);
      continue;
    }
    const double log_b0 = loss::LogOfNormal(b0);
    double h[kPoints];
    // Kept a loop (GCC unrolls 8 iterations before it would vectorise them).
#pragma GCC unroll 1
    for (int k = 0; k < kPoints; ++k) {
      const double bk = scales[k] * b0;
      h[k] = bk * (log_scales[k] + log_b0) + (1.0 - bk) * loss::Log1pOfNormal(-bk);
    }
    for (int k = 0; k < kPoints; ++k) sums[k] -= h[k];
  }
}

DML_SIMD_CLONES
void AddLogisticNegConjSteps(const float* y, const double* alpha, const double* delta,
                             std::size_t n, const double* steps, double* sums) {
  for (std::size_t i = 0; i < n; ++i) {
    const double yi = y[i];
    double b[kPoints];
    bool inside = true;
    for (int k = 0; k < kPoints; ++k) {
      b[k] = (alpha[i] + steps[k] * delta[i]) * yi;
      inside &= b[k] >= DBL_MIN && b[k] < 1.0;
    }
    if (!inside) {
      for (int k = 0; k < kPoints; ++k) {
        sums[k] += LogisticL2Objective::NegConj(yi, alpha[i] + steps[k] * delta[i]);
      }
      continue;
    }
    // NegConj(b) = -(b log b) - (1 - b) log(1 - b): the same bits negated.
    double h[kPoints];
#pragma GCC unroll 1  // as above
    for (int k = 0; k < kPoints; ++k) h[k] = internal::XLogXBinary(b[k]);
    for (int k = 0; k < kPoints; ++k) sums[k] -= h[k];
  }
}

}  // namespace dml
