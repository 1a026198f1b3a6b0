#include "dml/objective/logistic_rows.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "dml/objective/internal/vector_loops.hpp"
#include "dml/objective/logistic_l1.hpp"
#include "dml/objective/losses.hpp"

namespace dml {
namespace {

// Rows a block: the per-row values are formed as vectors into a buffer,
// then added in row order.
constexpr std::size_t kBlock = 256;

// 1/k! for k <= 13.
constexpr double kInvFactorial[14] = {
    1.0,           1.0,           1.0 / 2,           1.0 / 6,           1.0 / 24,
    1.0 / 120,     1.0 / 720,     1.0 / 5040,        1.0 / 40320,       1.0 / 362880,
    1.0 / 3628800, 1.0 / 39916800, 1.0 / 479001600, 1.0 / 6227020800.0};

}  // namespace

DML_SIMD_CLONES
void LogisticSigmoidTerms(const double* m, std::size_t n, double* sigma, double* dd) {
  for (std::size_t i = 0; i < n; ++i) {
    const double ex = loss::ExpNonPositive(-std::abs(m[i]));
    const double inv = 1.0 / (1.0 + ex);
    sigma[i] = (m[i] > 0 ? ex : 1.0) * inv;
    dd[i] = ex * inv * inv;
  }
}

DML_SIMD_CLONES
double LogisticLossSum(const double* m, std::size_t n) {
  double sum = 0.0;
  double v[kBlock];
  for (std::size_t b = 0; b < n; b += kBlock) {
    const std::size_t e = std::min(n, b + kBlock);
    for (std::size_t i = b; i < e; ++i) {
      const double ex = loss::ExpNonPositive(-std::abs(m[i]));  // in [0, 1]
      v[i - b] = loss::Log1pOfNormal(ex) + std::max(-m[i], 0.0);
    }
    for (std::size_t i = b; i < e; ++i) sum += v[i - b];
  }
  return sum;
}

DML_SIMD_CLONES
double LogisticLossChangeSum(const double* m, const double* sigma, const double* u, double t,
                             std::size_t n) {
  double sum = 0.0;
  double v[kBlock];
  bool direct[kBlock];
  for (std::size_t b = 0; b < n; b += kBlock) {
    const std::size_t e = std::min(n, b + kBlock);
    for (std::size_t i = b; i < e; ++i) {
      const double x = -t * u[i];  // -s_i
      // expm1(x): its Taylor series below 0.3 (13 terms: under an ulp),
      // e^x - 1 above (no cancellation there); e^x for x > 0 as 1 / e^{-x}
      // (inf past 708: the difference below takes over).
      const double ex = loss::ExpNonPositive(-std::abs(x));
      const double ux = x > 0.0 ? 1.0 / ex : ex;
      // x (1 + x (1/2! + x (1/3! + ... + x / 13!))), Horner.
      double series = kInvFactorial[13];
      for (int k = 12; k >= 1; --k) series = series * x + kInvFactorial[k];
      series *= x;
      const double em1 = std::abs(x) < 0.3 ? series : ux - 1.0;
      const double arg = sigma[i] * em1;
      direct[i - b] = arg > -0.5 && arg < DBL_MAX;
      v[i - b] = loss::Log1pOfNormal(direct[i - b] ? arg : 0.0);
    }
    for (std::size_t i = b; i < e; ++i) {
      if (u[i] == 0.0) continue;
      // Where log1p's argument is near -1 or not finite: the difference of
      // the two losses (rare; glibc's exp and log).
      sum += direct[i - b] ? v[i - b]
                           : loss::Logistic::Value(1.0, m[i] + t * u[i]) -
                                 loss::Logistic::Value(1.0, m[i]);
    }
  }
  return sum;
}

DML_SIMD_CLONES
double LogisticConjugateSum(const float* y, const double* a, double t, std::size_t n) {
  double sum = 0.0;
  double v[kBlock];
  bool inside[kBlock];
  for (std::size_t b = 0; b < n; b += kBlock) {
    const std::size_t e = std::min(n, b + kBlock);
    for (std::size_t i = b; i < e; ++i) {
      const double p = -static_cast<double>(y[i]) * (t * a[i]);
      inside[i - b] = p >= DBL_MIN && p < 1.0;
      const double pc = inside[i - b] ? p : 0.5;
      v[i - b] = internal::XLogXBinary(pc);
    }
    for (std::size_t i = b; i < e; ++i) {
      // The ends and outside the domain: the scalar formula (0, or +inf).
      sum += inside[i - b] ? v[i - b] : LogisticL1Objective::LossConjugate(y[i], t * a[i]);
    }
  }
  return sum;
}

}  // namespace dml
