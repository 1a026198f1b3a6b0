// TPA-SCD kernels and their host driver; see dml/gpu/tpa_scd.hpp for the
// method and the numerics.
//
// Layout on the device: the matrix as CSR (dual models, a row per
// coordinate) or CSC (primal models, a column per coordinate) with int64
// offsets, uint32 indices and float values; the labels as float; the shared
// vector, the coordinates and the per-coordinate gaps as double. A block
// owns one coordinate at a time, so its variable is read and written by one
// thread without atomics; the shared vector is read with __ldcg (through L2,
// which is coherent, not the SM's L1, which would keep other blocks' stale
// values) and written with double atomicAdd (native on sm_60 and later).

#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dml/gpu/internal/cuda_check.cuh"
#include "dml/gpu/internal/tpa_scd_device.hpp"
#include "dml/objective/elastic_net.hpp"
#include "dml/metrics/metrics.hpp"
#include "dml/objective/evaluate.hpp"
#include "dml/objective/hinge_svm.hpp"
#include "dml/objective/lasso.hpp"
#include "dml/objective/logistic_l1.hpp"
#include "dml/objective/logistic_l2.hpp"
#include "dml/objective/ridge.hpp"
#include "dml/objective/squared_hinge_svm.hpp"
#include "dml/solver/cocoa_local.hpp"
#include "dml/util/status.hpp"

namespace dml::gpu::internal {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;

// ---------------------------------------------------------------------------
// A random permutation of [0, n) per epoch without memory: a bijection of
// [0, 2^b) (2^b >= n) made of multiplications by odd keys, additions and
// xor-shifts, all invertible modulo 2^b, applied until the value falls
// below n (cycle walking: the walk from k < n stays in k's cycle, so the map
// is a bijection of [0, n)). About 2 applications per coordinate on average.
struct Permutation {
  uint64_t n = 0;
  uint64_t mask = 0;  // 2^b - 1
  uint64_t mul0 = 1, mul1 = 1, add0 = 0, add1 = 0;
  int shift = 1;
};

Permutation MakePermutation(uint64_t n, std::mt19937_64& rng) {
  Permutation p;
  p.n = n;
  int bits = 0;
  while ((uint64_t{1} << bits) < n) ++bits;
  p.mask = bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  p.shift = std::max(1, bits / 2);
  p.mul0 = rng() | 1u;
  p.mul1 = rng() | 1u;
  p.add0 = rng();
  p.add1 = rng();
  return p;
}

__device__ __forceinline__ uint64_t PermuteOnce(uint64_t x, const Permutation& p) {
  x = (x * p.mul0 + p.add0) & p.mask;
  x ^= x >> p.shift;
  x = (x * p.mul1 + p.add1) & p.mask;
  x ^= x >> p.shift;
  x = (x * p.mul0) & p.mask;
  return x;
}

__device__ __forceinline__ uint64_t Walk(uint64_t k, const Permutation& p) {
  uint64_t x = PermuteOnce(k, p);
  while (x >= p.n) x = PermuteOnce(x, p);
  return x;
}

// Sum of v over the block, returned to every thread. Every thread of the
// block must call it (block-uniform control flow). sh: 33 doubles.
__device__ __forceinline__ double BlockSum(double v, double* sh) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(kFullMask, v, o);
  if (blockDim.x == 32) return __shfl_sync(kFullMask, v, 0);
  const int warp = static_cast<int>(threadIdx.x >> 5);
  const int lane = static_cast<int>(threadIdx.x & 31);
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x >> 5) ? sh[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(kFullMask, v, o);
    if (lane == 0) sh[32] = v;
  }
  __syncthreads();
  return sh[32];
}

// out[idx[t]] += c val[t] over the nonzeros [begin, end) of one row or
// column, spread over the block's threads; atomic adds, since other blocks
// add to the same vector.
__device__ __forceinline__ void BlockScatter(const uint32_t* idx, const float* val, int64_t begin,
                                             int64_t end, double c, double* out) {
  for (int64_t t = begin + threadIdx.x; t < end; t += blockDim.x) {
    atomicAdd(out + idx[t], c * static_cast<double>(val[t]));
  }
}

// ---------------------------------------------------------------------------
// Dual models: coordinate i is example i (CSR row i).
struct DualArgs {
  const int64_t* off;
  const uint32_t* idx;
  const float* val;
  const float* y;
  const double* q;  // ||x_i||^2 / (lambda n)
  int64_t n;
  double inv_lambda_n;  // what a unit of alpha_i moves w by, per x_ij
  double* alpha;
  double* w;
  double q_scale = 1.0;  // CoCoA+'s sigma' (1: plain SCD)
  // A streamed chunk: off holds the chunk's slice of the global offsets,
  // which point `base` nonzeros before its idx/val (0 when resident).
  int64_t base = 0;
};

// Steps on the first `count` coordinates of permutation p (count <= p.n).
template <class Obj>
__global__ void DualEpochKernel(DualArgs a, Permutation p, uint64_t count) {
  __shared__ double sh[33];
  __shared__ double s_delta;
  for (uint64_t k = blockIdx.x; k < count; k += gridDim.x) {
    const uint64_t i = Walk(k, p);
    const int64_t begin = a.off[i] - a.base, end = a.off[i + 1] - a.base;
    double s = 0.0;
    for (int64_t t = begin + threadIdx.x; t < end; t += blockDim.x) {
      s += static_cast<double>(a.val[t]) * __ldcg(a.w + a.idx[t]);
    }
    s = BlockSum(s, sh);
    if (threadIdx.x == 0) {
      const double old = a.alpha[i];
      double next = Obj::Step(a.y[i], old, s, a.q[i] * a.q_scale);
      if (!isfinite(next)) next = old;  // a stale read gone wild: skip the step
      a.alpha[i] = next;
      s_delta = (next - old) * a.inv_lambda_n;
    }
    __syncthreads();
    const double d = s_delta;
    if (d != 0.0) {
      BlockScatter(a.idx, a.val, begin, end, d, a.w);
    }
    __syncthreads();  // s_delta and sh are reused by the next coordinate
  }
}

// The same steps with a block of one warp (rows of at most ~128 nonzeros):
// no shared memory and no barrier. The inner product is summed by a
// butterfly, which leaves the bitwise same sum in every lane, so every lane
// takes the same step and lane 0 alone stores it. Latency hiding, since the
// device holds only so many blocks: the step's inputs and the next
// coordinate's row bounds are loaded before the gather, and the first
// kWarpCache nonzeros per lane stay in registers for the update.
constexpr int kWarpCache = 4;

template <class Obj>
__global__ void __launch_bounds__(32) DualEpochWarpKernel(DualArgs a, Permutation p, uint64_t count) {
  const int lane = static_cast<int>(threadIdx.x);
  uint64_t k = blockIdx.x;
  if (k >= count) return;
  uint64_t i = Walk(k, p);
  int64_t begin = a.off[i] - a.base, end = a.off[i + 1] - a.base;
  for (;;) {
    const double y = a.y[i], q = a.q[i] * a.q_scale, old = a.alpha[i];
    const uint64_t k_next = k + gridDim.x;
    uint64_t i_next = 0;
    int64_t begin_next = 0, end_next = 0;
    if (k_next < count) {
      i_next = Walk(k_next, p);
      begin_next = a.off[i_next] - a.base;
      end_next = a.off[i_next + 1] - a.base;
    }
    uint32_t ci[kWarpCache];
    float cv[kWarpCache];
#pragma unroll
    for (int c = 0; c < kWarpCache; ++c) {
      const int64_t t = begin + lane + 32 * c;
      ci[c] = t < end ? a.idx[t] : 0u;
      cv[c] = t < end ? a.val[t] : 0.0f;
    }
    double s = 0.0;
#pragma unroll
    for (int c = 0; c < kWarpCache; ++c) {
      if (cv[c] != 0.0f) s += static_cast<double>(cv[c]) * __ldcg(a.w + ci[c]);
    }
    for (int64_t t = begin + lane + 32 * kWarpCache; t < end; t += 32) {
      s += static_cast<double>(a.val[t]) * __ldcg(a.w + a.idx[t]);
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(kFullMask, s, o);
    double next = Obj::Step(y, old, s, q);
    if (!isfinite(next)) next = old;  // a stale read gone wild: skip the step
    if (lane == 0) a.alpha[i] = next;
    const double d = (next - old) * a.inv_lambda_n;
    if (d != 0.0) {
#pragma unroll
      for (int c = 0; c < kWarpCache; ++c) {
        if (cv[c] != 0.0f) atomicAdd(a.w + ci[c], d * static_cast<double>(cv[c]));
      }
      for (int64_t t = begin + lane + 32 * kWarpCache; t < end; t += 32) {
        atomicAdd(a.w + a.idx[t], d * static_cast<double>(a.val[t]));
      }
    }
    if (k_next >= count) break;
    k = k_next;
    i = i_next;
    begin = begin_next;
    end = end_next;
  }
}

// Launches an epoch's steps on `count` coordinates with `threads` per
// block (32: the warp kernel).
template <class Obj>
void LaunchDualEpoch(int grid, int threads, cudaStream_t stream, const DualArgs& a,
                     const Permutation& p, uint64_t count) {
  if (threads == 32) {
    DualEpochWarpKernel<Obj><<<grid, 32, 0, stream>>>(a, p, count);
  } else {
    DualEpochKernel<Obj><<<grid, threads, 0, stream>>>(a, p, count);
  }
}

// Blocks of the dual epoch kernel that `threads` selects, for GridFor.
template <class Obj>
auto DualEpochKernelFor(int threads) {
  return threads == 32 ? DualEpochWarpKernel<Obj> : DualEpochKernel<Obj>;
}

// sums[0] += sum_i loss(y_i, z_i), sums[1] += sum_i NegConj(y_i, alpha_i),
// sums[2] += sum_i gap_i; cg[i] = gap_i / n.
template <class Obj>
__global__ void DualGapKernel(DualArgs a, double inv_n, double* sums, double* cg) {
  __shared__ double sh[33];
  double loss_acc = 0.0, negconj_acc = 0.0, gap_acc = 0.0;
  for (int64_t i = blockIdx.x; i < a.n; i += gridDim.x) {
    const int64_t begin = a.off[i] - a.base, end = a.off[i + 1] - a.base;
    double s = 0.0;
    for (int64_t t = begin + threadIdx.x; t < end; t += blockDim.x) {
      s += static_cast<double>(a.val[t]) * a.w[a.idx[t]];
    }
    s = BlockSum(s, sh);
    if (threadIdx.x == 0) {
      double loss, gap;
      Obj::LossAndGap(a.y[i], a.alpha[i], s, &loss, &gap);
      cg[i] = gap * inv_n;
      loss_acc += loss;
      gap_acc += gap;
      negconj_acc += Obj::NegConj(a.y[i], a.alpha[i]);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    atomicAdd(sums + 0, loss_acc);
    atomicAdd(sums + 1, negconj_acc);
    atomicAdd(sums + 2, gap_acc);
  }
}

// w += A^T alpha / (lambda n) (w zeroed before): rebuilds the shared vector.
__global__ void DualRebuildKernel(DualArgs a) {
  for (int64_t i = blockIdx.x; i < a.n; i += gridDim.x) {
    const double c = a.alpha[i] * a.inv_lambda_n;
    if (c == 0.0) continue;  // block-uniform
    BlockScatter(a.idx, a.val, a.off[i] - a.base, a.off[i + 1] - a.base, c, a.w);
  }
}

// q[i] = scale ||x_i||^2 (q narrowed to the chunk, as cg is).
__global__ void RowSquaredNormKernel(DualArgs a, double scale, double* q) {
  __shared__ double sh[33];
  for (int64_t i = blockIdx.x; i < a.n; i += gridDim.x) {
    double s = 0.0;
    for (int64_t t = a.off[i] - a.base + threadIdx.x; t < a.off[i + 1] - a.base; t += blockDim.x) {
      const double v = a.val[t];
      s += v * v;
    }
    s = BlockSum(s, sh);
    if (threadIdx.x == 0) q[i] = s * scale;
    __syncthreads();
  }
}

// *out += sum_j x_j^2.
__global__ void SquaredNormKernel(const double* x, int64_t m, double* out) {
  __shared__ double sh[33];
  double s = 0.0;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < m;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    s += x[j] * x[j];
  }
  s = BlockSum(s, sh);
  if (threadIdx.x == 0) atomicAdd(out, s);
}

// ---------------------------------------------------------------------------
// Primal models: coordinate j is feature j (CSC column j); v = A w.
struct PrimalArgs {
  const int64_t* off;
  const uint32_t* idx;
  const float* val;
  const float* y;   // per row
  const double* q;  // ||a_j||^2 / n
  int64_t d;
  int64_t n;
  double inv_n;
  double* w;
  double* v;
  // CoCoA+'s local subproblem (the device local solver): the steps move
  // w_j + dw_j and write dw_j, leaving w alone; `v` is then the local
  // vector v + sigma' A_k dw, and `scale` = sigma' scales the column
  // (curvature times sigma', v moved by sigma' times the step). Plain
  // TPA-SCD: no dw, scale 1.
  double* dw = nullptr;
  double scale = 1.0;
  // A streamed chunk: off holds the chunk's slice of the global offsets,
  // which point `base` nonzeros before its idx/val (0 when resident).
  int64_t base = 0;
};

// The coordinate a step starts from, and where it writes the step's result.
__device__ __forceinline__ double StepStart(const PrimalArgs& a, uint64_t j) {
  return a.dw == nullptr ? a.w[j] : a.w[j] + a.dw[j];
}
__device__ __forceinline__ void StepWrite(const PrimalArgs& a, uint64_t j, double next) {
  if (a.dw == nullptr) {
    a.w[j] = next;
  } else {
    a.dw[j] = next - a.w[j];
  }
}

// Lasso and elastic net: the exact step w_j' = Prox(w_j - g_j / q_j, q_j) of
// squared_cd::Step, with g_j = a_j^T (v - y) / n and q_j scaled by sigma';
// steps on the first `count` coordinates of p.
template <class Obj>
__global__ void SquaredEpochKernel(PrimalArgs a, Obj obj, Permutation p, uint64_t count) {
  __shared__ double sh[33];
  __shared__ double s_delta;
  for (uint64_t k = blockIdx.x; k < count; k += gridDim.x) {
    const uint64_t j = Walk(k, p);
    const int64_t begin = a.off[j] - a.base, end = a.off[j + 1] - a.base;
    double s = 0.0;
    for (int64_t t = begin + threadIdx.x; t < end; t += blockDim.x) {
      const uint32_t r = a.idx[t];
      s += static_cast<double>(a.val[t]) * (__ldcg(a.v + r) - static_cast<double>(a.y[r]));
    }
    s = BlockSum(s, sh);
    if (threadIdx.x == 0) {
      const double w = StepStart(a, j);
      const double q = a.q[j] * a.scale;
      const double g = s * a.inv_n;
      double next = q > 0.0 ? obj.Reg().Prox(w - g / q, q) : 0.0;
      if (!isfinite(next)) next = w;
      StepWrite(a, j, next);
      s_delta = a.scale * (next - w);
    }
    __syncthreads();
    const double dw = s_delta;
    if (dw != 0.0) {
      BlockScatter(a.idx, a.val, begin, end, dw, a.v);
    }
    __syncthreads();
  }
}

// L1-logistic: CDN's step (LogisticL1Objective::Step): the Newton direction
// with the L1 term exact, then Armijo backtracking on the coordinate's true
// objective, each trial one block reduction over the column. With sigma'
// (a.scale) the column is scaled by it and the loss change by 1/sigma', as
// in LogisticL1Objective::Step.
__global__ void LogisticL1EpochKernel(PrimalArgs a, double lambda, Permutation p, uint64_t count) {
  using L = loss::Logistic;
  __shared__ double sh[33];
  __shared__ double s_d;
  __shared__ int s_state;  // 0: try, 1: accepted, 2: gave up
  for (uint64_t k = blockIdx.x; k < count; k += gridDim.x) {
    const uint64_t j = Walk(k, p);
    const int64_t begin = a.off[j] - a.base, end = a.off[j + 1] - a.base;
    double gs = 0.0, hs = 0.0;
    for (int64_t t = begin + threadIdx.x; t < end; t += blockDim.x) {
      const uint32_t r = a.idx[t];
      const double x = a.val[t], yr = a.y[r], vr = __ldcg(a.v + r);
      gs += x * L::Derivative(yr, vr);
      hs += x * x * L::Second(yr, vr);
    }
    const double g = BlockSum(gs, sh) * a.inv_n;
    const double hsum = BlockSum(hs, sh) * a.inv_n;
    const double w = StepStart(a, j);
    if (threadIdx.x == 0) {
      const double h = fmax(a.scale * hsum, 1e-12 * lambda);
      const double d = reg::SoftThreshold(h * w - g, lambda) / h - w;
      s_d = isfinite(d) ? d : 0.0;
      s_state = s_d == 0.0 ? 2 : 0;
    }
    __syncthreads();
    for (int trial = 0; trial < LogisticL1Objective::kMaxLineSearch && s_state == 0; ++trial) {
      const double d = s_d;
      const double sd = a.scale * d;
      const double inv_ns = a.inv_n / a.scale;  // as the CPU step: one rounding, fused below
      double dl = 0.0;
      for (int64_t t = begin + threadIdx.x; t < end; t += blockDim.x) {
        const uint32_t r = a.idx[t];
        const double x = a.val[t], yr = a.y[r], vr = __ldcg(a.v + r);
        dl += L::Value(yr, vr + sd * x) - L::Value(yr, vr);
      }
      dl = BlockSum(dl, sh) * inv_ns;
      if (threadIdx.x == 0) {
        const double reg_change = lambda * (fabs(w + d) - fabs(w));
        if (dl + reg_change <= LogisticL1Objective::kSigma * (g * d + reg_change)) {
          s_state = 1;
        } else if (trial + 1 == LogisticL1Objective::kMaxLineSearch) {
          s_state = 2;
        } else {
          s_d = 0.5 * d;
        }
      }
      __syncthreads();
    }
    if (s_state == 1) {
      const double d = s_d;
      const double sd = a.scale * d;
      if (threadIdx.x == 0) StepWrite(a, j, w + d);
      BlockScatter(a.idx, a.val, begin, end, sd, a.v);
    }
    __syncthreads();
  }
}

// newGLMNET on the device (plain TPA-SCD's L1-logistic; Yuan, Ho, Lin 2012,
// as glmnet_l1.cpp): each outer iteration takes the loss's gradient and
// Hessian diagonal at w, runs TPA-SCD cycles on the quadratic model
//   q(d) = grad^T d + (1/2n) d^T X^T D X d + nu/2 |d|^2 + lambda |w + d|_1
// (a block per feature, the shared vector t = X d, the step GlmnetInnerStep
// of logistic_l1.hpp), then an Armijo search on w + s d. Per-feature arrays
// are narrowed to a streamed chunk as PrimalArgs' are (Shift).
struct GlmnetArgs {
  double* grad;         // (1/n) a_j^T b, b_i = loss'(y_i, v_i)
  double* hdiag;        // (1/n) a_j^T diag(D) a_j + nu, D_i = loss''(y_i, v_i)
  const double* smax;   // the step bound of glmnet_l1.cpp
  double* wpd;          // w + d
  const double* dn;     // per row: D_i / n
  double* t;            // per row: (X d)_i
  double* sums;         // a cycle: [0] summed violation, [1] steps taken; a trial: [1..3]
  double nu = 0.0, lambda = 0.0;
  GlmnetArgs Shift(int64_t first) const {
    GlmnetArgs g = *this;
    g.grad += first;
    g.hdiag += first;
    g.smax += first;
    g.wpd += first;
    return g;
  }
};

// b_i = loss'(y_i, v_i) / n and dn_i = loss''(y_i, v_i) / n.
__global__ void GlmnetRowKernel(PrimalArgs a, double* b, double* dn) {
  using L = loss::Logistic;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    b[i] = L::Derivative(a.y[i], a.v[i]) * a.inv_n;
    dn[i] = L::Second(a.y[i], a.v[i]) * a.inv_n;
  }
}

// grad_j, hdiag_j, wpd_j = w_j, and the summed violation at d = 0.
__global__ void GlmnetColumnKernel(PrimalArgs a, GlmnetArgs g, const double* b) {
  __shared__ double sh[33];
  double viol = 0.0;
  for (int64_t j = blockIdx.x; j < a.d; j += gridDim.x) {
    double gs = 0.0, hs = 0.0;
    for (int64_t t = a.off[j] - a.base + threadIdx.x; t < a.off[j + 1] - a.base; t += blockDim.x) {
      const uint32_t r = a.idx[t];
      const double x = a.val[t];
      gs += x * b[r];
      hs += x * x * g.dn[r];
    }
    gs = BlockSum(gs, sh);
    hs = BlockSum(hs, sh);
    if (threadIdx.x == 0) {
      g.grad[j] = gs;
      g.hdiag[j] = hs + g.nu;
      g.wpd[j] = a.w[j];
      viol += GlmnetViolation(gs, a.w[j], g.lambda);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(g.sums + 0, viol);
}

// One TPA-SCD cycle on q(d) over the first `count` features of p.
__global__ void GlmnetInnerKernel(PrimalArgs a, GlmnetArgs g, Permutation p, uint64_t count) {
  __shared__ double sh[33];
  __shared__ double s_z;
  double viol = 0.0, moved = 0.0;
  for (uint64_t k = blockIdx.x; k < count; k += gridDim.x) {
    const uint64_t j = Walk(k, p);
    const int64_t begin = a.off[j] - a.base, end = a.off[j + 1] - a.base;
    double s = 0.0;
    for (int64_t t = begin + threadIdx.x; t < end; t += blockDim.x) {
      const uint32_t r = a.idx[t];
      s += static_cast<double>(a.val[t]) * g.dn[r] * __ldcg(g.t + r);
    }
    s = BlockSum(s, sh);
    if (threadIdx.x == 0) {
      const double wpd = g.wpd[j];
      const double grad = g.grad[j] + (wpd - a.w[j]) * g.nu + s;
      viol += GlmnetViolation(grad, wpd, g.lambda);
      const double z = GlmnetInnerStep(grad, g.hdiag[j], wpd, g.lambda, g.smax[j]);
      if (z != 0.0) {
        g.wpd[j] = wpd + z;
        moved += 1.0;
      }
      s_z = z;
    }
    __syncthreads();
    const double z = s_z;
    if (z != 0.0) {
      BlockScatter(a.idx, a.val, begin, end, z, g.t);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    atomicAdd(g.sums + 0, viol);
    atomicAdd(g.sums + 1, moved);
  }
}

// The line search's sums at step s: sums[1] += loss(y_i, v_i + s t_i) -
// loss(y_i, v_i) over the rows; sums[2] += |w_j + s d_j| - |w_j| and
// sums[3] += grad_j d_j over the features (d = wpd - w).
__global__ void GlmnetTrialKernel(PrimalArgs a, GlmnetArgs g, double step) {
  using L = loss::Logistic;
  __shared__ double sh[33];
  double dl = 0.0, dr = 0.0, gd = 0.0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n; i += stride) {
    // As glmnet_l1.cpp: log1p(sigma(-m) expm1(-s y t)), m = y v, has no
    // cancellation; the two losses' difference where it would be inexact.
    const double y = a.y[i], v = a.v[i];
    const double arg = std::expm1(-step * y * g.t[i]) / (1.0 + std::exp(y * v));
    dl += arg > -0.5 && isfinite(arg) ? std::log1p(arg) : L::Value(y, v + step * g.t[i]) - L::Value(y, v);
  }
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < a.d; j += stride) {
    const double w = a.w[j], dj = g.wpd[j] - w;
    dr += fabs(w + step * dj) - fabs(w);
    gd += g.grad[j] * dj;
  }
  dl = BlockSum(dl, sh);
  dr = BlockSum(dr, sh);
  gd = BlockSum(gd, sh);
  if (threadIdx.x == 0) {
    atomicAdd(g.sums + 1, dl);
    atomicAdd(g.sums + 2, dr);
    atomicAdd(g.sums + 3, gd);
  }
}

// w += s d, v += s t.
__global__ void GlmnetApplyKernel(PrimalArgs a, GlmnetArgs g, double step) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < a.d; j += stride) {
    a.w[j] += step * (g.wpd[j] - a.w[j]);
  }
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n; i += stride) {
    a.v[i] += step * g.t[i];
  }
}

// u_i = loss'(y_i, v_i) / n; sums[0] += sum of loss(y_i, v_i) over the rows
// [loss_begin, loss_end) (a CoCoA+ block counts its share of the rows).
template <class Obj>
__global__ void PrimalRowKernel(PrimalArgs a, double* u, double* sums, int64_t loss_begin,
                                int64_t loss_end) {
  __shared__ double sh[33];
  double acc = 0.0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double value, derivative;
    Obj::ValueAndDerivative(a.y[i], a.v[i], &value, &derivative);
    u[i] = derivative * a.inv_n;
    if (i >= loss_begin && i < loss_end) acc += value;
  }
  acc = BlockSum(acc, sh);
  if (threadIdx.x == 0) atomicAdd(sums + 0, acc);
}

// gap_j = obj.CoordinateGap(w_j, a_j^T u); sums[1] += penalty, sums[2] += gaps.
template <class Obj>
__global__ void PrimalColumnKernel(PrimalArgs a, Obj obj, const double* u, double* sums,
                                   double* cg) {
  __shared__ double sh[33];
  double reg_acc = 0.0, gap_acc = 0.0;
  for (int64_t j = blockIdx.x; j < a.d; j += gridDim.x) {
    double s = 0.0;
    for (int64_t t = a.off[j] - a.base + threadIdx.x; t < a.off[j + 1] - a.base; t += blockDim.x) {
      s += static_cast<double>(a.val[t]) * u[a.idx[t]];
    }
    s = BlockSum(s, sh);
    if (threadIdx.x == 0) {
      const double gap = obj.CoordinateGap(a.w[j], s);
      cg[j] = gap;
      gap_acc += gap;
      reg_acc += obj.Regularizer(a.w[j]);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    atomicAdd(sums + 1, reg_acc);
    atomicAdd(sums + 2, gap_acc);
  }
}

// ---------------------------------------------------------------------------
// Host side.

// Where a run's device work goes: its stream (null: the legacy default
// stream) and the caller's scratch (null: cudaMalloc). The local solvers
// use the defaults.
struct Place {
  cudaStream_t stream = nullptr;
  Arena* arena = nullptr;
};

// Allocates max(n, 1) elements and copies n from the host, in stream order
// (a copy from pageable memory has left h_src when this returns).
template <class T>
absl::Status Upload(DeviceBuffer<T>& d_buf, const T* h_src, std::size_t n, Place at = {}) {
  if (auto s = d_buf.Allocate(std::max<std::size_t>(n, 1), at.arena); !s.ok()) return s;
  if (n == 0) return absl::OkStatus();
  DML_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(d_buf.get(), h_src, n * sizeof(T), cudaMemcpyHostToDevice, at.stream));
  return absl::OkStatus();
}

// Copies n elements back once the stream's work before it is done.
template <class T>
absl::Status Download(std::vector<T>& h_dst, const DeviceBuffer<T>& d_buf, std::size_t n,
                      cudaStream_t stream = nullptr) {
  h_dst.resize(n);
  if (n == 0) return absl::OkStatus();
  DML_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(h_dst.data(), d_buf.get(), n * sizeof(T), cudaMemcpyDeviceToHost, stream));
  DML_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

// Threads per block from the mean length of a coordinate's vector: a warp
// for short rows (a9a: 14 nonzeros), up to 256 for long ones, each thread
// taking about four nonzeros.
int ThreadsFor(int64_t nnz, int64_t coords) {
  const double mean = coords > 0 ? static_cast<double>(nnz) / static_cast<double>(coords) : 0.0;
  int threads = 32;
  while (threads < 256 && threads * 4 < mean) threads *= 2;
  return threads;
}

absl::StatusOr<int64_t> Budget(const TpaScdOptions& gpu) {
  if (gpu.memory_budget_bytes > 0) return gpu.memory_budget_bytes;
  if (gpu.scratch != nullptr) return gpu.scratch_bytes;
  size_t free_bytes = 0, total_bytes = 0;
  DML_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
  return static_cast<int64_t>(0.9 * static_cast<double>(free_bytes));
}

absl::Status CheckBudget(int64_t need, const TpaScdOptions& gpu) {
  absl::StatusOr<int64_t> budget = Budget(gpu);
  if (!budget.ok()) return budget.status();
  if (need > *budget) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "tpa-scd: the data and solver state need %d bytes of device memory, the budget is %d "
        "(a local solver's block stays resident: only TrainTpaScd streams)",
        need, *budget));
  }
  return absl::OkStatus();
}

// Blocks in flight: what the device holds at once for `kernel` at `threads`
// per block, at most coords/16 (and gpu.max_blocks when set), at least 1.
template <class Kernel>
absl::StatusOr<int> GridFor(Kernel kernel, int threads, int64_t coords, const TpaScdOptions& gpu,
                            const DeviceInfo& info) {
  int per_sm = 0;
  DML_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
  int64_t grid = static_cast<int64_t>(std::max(1, per_sm)) * std::max(1, info.multiprocessors);
  grid = std::min<int64_t>(grid, std::max<int64_t>(1, coords / 16));
  if (gpu.max_blocks > 0) grid = std::min<int64_t>(grid, gpu.max_blocks);
  return static_cast<int>(std::max<int64_t>(1, grid));
}

// The stopping and reporting shared by the dual and primal loops.
struct Loop {
  const SolverOptions& options;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  int epoch = 0;
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  // A reason to stop before the next epoch, if any.
  bool Stop(StopReason* why) const {
    if (options.stop.cancel != nullptr && options.stop.cancel->load()) {
      *why = StopReason::kCancelled;
      return true;
    }
    if (epoch >= options.stop.max_epochs) {
      *why = StopReason::kMaxEpochs;
      return true;
    }
    if (seconds() >= options.stop.max_seconds) {
      *why = StopReason::kTimeBudget;
      return true;
    }
    return false;
  }
  bool EvaluateNow() const {
    const int every = std::max(1, options.eval_every);
    return epoch % every == 0 || epoch >= options.stop.max_epochs;
  }
  // Whether a certificate meets the gap or target rule (and which).
  bool Meets(double primal, double gap, double slack, StopReason* why) const {
    if (options.stop.target_primal && primal <= *options.stop.target_primal) {
      *why = StopReason::kTargetReached;
      return true;
    }
    if (gap <= slack * GapTarget(options.stop, primal)) {
      *why = StopReason::kConverged;
      return true;
    }
    return false;
  }
};

// Good evaluations in a row after which the blocks in flight double again,
// times 2^(failures of the grid they double to), at most 16x.
constexpr int kRegrow = 2;

// The blocks in flight of a training run, and what its evaluations did to
// them. Exact coordinate descent never sets its objective back; where an
// evaluation finds it went back (or not finite), stale steps overshot: the
// caller returns to the last good evaluation and the blocks halve (one
// block is sequential: a setback there is rounding, and a non-finite
// objective an error). After good evaluations they double again, up to the
// start: soon to a grid that has not failed (the large steps from the
// starting point overshoot at grids that are fine later on, and a grid too
// small for the problem makes every epoch slow), later the more often that
// grid failed, so a grid that keeps overshooting is retried rarely.
class Blocks {
 public:
  explicit Blocks(int grid) : grid_(grid), max_(grid) {}
  int grid() const { return grid_; }

  // Judges evaluation `p` of `epoch`: `worse`, whether its objective went
  // back beyond rounding. True: roll back (the blocks are halved and `p`
  // carries an event saying `what` happened). Error: not finite with one
  // block in flight.
  absl::StatusOr<bool> Judge(bool finite, bool worse, const char* what, int epoch, Progress& p) {
    if (!finite && grid_ == 1) {
      return absl::InternalError(absl::StrFormat(
          "tpa-scd: the objective is not finite after epoch %d with one block in flight", epoch));
    }
    if (!finite || (grid_ > 1 && worse)) {
      ++fails_[std::min(level_, kLevels - 1)];
      ++level_;
      grid_ = std::max(1, max_ >> std::min(level_, 30));
      p.events.push_back({"concurrency_halved",
                          absl::StrCat(what, ": back to the last evaluation, ", grid_,
                                       " blocks in flight from now on")});
      p.event = p.events.back().what;
      ++halvings_;
      streak_ = 0;
      return true;
    }
    if (level_ > 0 && ++streak_ >= (kRegrow << std::min(fails_[std::min(level_ - 1, kLevels - 1)], 4))) {
      --level_;
      grid_ = std::max(1, max_ >> std::min(level_, 30));
      ++doublings_;
      streak_ = 0;
    }
    return false;
  }

  // What TrainResult::note says of the device and the blocks.
  std::string Note(const DeviceInfo& info, int threads) const {
    std::string note = absl::StrFormat("tpa-scd ran on %s: %d blocks of %d threads in flight",
                                       DescribeDevice(info), grid_, threads);
    if (halvings_ > 0) {
      absl::StrAppendFormat(&note, " (from %d: halved %d times where the objective went back, "
                            "doubled %d times)", max_, halvings_, doublings_);
    }
    return note;
  }

 private:
  static constexpr int kLevels = 32;
  int grid_, max_, level_ = 0, streak_ = 0, halvings_ = 0, doublings_ = 0;
  int fails_[kLevels] = {};
};

// Fills r from the final exact certificate `c` and the loop; a gap or
// target stop that `c` does not bear out is reported as max epochs.
void Finish(const Loop& loop, StopReason why, const Certificate& c, TrainResult& r) {
  if (why == StopReason::kConverged || why == StopReason::kTargetReached) {
    StopReason final_why;
    if (!loop.Meets(c.primal, c.gap, 1.0, &final_why)) why = StopReason::kMaxEpochs;
  }
  r.primal = c.primal;
  r.dual = c.dual;
  r.gap = c.gap;
  r.epochs = loop.epoch;
  r.rounds = loop.epoch;
  r.seconds = loop.seconds();
  r.reason = why;
}

void Report(const SolverOptions& options, TrainResult& r, Progress p) {
  if (options.on_epoch) options.on_epoch(p);
  r.history.push_back(std::move(p));
}

// The coordinates' vectors on the device, the rows of a dual problem (CSR)
// or the columns of a primal one (CSC): all resident, or streamed in
// contiguous chunks through two buffers, the next chunk's copy (its own
// stream, from page-locked host memory) overlapping this chunk's compute.
// A streamed epoch visits first the two chunks its buffers still hold (in a
// random order), then the others in a random order, and each chunk's
// coordinates in a random order.
template <class Matrix>
class OuterData {
 public:
  OuterData() = default;
  OuterData(const OuterData&) = delete;
  OuterData& operator=(const OuterData&) = delete;
  ~OuterData() {
    // On an error return work may still run on the streams, reading the
    // registered host memory: it must end before that memory is released.
    if (copy_ != nullptr) (void)cudaStreamSynchronize(copy_);
    if (copy_ != nullptr) (void)cudaStreamSynchronize(compute_);
    for (const void* p : registered_) (void)cudaHostUnregister(const_cast<void*>(p));
    for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
    for (cudaStream_t st : streams_) (void)cudaStreamDestroy(st);
  }

  struct Chunk {
    int64_t row0 = 0, rows = 0;
  };

  // The chunks of a matrix with outer offsets `off` for two buffers of
  // `buffer_bytes` (<= 0: one chunk, resident), and the bytes of the
  // largest chunk's slot (its offsets 8, its nonzeros 8 bytes apiece).
  // `what` names a coordinate's vector in errors ("row", "column").
  static absl::Status Chunking(const std::vector<int64_t>& off, int64_t buffer_bytes,
                               const char* what, std::vector<Chunk>* chunks, int64_t* slot) {
    const int64_t n = static_cast<int64_t>(off.size()) - 1;
    chunks->clear();
    if (buffer_bytes <= 0) {
      chunks->push_back({0, n});
    } else {
      int64_t row0 = 0;
      while (row0 < n) {
        int64_t end = row0;
        while (end < n && (end + 2 - row0) * 8 + (off[end + 1] - off[row0]) * 8 <= buffer_bytes) ++end;
        if (end == row0) {
          return absl::ResourceExhaustedError(absl::StrFormat(
              "tpa-scd: %s %d has %d nonzeros, more than a streaming buffer of %d bytes holds",
              what, row0, off[row0 + 1] - off[row0], buffer_bytes));
        }
        chunks->push_back({row0, end - row0});
        row0 = end;
      }
    }
    *slot = 0;
    for (const Chunk& c : *chunks) {
      *slot = std::max(*slot, (c.rows + 1) * 8 + (off[c.row0 + c.rows] - off[c.row0]) * 8);
    }
    return absl::OkStatus();
  }

  // `buffer_bytes` <= 0: resident; else two buffers of at most that many
  // bytes each (Chunking). The buffers come from at.arena where given; the
  // kernels run on at.stream (resident, or the caller's stream while
  // streaming) or on a compute stream of its own (streaming without a
  // caller's stream), the copies of a streamed epoch on a stream of its own.
  absl::Status Init(const Matrix& x, int64_t buffer_bytes, const char* what, Place at) {
    x_ = &x;
    stream_ = at.stream;
    const std::vector<int64_t>& off = x.offsets();
    // Each slot is one allocation that a chunk's offsets (rows + 1, 8 bytes
    // each) and then its indices and values (4 bytes each) are laid out in:
    // the chunking keeps every chunk within it.
    int64_t slot = 0;
    if (auto st = Chunking(off, buffer_bytes, what, &chunks_, &slot); !st.ok()) return st;
    for (const Chunk& c : chunks_) max_rows_ = std::max(max_rows_, c.rows);
    const int buffers = chunks_.size() > 1 ? 2 : 1;
    for (int b = 0; b < buffers; ++b) {
      if (auto st = buf_[b].Allocate(static_cast<std::size_t>(slot), at.arena); !st.ok()) return st;
    }
    if (chunks_.size() == 1) {
      if (auto st = Copy(0, 0, stream_); !st.ok()) return st;
      copied_bytes_ += SlotBytes(chunks_[0]);
      DML_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
      return absl::OkStatus();
    }
    // Page-locked host memory makes the copies asynchronous. A copy range
    // must be wholly registered or not at all, so either all three arrays
    // are registered, exactly, or none is (then the driver stages the
    // copies and they do not overlap the compute).
    for (const void* p : {static_cast<const void*>(off.data()),
                          static_cast<const void*>(x.indices().data()),
                          static_cast<const void*>(x.values().data())}) {
      const std::size_t bytes = p == off.data() ? off.size() * 8 : x.indices().size() * 4;
      if (p == nullptr || bytes == 0) continue;
      if (cudaHostRegister(const_cast<void*>(p), bytes, cudaHostRegisterDefault) == cudaSuccess) {
        registered_.push_back(p);
      } else {
        (void)cudaGetLastError();
        for (const void* q : registered_) (void)cudaHostUnregister(const_cast<void*>(q));
        registered_.clear();
        break;
      }
    }
    // With the caller's stream the copy stream does not synchronize with
    // the legacy default stream either: it is ordered by events alone.
    for (int k = 0; k < (stream_ != nullptr ? 1 : 2); ++k) {
      cudaStream_t st;
      DML_CUDA_RETURN_IF_ERROR(stream_ != nullptr
                                   ? cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking)
                                   : cudaStreamCreate(&st));
      streams_.push_back(st);
    }
    copy_ = streams_[0];
    compute_ = stream_ != nullptr ? stream_ : streams_[1];
    for (int k = 0; k < 5; ++k) {  // copied[2], computed[2], start
      cudaEvent_t e;
      DML_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      events_.push_back(e);
    }
    return absl::OkStatus();
  }

  bool streamed() const { return copy_ != nullptr; }
  // Whether the streamed copies come from page-locked memory (else the
  // driver stages them and they do not overlap the compute).
  bool page_locked() const { return registered_.size() == 3; }
  int64_t chunk_count() const { return static_cast<int64_t>(chunks_.size()); }
  int64_t max_rows() const { return max_rows_; }

  // Calls launch(args, row0, rows, stream) for every chunk, args being
  // `whole` (the per-coordinate arrays of all of them) narrowed to the
  // chunk; waits for the last launch. `rng`: chunk order (null: the held
  // chunks, then the others in order).
  // A streamed pass begins with the chunks its slots still hold from the
  // last pass (in random order where `rng` is given) and copies only the
  // others: without that, each pass would wait for its first copy with
  // nothing to overlap it (the pipeline filled and drained every epoch),
  // and two chunks per pass would cross the bus again for nothing.
  template <class Args, class Launch>
  absl::Status ForEach(const Args& whole, std::mt19937_64* rng, Launch launch) {
    if (!streamed()) {
      Args a = whole;
      SetPointers(a, 0, chunks_[0]);
      a.base = 0;
      launch(a, int64_t{0}, chunks_[0].rows, stream_);
      DML_CUDA_RETURN_IF_ERROR(cudaGetLastError());
      DML_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
      return absl::OkStatus();
    }
    // The held chunks first: the slot used last, then the other one.
    std::vector<int64_t> order;
    order.reserve(chunks_.size());
    for (int b : {last_slot_, 1 - last_slot_}) {
      if (held_[b] >= 0) order.push_back(held_[b]);
    }
    const std::size_t kept = order.size();
    if (rng != nullptr && kept == 2 && ((*rng)() & 1) != 0) std::swap(order[0], order[1]);
    for (int64_t c = 0; c < static_cast<int64_t>(chunks_.size()); ++c) {
      if (c != held_[0] && c != held_[1]) order.push_back(c);
    }
    if (rng != nullptr) std::shuffle(order.begin() + static_cast<std::ptrdiff_t>(kept), order.end(), *rng);
    // Turn t computes from slot first ^ (t & 1): a held chunk in its own
    // slot, and each later chunk in the slot freed by the turn two before.
    const int first = kept > 0 && held_[1 - last_slot_] == order[0] ? 1 - last_slot_ : last_slot_;
    cudaStream_t copy = copy_, compute = compute_;
    // The copies write the slots only after what the compute stream holds
    // before this pass (the caller's work on its scratch, in its order).
    DML_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[4], compute));
    DML_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copy, events_[4], 0));
    for (std::size_t t = 0; t < order.size(); ++t) {
      const int b = first ^ static_cast<int>(t & 1);
      const Chunk& c = chunks_[order[t]];
      if (t >= kept) {
        // The slot is free once the chunk computed from it two turns ago is
        // done (or, in the first two turns, once the last pass's is: the
        // stream order above).
        if (t >= 2) DML_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copy, events_[2 + b], 0));
        held_[b] = -1;  // until the compute waits for the copy: an error leaves the slot unknown
        if (auto st = Copy(b, order[t], copy); !st.ok()) return st;
        copied_bytes_ += SlotBytes(c);
        DML_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[b], copy));
        DML_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(compute, events_[b], 0));
        held_[b] = order[t];
      }
      Args a = whole;
      SetPointers(a, b, c);
      a.base = x_->offsets()[c.row0];
      Narrow(a, c.row0, c.rows);
      launch(a, c.row0, c.rows, compute);
      DML_CUDA_RETURN_IF_ERROR(cudaGetLastError());
      DML_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[2 + b], compute));
      last_slot_ = b;
    }
    DML_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(compute));
    return absl::OkStatus();
  }

  // Bytes of offsets and nonzeros copied host to device so far.
  int64_t copied_bytes() const { return copied_bytes_; }

 private:
  int64_t Nnz(const Chunk& c) const {
    return x_->offsets()[c.row0 + c.rows] - x_->offsets()[c.row0];
  }
  int64_t SlotBytes(const Chunk& c) const { return (c.rows + 1) * 8 + Nnz(c) * 8; }
  // Where chunk c's arrays lie in slot b.
  int64_t* OffIn(int b) const { return reinterpret_cast<int64_t*>(buf_[b].get()); }
  uint32_t* IdxIn(int b, const Chunk& c) const {
    return reinterpret_cast<uint32_t*>(buf_[b].get() + (c.rows + 1) * 8);
  }
  float* ValIn(int b, const Chunk& c) const {
    return reinterpret_cast<float*>(buf_[b].get() + (c.rows + 1) * 8 + Nnz(c) * 4);
  }
  template <class Args>
  void SetPointers(Args& a, int b, const Chunk& c) const {
    a.off = OffIn(b);
    a.idx = IdxIn(b, c);
    a.val = ValIn(b, c);
  }
  // The per-coordinate arrays of a chunk of `count` coordinates from `first`.
  static void Narrow(DualArgs& a, int64_t first, int64_t count) {
    a.y += first;
    a.q += first;
    a.alpha += first;
    a.n = count;
  }
  static void Narrow(PrimalArgs& a, int64_t first, int64_t count) {
    a.q += first;
    a.w += first;
    if (a.dw != nullptr) a.dw += first;
    a.d = count;
  }

  absl::Status Copy(int b, int64_t chunk, cudaStream_t stream) {
    const Chunk& c = chunks_[chunk];
    const std::vector<int64_t>& off = x_->offsets();
    const int64_t k0 = off[c.row0], k1 = off[c.row0 + c.rows];
    DML_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(OffIn(b), off.data() + c.row0,
                                             static_cast<std::size_t>(c.rows + 1) * 8,
                                             cudaMemcpyHostToDevice, stream));
    if (k1 > k0) {
      DML_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(IdxIn(b, c), x_->indices().data() + k0,
                                               static_cast<std::size_t>(k1 - k0) * 4,
                                               cudaMemcpyHostToDevice, stream));
      DML_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ValIn(b, c), x_->values().data() + k0,
                                               static_cast<std::size_t>(k1 - k0) * 4,
                                               cudaMemcpyHostToDevice, stream));
    }
    return absl::OkStatus();
  }

  const Matrix* x_ = nullptr;
  cudaStream_t stream_ = nullptr;   // the run's stream (the caller's, or the legacy default)
  cudaStream_t copy_ = nullptr;     // streaming: the copies' stream (own)
  cudaStream_t compute_ = nullptr;  // streaming: the kernels' stream
  std::vector<Chunk> chunks_;
  int64_t max_rows_ = 0;
  DeviceBuffer<char> buf_[2];
  std::vector<const void*> registered_;
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> events_;
  int64_t held_[2] = {-1, -1};  // the chunk each slot holds, -1: none
  int last_slot_ = 0;           // the slot the last launch read
  int64_t copied_bytes_ = 0;
};

// The device memory of a TrainTpaScd run, exactly as it allocates it
// (ArenaBytes of every buffer, so a caller's scratch of total() bytes holds
// it): the per-coordinate and per-example state, always resident, and the
// coordinates' vectors in one slot (resident) or two (streamed).
struct Layout {
  int64_t state = 0;
  int64_t vectors = 0;       // the one slot of the resident layout
  int64_t buffer_bytes = 0;  // 0: resident; else the cap of each streaming slot
  int64_t slot = 0;          // ArenaBytes of a slot as allocated
  int slots = 1;
  int64_t total() const { return state + slots * slot; }
};

int64_t AB(int64_t bytes) { return static_cast<int64_t>(ArenaBytes(static_cast<std::size_t>(bytes))); }

// Per-example y, q, alpha, its saved copy, the gaps; the shared w and the
// certificate's; the sums.
int64_t DualState(int64_t n, int64_t d) {
  const int64_t n1 = std::max<int64_t>(n, 1), d1 = std::max<int64_t>(d, 1);
  return AB(4 * n1) + 4 * AB(8 * n1) + 2 * AB(8 * d1) + AB(32);
}

// Per-feature q, w, its saved copy, the gaps; per-example y, v, u; the sums.
int64_t PrimalState(int64_t n, int64_t d) {
  const int64_t n1 = std::max<int64_t>(n, 1), d1 = std::max<int64_t>(d, 1);
  return AB(4 * n1) + 4 * AB(8 * d1) + 2 * AB(8 * n1) + AB(32);
}

// newGLMNET (plain L1-logistic) adds per feature its gradient, Hessian
// diagonal, step bound and w + d; per example D / n and X d; its sums.
int64_t GlmnetState(int64_t n, int64_t d) {
  const int64_t n1 = std::max<int64_t>(n, 1), d1 = std::max<int64_t>(d, 1);
  return 4 * AB(8 * d1) + 2 * AB(8 * n1) + AB(32);
}

// The layout for outer offsets `off` (rows or columns) beside `state`
// bytes within `budget`: resident where all fits, else two streaming slots
// sharing what is left. `state_what` and `what` name them in the error.
absl::StatusOr<Layout> PlanLayout(const std::vector<int64_t>& off, int64_t state, int64_t budget,
                                  const char* state_what, const char* what) {
  Layout l;
  l.state = state;
  l.vectors = AB(static_cast<int64_t>(off.size()) * 8 + (off.back() - off.front()) * 8);
  if (state + l.vectors <= budget) {
    l.slot = l.vectors;
    return l;
  }
  l.buffer_bytes = (budget - state) / 2 / 256 * 256;  // a slot's ArenaBytes stays within it
  // No floor beyond one piece: a budget TpaScdScratchBytes sized for small
  // slots must plan them again (a row too long for a slot is Chunking's error).
  if (l.buffer_bytes < 256) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "tpa-scd: the %s needs %d bytes of device memory and the %ss %d; the budget of %d bytes "
        "holds neither all of them nor the state and two streaming buffers",
        state_what, state, what, l.vectors, budget));
  }
  std::vector<OuterData<CsrMatrix>::Chunk> chunks;
  int64_t slot = 0;
  if (auto s = OuterData<CsrMatrix>::Chunking(off, l.buffer_bytes, what, &chunks, &slot); !s.ok()) {
    return s;
  }
  l.slot = AB(slot);
  l.slots = chunks.size() > 1 ? 2 : 1;
  return l;
}

// The CSC offsets of x's columns (counts only, without building the CSC).
std::vector<int64_t> ColumnOffsets(const CsrMatrix& x) {
  std::vector<int64_t> off(static_cast<std::size_t>(x.cols()) + 1, 0);
  for (uint32_t j : x.indices()) ++off[j + 1];
  for (std::size_t j = 1; j < off.size(); ++j) off[j] += off[j - 1];
  return off;
}

// The layout of TrainTpaScd under gpu's budget for n examples and d
// features whose coordinates' vectors have offsets `off` (rows for a dual
// model, columns for a primal one).
absl::StatusOr<Layout> LayoutFor(const std::vector<int64_t>& off, int64_t n, int64_t d, bool dual,
                                 const TpaScdOptions& gpu, bool glmnet = false) {
  absl::StatusOr<int64_t> budget = Budget(gpu);
  if (!budget.ok()) return budget.status();
  if (dual) return PlanLayout(off, DualState(n, d), *budget, "per-example state", "row");
  return PlanLayout(off, PrimalState(n, d) + (glmnet ? GlmnetState(n, d) : 0), *budget,
                    "per-feature and per-example state", "column");
}

// A TrainTpaScd run's device memory: its layout, and the caller's scratch
// (where given) as the arena its buffers come from.
struct RunMemory {
  Layout layout;
  std::unique_ptr<Arena> arena;
  cudaStream_t stream = nullptr;
  Place at() const { return Place{stream, arena.get()}; }
};

absl::StatusOr<RunMemory> PlanRun(const std::vector<int64_t>& off, int64_t n, int64_t d, bool dual,
                                  const TpaScdOptions& gpu, bool glmnet = false) {
  RunMemory m;
  absl::StatusOr<Layout> layout = LayoutFor(off, n, d, dual, gpu, glmnet);
  if (!layout.ok()) return layout.status();
  m.layout = *layout;
  m.stream = static_cast<cudaStream_t>(gpu.stream);
  if (gpu.scratch == nullptr) return m;
  if (m.layout.total() > gpu.scratch_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tpa-scd: the caller's scratch holds %d bytes; this run needs %d (TpaScdScratchBytes)",
        gpu.scratch_bytes, m.layout.total()));
  }
  m.arena = std::make_unique<Arena>(gpu.scratch, static_cast<std::size_t>(gpu.scratch_bytes));
  return m;
}

template <class Obj>
absl::StatusOr<TrainResult> RunDual(const Dataset& data, const ModelSpec& model,
                                    const SolverOptions& options, const TpaScdOptions& gpu,
                                    const DeviceInfo& info) {
  const CsrMatrix& x = data.x;
  const int64_t n = x.rows(), d = x.cols(), nnz = static_cast<int64_t>(x.values().size());
  const double lambda_n = model.lambda * static_cast<double>(n);
  const double inv_n = 1.0 / static_cast<double>(n);
  std::vector<double> alpha(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) alpha[i] = Obj::Initial(data.y[i], lambda_n);

  // Per-example state stays resident; the rows too where they fit, else
  // they are streamed through two buffers that share what is left (Layout).
  // Beside the shared vector, a second d-vector holds w rebuilt from alpha
  // alone for the certificates.
  absl::StatusOr<RunMemory> memory = PlanRun(x.offsets(), n, d, /*dual=*/true, gpu);
  if (!memory.ok()) return memory.status();
  const Place at = memory->at();
  const cudaStream_t stream = at.stream;
  const int64_t buffer_bytes = memory->layout.buffer_bytes;

  std::mt19937_64 rng(options.seed);
  OuterData<CsrMatrix> rows;
  if (auto s = rows.Init(x, buffer_bytes, "row", at); !s.ok()) return s;
  DeviceBuffer<float> d_y;
  DeviceBuffer<double> d_q, d_alpha, d_saved, d_w, d_wx, d_cg, d_sums;
  if (auto s = Upload(d_y, data.y.data(), data.y.size(), at); !s.ok()) return s;
  if (auto s = d_q.Allocate(static_cast<std::size_t>(std::max<int64_t>(n, 1)), at.arena); !s.ok()) return s;
  if (auto s = Upload(d_alpha, alpha.data(), alpha.size(), at); !s.ok()) return s;
  if (auto s = Upload(d_saved, alpha.data(), alpha.size(), at); !s.ok()) return s;
  if (auto s = d_w.Allocate(static_cast<std::size_t>(std::max<int64_t>(d, 1)), at.arena); !s.ok()) return s;
  if (auto s = d_wx.Allocate(static_cast<std::size_t>(std::max<int64_t>(d, 1)), at.arena); !s.ok()) return s;
  if (auto s = d_cg.Allocate(static_cast<std::size_t>(n), at.arena); !s.ok()) return s;
  if (auto s = d_sums.Allocate(4, at.arena); !s.ok()) return s;
  const DualArgs args{nullptr, nullptr, nullptr, d_y.get(), d_q.get(),
                      n,       1.0 / lambda_n, d_alpha.get(), d_w.get()};

  const int threads = ThreadsFor(nnz, n);
  absl::StatusOr<int> grid_or =
      GridFor(DualEpochKernelFor<Obj>(threads), threads, rows.max_rows(), gpu, info);
  if (!grid_or.ok()) return grid_or.status();
  Blocks blocks(*grid_or);
  const int eval_grid = std::max(1, info.multiprocessors) * 8;
  auto epoch = [&](const DualArgs& a, int64_t, int64_t count, cudaStream_t st) {
    LaunchDualEpoch<Obj>(blocks.grid(), threads, st, a,
                         MakePermutation(static_cast<uint64_t>(count), rng),
                         static_cast<uint64_t>(count));
  };
  auto gap = [&](const DualArgs& a, int64_t row0, int64_t, cudaStream_t st) {
    DualGapKernel<Obj><<<eval_grid, threads, 0, st>>>(a, inv_n, d_sums.get(), d_cg.get() + row0);
  };
  auto rebuild = [&](const DualArgs& a, int64_t, int64_t, cudaStream_t st) {
    DualRebuildKernel<<<eval_grid, threads, 0, st>>>(a);
  };
  // q and the starting w from the rows on the device (a host pass over a
  // large problem's nonzeros costs more than its epochs).
  if (auto s = rows.ForEach(args, nullptr,
                            [&](const DualArgs& a, int64_t row0, int64_t, cudaStream_t st) {
                              RowSquaredNormKernel<<<eval_grid, threads, 0, st>>>(
                                  a, 1.0 / lambda_n, d_q.get() + row0);
                            });
      !s.ok()) {
    return s;
  }
  DML_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d_w.get(), 0, static_cast<std::size_t>(d) * sizeof(double), stream));
  if (auto s = rows.ForEach(args, nullptr, rebuild); !s.ok()) return s;
  // The certificate of alpha alone, EvaluateDual's computation on the
  // device: w rebuilt as A^T alpha / (lambda n) into its own vector (not the
  // shared vector the steps wrote, which carries their rounding), then the
  // loss and the per-coordinate gaps against it, all in double.
  auto certify = [&]() -> absl::StatusOr<Certificate> {
    DualArgs exact = args;
    exact.w = d_wx.get();
    DML_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d_wx.get(), 0, static_cast<std::size_t>(d) * sizeof(double), stream));
    if (auto s = rows.ForEach(exact, nullptr, rebuild); !s.ok()) return s;
    DML_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d_sums.get(), 0, 4 * sizeof(double), stream));
    if (auto s = rows.ForEach(exact, nullptr, gap); !s.ok()) return s;
    SquaredNormKernel<<<eval_grid, 256, 0, stream>>>(d_wx.get(), d, d_sums.get() + 3);
    DML_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    double sums[4];
    DML_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(sums, d_sums.get(), sizeof sums, cudaMemcpyDeviceToHost, stream));
    DML_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    Certificate c;
    c.primal = sums[0] * inv_n + 0.5 * model.lambda * sums[3];
    c.gap = sums[2] * inv_n;
    c.dual = c.primal - c.gap;
    return c;
  };

  // The evaluation's sums against the shared w: losses, conjugates, gaps, ||w||^2.
  double sums[4];
  auto measure = [&]() -> absl::Status {
    DML_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d_sums.get(), 0, 4 * sizeof(double), stream));
    if (auto s = rows.ForEach(args, nullptr, gap); !s.ok()) return s;
    SquaredNormKernel<<<eval_grid, 256, 0, stream>>>(d_w.get(), d, d_sums.get() + 3);
    DML_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    DML_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(sums, d_sums.get(), sizeof sums, cudaMemcpyDeviceToHost, stream));
    DML_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    return absl::OkStatus();
  };

  TrainResult r;
  r.threads = 1;
  Loop loop{options};
  // The first epoch is judged against the starting point's dual: against
  // -inf, one whose stale steps overshot far would be kept and saved.
  if (auto s = measure(); !s.ok()) return s;
  double last_dual = sums[1] * inv_n - 0.5 * model.lambda * sums[3];
  double slack = 1.0;  // tightened when the exact certificate disagrees
  std::optional<Certificate> final_certificate;
  StopReason why = StopReason::kMaxEpochs;
  while (!loop.Stop(&why)) {
    if (auto s = rows.ForEach(args, &rng, epoch); !s.ok()) return s;
    ++loop.epoch;
    if (!loop.EvaluateNow()) continue;

    if (auto s = measure(); !s.ok()) return s;
    const double half_norm = 0.5 * model.lambda * sums[3];
    Progress p;
    p.round = loop.epoch;
    p.epochs = loop.epoch;
    p.seconds = loop.seconds();
    p.primal = sums[0] * inv_n + half_norm;
    p.dual = sums[1] * inv_n - half_norm;
    p.gap = sums[2] * inv_n;
    p.nnz_touched = 2 * nnz;
    p.device_bytes = rows.copied_bytes();
    // The dual of exact coordinate ascent never falls (Blocks): where it
    // fell, back to the last good alpha, w rebuilt from it.
    absl::StatusOr<bool> back =
        blocks.Judge(std::isfinite(p.dual) && std::isfinite(p.gap),
                     p.dual < last_dual - 1e-9 * std::abs(last_dual), "the dual fell", loop.epoch, p);
    if (!back.ok()) return back.status();
    if (*back) {
      DML_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_alpha.get(), d_saved.get(), d_alpha.bytes(), cudaMemcpyDeviceToDevice, stream));
      DML_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d_w.get(), 0, static_cast<std::size_t>(d) * sizeof(double), stream));
      if (auto s = rows.ForEach(args, nullptr, rebuild); !s.ok()) return s;
      Report(options, r, std::move(p));
      continue;
    }
    DML_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_saved.get(), d_alpha.get(), d_alpha.bytes(), cudaMemcpyDeviceToDevice, stream));
    last_dual = p.dual;
    StopReason device_says;
    const bool stop = loop.Meets(p.primal, p.gap, slack, &device_says);
    Report(options, r, std::move(p));
    if (!stop) continue;
    // The exact certificate decides.
    absl::StatusOr<Certificate> c = certify();
    if (!c.ok()) return c.status();
    if (loop.Meets(c->primal, c->gap, 1.0, &why)) {
      final_certificate = *c;
      break;
    }
    slack *= 0.5;
  }

  if (!final_certificate) {
    absl::StatusOr<Certificate> c = certify();
    if (!c.ok()) return c.status();
    final_certificate = *c;
  }
  if (auto s = Download(alpha, d_alpha, alpha.size(), stream); !s.ok()) return s;
  for (int64_t i = 0; i < n; ++i) {
    if (!Obj::InDomain(data.y[i], alpha[i])) {  // the steps keep alpha in it: a defect
      return absl::InternalError(absl::StrFormat(
          "tpa-scd: alpha[%d] = %g left the dual domain of %s (label %g)", i, alpha[i],
          AsAbsl(ModelName(model.kind)), data.y[i]));
    }
  }
  if (auto s = Download(r.w, d_wx, static_cast<std::size_t>(d), stream); !s.ok()) return s;
  r.alpha = std::move(alpha);
  Finish(loop, why, *final_certificate, r);
  r.note = blocks.Note(info, threads);
  r.device_bytes = rows.copied_bytes();
  if (rows.streamed()) {
    absl::StrAppendFormat(&r.note, "; rows streamed in %d chunks of at most %d bytes%s, %d bytes copied",
                          rows.chunk_count(), buffer_bytes,
                          rows.page_locked() ? "" : " (host rows not page-locked: copies staged)",
                          rows.copied_bytes());
  }
  return r;
}

// At most this many TPA-SCD cycles per newGLMNET outer iteration (the CPU's
// kGlmnetMaxInnerCycles is for exact sequential cycles).
constexpr int kDeviceInnerCycles = 100;

// kModel: 0 lasso / elastic net (the exact squared step), 1 L1-logistic (newGLMNET).
template <class Obj, int kModel>
absl::StatusOr<TrainResult> RunPrimal(const Dataset& data, const ModelSpec& model,
                                      const SolverOptions& options, const TpaScdOptions& gpu,
                                      const DeviceInfo& info) {
  const CscMatrix a = data.x.Convert();
  const int64_t n = data.x.rows(), d = data.x.cols(), nnz = static_cast<int64_t>(a.values().size());
  const double inv_n = 1.0 / static_cast<double>(n);
  std::vector<double> q = a.OuterSquaredNorms();
  for (double& qj : q) qj *= inv_n;
  const Obj obj = Obj::Make(model, data.y);
  std::vector<double> w(static_cast<std::size_t>(d), 0.0), v(static_cast<std::size_t>(n), 0.0);

  // Per-feature (q, w, its saved copy, the gaps) and per-example (y, v, u)
  // state stays resident; the columns too where they fit, else they are
  // streamed through two buffers that share what is left (Layout).
  absl::StatusOr<RunMemory> memory = PlanRun(a.offsets(), n, d, /*dual=*/false, gpu, /*glmnet=*/kModel == 1);
  if (!memory.ok()) return memory.status();
  const Place at = memory->at();
  const cudaStream_t stream = at.stream;
  const int64_t buffer_bytes = memory->layout.buffer_bytes;
  OuterData<CscMatrix> cols;
  if (auto s = cols.Init(a, buffer_bytes, "column", at); !s.ok()) return s;

  DeviceBuffer<float> d_y;
  DeviceBuffer<double> d_q, d_w, d_saved, d_v, d_u, d_cg, d_sums;
  if (auto s = Upload(d_y, data.y.data(), data.y.size(), at); !s.ok()) return s;
  if (auto s = Upload(d_q, q.data(), q.size(), at); !s.ok()) return s;
  if (auto s = Upload(d_w, w.data(), w.size(), at); !s.ok()) return s;
  if (auto s = Upload(d_saved, w.data(), w.size(), at); !s.ok()) return s;
  if (auto s = Upload(d_v, v.data(), v.size(), at); !s.ok()) return s;
  if (auto s = d_u.Allocate(static_cast<std::size_t>(n), at.arena); !s.ok()) return s;
  if (auto s = d_cg.Allocate(static_cast<std::size_t>(std::max<int64_t>(d, 1)), at.arena); !s.ok()) return s;
  if (auto s = d_sums.Allocate(4, at.arena); !s.ok()) return s;
  const PrimalArgs args{nullptr, nullptr, nullptr, d_y.get(), d_q.get(),
                        d, n, inv_n, d_w.get(), d_v.get()};
  // newGLMNET's state (L1-logistic); its step bounds as glmnet_l1.cpp's.
  DeviceBuffer<double> d_grad, d_hdiag, d_smax, d_wpd, d_dn, d_t, d_gsums;
  GlmnetArgs glm{};
  if constexpr (kModel == 1) {
    std::vector<double> smax(static_cast<std::size_t>(d), kGlmnetMaxStep);
    for (int64_t j = 0; j < d; ++j) {
      double scale = 0.0;
      for (int64_t k = a.offsets()[j]; k < a.offsets()[j + 1]; ++k) {
        scale = std::max(scale, std::abs(static_cast<double>(a.values()[k])));
      }
      if (scale > 0.0 && scale < 1.0) smax[j] = kGlmnetMaxStep / scale;
    }
    const std::size_t d1 = static_cast<std::size_t>(std::max<int64_t>(d, 1));
    const std::size_t n1 = static_cast<std::size_t>(std::max<int64_t>(n, 1));
    for (DeviceBuffer<double>* b : {&d_grad, &d_hdiag, &d_wpd}) {
      if (auto s = b->Allocate(d1, at.arena); !s.ok()) return s;
    }
    if (auto s = Upload(d_smax, smax.data(), smax.size(), at); !s.ok()) return s;
    for (DeviceBuffer<double>* b : {&d_dn, &d_t}) {
      if (auto s = b->Allocate(n1, at.arena); !s.ok()) return s;
    }
    if (auto s = d_gsums.Allocate(4, at.arena); !s.ok()) return s;
    glm.grad = d_grad.get();
    glm.hdiag = d_hdiag.get();
    glm.smax = d_smax.get();
    glm.wpd = d_wpd.get();
    glm.dn = d_dn.get();
    glm.t = d_t.get();
    glm.sums = d_gsums.get();
    glm.nu = kGlmnetNuPerLambda * model.lambda;
    glm.lambda = model.lambda;
  }

  const int threads = ThreadsFor(nnz, d);
  const absl::StatusOr<int> grid_or = [&] {
    if constexpr (kModel == 0) {
      return GridFor(SquaredEpochKernel<Obj>, threads, cols.max_rows(), gpu, info);
    } else {
      return GridFor(GlmnetInnerKernel, threads, cols.max_rows(), gpu, info);
    }
  }();
  if (!grid_or.ok()) return grid_or.status();
  Blocks blocks(*grid_or);
  const int eval_grid = std::max(1, info.multiprocessors) * 8;

  TrainResult r;
  r.threads = 1;
  Loop loop{options};
  std::mt19937_64 rng(options.seed);
  double slack = 1.0;
  StopReason why = StopReason::kMaxEpochs;
  auto epoch = [&](const PrimalArgs& c, int64_t, int64_t count, cudaStream_t st) {
    const Permutation perm = MakePermutation(static_cast<uint64_t>(count), rng);
    if constexpr (kModel == 0) {
      SquaredEpochKernel<Obj><<<blocks.grid(), threads, 0, st>>>(c, obj, perm, perm.n);
    } else {
      LogisticL1EpochKernel<<<blocks.grid(), threads, 0, st>>>(c, model.lambda, perm, perm.n);
    }
  };
  auto gaps = [&](const PrimalArgs& c, int64_t j0, int64_t, cudaStream_t st) {
    PrimalColumnKernel<Obj><<<eval_grid, threads, 0, st>>>(c, obj, d_u.get(), d_sums.get(),
                                                           d_cg.get() + j0);
  };
  // One newGLMNET outer iteration (L1-logistic): the model at w, its TPA-SCD
  // cycles until their summed violation is below inner_eps times the first
  // iteration's (inner_eps quartered where one cycle was enough), then the
  // Armijo search on w + s d. A search that fails keeps w and halves the
  // blocks of the cycles (stale reads are what spoils a direction).
  double inner_eps = 1.0, gnorm1_init = -1.0;
  const int max_inner_grid = blocks.grid();
  int inner_grid = max_inner_grid, accepted = 0;
  int64_t glmnet_nnz = 0;
  auto glmnet_outer = [&]() -> absl::Status {
    glmnet_nnz = 0;
    const int row_grid = std::max(1, info.multiprocessors) * 8;
    GlmnetRowKernel<<<row_grid, 256, 0, stream>>>(args, d_u.get(), d_dn.get());
    DML_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    DML_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d_t.get(), 0, static_cast<std::size_t>(n) * sizeof(double), stream));
    double gs[4];
    auto read_sums = [&]() -> absl::Status {
      DML_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(gs, d_gsums.get(), sizeof gs, cudaMemcpyDeviceToHost, stream));
      DML_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
      return absl::OkStatus();
    };
    DML_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d_gsums.get(), 0, 4 * sizeof(double), stream));
    if (auto s = cols.ForEach(args, nullptr,
                              [&](const PrimalArgs& c, int64_t j0, int64_t, cudaStream_t st) {
                                GlmnetColumnKernel<<<eval_grid, threads, 0, st>>>(c, glm.Shift(j0), d_u.get());
                              });
        !s.ok()) {
      return s;
    }
    if (auto s = read_sums(); !s.ok()) return s;
    glmnet_nnz += nnz;
    if (gnorm1_init < 0) gnorm1_init = gs[0];
    // A cycle's violation is summed before each of its steps: the first
    // one's is about the violation at d = 0, so the stall test starts at
    // the second.
    double last_viol = std::numeric_limits<double>::infinity();
    for (int cycle = 0; cycle < kDeviceInnerCycles; ++cycle) {
      DML_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d_gsums.get(), 0, 2 * sizeof(double), stream));
      if (auto s = cols.ForEach(args, &rng,
                                [&](const PrimalArgs& c, int64_t j0, int64_t count, cudaStream_t st) {
                                  const Permutation perm = MakePermutation(static_cast<uint64_t>(count), rng);
                                  GlmnetInnerKernel<<<inner_grid, threads, 0, st>>>(c, glm.Shift(j0), perm, perm.n);
                                });
          !s.ok()) {
        return s;
      }
      if (auto s = read_sums(); !s.ok()) return s;
      glmnet_nnz += 2 * nnz;
      if (gs[0] <= inner_eps * gnorm1_init) {
        if (cycle == 0) inner_eps *= 0.25;
        break;
      }
      if (gs[1] == 0.0) break;  // nothing moved: another cycle sees the same
      // Stale reads leave a floor under the violation that more cycles do
      // not cross (news20: every outer iteration ran to the cap): stop once
      // a cycle gains less than a tenth; the line search takes what is there.
      if (gs[0] > 0.9 * last_viol) break;
      last_viol = gs[0];
    }
    // Armijo: P(w + s d) - P(w) <= sigma s (grad^T d + lambda (|w + d|_1 - |w|_1)).
    double delta = 0.0;
    for (int trial = 0; trial < LogisticL1Objective::kMaxLineSearch; ++trial) {
      const double step = std::ldexp(1.0, -trial);
      DML_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d_gsums.get(), 0, 4 * sizeof(double), stream));
      GlmnetTrialKernel<<<row_grid, 256, 0, stream>>>(args, glm, step);
      DML_CUDA_RETURN_IF_ERROR(cudaGetLastError());
      if (auto s = read_sums(); !s.ok()) return s;
      if (trial == 0) {
        delta = gs[3] + model.lambda * gs[2];
        if (delta == 0.0) return absl::OkStatus();  // d = 0: at the model's optimum
        if (!(delta < 0.0)) break;  // not a descent direction: stale cycles spoiled it
      }
      const double change = gs[1] * inv_n + model.lambda * gs[2];
      if (std::isfinite(change) && change <= LogisticL1Objective::kSigma * step * delta) {
        GlmnetApplyKernel<<<row_grid, 256, 0, stream>>>(args, glm, step);
        DML_CUDA_RETURN_IF_ERROR(cudaGetLastError());
        // Halved blocks double again after a run of good searches.
        if (inner_grid < max_inner_grid && ++accepted >= 8) {
          inner_grid = std::min(max_inner_grid, 2 * inner_grid);
          accepted = 0;
        }
        return absl::OkStatus();
      }
    }
    inner_grid = std::max(1, inner_grid / 2);
    accepted = 0;
    return absl::OkStatus();
  };
  // The evaluation's sums against the shared v: losses, regularizer, gaps.
  double sums[4];
  auto measure = [&]() -> absl::Status {
    DML_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d_sums.get(), 0, 4 * sizeof(double), stream));
    PrimalRowKernel<Obj><<<eval_grid, 256, 0, stream>>>(args, d_u.get(), d_sums.get(), 0, n);
    DML_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    if (auto s = cols.ForEach(args, nullptr, gaps); !s.ok()) return s;
    DML_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(sums, d_sums.get(), sizeof sums, cudaMemcpyDeviceToHost, stream));
    DML_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    return absl::OkStatus();
  };
  // The first epoch is judged against the starting point's primal: against
  // +inf, one whose stale steps overshot far (news20's lasso went to 1e45)
  // would be kept and saved, and the run would descend from there.
  if (auto s = measure(); !s.ok()) return s;
  double last_primal = sums[0] * inv_n + sums[1];
  while (!loop.Stop(&why)) {
    if constexpr (kModel == 1) {
      if (auto s = glmnet_outer(); !s.ok()) return s;
    } else {
      if (auto s = cols.ForEach(args, &rng, epoch); !s.ok()) return s;
    }
    ++loop.epoch;
    if (!loop.EvaluateNow()) continue;

    if (auto s = measure(); !s.ok()) return s;
    Progress p;
    p.round = loop.epoch;
    p.epochs = loop.epoch;
    p.seconds = loop.seconds();
    p.primal = sums[0] * inv_n + sums[1];
    p.gap = sums[2];
    p.dual = p.primal - p.gap;
    p.nnz_touched = kModel == 1 ? glmnet_nnz : 2 * nnz;
    p.device_bytes = cols.copied_bytes();
    // Exact coordinate descent never raises the primal (Blocks): where it
    // rose, back to the last good w, v rebuilt as A w.
    absl::StatusOr<bool> back = blocks.Judge(
        std::isfinite(p.primal) && std::isfinite(p.gap),
        p.primal > last_primal + 1e-9 * std::abs(last_primal), "the primal rose", loop.epoch, p);
    if (!back.ok()) return back.status();
    if (*back) {
      DML_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_w.get(), d_saved.get(), d_w.bytes(), cudaMemcpyDeviceToDevice, stream));
      if (auto s = Download(w, d_w, w.size(), stream); !s.ok()) return s;
      v = Predict(data.x, w);
      DML_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_v.get(), v.data(), v.size() * sizeof(double),
                                               cudaMemcpyHostToDevice, stream));
      Report(options, r, std::move(p));
      continue;
    }
    DML_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_saved.get(), d_w.get(), d_w.bytes(), cudaMemcpyDeviceToDevice, stream));
    last_primal = p.primal;
    StopReason device_says;
    const bool stop = loop.Meets(p.primal, p.gap, slack, &device_says);
    Report(options, r, std::move(p));
    if (!stop) continue;
    if (auto s = Download(w, d_w, w.size(), stream); !s.ok()) return s;
    absl::StatusOr<Certificate> c = EvaluatePrimal(data, model, w);
    if (!c.ok()) return c.status();
    if (loop.Meets(c->primal, c->gap, 1.0, &why)) break;
    slack *= 0.5;
  }

  if (auto s = Download(w, d_w, w.size(), stream); !s.ok()) return s;
  absl::StatusOr<Certificate> c = EvaluatePrimal(data, model, w);
  if (!c.ok()) return c.status();
  Finish(loop, why, *c, r);
  r.w = std::move(w);
  r.note = blocks.Note(info, threads);
  if constexpr (kModel == 1) {
    absl::StrAppendFormat(&r.note, "; newGLMNET's cycles on %d blocks (of %d)", inner_grid, max_inner_grid);
  }
  r.device_bytes = cols.copied_bytes();
  if (cols.streamed()) {
    absl::StrAppendFormat(&r.note, "; columns streamed in %d chunks of at most %d bytes%s, %d bytes copied",
                          cols.chunk_count(), buffer_bytes,
                          cols.page_locked() ? "" : " (host columns not page-locked: copies staged)",
                          cols.copied_bytes());
  }
  return r;
}

// ---------------------------------------------------------------------------
// CoCoA+'s local solver on the device (dual models): the block's rows stay
// resident; each Solve runs TPA-SCD passes on the local subproblem (the
// step of cocoa_local_dual.cpp with q' = sigma' q and the local vector
// u = w + sigma' delta_w), then commits gamma * dA.

// DuHL's block reload: row (or column) r of the new block is data copied from the
// block held now (src[r] >= 0: its offset there) or from the rows just
// uploaded (src[r] < 0: offset -src[r] - 1 in the staging arrays).
__global__ void AssembleRowsKernel(const int64_t* off, const int64_t* src, const uint32_t* old_idx,
                                   const float* old_val, const uint32_t* new_idx,
                                   const float* new_val, uint32_t* idx, float* val, int64_t rows) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t begin = off[r], len = off[r + 1] - begin, s = src[r];
    const uint32_t* from_idx = s >= 0 ? old_idx + s : new_idx + (-s - 1);
    const float* from_val = s >= 0 ? old_val + s : new_val + (-s - 1);
    for (int64_t t = threadIdx.x; t < len; t += blockDim.x) {
      idx[begin + t] = from_idx[t];
      val[begin + t] = from_val[t];
    }
  }
}

// A reloaded block on the device: outer slot k of `x` is slot kept[k] of the
// block held now (offsets `held_off`, `held` slots, data in off/idx/val),
// copied on the device, or new (kept[k] < 0) and uploaded. On success
// off/idx/val hold the new block; returns the bytes uploaded (offsets,
// sources and the new slots' nonzeros). `slot` names a slot in errors.
template <class Matrix>
absl::StatusOr<int64_t> AssembleBlock(const Matrix& x, const std::vector<int64_t>& kept,
                                      const std::vector<int64_t>& held_off, int64_t held,
                                      const char* slot, int grid, int threads,
                                      DeviceBuffer<int64_t>& d_off, DeviceBuffer<uint32_t>& d_idx,
                                      DeviceBuffer<float>& d_val) {
  const int64_t m = x.outer_size();
  std::vector<int64_t> src(static_cast<std::size_t>(m));
  std::vector<uint32_t> new_idx;
  std::vector<float> new_val;
  for (int64_t k = 0; k < m; ++k) {
    const SparseView r = x.outer(k);
    if (kept[k] >= 0) {
      if (kept[k] >= held || held_off[kept[k] + 1] - held_off[kept[k]] !=
                                 static_cast<int64_t>(r.size)) {
        return absl::InvalidArgumentError(
            absl::StrCat("reload: ", slot, " ", k, " is said to be kept ", slot, " ", kept[k],
                         ", which this solver does not hold with that length"));
      }
      src[k] = held_off[kept[k]];
    } else {
      src[k] = -static_cast<int64_t>(new_idx.size()) - 1;
      new_idx.insert(new_idx.end(), r.index, r.index + r.size);
      new_val.insert(new_val.end(), r.value, r.value + r.size);
    }
  }
  DeviceBuffer<int64_t> off, d_src;
  DeviceBuffer<uint32_t> staged_idx, idx;
  DeviceBuffer<float> staged_val, val;
  if (auto s = Upload(off, x.offsets().data(), x.offsets().size()); !s.ok()) return s;
  if (auto s = Upload(d_src, src.data(), src.size()); !s.ok()) return s;
  if (auto s = Upload(staged_idx, new_idx.data(), new_idx.size()); !s.ok()) return s;
  if (auto s = Upload(staged_val, new_val.data(), new_val.size()); !s.ok()) return s;
  const std::size_t nnz = x.values().size();
  if (auto s = idx.Allocate(std::max<std::size_t>(nnz, 1)); !s.ok()) return s;
  if (auto s = val.Allocate(std::max<std::size_t>(nnz, 1)); !s.ok()) return s;
  AssembleRowsKernel<<<grid, threads>>>(off.get(), d_src.get(), d_idx.get(), d_val.get(),
                                        staged_idx.get(), staged_val.get(), idx.get(), val.get(),
                                        m);
  DML_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  DML_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  d_off = std::move(off);
  d_idx = std::move(idx);
  d_val = std::move(val);
  return static_cast<int64_t>(x.offsets().size() * 8 + src.size() * 8 + new_idx.size() * 8);
}

// dA_i = local_i - alpha_i; alpha_i += gamma dA_i (kept in the domain, as
// the CPU solver does against rounding).
template <class Obj>
__global__ void CommitKernel(const float* y, const double* local, double* alpha, double* da,
                             int64_t n, double gamma) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double d = local[i] - alpha[i];
    da[i] = d;
    if (d == 0.0) continue;
    double next = gamma == 1.0 ? local[i] : alpha[i] + gamma * d;
    if (!Obj::InDomain(y[i], next)) next = gamma >= 0.5 ? local[i] : alpha[i];
    alpha[i] = next;
  }
}

// da_i = local_i - alpha_i; sums[0] += sum_i NegConj(y_i, local_i) -
// NegConj(y_i, alpha_i), sums[1] += the terms' magnitudes (for the rounding
// of that difference).
template <class Obj>
__global__ void LocalChangeKernel(const float* y, const double* local, const double* alpha,
                                  double* da, int64_t n, double* sums) {
  __shared__ double sh[33];
  double acc = 0.0, mag = 0.0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double d = local[i] - alpha[i];
    da[i] = d;
    if (d != 0.0) {
      const double after = Obj::NegConj(y[i], local[i]), before = Obj::NegConj(y[i], alpha[i]);
      acc += after - before;
      mag += fabs(after) + fabs(before);
    }
  }
  acc = BlockSum(acc, sh);
  mag = BlockSum(mag, sh);
  if (threadIdx.x == 0) {
    atomicAdd(sums, acc);
    atomicAdd(sums + 1, mag);
  }
}

// Solves in a row without an overshoot after which the local solver's
// blocks double again.
constexpr int kLocalRegrow = 8;

// The blocks in flight of a device local solver (dual or primal): halved
// where a solve's passes overshot (run again), doubled again after
// kLocalRegrow solves in a row without one, never above the most the
// device holds for the block.
class LocalGrid {
 public:
  int grid() const { return grid_; }
  // A new block's most (Init: the start; Reload: capped to it).
  void SetMax(int max, bool start) {
    max_ = max;
    grid_ = start ? max : std::min(grid_, max);
  }
  // Whether the passes must run again with fewer blocks (false at one
  // block: that is sequential, what it gives is the answer).
  bool Overshot() {
    if (grid_ == 1) return false;
    grid_ = std::max(1, grid_ / 2);
    streak_ = 0;
    return true;
  }
  void Solved() {
    if (++streak_ >= kLocalRegrow && grid_ < max_) {
      grid_ = std::min(max_, 2 * grid_);
      streak_ = 0;
    }
  }

 private:
  int grid_ = 1, max_ = 1, streak_ = 0;
};

template <class Obj>
class DeviceDualLocalSolver final : public LocalSolver {
 public:
  static absl::StatusOr<std::unique_ptr<LocalSolver>> Make(LocalBlock block, const ModelSpec& model,
                                                           uint64_t seed, const TpaScdOptions& gpu,
                                                           const DeviceInfo& info) {
    auto s = std::unique_ptr<DeviceDualLocalSolver>(new DeviceDualLocalSolver(info, seed));
    if (auto st = s->Init(std::move(block), model, gpu); !st.ok()) return st;
    return std::unique_ptr<LocalSolver>(std::move(s));
  }

  absl::StatusOr<LocalUpdate> Solve(const std::vector<double>& shared, double sigma_prime,
                                    double gamma, int64_t steps,
                                    const std::atomic<bool>* interrupt) override {
    if (auto st = CheckDualSolve(shared, d_, sigma_prime, gamma, steps); !st.ok()) return st;
    DML_CUDA_RETURN_IF_ERROR(cudaSetDevice(info_.index));
    const int eval_grid = std::max(1, info_.multiprocessors) * 8;
    LocalUpdate up;
    for (;;) {
      DML_CUDA_RETURN_IF_ERROR(cudaMemcpy(d_u_.get(), shared.data(), shared.size() * sizeof(double),
                                          cudaMemcpyHostToDevice));
      DML_CUDA_RETURN_IF_ERROR(cudaMemcpy(d_local_.get(), d_alpha_.get(), d_alpha_.bytes(),
                                          cudaMemcpyDeviceToDevice));
      DualArgs a = Args(d_local_.get(), d_u_.get(), sigma_prime * inv_ln_);
      a.q_scale = sigma_prime;
      up.steps = 0;
      int64_t left = steps;
      while (left > 0) {
        if (interrupt != nullptr && interrupt->load(std::memory_order_relaxed)) break;
        const int64_t count = std::min(left, nk_);
        LaunchDualEpoch<Obj>(grid_.grid(), threads_, nullptr, a,
                             MakePermutation(static_cast<uint64_t>(nk_), rng_),
                             static_cast<uint64_t>(count));
        DML_CUDA_RETURN_IF_ERROR(cudaGetLastError());
        DML_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
        left -= count;
        up.steps += count;
      }
      DML_CUDA_RETURN_IF_ERROR(cudaMemset(d_sums_.get(), 0, 2 * sizeof(double)));
      LocalChangeKernel<Obj><<<eval_grid, 256>>>(d_y_.get(), d_local_.get(), d_alpha_.get(),
                                                 d_da_.get(), nk_, d_sums_.get());
      DML_CUDA_RETURN_IF_ERROR(cudaGetLastError());
      // delta_w exactly from dA (A_k^T dA / (lambda n)), not scaled by gamma.
      DML_CUDA_RETURN_IF_ERROR(cudaMemset(d_u_.get(), 0, static_cast<std::size_t>(d_) * sizeof(double)));
      DualRebuildKernel<<<eval_grid, threads_>>>(Args(d_da_.get(), d_u_.get(), inv_ln_));
      DML_CUDA_RETURN_IF_ERROR(cudaGetLastError());
      if (auto st = Download(up.delta_shared, d_u_, static_cast<std::size_t>(d_)); !st.ok()) return st;
      double change[2] = {0.0, 0.0};  // the NegConj change and its terms' magnitudes
      DML_CUDA_RETURN_IF_ERROR(cudaMemcpy(change, d_sums_.get(), sizeof change,
                                          cudaMemcpyDeviceToHost));
      const double negconj_change = change[0];
      // The local subproblem's gain (cocoa_local_dual.cpp's G_k(dA), 0 at
      // dA = 0) never falls below 0 under exact steps; where it did, stale
      // steps overshot: the passes again from alpha with half the blocks
      // (one block is sequential SCD).
      double wd = 0.0, wd_mag = 0.0, dd = 0.0;
      for (int64_t j = 0; j < d_; ++j) {
        wd += shared[j] * up.delta_shared[j];
        wd_mag += std::abs(shared[j] * up.delta_shared[j]);
        dd += up.delta_shared[j] * up.delta_shared[j];
      }
      const double inv_n = lambda_ * inv_ln_;
      const double gain = negconj_change * inv_n - lambda_ * wd - 0.5 * sigma_prime * lambda_ * dd;
      // What rounding alone can make of a zero gain: the NegConj difference
      // cancels terms of size change[1], w.dw terms of size wd_mag. Near the
      // optimum the true gain is second order and may be smaller than that.
      constexpr double kEps = 2.220446049250313e-16;
      const double tol = 16.0 * kEps *
                         (change[1] * inv_n + lambda_ * wd_mag + 0.5 * sigma_prime * lambda_ * dd);
      if ((std::isfinite(gain) && gain >= -tol) || !grid_.Overshot()) break;
    }
    up.nnz_touched = static_cast<int64_t>(static_cast<double>(up.steps) * mean_row_ * 2.0);
    CommitKernel<Obj><<<eval_grid, 256>>>(d_y_.get(), d_local_.get(), d_alpha_.get(), d_da_.get(),
                                          nk_, gamma);
    DML_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    DML_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
    grid_.Solved();
    return up;
  }

  absl::StatusOr<BlockCertificate> Certify(const std::vector<double>& shared) const override {
    if (static_cast<int64_t>(shared.size()) != d_) {
      return absl::InvalidArgumentError(absl::StrCat("certify: shared w has ", shared.size(),
                                                     " entries but the block has ", d_,
                                                     " features"));
    }
    DML_CUDA_RETURN_IF_ERROR(cudaSetDevice(info_.index));
    DML_CUDA_RETURN_IF_ERROR(cudaMemcpy(d_u_.get(), shared.data(), shared.size() * sizeof(double),
                                        cudaMemcpyHostToDevice));
    DML_CUDA_RETURN_IF_ERROR(cudaMemset(d_sums_.get(), 0, 4 * sizeof(double)));
    const int eval_grid = std::max(1, info_.multiprocessors) * 8;
    DualGapKernel<Obj><<<eval_grid, threads_>>>(Args(d_alpha_.get(), d_u_.get(), inv_ln_), 1.0,
                                                d_sums_.get(), d_da_.get());
    DML_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    double sums[4];
    DML_CUDA_RETURN_IF_ERROR(cudaMemcpy(sums, d_sums_.get(), sizeof sums, cudaMemcpyDeviceToHost));
    BlockCertificate c;
    c.loss_sum = sums[0];
    c.gap_sum = sums[2];
    return c;
  }

  absl::StatusOr<int64_t> Reload(LocalBlock block, const std::vector<int64_t>& kept) override {
    const CsrMatrix& x = block.rows;
    const int64_t m = x.rows();
    if (x.cols() != d_ || static_cast<int64_t>(kept.size()) != m ||
        static_cast<int64_t>(block.y.size()) != m || m == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "reload: a block of ", m, " rows, ", x.cols(), " columns, ", block.y.size(),
          " labels and ", kept.size(), " kept entries; this solver has ", d_, " columns"));
    }
    DML_CUDA_RETURN_IF_ERROR(cudaSetDevice(info_.index));
    absl::StatusOr<int64_t> assembled =
        AssembleBlock(x, kept, host_off_, nk_, "row", std::max(1, info_.multiprocessors) * 8,
                      threads_, d_off_, d_idx_, d_val_);
    if (!assembled.ok()) return assembled.status();
    if (auto s = Upload(d_y_, block.y.data(), block.y.size()); !s.ok()) return s;
    const int64_t moved = *assembled + static_cast<int64_t>(block.y.size() * 4);
    const std::size_t nnz = x.values().size();
    if (m != nk_) {
      for (DeviceBuffer<double>* b : {&d_q_, &d_alpha_, &d_local_, &d_da_}) {
        if (auto s = b->Allocate(static_cast<std::size_t>(m)); !s.ok()) return s;
      }
    }
    nk_ = m;
    mean_row_ = static_cast<double>(nnz) / static_cast<double>(m);
    RowSquaredNormKernel<<<std::max(1, info_.multiprocessors) * 8, threads_>>>(
        Args(d_alpha_.get(), d_u_.get(), inv_ln_), inv_ln_, d_q_.get());
    DML_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    DML_CUDA_RETURN_IF_ERROR(cudaMemset(d_alpha_.get(), 0, static_cast<std::size_t>(m) * 8));
    host_off_ = x.offsets();
    y_ = std::move(block.y);
    host_alpha_.assign(static_cast<std::size_t>(m), 0.0);
    absl::StatusOr<int> grid = GridFor(DualEpochKernelFor<Obj>(threads_), threads_, nk_, gpu_, info_);
    if (!grid.ok()) return grid.status();
    grid_.SetMax(*grid, /*start=*/false);
    return moved;
  }

  const std::vector<double>& coordinates() const override {
    // The interface returns a reference: a host copy refreshed on each call.
    if (cudaSetDevice(info_.index) != cudaSuccess ||
        !Download(host_alpha_, d_alpha_, static_cast<std::size_t>(nk_)).ok()) {
      (void)cudaGetLastError();
    }
    return host_alpha_;
  }

  absl::Status set_coordinates(std::vector<double> c) override {
    if (static_cast<int64_t>(c.size()) != nk_) {
      return absl::InvalidArgumentError(absl::StrCat("block has ", nk_, " examples but ", c.size(),
                                                     " coordinates were given"));
    }
    for (std::size_t i = 0; i < c.size(); ++i) {
      if (!Obj::InDomain(y_[i], c[i])) {
        return absl::InvalidArgumentError(absl::StrCat(
            "coordinate ", i, " = ", c[i], " is outside the dual domain (label ", y_[i], ")"));
      }
    }
    DML_CUDA_RETURN_IF_ERROR(cudaSetDevice(info_.index));
    DML_CUDA_RETURN_IF_ERROR(cudaMemcpy(d_alpha_.get(), c.data(), c.size() * sizeof(double),
                                        cudaMemcpyHostToDevice));
    host_alpha_ = std::move(c);
    return absl::OkStatus();
  }

 private:
  DeviceDualLocalSolver(const DeviceInfo& info, uint64_t seed) : info_(info), rng_(seed) {}

  absl::Status Init(LocalBlock block, const ModelSpec& model, const TpaScdOptions& gpu) {
    const CsrMatrix& x = block.rows;
    nk_ = x.rows();
    d_ = x.cols();
    const int64_t nnz = static_cast<int64_t>(x.values().size());
    inv_ln_ = 1.0 / (model.lambda * static_cast<double>(block.n_global));
    lambda_ = model.lambda;
    mean_row_ = nk_ > 0 ? static_cast<double>(nnz) / static_cast<double>(nk_) : 0.0;
    std::vector<double> q = x.OuterSquaredNorms();
    for (double& qi : q) qi *= inv_ln_;
    const int64_t need = (nk_ + 1) * 8 + nnz * 8 + nk_ * (4 + 8 + 8 + 8 + 8) + d_ * 8 + 64;
    if (auto s = CheckBudget(need, gpu); !s.ok()) return s;
    DML_CUDA_RETURN_IF_ERROR(cudaSetDevice(info_.index));
    std::vector<double> zeros(static_cast<std::size_t>(nk_), 0.0);
    if (auto s = Upload(d_off_, x.offsets().data(), x.offsets().size()); !s.ok()) return s;
    if (auto s = Upload(d_idx_, x.indices().data(), x.indices().size()); !s.ok()) return s;
    if (auto s = Upload(d_val_, x.values().data(), x.values().size()); !s.ok()) return s;
    if (auto s = Upload(d_y_, block.y.data(), block.y.size()); !s.ok()) return s;
    if (auto s = Upload(d_q_, q.data(), q.size()); !s.ok()) return s;
    if (auto s = Upload(d_alpha_, zeros.data(), zeros.size()); !s.ok()) return s;
    if (auto s = d_local_.Allocate(static_cast<std::size_t>(nk_)); !s.ok()) return s;
    if (auto s = d_da_.Allocate(static_cast<std::size_t>(nk_)); !s.ok()) return s;
    if (auto s = d_u_.Allocate(static_cast<std::size_t>(std::max<int64_t>(d_, 1))); !s.ok()) return s;
    if (auto s = d_sums_.Allocate(4); !s.ok()) return s;
    y_ = std::move(block.y);
    host_alpha_ = std::move(zeros);
    host_off_ = x.offsets();
    gpu_ = gpu;
    threads_ = ThreadsFor(nnz, nk_);
    absl::StatusOr<int> grid = GridFor(DualEpochKernelFor<Obj>(threads_), threads_, nk_, gpu, info_);
    if (!grid.ok()) return grid.status();
    grid_.SetMax(*grid, /*start=*/true);
    return absl::OkStatus();
  }

  DualArgs Args(double* alpha, double* w, double inv_lambda_n) const {
    return DualArgs{d_off_.get(), d_idx_.get(), d_val_.get(), d_y_.get(), d_q_.get(),
                    nk_,          inv_lambda_n, alpha,        w};
  }

  DeviceInfo info_;
  std::mt19937_64 rng_;
  int64_t nk_ = 0, d_ = 0;
  double inv_ln_ = 0.0, lambda_ = 0.0, mean_row_ = 0.0;
  int threads_ = 32;
  LocalGrid grid_;
  std::vector<float> y_;
  std::vector<int64_t> host_off_;  // the held block's row offsets (Reload)
  TpaScdOptions gpu_;
  mutable std::vector<double> host_alpha_;
  DeviceBuffer<int64_t> d_off_;
  DeviceBuffer<uint32_t> d_idx_;
  DeviceBuffer<float> d_val_, d_y_;
  DeviceBuffer<double> d_q_, d_alpha_, d_local_, d_da_, d_u_, d_sums_;
};

// ---------------------------------------------------------------------------
// CoCoA+'s local solver on the device (primal models): the block's columns
// (CSC over all n rows) and all n labels stay resident; each Solve runs
// TPA-SCD passes on the local subproblem of cocoa_local_primal.cpp,
//   min_dw (1/sigma') f(v + sigma' A_k dw) + sum_{j in k} g_j(w_j + dw_j),
// the steps moving w_j + dw_j against the local vector v + sigma' A_k dw,
// then returns delta_v = A_k dw, summed again from dw (not the drifting local
// vector), and commits w += gamma dw.

// out += A_k c (out zeroed before): a column per block, atomic adds.
__global__ void ColumnTimesKernel(PrimalArgs a, const double* c, double* out) {
  for (int64_t j = blockIdx.x; j < a.d; j += gridDim.x) {
    const double cj = c[j];
    if (cj == 0.0) continue;  // block-uniform
    BlockScatter(a.idx, a.val, a.off[j] - a.base, a.off[j + 1] - a.base, cj, out);
  }
}

// The local subproblem's change from dw = 0 to dw, in two parts with the
// magnitudes of their terms (for the rounding tolerance):
//   sums[0] += sum_i loss(y_i, s_i + sigma' delta_i) - loss(y_i, s_i),
//   sums[1] += the |terms|, over the rows (s: the shared v);
//   sums[2] += sum_j g_j(w_j + dw_j) - g_j(w_j), sums[3] += the |terms|.
template <class Obj>
__global__ void PrimalLocalChangeKernel(PrimalArgs a, Obj obj, const double* shared,
                                        const double* delta, double* sums) {
  __shared__ double sh[33];
  double loss = 0.0, loss_mag = 0.0, reg = 0.0, reg_mag = 0.0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t i = first; i < a.n; i += stride) {
    if (delta[i] == 0.0) continue;
    double after, before, derivative;
    Obj::ValueAndDerivative(a.y[i], shared[i] + a.scale * delta[i], &after, &derivative);
    Obj::ValueAndDerivative(a.y[i], shared[i], &before, &derivative);
    loss += after - before;
    loss_mag += fabs(after) + fabs(before);
  }
  for (int64_t j = first; j < a.d; j += stride) {
    if (a.dw[j] == 0.0) continue;
    const double after = obj.Regularizer(a.w[j] + a.dw[j]), before = obj.Regularizer(a.w[j]);
    reg += after - before;
    reg_mag += fabs(after) + fabs(before);
  }
  loss = BlockSum(loss, sh);
  loss_mag = BlockSum(loss_mag, sh);
  reg = BlockSum(reg, sh);
  reg_mag = BlockSum(reg_mag, sh);
  if (threadIdx.x == 0) {
    atomicAdd(sums + 0, loss);
    atomicAdd(sums + 1, loss_mag);
    atomicAdd(sums + 2, reg);
    atomicAdd(sums + 3, reg_mag);
  }
}

// w_j += gamma dw_j.
__global__ void PrimalCommitKernel(double* w, const double* dw, int64_t d, double gamma) {
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < d;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    w[j] += gamma * dw[j];
  }
}

// kModel as RunPrimal's: 0 lasso / elastic net, 1 L1-logistic.
template <class Obj, int kModel>
class DevicePrimalLocalSolver final : public LocalSolver {
 public:
  static absl::StatusOr<std::unique_ptr<LocalSolver>> Make(LocalBlock block, const ModelSpec& model,
                                                           uint64_t seed, const TpaScdOptions& gpu,
                                                           const DeviceInfo& info) {
    auto s = std::unique_ptr<DevicePrimalLocalSolver>(new DevicePrimalLocalSolver(info, seed, model));
    if (auto st = s->Init(std::move(block), gpu); !st.ok()) return st;
    return std::unique_ptr<LocalSolver>(std::move(s));
  }

  absl::StatusOr<LocalUpdate> Solve(const std::vector<double>& shared, double sigma_prime,
                                    double gamma, int64_t steps,
                                    const std::atomic<bool>* interrupt) override {
    if (auto st = CheckPrimalSolve(shared, n_, sigma_prime, gamma, steps); !st.ok()) return st;
    DML_CUDA_RETURN_IF_ERROR(cudaSetDevice(info_.index));
    const int eval_grid = std::max(1, info_.multiprocessors) * 8;
    const std::size_t v_bytes = static_cast<std::size_t>(n_) * sizeof(double);
    const std::size_t w_bytes = static_cast<std::size_t>(dk_) * sizeof(double);
    DML_CUDA_RETURN_IF_ERROR(cudaMemcpy(d_shared_.get(), shared.data(), v_bytes,
                                        cudaMemcpyHostToDevice));
    const Obj obj = Obj::Make(model_, y_);
    PrimalArgs a = Args();
    a.dw = d_dw_.get();
    a.scale = sigma_prime;
    LocalUpdate up;
    for (;;) {
      DML_CUDA_RETURN_IF_ERROR(cudaMemcpy(d_v_.get(), d_shared_.get(), v_bytes,
                                          cudaMemcpyDeviceToDevice));
      DML_CUDA_RETURN_IF_ERROR(cudaMemset(d_dw_.get(), 0, w_bytes));
      up.steps = 0;
      int64_t left = steps;
      while (left > 0) {
        if (interrupt != nullptr && interrupt->load(std::memory_order_relaxed)) break;
        const int64_t count = std::min(left, dk_);
        const Permutation perm = MakePermutation(static_cast<uint64_t>(dk_), rng_);
        if constexpr (kModel == 0) {
          SquaredEpochKernel<Obj><<<grid_.grid(), threads_>>>(a, obj, perm,
                                                              static_cast<uint64_t>(count));
        } else {
          LogisticL1EpochKernel<<<grid_.grid(), threads_>>>(a, model_.lambda, perm,
                                                     static_cast<uint64_t>(count));
        }
        DML_CUDA_RETURN_IF_ERROR(cudaGetLastError());
        DML_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
        left -= count;
        up.steps += count;
      }
      // delta_v = A_k dw exactly, and the subproblem's change with it.
      DML_CUDA_RETURN_IF_ERROR(cudaMemset(d_delta_.get(), 0, v_bytes));
      ColumnTimesKernel<<<eval_grid, threads_>>>(a, d_dw_.get(), d_delta_.get());
      DML_CUDA_RETURN_IF_ERROR(cudaGetLastError());
      DML_CUDA_RETURN_IF_ERROR(cudaMemset(d_sums_.get(), 0, 4 * sizeof(double)));
      PrimalLocalChangeKernel<Obj><<<eval_grid, 256>>>(a, obj, d_shared_.get(), d_delta_.get(),
                                                      d_sums_.get());
      DML_CUDA_RETURN_IF_ERROR(cudaGetLastError());
      double change[4];
      DML_CUDA_RETURN_IF_ERROR(cudaMemcpy(change, d_sums_.get(), sizeof change,
                                          cudaMemcpyDeviceToHost));
      // Exact steps never raise the local subproblem's objective (1/sigma')
      // f(v + sigma' A_k dw) + g(w + dw) above its value at dw = 0; where it
      // rose beyond what rounding makes of a zero change, stale steps
      // overshot: the passes again from dw = 0 with half the blocks (one
      // block is sequential CD).
      const double rise = change[0] * inv_n_ / sigma_prime + change[2];
      constexpr double kEps = 2.220446049250313e-16;
      const double tol = 16.0 * kEps * (change[1] * inv_n_ / sigma_prime + change[3]);
      if ((std::isfinite(rise) && rise <= tol) || !grid_.Overshot()) break;
    }
    if (auto st = Download(up.delta_shared, d_delta_, static_cast<std::size_t>(n_)); !st.ok()) {
      return st;
    }
    up.nnz_touched = static_cast<int64_t>(static_cast<double>(up.steps) * mean_col_ * 2.0);
    PrimalCommitKernel<<<eval_grid, 256>>>(d_w_.get(), d_dw_.get(), dk_, gamma);
    DML_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    DML_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
    grid_.Solved();
    return up;
  }

  // cocoa_local_primal.cpp's Certify on the device: u = grad f(v) over all
  // rows, the loss over the block's share of them, the bounded-support gap
  // of each of its columns.
  absl::StatusOr<BlockCertificate> Certify(const std::vector<double>& shared) const override {
    if (static_cast<int64_t>(shared.size()) != n_) {
      return absl::InvalidArgumentError(
          absl::StrCat("certify: shared v has ", shared.size(), " entries, expected ", n_));
    }
    DML_CUDA_RETURN_IF_ERROR(cudaSetDevice(info_.index));
    const std::vector<double>& w = coordinates();
    double w_max = 0.0;
    for (double wj : w) w_max = std::max(w_max, std::abs(wj));
    const Obj obj = Obj::Make(model_, y_, w_max);
    DML_CUDA_RETURN_IF_ERROR(cudaMemcpy(d_shared_.get(), shared.data(), shared.size() * sizeof(double),
                                        cudaMemcpyHostToDevice));
    DML_CUDA_RETURN_IF_ERROR(cudaMemset(d_sums_.get(), 0, 4 * sizeof(double)));
    PrimalArgs a = Args();
    a.v = d_shared_.get();
    const int eval_grid = std::max(1, info_.multiprocessors) * 8;
    PrimalRowKernel<Obj><<<eval_grid, 256>>>(a, d_delta_.get(), d_sums_.get(), loss_begin_,
                                             loss_end_);
    DML_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    PrimalColumnKernel<Obj><<<eval_grid, threads_>>>(a, obj, d_delta_.get(), d_sums_.get(),
                                                     d_dw_.get());
    DML_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    double sums[4];
    DML_CUDA_RETURN_IF_ERROR(cudaMemcpy(sums, d_sums_.get(), sizeof sums, cudaMemcpyDeviceToHost));
    BlockCertificate c;
    c.loss_sum = sums[0];
    c.reg_sum = sums[1];
    c.gap_sum = sums[2];
    return c;
  }

  const std::vector<double>& coordinates() const override {
    // The interface returns a reference: a host copy refreshed on each call.
    if (cudaSetDevice(info_.index) != cudaSuccess ||
        !Download(host_w_, d_w_, static_cast<std::size_t>(dk_)).ok()) {
      (void)cudaGetLastError();
    }
    return host_w_;
  }

  absl::Status set_coordinates(std::vector<double> c) override {
    if (static_cast<int64_t>(c.size()) != dk_) {
      return absl::InvalidArgumentError(absl::StrCat("primal local solver: ", c.size(),
                                                     " coordinates for a block of ", dk_,
                                                     " features"));
    }
    for (std::size_t j = 0; j < c.size(); ++j) {
      if (!std::isfinite(c[j])) {
        return absl::InvalidArgumentError(
            absl::StrCat("primal local solver: coordinate ", j, " is not finite"));
      }
    }
    DML_CUDA_RETURN_IF_ERROR(cudaSetDevice(info_.index));
    DML_CUDA_RETURN_IF_ERROR(cudaMemcpy(d_w_.get(), c.data(), c.size() * sizeof(double),
                                        cudaMemcpyHostToDevice));
    host_w_ = std::move(c);
    return absl::OkStatus();
  }

  // DuHL's next block of columns: the kept ones are copied on the device,
  // only the new ones (and the offsets, sources and curvatures) uploaded.
  // The labels and the loss rows stay (every primal block holds all n).
  absl::StatusOr<int64_t> Reload(LocalBlock block, const std::vector<int64_t>& kept) override {
    const CscMatrix& x = block.cols;
    const int64_t m = x.cols();
    if (x.rows() != n_ || static_cast<int64_t>(kept.size()) != m ||
        static_cast<int64_t>(block.y.size()) != n_ || m == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "reload: a block of ", x.rows(), " rows, ", m, " columns, ", block.y.size(),
          " labels and ", kept.size(), " kept entries; this solver has ", n_, " rows"));
    }
    if (auto s = CheckPrimalBlock(block, model_); !s.ok()) return s;  // labels, loss rows
    std::vector<double> q = x.OuterSquaredNorms();
    for (double& qj : q) qj *= inv_n_;
    DML_CUDA_RETURN_IF_ERROR(cudaSetDevice(info_.index));
    absl::StatusOr<int64_t> assembled =
        AssembleBlock(x, kept, host_off_, dk_, "column", std::max(1, info_.multiprocessors) * 8,
                      threads_, d_off_, d_idx_, d_val_);
    if (!assembled.ok()) return assembled.status();
    if (auto s = Upload(d_q_, q.data(), q.size()); !s.ok()) return s;
    int64_t moved = *assembled + static_cast<int64_t>(q.size() * 8);
    // Every primal block holds all n labels: uploaded again only if they changed.
    if (block.y != y_) {
      if (auto s = Upload(d_y_, block.y.data(), block.y.size()); !s.ok()) return s;
      moved += static_cast<int64_t>(block.y.size() * 4);
      y_ = std::move(block.y);
    }
    loss_begin_ = block.loss_row_begin;
    loss_end_ = block.loss_row_end;
    const std::size_t nnz = x.values().size();
    if (m != dk_) {
      for (DeviceBuffer<double>* b : {&d_w_, &d_dw_}) {
        if (auto s = b->Allocate(static_cast<std::size_t>(m)); !s.ok()) return s;
      }
    }
    DML_CUDA_RETURN_IF_ERROR(cudaMemset(d_w_.get(), 0, static_cast<std::size_t>(m) * 8));
    dk_ = m;
    mean_col_ = static_cast<double>(nnz) / static_cast<double>(m);
    host_off_ = x.offsets();
    host_w_.assign(static_cast<std::size_t>(m), 0.0);
    absl::StatusOr<int> grid = [&] {
      if constexpr (kModel == 0) {
        return GridFor(SquaredEpochKernel<Obj>, threads_, dk_, gpu_, info_);
      } else {
        return GridFor(LogisticL1EpochKernel, threads_, dk_, gpu_, info_);
      }
    }();
    if (!grid.ok()) return grid.status();
    grid_.SetMax(*grid, /*start=*/false);
    return moved;
  }

 private:
  DevicePrimalLocalSolver(const DeviceInfo& info, uint64_t seed, const ModelSpec& model)
      : info_(info), rng_(seed), model_(model) {}

  absl::Status Init(LocalBlock block, const TpaScdOptions& gpu) {
    const CscMatrix& x = block.cols;
    n_ = x.rows();
    dk_ = x.cols();
    loss_begin_ = block.loss_row_begin;
    loss_end_ = block.loss_row_end;
    inv_n_ = 1.0 / static_cast<double>(n_);
    const int64_t nnz = static_cast<int64_t>(x.values().size());
    mean_col_ = static_cast<double>(nnz) / static_cast<double>(dk_);
    std::vector<double> q = x.OuterSquaredNorms();
    for (double& qj : q) qj *= inv_n_;
    // Columns; labels; q, w and dw (the gaps in Certify) per column;
    // shared, local and delta (u in Certify) per row.
    const int64_t need = (dk_ + 1) * 8 + nnz * 8 + n_ * 4 + dk_ * 24 + n_ * 24 + 64;
    if (auto s = CheckBudget(need, gpu); !s.ok()) return s;
    DML_CUDA_RETURN_IF_ERROR(cudaSetDevice(info_.index));
    std::vector<double> zeros(static_cast<std::size_t>(dk_), 0.0);
    if (auto s = Upload(d_off_, x.offsets().data(), x.offsets().size()); !s.ok()) return s;
    if (auto s = Upload(d_idx_, x.indices().data(), x.indices().size()); !s.ok()) return s;
    if (auto s = Upload(d_val_, x.values().data(), x.values().size()); !s.ok()) return s;
    if (auto s = Upload(d_y_, block.y.data(), block.y.size()); !s.ok()) return s;
    if (auto s = Upload(d_q_, q.data(), q.size()); !s.ok()) return s;
    if (auto s = Upload(d_w_, zeros.data(), zeros.size()); !s.ok()) return s;
    if (auto s = d_dw_.Allocate(static_cast<std::size_t>(dk_)); !s.ok()) return s;
    for (DeviceBuffer<double>* b : {&d_shared_, &d_v_, &d_delta_}) {
      if (auto s = b->Allocate(static_cast<std::size_t>(n_)); !s.ok()) return s;
    }
    if (auto s = d_sums_.Allocate(4); !s.ok()) return s;
    y_ = std::move(block.y);
    host_w_ = std::move(zeros);
    host_off_ = x.offsets();
    gpu_ = gpu;
    threads_ = ThreadsFor(nnz, dk_);
    const absl::StatusOr<int> grid = [&] {
      if constexpr (kModel == 0) {
        return GridFor(SquaredEpochKernel<Obj>, threads_, dk_, gpu, info_);
      } else {
        return GridFor(LogisticL1EpochKernel, threads_, dk_, gpu, info_);
      }
    }();
    if (!grid.ok()) return grid.status();
    grid_.SetMax(*grid, /*start=*/true);
    return absl::OkStatus();
  }

  PrimalArgs Args() const {
    return PrimalArgs{d_off_.get(), d_idx_.get(), d_val_.get(), d_y_.get(), d_q_.get(),
                      dk_,          n_,           inv_n_,       d_w_.get(), d_v_.get()};
  }

  DeviceInfo info_;
  std::mt19937_64 rng_;
  ModelSpec model_;
  int64_t n_ = 0, dk_ = 0, loss_begin_ = 0, loss_end_ = 0;
  double inv_n_ = 0.0, mean_col_ = 0.0;
  int threads_ = 32;
  LocalGrid grid_;
  std::vector<float> y_;
  std::vector<int64_t> host_off_;  // the held block's column offsets (Reload)
  TpaScdOptions gpu_;
  mutable std::vector<double> host_w_;
  DeviceBuffer<int64_t> d_off_;
  DeviceBuffer<uint32_t> d_idx_;
  DeviceBuffer<float> d_val_, d_y_;
  // d_shared_ and d_delta_ are scratch for Certify too (u there), hence mutable.
  mutable DeviceBuffer<double> d_shared_, d_delta_, d_dw_;
  DeviceBuffer<double> d_q_, d_w_, d_v_, d_sums_;
};

__global__ void CopyKernel(const float4* __restrict__ src, float4* __restrict__ dst, int64_t m) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < m;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = src[i];
  }
}

}  // namespace

absl::StatusOr<DeviceInfo> QueryDeviceCuda(int index) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::UnavailableError(absl::StrFormat("no usable CUDA device: cudaGetDeviceCount failed: %s (%s)",
                                                  cudaGetErrorString(err), cudaGetErrorName(err)));
  }
  if (index < 0 || index >= count) {
    return absl::UnavailableError(
        absl::StrFormat("no CUDA device %d: this machine has %d", index, count));
  }
  cudaDeviceProp prop{};
  DML_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, index));
  DeviceInfo info;
  info.index = index;
  info.name = prop.name;
  info.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  info.multiprocessors = prop.multiProcessorCount;
  return info;
}

absl::StatusOr<TrainResult> TrainOnDevice(const Dataset& data, const ModelSpec& model,
                                          const SolverOptions& options, const TpaScdOptions& gpu) {
  absl::StatusOr<DeviceInfo> info = QueryDeviceCuda(gpu.device);
  if (!info.ok()) return info.status();
  DML_CUDA_RETURN_IF_ERROR(cudaSetDevice(gpu.device));
  switch (model.kind) {
    case ModelKind::kRidge: return RunDual<RidgeObjective>(data, model, options, gpu, *info);
    case ModelKind::kLogisticL2: return RunDual<LogisticL2Objective>(data, model, options, gpu, *info);
    case ModelKind::kHingeSvm: return RunDual<HingeSvmObjective>(data, model, options, gpu, *info);
    case ModelKind::kSquaredHingeSvm:
      return RunDual<SquaredHingeSvmObjective>(data, model, options, gpu, *info);
    case ModelKind::kLasso: return RunPrimal<LassoObjective, 0>(data, model, options, gpu, *info);
    case ModelKind::kElasticNet:
      return RunPrimal<ElasticNetObjective, 0>(data, model, options, gpu, *info);
    case ModelKind::kLogisticL1:
      return RunPrimal<LogisticL1Objective, 1>(data, model, options, gpu, *info);
  }
  return absl::InvalidArgumentError("tpa-scd: unknown model");
}

absl::StatusOr<int64_t> ScratchBytesCuda(const Dataset& data, const ModelSpec& model,
                                         const TpaScdOptions& gpu) {
  absl::StatusOr<DeviceInfo> info = QueryDeviceCuda(gpu.device);
  if (!info.ok()) return info.status();
  DML_CUDA_RETURN_IF_ERROR(cudaSetDevice(gpu.device));
  // Primal: the CSC offsets alone (column counts), not the CSC a run builds.
  const bool dual = FormulationOf(model.kind) == Formulation::kDual;
  const int64_t n = data.x.rows(), d = data.x.cols();
  absl::StatusOr<Layout> layout =
      dual ? LayoutFor(data.x.offsets(), n, d, true, gpu)
           : LayoutFor(ColumnOffsets(data.x), n, d, false, gpu, model.kind == ModelKind::kLogisticL1);
  if (!layout.ok()) return layout.status();
  return layout->total();
}

absl::StatusOr<std::unique_ptr<LocalSolver>> MakeDeviceLocalSolver(LocalBlock block,
                                                                    const ModelSpec& model,
                                                                    uint64_t seed,
                                                                    const TpaScdOptions& gpu) {
  absl::StatusOr<DeviceInfo> info = QueryDeviceCuda(gpu.device);
  if (!info.ok()) return info.status();
  switch (model.kind) {
    case ModelKind::kRidge:
      return DeviceDualLocalSolver<RidgeObjective>::Make(std::move(block), model, seed, gpu, *info);
    case ModelKind::kLogisticL2:
      return DeviceDualLocalSolver<LogisticL2Objective>::Make(std::move(block), model, seed, gpu,
                                                              *info);
    case ModelKind::kHingeSvm:
      return DeviceDualLocalSolver<HingeSvmObjective>::Make(std::move(block), model, seed, gpu,
                                                            *info);
    case ModelKind::kSquaredHingeSvm:
      return DeviceDualLocalSolver<SquaredHingeSvmObjective>::Make(std::move(block), model, seed,
                                                                   gpu, *info);
    case ModelKind::kLasso:
      return DevicePrimalLocalSolver<LassoObjective, 0>::Make(std::move(block), model, seed, gpu,
                                                              *info);
    case ModelKind::kElasticNet:
      return DevicePrimalLocalSolver<ElasticNetObjective, 0>::Make(std::move(block), model, seed,
                                                                   gpu, *info);
    case ModelKind::kLogisticL1:
      return DevicePrimalLocalSolver<LogisticL1Objective, 1>::Make(std::move(block), model, seed,
                                                                   gpu, *info);
  }
  return absl::InvalidArgumentError("tpa-scd: unknown model");
}

absl::StatusOr<double> HostToDeviceBandwidthCuda(int index, int64_t bytes) {
  absl::StatusOr<DeviceInfo> info = QueryDeviceCuda(index);
  if (!info.ok()) return info.status();
  DML_CUDA_RETURN_IF_ERROR(cudaSetDevice(index));
  void* host = nullptr;
  DML_CUDA_RETURN_IF_ERROR(cudaMallocHost(&host, static_cast<std::size_t>(bytes)));
  std::memset(host, 0x3c, static_cast<std::size_t>(bytes));
  DeviceBuffer<char> dev;
  absl::Status status = dev.Allocate(static_cast<std::size_t>(bytes));
  std::vector<double> times;
  for (int rep = 0; rep < 6 && status.ok(); ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    const cudaError_t err = cudaMemcpy(dev.get(), host, static_cast<std::size_t>(bytes),
                                       cudaMemcpyHostToDevice);
    if (err != cudaSuccess) status.Update(CudaStatus(err, "cudaMemcpy", __FILE__, __LINE__));
    if (rep > 0) times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  (void)cudaFreeHost(host);
  if (!status.ok()) return status;
  std::sort(times.begin(), times.end());
  return static_cast<double>(bytes) / times[times.size() / 2];
}

absl::StatusOr<double> CopyBandwidthCuda(int index, int64_t bytes) {
  absl::StatusOr<DeviceInfo> info = QueryDeviceCuda(index);
  if (!info.ok()) return info.status();
  DML_CUDA_RETURN_IF_ERROR(cudaSetDevice(index));
  const int64_t m = std::max<int64_t>(1, bytes / 16);
  DeviceBuffer<float4> src, dst;
  if (auto s = src.Allocate(static_cast<std::size_t>(m)); !s.ok()) return s;
  if (auto s = dst.Allocate(static_cast<std::size_t>(m)); !s.ok()) return s;
  DML_CUDA_RETURN_IF_ERROR(cudaMemset(src.get(), 0x3c, src.bytes()));
  cudaEvent_t begin, end;
  DML_CUDA_RETURN_IF_ERROR(cudaEventCreate(&begin));
  DML_CUDA_RETURN_IF_ERROR(cudaEventCreate(&end));
  const int grid = std::max(1, info->multiprocessors) * 8;
  std::vector<float> times;
  absl::Status status;
  for (int rep = 0; rep < 6 && status.ok(); ++rep) {
    (void)cudaEventRecord(begin);
    CopyKernel<<<grid, 256>>>(src.get(), dst.get(), m);
    (void)cudaEventRecord(end);
    const cudaError_t err = cudaEventSynchronize(end);
    if (err != cudaSuccess) {
      status.Update(CudaStatus(err, "CopyKernel", __FILE__, __LINE__));
      break;
    }
    float ms = 0.0f;
    (void)cudaEventElapsedTime(&ms, begin, end);
    if (rep > 0) times.push_back(ms);  // the first is the warm-up
  }
  (void)cudaEventDestroy(begin);
  (void)cudaEventDestroy(end);
  if (!status.ok()) return status;
  std::sort(times.begin(), times.end());
  const double ms = times[times.size() / 2];
  return 2.0 * 16.0 * static_cast<double>(m) / (ms * 1e-3);
}

}  // namespace dml::gpu::internal
