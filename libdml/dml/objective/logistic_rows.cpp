#include "dml/objective/logistic_rows.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "dml/objective/logistic_l1.hpp"
#include "dml/objective/losses.hpp"

namespace dml {
namespace {

// Rows a block: the per-row values are formed as vectors into a buffer,
// then added in row order.
constexpr std::size_t kBlock = 256;

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DML_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DML_SIMD_CLONES
#endif

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
  // log(1 + e^{-|z|}) + max(-z, 0), the loss at margin z.
  auto loss = [](double z) {
    return loss::Log1pOfNormal(loss::ExpNonPositive(-std::abs(z))) + std::max(-z, 0.0);
  };
  double sum = 0.0;
  double v[kBlock];
  for (std::size_t b = 0; b < n; b += kBlock) {
    const std::size_t e = std::min(n, b + kBlock);
    for (std::size_t i = b; i < e; ++i) {
      const double x = -t * u[i];  // -s_i
      // expm1(x) = (e^x - 1) x / log(e^x) (Kahan: the rounding of e^x
      // cancels); e^x for x > 0 as 1 / e^{-x} (inf past 708, and the
      // product overflows from about 703: the difference below takes over).
      const double ex = loss::ExpNonPositive(-std::abs(x));
      const double ux = x > 0.0 ? 1.0 / ex : ex;
      const double em1 =
          ux == 1.0 ? x : ux == 0.0 ? -1.0 : (ux - 1.0) * x / loss::LogOfNormal(ux);
      const double arg = sigma[i] * em1;
      const bool direct = arg > -0.5 && arg < DBL_MAX;
      const double argc = direct ? arg : 0.0;
      const double change =
          direct ? loss::Log1pOfNormal(argc) : loss(m[i] - x) - loss(m[i]);
      v[i - b] = u[i] == 0.0 ? 0.0 : change;
    }
    for (std::size_t i = b; i < e; ++i) sum += v[i - b];
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
      v[i - b] = pc * loss::LogOfNormal(pc) + (1.0 - pc) * loss::Log1pOfNormal(-pc);
    }
    for (std::size_t i = b; i < e; ++i) {
      // The ends and outside the domain: the scalar formula (0, or +inf).
      sum += inside[i - b] ? v[i - b] : LogisticL1Objective::LossConjugate(y[i], t * a[i]);
    }
  }
  return sum;
}

}  // namespace dml
