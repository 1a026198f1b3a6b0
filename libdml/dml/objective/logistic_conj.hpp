#pragma once
// Sums of logistic's dual term H(b) = -b log b - (1-b) log(1-b) (NegConj)
// over rows at eight points each: the certificates' inner loops (the
// Newton solver's plain certificate at kIterateDualScales, its refinement
// at kNewtonDualSteps). A row's eight logs are taken as one vector (a
// branch-free log, AVX2 where the CPU has it), where glibc's log, a call a
// value, was a fifth of a9a's Newton run.
//
// Every sums[k] is added in row order, as the per-row NegConj calls add
// it; the results do not depend on the CPU (no FMA contraction in either
// build of the loop). Values are NegConj's to within an ulp or two of
// its logs (LogOfNormal). Thread-safety: pure functions.

#include <cstddef>

namespace dml {

/// sums[k] += NegConj(y[i], -scales[k] g[i]) for rows i < n, k < 8
/// (LogisticL2Objective::AddNegConjAtScales row by row; log_scales[k] =
/// log scales[k], every scale positive).
void AddLogisticNegConjAtScales(const float* y, const double* g, std::size_t n,
                                const double* scales, const double* log_scales, double* sums);

/// sums[k] += NegConj(y[i], alpha[i] + steps[k] delta[i]) for rows i < n,
/// k < 8.
void AddLogisticNegConjSteps(const float* y, const double* alpha, const double* delta,
                             std::size_t n, const double* steps, double* sums);

}  // namespace dml
