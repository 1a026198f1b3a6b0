#pragma once
// Per-example terms of the logistic loss over runs of rows, for the loops
// that take one exp or log a row (newGLMNET's per-example terms and line
// search, the L1 certificates' loss and scaled dual): glibc's exp and log
// are calls a value; here they are branch-free (ExpNonPositive,
// LogOfNormal) so that the loops vectorise, with an AVX2 build (without
// FMA: the same roundings) picked where the CPU has it.
//
// Sums are added in row order, as a loop of the scalar formulas adds them;
// values agree with those formulas to an ulp or two of their exp and log.
// Thread-safety: pure functions of their arguments.

#include <cstddef>

namespace dml {

/// For margins m_i = y_i x_i.w: sigma[i] = sigma(-m_i) = 1 / (1 + e^{m_i})
/// and dd[i] = sigma(m_i) sigma(-m_i), rows i < n.
void LogisticSigmoidTerms(const double* m, std::size_t n, double* sigma, double* dd);

/// sum_i log(1 + exp(-m_i)) over rows i < n.
double LogisticLossSum(const double* m, std::size_t n);

/// sum_i [log(1 + exp(-m_i - s_i)) - log(1 + exp(-m_i))], s_i = t u_i, over
/// rows i < n, with sigma[i] = sigma(-m_i): newGLMNET's line search, as
/// log1p(sigma(-m_i) expm1(-s_i)) (no cancellation for small steps) where
/// that argument is above -1/2 and finite, else the two losses' difference
/// (glibc's exp and log). Rows with u_i = 0 add nothing.
double LogisticLossChangeSum(const double* m, const double* sigma, const double* u, double t,
                             std::size_t n);

/// sum_i loss*(y_i, t a_i) over rows i < n, loss* the logistic loss's
/// conjugate b log b + (1 - b) log(1 - b), b = -y_i t a_i in [0, 1]
/// (LogisticL1Objective::LossConjugate; +inf where b is outside).
double LogisticConjugateSum(const float* y, const double* a, double t, std::size_t n);

}  // namespace dml
