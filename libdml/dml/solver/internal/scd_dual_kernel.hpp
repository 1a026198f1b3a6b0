#pragma once
// The inner loop shared by the dual SCD solvers (sequential, asynchronous):
// one epoch of stochastic dual coordinate ascent over a block of examples,
// with LIBLINEAR-style shrinking, cheap running estimates of the primal and
// dual values, and the exact certificate pass. Templated on the objective
// (dml/objective/{ridge,logistic_l2,hinge_svm,squared_hinge_svm}.hpp) so that
// every step inlines, and on whether the shared w is updated atomically.
//
// Conventions (dml/objective/model.hpp): w = A^T alpha / (lambda n); the step
// for coordinate i maximises
//   NegConj(a') - (a' - a) z - (a' - a)^2 q / 2,  z = x_i.w, q = ||x_i||^2/(lambda n),
// which is n times the change of D(alpha) when only alpha_i moves.
//
// Internal: included by solver/*.cpp only.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "dml/data/sparse.hpp"
#include "dml/objective/hinge_svm.hpp"
#include "dml/objective/logistic_l2.hpp"
#include "dml/objective/model.hpp"
#include "dml/objective/ridge.hpp"
#include "dml/objective/squared_hinge_svm.hpp"
#include "dml/solver/internal/dense_run.hpp"
#include "dml/solver/internal/stopping.hpp"
#include "dml/solver/solver.hpp"
#include "dml/util/rng.hpp"

namespace dml::internal {

/// Calls f(Obj{}) with the objective struct of a dual model. The caller has
/// checked FormulationOf(kind) == kDual.
template <typename F>
decltype(auto) VisitDualObjective(ModelKind kind, F&& f) {
  switch (kind) {
    case ModelKind::kRidge: return f(RidgeObjective{});
    case ModelKind::kLogisticL2: return f(LogisticL2Objective{});
    case ModelKind::kHingeSvm: return f(HingeSvmObjective{});
    default: return f(SquaredHingeSvmObjective{});
  }
}

/// Everything one step needs about example i, in one cache line: a step in
/// random order then costs this line plus the row itself.
struct alignas(64) DualCoord {
  double alpha;
  double q;        ///< ||x_i||^2 / (lambda n)
  int64_t begin;   ///< offset of row i in the CSR arrays
  uint32_t len;    ///< nonzeros of row i
  float y;
  double nc;       ///< NegConj(y, alpha), kept with alpha
  double aux;      ///< objective's cache: logit(alpha y) for logistic
  /// v where every value of row i is v (binary features: 1), else 0: its
  /// steps then read the indices alone (half the row's bytes, no multiplies).
  float unit;
  /// Row i's features form one contiguous run (a dense row) and unit is 0:
  /// the non-atomic steps use the SIMD run loops (dense_run.hpp).
  bool run;
  /// Shrinking took the coordinate out of the active set (set there, cleared
  /// when an epoch visits it again): the certificate tells its gap apart.
  bool shrunk;
};
static_assert(sizeof(DualCoord) == 64, "DualCoord should fill one cache line");

/// One coordinate step on a DualCoord: the maximiser (Obj::Step; for
/// logistic the cached-logit variant, see below), the change of NegConj, and
/// the coordinate's gap just before the step (for the stopping trigger; >= 0).
struct DualStepOut {
  double delta;     ///< alpha' - alpha
  double nc_delta;  ///< NegConj(alpha') - NegConj(alpha)
  double gap;
};

template <typename Obj>
struct DualStepper {
  static void Init(DualCoord& c) { c.nc = Obj::NegConj(c.y, c.alpha); }
  static DualStepOut Step(DualCoord& c, double z) {
    const double y = c.y;
    const double a = c.alpha;
    DualStepOut out;
    // loss(z) + loss*(-a) + a z, reusing NegConj(a): an estimate, so the
    // cancellation-free Obj::CoordinateGap is not needed here.
    out.gap = std::max(0.0, Obj::Loss(y, z) - c.nc + a * z);
    const double an = Obj::Step(y, a, z, c.q);
    out.delta = an - a;
    out.nc_delta = 0.0;
    if (out.delta != 0.0) {
      const double nc = Obj::NegConj(y, an);
      out.nc_delta = nc - c.nc;
      c.alpha = an;
      c.nc = nc;
    }
    return out;
  }
};

/// Logistic: the step runs in the logit t = logit(alpha y), cached in aux
/// with H = NegConj in nc, so that a coordinate near its optimum costs no
/// exp or log (LogisticL2Objective::StepFromAnchor, with its relative
/// tolerance kRel for long steps), and the gap estimate KL(b || sigmoid(-m))
/// uses its Taylor expansion in the logits (relative error < 1e-3) when they
/// are within 1. The cache is exact up to the step's Taylor truncation
/// (~1e-10 b(1-b)); alpha itself is what the certificates use.
template <>
struct DualStepper<LogisticL2Objective> {
  using Obj = LogisticL2Objective;
  static void Init(DualCoord& c) {
    const double b = c.alpha * c.y;
    c.aux = std::log(b / (1.0 - b));
    c.nc = Obj::NegConj(c.y, c.alpha);
  }
  static DualStepOut Step(DualCoord& c, double z) {
    const double y = c.y;
    const double m = y * z;
    const double b = c.alpha * y;
    const double t = c.aux;
    DualStepOut out;
    const Obj::Anchor anchor(t, b, c.nc);
    const double delta = -m - t;  // logit of the optimal b minus logit of b
    if (std::abs(delta) <= 0.05) {  // to third order: relative error < 1e-3
      out.gap = delta * delta * (0.5 * anchor.c1 + delta * (1.0 / 3.0) * anchor.p2);
    } else if (std::abs(delta) <= 1.0) {
      out.gap = anchor.Bregman(delta);
    } else {
      const double sp = std::max(-m, 0.0) + Obj::Log1pUnit(std::exp(-std::abs(m)));  // loss
      out.gap = std::max(0.0, sp - c.nc + b * m);
    }
    const Obj::LogitPoint p = Obj::StepFromAnchor(m, c.q, anchor);
    const double an = p.b * y;
    out.delta = an - c.alpha;
    out.nc_delta = p.h - c.nc;
    c.alpha = an;
    c.aux = p.t;
    c.nc = p.h;
    return out;
  }
};

/// Reads and adds on the shared w: plain (one thread) or atomic (several;
/// relaxed loads and a relaxed compare-exchange loop for the add, so there is
/// no data race on w, only the lost-update-free "wild" reads of PASSCoDe).
template <bool kAtomic>
struct SharedW {
  static double Load(const double* p) {
    if constexpr (kAtomic) {
      double v;
      __atomic_load(p, &v, __ATOMIC_RELAXED);
      return v;
    } else {
      return *p;
    }
  }
  static void Add(double* p, double v) {
    if constexpr (kAtomic) {
      double cur;
      __atomic_load(p, &cur, __ATOMIC_RELAXED);
      double next = cur + v;
      while (!__atomic_compare_exchange(p, &cur, &next, /*weak=*/true, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
        next = cur + v;
      }
    } else {
      *p += v;
    }
  }
};

/// x_i.w with four independent accumulators (the sum's latency chain is the
/// bottleneck for short rows). kUnit: every value of the row is 1 (`vx`
/// unread), so the terms are w's alone, summed in the same order.
template <bool kAtomic, bool kUnit = false>
inline double SparseDot(const uint32_t* ix, const float* vx, uint32_t len, const double* w) {
  using W = SharedW<kAtomic>;
  auto v = [vx](uint32_t k) { return kUnit ? 1.0 : static_cast<double>(vx[k]); };
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  uint32_t k = 0;
  for (; k + 4 <= len; k += 4) {
    s0 += v(k) * W::Load(w + ix[k]);
    s1 += v(k + 1) * W::Load(w + ix[k + 1]);
    s2 += v(k + 2) * W::Load(w + ix[k + 2]);
    s3 += v(k + 3) * W::Load(w + ix[k + 3]);
  }
  for (; k < len; ++k) s0 += v(k) * W::Load(w + ix[k]);
  return (s0 + s1) + (s2 + s3);
}

/// w += c x_i (kUnit: every value of the row is 1, `vx` unread).
template <bool kAtomic, bool kUnit = false>
inline void SparseAxpy(const uint32_t* ix, const float* vx, uint32_t len, double c, double* w) {
  for (uint32_t k = 0; k < len; ++k) {
    SharedW<kAtomic>::Add(w + ix[k], kUnit ? c : c * static_cast<double>(vx[k]));
  }
}

/// One block of coordinates (all of them for the sequential solver, one
/// thread's share for the asynchronous one) and its shrinking state
/// (Hsieh et al. 2008, Sec. 3.2; LIBLINEAR's solve_l2r_l1l2_svc).
struct DualBlock {
  std::vector<int64_t> order;  ///< this block's examples; [0, active) are not shrunk
  int64_t active = 0;
  double pg_max_old = std::numeric_limits<double>::infinity();
  double pg_min_old = -std::numeric_limits<double>::infinity();
  /// The active set is unshrunk when its projected-gradient range falls
  /// below this; it tightens (x0.1) whenever the full set gets there.
  double eps_pg = 0.1;
  /// The engine applies the end-of-epoch rule to all blocks at once (several
  /// threads: one block unshrinking on its own, out of step with the
  /// others, costs extra full passes); the epoch leaves its projected-
  /// gradient extremes in DualEpochSums.
  bool shared_rule = false;
  Rng rng{1};

  int64_t size() const { return static_cast<int64_t>(order.size()); }
  void Unshrink() {
    active = size();
    pg_max_old = std::numeric_limits<double>::infinity();
    pg_min_old = -std::numeric_limits<double>::infinity();
  }
};

/// What an epoch over a block adds to the running estimates.
struct DualEpochSums {
  /// Sum over the visited i of the coordinate gap just before its step
  /// (each >= 0); shrunk coordinates sit at a bound with gap 0.
  double gap_sum = 0.0;
  double negconj_delta = 0.0;  ///< change of sum_i NegConj(alpha_i)
  double wsq_delta = 0.0;      ///< change of ||w||^2 (exact for one thread)
  /// ||w||^2 measured on w after the epoch, where the engine measures it
  /// (several threads: wsq_delta misses the cross terms of concurrent steps,
  /// so on dense low-dimensional data the tracked dual drifts low and the
  /// estimate never triggers a certificate); NaN where not measured.
  double wsq_exact = std::numeric_limits<double>::quiet_NaN();
  int64_t nnz = 0;             ///< nonzeros read
  /// Nonzeros of the rows shrunk in this epoch (read once more before they
  /// left): nnz - shrunk_nnz is what the next epoch reads, unless unshrunk.
  int64_t shrunk_nnz = 0;
  /// Extremes of the projected gradients seen (shrinking only).
  double pg_max = -std::numeric_limits<double>::infinity();
  double pg_min = std::numeric_limits<double>::infinity();
  /// The epoch started with no coordinate shrunk (ApplyShrinkRule).
  bool began_full = true;
  void Merge(const DualEpochSums& o) {
    began_full = began_full && o.began_full;
    gap_sum += o.gap_sum;
    negconj_delta += o.negconj_delta;
    wsq_delta += o.wsq_delta;
    nnz += o.nnz;
    shrunk_nnz += o.shrunk_nnz;
    pg_max = std::max(pg_max, o.pg_max);
    pg_min = std::min(pg_min, o.pg_min);
  }
};

/// LIBLINEAR's end-of-epoch rule: once the active set's projected gradients
/// lie within eps_pg, bring every shrunk coordinate back (the thresholds
/// reset), or tighten eps_pg (x0.1) where none is shrunk; else the epoch's
/// extremes are the next epoch's shrinking thresholds. `full`: nothing is
/// shrunk (at the end of the epoch). One departure: an epoch that began
/// with nothing shrunk and shrank is not taken as the active set's
/// convergence (its extremes are over the rows that stayed, seen before the
/// others left): LIBLINEAR unshrinks there, and near its own stop (eps_pg
/// 0.1) the next epoch, over every row with no thresholds, had a range just
/// above 0.1 again, so full passes alternated (w8a hinge: 12 in a row, 13 ms
/// of a 78 ms solve) where epochs over the active set cost 1/100 of one.
/// `blk` holds the rule's state (the one block, or the engine's).
/// Returns whether it unshrank (the engine's other blocks follow).
inline bool ApplyShrinkRule(double pg_max, double pg_min, bool full, bool began_full,
                            DualBlock& blk) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (pg_max - pg_min <= blk.eps_pg) {
    if (full) {
      blk.eps_pg *= 0.1;
    } else if (!began_full) {
      blk.Unshrink();
      return true;
    }
  }
  blk.pg_max_old = pg_max <= 0.0 ? kInf : pg_max;
  blk.pg_min_old = pg_min >= 0.0 ? -kInf : pg_min;
  return false;
}

/// No synchronisation inside an epoch (one thread, or a w shared by atomics).
struct NoEpochSync {
  static constexpr bool kEnabled = false;
  int64_t every = 0;
  void operator()() {}
};

/// One epoch over `blk`: a fresh random permutation of the active
/// coordinates, one coordinate step each (DualStepper). With kShrink (hinge and
/// squared hinge only), a coordinate at a bound whose gradient points out of
/// the box by more than last epoch's projected-gradient extremes is shrunk,
/// exactly as LIBLINEAR does. Sync (kEnabled) is called after about every
/// sync.every nonzeros read: a thread working on a private copy of w
/// publishes its changes there and takes the others'.
template <typename Obj, bool kAtomic, bool kShrink, typename Sync = NoEpochSync>
DualEpochSums RunDualEpoch(const uint32_t* idx, const float* val, DualCoord* coords, double* w,
                           double inv_ln, DualBlock& blk, Sync sync = Sync{}) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  DualEpochSums s;
  int64_t* order = blk.order.data();
  int64_t active = blk.active;
  const bool began_full = active == blk.size();
  for (int64_t k = active; k > 1; --k) {
    std::swap(order[k - 1], order[blk.rng.Below(static_cast<uint64_t>(k))]);
  }
  double pg_max = -kInf, pg_min = kInf;
  double gap_sum = 0.0, nc_delta = 0.0, wsq_delta = 0.0;
  int64_t nnz = 0, shrunk_nnz = 0;
  int64_t next_sync = Sync::kEnabled ? sync.every : 0;
  for (int64_t t = 0; t < active; ++t) {
    if constexpr (Sync::kEnabled) {
      if (nnz >= next_sync) {
        sync();
        next_sync = nnz + sync.every;
      }
    }
    // The rows come in random order: fetch the row two steps ahead and the
    // coordinate record three steps ahead, so the misses overlap this step.
    if (t + 3 < active) __builtin_prefetch(coords + order[t + 3]);
    if (t + 2 < active) {
      const DualCoord& c2 = coords[order[t + 2]];
      __builtin_prefetch(idx + c2.begin);
      if (c2.run) {
        // A dense row is long and read once a pass: fetch all of it (the
        // streamer starts only after a few of its lines missed).
        const float* v2 = val + c2.begin;
        for (uint32_t k = 0; k < c2.len; k += 16) __builtin_prefetch(v2 + k);
      } else if (c2.unit == 0.0f) {
        __builtin_prefetch(val + c2.begin);
      }
    }
    DualCoord& c = coords[order[t]];
    if constexpr (kShrink) {
      if (c.shrunk) c.shrunk = false;  // back after an unshrink (else no store)
    }
    const uint32_t* ix = idx + c.begin;
    const float* vx = val + c.begin;
    const double unit = c.unit;
    // Dense rows on one thread's w (not the atomic shared one): SIMD loops.
    const bool run = !kAtomic && c.run;
    const double z = run           ? DenseRunDot(vx, c.len, w + ix[0])
                     : unit != 0.0 ? unit * SparseDot<kAtomic, true>(ix, nullptr, c.len, w)
                                   : SparseDot<kAtomic>(ix, vx, c.len, w);
    nnz += c.len;
    if constexpr (kShrink) {
      const double y = c.y;
      const double a = c.alpha;
      const double b = a * y;
      const double g = Obj::Gradient(y, a, z);
      double pg = 0.0;
      if (b == 0.0) {
        if (g > blk.pg_max_old) {
          c.shrunk = true;
          shrunk_nnz += c.len;
          std::swap(order[t], order[--active]);
          --t;
          continue;
        }
        if (g < 0.0) pg = g;
      } else if (b == Obj::kUpper) {
        if (g < blk.pg_min_old) {
          c.shrunk = true;
          shrunk_nnz += c.len;
          std::swap(order[t], order[--active]);
          --t;
          continue;
        }
        if (g > 0.0) pg = g;
      } else {
        pg = g;
      }
      pg_max = std::max(pg_max, pg);
      pg_min = std::min(pg_min, pg);
      // At a bound, pushed outwards: the coordinate's gap and step are 0.
      if (pg == 0.0) continue;
    }
    const double q = c.q;
    const DualStepOut st = DualStepper<Obj>::Step(c, z);
    gap_sum += st.gap;
    if (st.delta != 0.0) {
      nc_delta += st.nc_delta;
      const double dd = st.delta * inv_ln;
      // ||w + dd x||^2 - ||w||^2 = dd (2 x.w + dd ||x||^2), dd ||x||^2 = delta q.
      wsq_delta += dd * (2.0 * z + st.delta * q);
      if (run) {
        DenseRunAxpy(vx, c.len, dd, w + ix[0]);
      } else if (unit != 0.0) {
        SparseAxpy<kAtomic, true>(ix, nullptr, c.len, dd * unit, w);
      } else {
        SparseAxpy<kAtomic>(ix, vx, c.len, dd, w);
      }
    }
  }
  blk.active = active;
  if constexpr (kShrink) {
    s.pg_max = pg_max;
    s.pg_min = pg_min;
    s.began_full = began_full;
    if (!blk.shared_rule) ApplyShrinkRule(pg_max, pg_min, active == blk.size(), began_full, blk);
  }
  s.gap_sum = gap_sum;
  s.negconj_delta = nc_delta;
  s.wsq_delta = wsq_delta;
  s.nnz = nnz;
  s.shrunk_nnz = shrunk_nnz;
  return s;
}

/// RunDualEpoch with shrinking where the objective has bounds and it is asked for.
template <typename Obj, bool kAtomic, typename Sync = NoEpochSync>
DualEpochSums RunDualEpochMaybeShrink(bool shrink, const uint32_t* idx, const float* val,
                                      DualCoord* coords, double* w, double inv_ln,
                                      DualBlock& blk, Sync sync = Sync{}) {
  if constexpr (Obj::kShrinkable) {
    if (shrink) {
      return RunDualEpoch<Obj, kAtomic, true, Sync>(idx, val, coords, w, inv_ln, blk, sync);
    }
  }
  return RunDualEpoch<Obj, kAtomic, false, Sync>(idx, val, coords, w, inv_ln, blk, sync);
}

/// Exact values from alpha alone: w is rebuilt as A^T alpha / (lambda n) in
/// the same order as PrimalFromDual (so it is bitwise that vector), then the
/// margins give P, the per-coordinate gaps and sum NegConj.
struct DualExact {
  double primal = 0.0;
  double dual = 0.0;
  double gap = 0.0;
  double negconj_sum = 0.0;  ///< sum_i NegConj(alpha_i), to restart the running estimate
  double wsq = 0.0;          ///< ||w||^2
  double shrunk_gap = 0.0;   ///< the part of gap from shrunk coordinates
};

/// acc = sum over rows [b, e) of alpha_i x_i (unscaled), rows in order.
inline void SumAlphaRows(const CsrMatrix& x, const DualCoord* coords, int64_t b, int64_t e,
                         double* acc) {
  const uint32_t* idx = x.indices().data();
  const float* val = x.values().data();
  std::fill(acc, acc + x.cols(), 0.0);
  for (int64_t i = b; i < e; ++i) {
    const DualCoord& c = coords[i];
    const double a = c.alpha;
    if (a == 0.0) continue;
    if (c.run) {  // the same sums, on SIMD lanes
      DenseRunAxpy(val + c.begin, c.len, a, acc + idx[c.begin]);
      continue;
    }
    for (uint32_t k = 0; k < c.len; ++k) {
      acc[idx[c.begin + k]] += a * static_cast<double>(val[c.begin + k]);
    }
  }
}

/// w = A^T alpha / (lambda n) rebuilt from the coordinates in the order of
/// PrimalFromDual (so bitwise that vector); returns ||w||^2.
inline double RebuildDualW(const CsrMatrix& x, const DualCoord* coords, double lambda, double* w) {
  SumAlphaRows(x, coords, 0, x.rows(), w);
  const double scale = 1.0 / (lambda * static_cast<double>(x.rows()));
  double wsq = 0.0;
  for (int64_t j = 0; j < x.cols(); ++j) {
    w[j] *= scale;
    wsq += w[j] * w[j];
  }
  return wsq;
}

/// The certificate's sums over rows [b, e) at w: loss, coordinate gaps and
/// NegConj (kept with alpha by every step, DualStepper).
struct DualMarginSums {
  double loss = 0.0;
  double gap = 0.0;
  double nc = 0.0;
  double shrunk_gap = 0.0;  ///< of gap, the shrunk coordinates' part
};

template <typename Obj>
DualMarginSums SumDualMargins(const CsrMatrix& x, const DualCoord* coords, int64_t b, int64_t e,
                              const double* w) {
  const uint32_t* idx = x.indices().data();
  const float* val = x.values().data();
  DualMarginSums s;
  for (int64_t i = b; i < e; ++i) {
    const DualCoord& c = coords[i];
    const double z = c.run ? DenseRunDot(val + c.begin, c.len, w + idx[c.begin])
                           : SparseDot<false>(idx + c.begin, val + c.begin, c.len, w);
    double li, gi;
    Obj::LossAndGap(c.y, c.alpha, z, &li, &gi);
    s.loss += li;
    s.gap += gi;
    s.nc += c.nc;
    if (c.shrunk) s.shrunk_gap += gi;
  }
  return s;
}

/// The running estimates' starting values: w rebuilt, ||w||^2 and
/// sum NegConj (from the values kept with alpha). No margins: cheap.
inline DualExact DualStartState(const CsrMatrix& x, const DualCoord* coords, double lambda,
                                double* w) {
  DualExact e;
  e.wsq = RebuildDualW(x, coords, lambda, w);
  for (int64_t i = 0; i < x.rows(); ++i) e.negconj_sum += coords[i].nc;
  return e;
}

/// The exact values from the certificate's sums over all n rows and ||w||^2.
inline DualExact DualExactFrom(const DualMarginSums& s, double wsq, double lambda, int64_t n) {
  DualExact e;
  const double inv_n = 1.0 / static_cast<double>(n);
  e.primal = s.loss * inv_n + 0.5 * lambda * wsq;
  e.gap = s.gap * inv_n;
  e.shrunk_gap = s.shrunk_gap * inv_n;
  e.dual = e.primal - e.gap;
  e.negconj_sum = s.nc;
  e.wsq = wsq;
  return e;
}

template <typename Obj>
DualExact CertifyDualCoords(const CsrMatrix& x, const DualCoord* coords, double lambda,
                            double* w) {
  const double wsq = RebuildDualW(x, coords, lambda, w);
  return DualExactFrom(SumDualMargins<Obj>(x, coords, 0, x.rows(), w), wsq, lambda, x.rows());
}

/// Per-example data for a dataset: alpha at the objective's starting point.
template <typename Obj>
std::vector<DualCoord> MakeDualCoords(const Dataset& data, double lambda) {
  const int64_t n = data.x.rows();
  const double lambda_n = lambda * static_cast<double>(n);
  const std::vector<double> xx = data.x.OuterSquaredNorms();
  const std::vector<int64_t>& off = data.x.offsets();
  std::vector<DualCoord> coords(static_cast<std::size_t>(n));
  DualCoord prev{};  // the starting point depends on y only: reuse it (logs for logistic)
  bool have_prev = false;
  for (int64_t i = 0; i < n; ++i) {
    DualCoord& c = coords[i];
    c.y = data.y[i];
    if (have_prev && c.y == prev.y) {
      c.alpha = prev.alpha;
      c.nc = prev.nc;
      c.aux = prev.aux;
    } else {
      c.alpha = Obj::Initial(c.y, lambda_n);
      c.aux = 0.0;
      DualStepper<Obj>::Init(c);
      prev = c;
      have_prev = true;
    }
    c.q = xx[i] / lambda_n;
    c.begin = off[i];
    c.len = static_cast<uint32_t>(off[i + 1] - off[i]);
    c.unit = 0.0f;
    if (c.len > 0) {
      const float* v = data.x.values().data() + off[i];
      const float v0 = v[0];
      if (v0 != 0.0f && std::all_of(v, v + c.len, [v0](float x) { return x == v0; })) c.unit = v0;
    }
    c.run = c.unit == 0.0f && IsDenseRun(data.x.indices().data() + off[i], c.len);
  }
  return coords;
}

/// Certificates in a row that did not cut the best gap so far by 10%
/// before the engine hears of a stall. Several threads' stale gradients
/// near the optimum shrank coordinates that should move, and the gap sat
/// at 1e-9 for thousands of epochs (400 x 30 squared hinge, two threads
/// time-sliced on a loaded machine); one thread converges from there.
constexpr int kStallCertificates = 20;

/// A certificate taken beside the epochs (scd_dual_beside.hpp): of the
/// snapshot taken at the end of `epoch`.
struct BesideDone {
  int epoch = 0;
  int64_t nnz = 0;  ///< what that epoch read (its progress entry)
  DualExact exact;
};

/// Beside: the epochs' reads (in passes over the data) after which the
/// certificate in flight is waited for.
constexpr double kBesideMaxLagPasses = 4.0;
/// Beside: the fewest passes' worth of epoch work between rebuilds of w.
constexpr double kBesideResyncPasses = 4.0;

/// Whether Engine may take its certificates beside its epochs (DriveDualScd).
template <typename E, typename = void>
struct HasBeside : std::false_type {};
template <typename E>
struct HasBeside<E, std::void_t<decltype(std::declval<E&>().BesideOn())>> : std::true_type {};

/// The epoch loop shared by the sequential and asynchronous dual solvers.
/// `checker` was made before the engine, so that times include the setup.
/// Engine provides:
///   DualEpochSums RunEpoch();      one epoch over every block
///   DualExact Certify();           rebuild w from alpha, exact values
///   double NegConjSum(), WSq();    exact tracked values at the start
///   int64_t Nnz();                 nonzeros of the data (a pass's work)
///   void Unshrink();               bring every shrunk coordinate back
///   std::vector<double> Alpha();   the current alpha
///   std::vector<double> W();       w(alpha) after Certify (up to the
///                                  rounding of the certificate's sums)
///   void DualFell(int epoch);      the exact dual fell since the last
///                                  certificate (several threads: stale
///                                  steps overshot; one thread: rounding)
///   void Stalled(int since, int epoch);  the certificates of epochs
///                                  (since, epoch], kStallCertificates of
///                                  them, did not cut the best gap by 10%
/// and, where its certificates can run on another thread (HasBeside):
///   bool BesideOn();               they do in this run
///   bool BesideIdle();             none in flight or waiting
///   bool BesideStart(int epoch, int64_t nnz);  snapshot alpha (the rows
///                                  that changed) and certify it there;
///                                  false: no thread for it (BesideOn()
///                                  is false from then on)
///   std::optional<BesideDone> BesidePoll();  a finished one, once
///   std::optional<BesideDone> BesideWait();  the same, once none is in flight
///   void BesideAbandon();          stop the one in flight, dropping it
///   DualExact BesideResync();      rebuild w from alpha (its drift: no
///                                  certificate does it here); the exact
///                                  sum NegConj and ||w||^2
///   void BesideAdopt();            W() and Alpha() are then the snapshot's
///
/// Running estimates (O(1) per step): D exactly (up to rounding; up to the
/// races for several threads) from sum NegConj and ||w||^2 tracked through
/// every step; the gap as (1/n) sum_i of each coordinate's gap just before
/// its step (>= 0 term by term; the loss at pre-step margins alone is a
/// noisy, often low estimate of P), and P as D + that gap. They only decide when an exact certificate is worth a pass: every eval_every
/// epochs, and whenever the estimates satisfy the gap or target rule. A gap or
/// target stop needs the exact certificate, which covers every coordinate,
/// shrunk or not; when the estimate was satisfied but the certificate is not,
/// the shrunk coordinates are brought back if their own gaps (which the
/// estimate takes as 0) are what stands in the way.
///
/// Beside (BesideOn): a certificate is started whenever none is in flight
/// and the estimate satisfies the rule (or one is due), its calibration
/// taken only where it lowers kappa, so that near the end one certificate
/// follows another; the epochs go on meanwhile, and one that stops the run
/// returns its snapshot (TrainResult::epochs is that snapshot's epoch).
/// Which epoch that is depends on the threads' timing.
template <typename Obj, typename Engine>
TrainResult DriveDualScd(const SolverOptions& opt, double lambda, int64_t n, Engine& eng,
                         StopChecker& checker) {
  const double inv_n = 1.0 / static_cast<double>(n);
  double negconj_sum = eng.NegConjSum();
  double wsq = eng.WSq();
  StopReason reason = StopReason::kMaxEpochs;
  bool certified = false;  // `exact` describes the current iterate
  DualExact exact;
  int epoch = 0;
  int64_t last_nnz = 0;
  // The pre-step gaps overestimate the end-of-epoch gap (a coordinate's gap
  // grows with the steps of the others since its own step: a full epoch
  // before its step, half an epoch on average after it), typically 1.5-2x.
  // kappa scales the estimate. Every certificate recalibrates it (to 1.1x
  // the ratio it saw, so an estimate that was too low does not trigger again
  // at once), and it then relaxes back to kKappa0 with a half-life of
  // 4 passes' worth of work, so that no early, unrepresentative certificate
  // can keep the trigger off for long (nor keep it firing).
  constexpr double kKappa0 = 0.6;
  const double half_life = 4.0 * static_cast<double>(std::max<int64_t>(1, eng.Nnz()));
  double kappa_cal = kKappa0;
  double work_since_cert = 0.0;
  double work_total = 0.0;  // read by all epochs so far (eval_pacing)
  // The first certificate is judged against the starting dual (exact here):
  // against -inf, stale first-epoch steps that overshot below it would pass.
  double last_dual = negconj_sum * inv_n - 0.5 * lambda * wsq;
  double best_gap = std::numeric_limits<double>::infinity();
  int since_best = 0;  // certificates since best_gap was cut by 10%
  int best_epoch = 0;  // the epoch of that certificate
  // Beside: the running sums when the certificate in flight was started,
  // whether the estimate had asked for it, and the last unshrink (a
  // certificate of an earlier snapshot does not ask for another).
  double snap_negconj = 0.0, snap_wsq = 0.0, snap_gap_est = 0.0;
  bool snap_estimated = false;
  int unshrunk_at = 0;
  int adopted_epoch = 0;  // the snapshot returned (0: the current iterate)
  double work_since_resync = 0.0;
  // After a certificate (the current iterate's, or beside a snapshot's of
  // epoch `at`): the engine's warnings, the stall count, the report; the
  // reason to stop, if any.
  auto after_certificate = [&](int at, const DualExact& x,
                               int64_t nnz) -> std::optional<StopReason> {
    // Exact coordinate ascent never lowers the dual; asynchronous steps on
    // a stale w can (PASSCoDe's bound on the delay fails on dense columns
    // with many threads): the engine is told, and runs fewer threads.
    if (x.dual < last_dual - 1e-9 * std::abs(last_dual)) eng.DualFell(at);
    last_dual = x.dual;
    if (x.gap < 0.9 * best_gap) {
      best_gap = x.gap;
      since_best = 0;
      best_epoch = at;
    } else if (++since_best >= kStallCertificates) {
      eng.Stalled(best_epoch, at);
      best_gap = x.gap;
      since_best = 0;
      best_epoch = at;
    }
    return checker.AfterEpoch(CertifiedProgress(at, x.primal, x.dual, x.gap, nnz));
  };
  // A certificate against the estimate it was taken at: kappa to 1.1x the
  // ratio it saw (see above).
  auto calibrate = [&](double gap, double estimate) {
    if (estimate > 0.0) kappa_cal = std::min(4.0, std::max(0.25, 1.1 * gap / estimate));
  };
  // The run returns the snapshot a beside certificate was of (generic in
  // the engine: only beside engines instantiate it).
  auto adopt = [&](auto& beside_engine, const BesideDone& done) {
    exact = done.exact;
    certified = true;
    adopted_epoch = done.epoch;
    beside_engine.BesideAdopt();
  };
  for (;;) {
    if (auto r = checker.BeforeEpoch(epoch + 1)) {
      reason = *r;
      break;
    }
    ++epoch;
    const DualEpochSums s = eng.RunEpoch();
    certified = false;
    last_nnz = s.nnz;
    negconj_sum += s.negconj_delta;
    wsq = std::isnan(s.wsq_exact) ? wsq + s.wsq_delta : s.wsq_exact;
    const double d_est = negconj_sum * inv_n - 0.5 * lambda * wsq;
    const double gap_est = s.gap_sum * inv_n;
    work_since_cert += static_cast<double>(s.nnz);
    work_total += static_cast<double>(s.nnz);
    const double kappa =
        kKappa0 + (kappa_cal - kKappa0) * std::exp2(-work_since_cert / half_life);
    const double p_est = d_est + kappa * gap_est;
    const bool est_ok = checker.Satisfied(p_est, kappa * gap_est).has_value();
    const bool periodic = PeriodicCertificateDue(opt.eval_every, work_since_cert, eng.Nnz(),
                                                 opt.eval_pacing, work_total);
    if constexpr (HasBeside<Engine>::value) {
      if (eng.BesideOn()) {
        std::optional<BesideDone> done = eng.BesidePoll();
        // A certificate is about two passes of streaming reads, so it lags
        // this far behind only where its thread does not run (a virtual
        // CPU descheduled by the host): waiting lets it run here.
        if (!done && !eng.BesideIdle() &&
            work_since_cert >= kBesideMaxLagPasses * static_cast<double>(eng.Nnz())) {
          done = eng.BesideWait();
        }
        if (done) {
          const DualExact& x = done->exact;
          // The running sums take the drift the certificate found (it is
          // of the snapshot; the steps since are in both).
          negconj_sum += x.negconj_sum - snap_negconj;
          wsq += x.wsq - snap_wsq;
          if (auto r = after_certificate(done->epoch, x, done->nnz)) {
            reason = *r;
            adopt(eng, *done);
            break;
          }
          calibrate(x.gap, snap_gap_est);
          if (snap_estimated && done->epoch >= unshrunk_at &&
              x.shrunk_gap > 0.5 * checker.GapAllowed(x.primal)) {
            eng.Unshrink();
            unshrunk_at = epoch + 1;
          }
        }
        // The steps' rounding drifts w from w(alpha); a certificate on
        // this thread rebuilt it, so here a pass does it now and then
        // (every quarter of the work so far, at least 4 passes apart),
        // between certificates (their drift correction assumes none).
        work_since_resync += static_cast<double>(s.nnz);
        if (work_since_resync >= std::max(kBesideResyncPasses * static_cast<double>(eng.Nnz()),
                                          0.25 * work_total) &&
            eng.BesideIdle()) {
          const DualExact e = eng.BesideResync();
          negconj_sum = e.negconj_sum;
          wsq = e.wsq;
          work_since_resync = 0.0;
        }
        // A certificate here costs this thread only the copy: a
        // calibration that found the estimate low does not hold the next
        // one back (one that found it high lets them come sooner).
        const double kappa_b = std::min(kKappa0, kappa);
        const bool est_b =
            checker.Satisfied(d_est + kappa_b * gap_est, kappa_b * gap_est).has_value();
        if (!((periodic || est_b) && eng.BesideIdle())) continue;
        if (eng.BesideStart(epoch, s.nnz)) {
          snap_negconj = negconj_sum;
          snap_wsq = wsq;
          snap_gap_est = gap_est;
          snap_estimated = est_b;
          work_since_cert = 0.0;
          continue;
        }
        // No second thread after all (BesideOn() is now false): this one
        // certifies from here on.
      }
    }
    if (!periodic && !est_ok) continue;
    exact = eng.Certify();
    certified = true;
    calibrate(exact.gap, gap_est);
    work_since_cert = 0.0;
    negconj_sum = exact.negconj_sum;
    wsq = exact.wsq;
    if (auto r = after_certificate(epoch, exact, s.nnz)) {
      reason = *r;
      break;
    }
    // The estimate said done and the certificate did not: bring the shrunk
    // coordinates back only where they hold half the gap the rule allows
    // (they then keep the run from stopping whatever the active set does).
    // Else the active set's own gap is what is left, and a full pass after
    // every such certificate cost more than it gained (w8a hinge at a gap of
    // 3e-5: 15 unshrunk passes in 23 epochs, 83 -> 72 ms without them).
    if (est_ok && exact.shrunk_gap > 0.5 * checker.GapAllowed(exact.primal)) eng.Unshrink();
  }
  if constexpr (HasBeside<Engine>::value) {
    // Out of epochs, the certificate in flight may stop the run as well,
    // and if it is of the last epoch it is the result's. Cancelled or out
    // of time, it is dropped (its thread stops at once).
    if (eng.BesideOn() && adopted_epoch == 0) {
      if (reason == StopReason::kCancelled || reason == StopReason::kTimeBudget) {
        eng.BesideAbandon();
      } else if (std::optional<BesideDone> done = eng.BesideWait()) {
        const std::optional<StopReason> r =
            after_certificate(done->epoch, done->exact, done->nnz);
        if (r || done->epoch == epoch) {
          if (r) reason = *r;
          adopt(eng, *done);
        }
      }
    }
  }
  if (!certified) {
    exact = eng.Certify();
    if (epoch > 0) {
      checker.AfterEpoch(CertifiedProgress(epoch, exact.primal, exact.dual, exact.gap, last_nnz));
    }
  }
  TrainResult result;
  result.w = eng.W();
  result.alpha = eng.Alpha();
  result.primal = exact.primal;
  result.dual = exact.dual;
  result.gap = exact.gap;
  result.epochs = adopted_epoch > 0 ? adopted_epoch : epoch;
  result.rounds = static_cast<int>(result.epochs);
  result.reason = reason;
  result.seconds = checker.Elapsed();
  result.history = checker.TakeHistory();
  return result;
}

}  // namespace dml::internal
