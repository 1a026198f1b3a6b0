#define BOOST_TEST_MODULE newton
// The truncated Newton solver (solver/newton.cpp) and the auto choice:
// ridge against its closed form, logistic and squared hinge against their
// optimality conditions computed here, on features whose units span 4
// decades, with 1 and 2 threads; hinge (smoothed) against dual CD and its
// own tighter runs; stops, errors and the auto choice.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <iomanip>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "dml/data/synthetic.hpp"
#include "dml/objective/evaluate.hpp"
#include "dml/objective/losses.hpp"
#include "dml/objective/model.hpp"
#include "dml/objective/newton_certificate.hpp"
#include "dml/solver/internal/chunks.hpp"
#include "dml/solver/internal/solvers.hpp"
#include "dml/solver/solver.hpp"
#include "dml/util/rng.hpp"
#include "unscaled_problem.hpp"

namespace {

using dml::testing::UnscaledProblem;

dml::SolverOptions NewtonOptions(int threads = 1) {
  dml::SolverOptions o;
  o.kind = dml::SolverKind::kNewton;
  o.threads = threads;
  o.fit_threads = false;  // run every thread even on these small problems
  o.stop.gap_rel = 1e-10;
  return o;
}

// Dense d x d system solved by Gaussian elimination with partial pivoting.
std::vector<double> Solve(std::vector<std::vector<double>> a, std::vector<double> b) {
  const std::size_t d = b.size();
  for (std::size_t c = 0; c < d; ++c) {
    std::size_t p = c;
    for (std::size_t r = c + 1; r < d; ++r) {
      if (std::abs(a[r][c]) > std::abs(a[p][c])) p = r;
    }
    std::swap(a[c], a[p]);
    std::swap(b[c], b[p]);
    for (std::size_t r = c + 1; r < d; ++r) {
      const double f = a[r][c] / a[c][c];
      for (std::size_t k = c; k < d; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  std::vector<double> x(d);
  for (std::size_t c = d; c-- > 0;) {
    double s = b[c];
    for (std::size_t k = c + 1; k < d; ++k) s -= a[c][k] * x[k];
    x[c] = s / a[c][c];
  }
  return x;
}

// grad P(w) = (1/n) sum_i loss'(y_i, x_i.w) x_i + lambda w, computed here.
template <typename Loss>
std::vector<double> Gradient(const dml::Dataset& data, double lambda, const std::vector<double>& w) {
  const double n = static_cast<double>(data.x.rows());
  std::vector<double> g(w.size(), 0.0);
  for (int64_t i = 0; i < data.x.rows(); ++i) {
    const dml::SparseView r = data.x.outer(i);
    double z = 0.0;
    for (std::size_t k = 0; k < r.size; ++k) z += r.value[k] * w[r.index[k]];
    const double d = Loss::Derivative(data.y[i], z);
    for (std::size_t k = 0; k < r.size; ++k) g[r.index[k]] += d * r.value[k] / n;
  }
  for (std::size_t j = 0; j < w.size(); ++j) g[j] += lambda * w[j];
  return g;
}

double MaxAbs(const std::vector<double>& v) {
  double m = 0.0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

/// Generated data of the given shape: regression labels (unused by
/// AutoSolver) unless told otherwise, features in units over `decades`.
dml::Dataset Generated(int64_t rows, int64_t cols, int64_t nnz_per_row, uint64_t seed,
                       dml::Task task = dml::Task::kRegression, double noise = 0.0,
                       double decades = 0.0) {
  dml::SyntheticOptions g;
  g.rows = rows;
  g.cols = cols;
  g.nnz_per_row = nnz_per_row;
  g.seed = seed;
  g.task = task;
  g.noise = noise;
  g.scale_decades = decades;
  auto gen = dml::GenerateSynthetic(g);
  BOOST_REQUIRE_MESSAGE(gen.ok(), gen.status().ToString());
  return std::move(gen->data);
}

}  // namespace

BOOST_AUTO_TEST_CASE(ridge_matches_its_closed_form_on_unscaled_features) {
  const dml::Dataset data = UnscaledProblem(30, 4.0, dml::Task::kRegression);
  const dml::ModelSpec m{dml::ModelKind::kRidge, 1e-3, 0.5};
  // (A^T A / n + lambda I) w = A^T y / n.
  const std::size_t d = 30;
  const double n = static_cast<double>(data.x.rows());
  std::vector<std::vector<double>> h(d, std::vector<double>(d, 0.0));
  std::vector<double> rhs(d, 0.0);
  for (int64_t i = 0; i < data.x.rows(); ++i) {
    const dml::SparseView r = data.x.outer(i);
    for (std::size_t a = 0; a < r.size; ++a) {
      rhs[r.index[a]] += r.value[a] * data.y[i] / n;
      for (std::size_t b = 0; b < r.size; ++b) {
        h[r.index[a]][r.index[b]] += static_cast<double>(r.value[a]) * r.value[b] / n;
      }
    }
  }
  for (std::size_t j = 0; j < d; ++j) h[j][j] += m.lambda;
  const std::vector<double> exact = Solve(h, rhs);
  for (int threads : {1, 2}) {
    auto r = dml::Train(data, m, NewtonOptions(threads));
    BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    BOOST_TEST((r->reason == dml::StopReason::kConverged));
    BOOST_TEST(r->threads == threads);
    // The features' scales make H's condition number about 1e9: w is
    // pinned down to ~1e-5 of its size only. The objective is within the
    // asked relative gap, 1e-10, above the exact optimum, and not below it.
    auto p = dml::PrimalValue(data, m, exact);
    BOOST_REQUIRE(p.ok());
    BOOST_TEST(r->primal - *p <= 1e-10 * *p, std::setprecision(17) << r->primal << " vs " << *p);
    BOOST_TEST(r->primal - *p >= -1e-13 * *p, std::setprecision(17) << r->primal << " vs " << *p);
    for (std::size_t j = 0; j < d; ++j) {
      BOOST_TEST(std::abs(r->w[j] - exact[j]) <= 1e-4 * MaxAbs(exact),
                 "w[" << j << "] " << r->w[j] << " vs " << exact[j]);
    }
    BOOST_TEST(r->gap <= 1e-10 * r->primal);
  }
}

BOOST_AUTO_TEST_CASE(logistic_and_squared_hinge_meet_their_optimality_conditions_unscaled) {
  // 40 dense columns: the explicit Hessian (Cholesky); 80: forming it
  // would cost more than 16 nnz (newton.cpp), so CG.
  for (int64_t cols : {40, 80}) {
  const dml::Dataset data = UnscaledProblem(cols, 4.0);
  for (auto kind : {dml::ModelKind::kLogisticL2, dml::ModelKind::kSquaredHingeSvm}) {
    const dml::ModelSpec m{kind, 1.0 / 2000.0, 0.5};  // LIBLINEAR's C = 1
    std::vector<double> primal;
    for (int threads : {1, 2}) {
      auto r = dml::Train(data, m, NewtonOptions(threads));
      BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
      BOOST_TEST((r->reason == dml::StopReason::kConverged), dml::ModelName(kind));
      // The certificate is recomputed independently: a bound on P - P*.
      auto c = dml::CertifyIterateNewton(data, m, r->w, 50);
      BOOST_REQUIRE(c.ok());
      BOOST_TEST(c->gap <= 1e-8 * c->primal, dml::ModelName(kind) << " gap " << c->gap);
      BOOST_TEST(std::abs(c->primal - r->primal) <= 1e-12 * r->primal);
      // First-order optimality, relative to the gradient at w = 0.
      const std::vector<double> zero(r->w.size(), 0.0);
      const double g0 = kind == dml::ModelKind::kLogisticL2
                            ? MaxAbs(Gradient<dml::loss::Logistic>(data, m.lambda, zero))
                            : MaxAbs(Gradient<dml::loss::SquaredHinge>(data, m.lambda, zero));
      const double g = kind == dml::ModelKind::kLogisticL2
                           ? MaxAbs(Gradient<dml::loss::Logistic>(data, m.lambda, r->w))
                           : MaxAbs(Gradient<dml::loss::SquaredHinge>(data, m.lambda, r->w));
      BOOST_TEST(g <= 1e-5 * g0, dml::ModelName(kind) << " |grad| " << g << " of " << g0);
      primal.push_back(r->primal);
    }
    BOOST_TEST(std::abs(primal[0] - primal[1]) <= 1e-9 * primal[0]);
  }
  }
}

// One-hot groups and other 0/1 columns, as a9a and w8a have them: rows
// whose values are all 1 take the explicit Hessian's binary path
// (AddRowProducts' 0/1 rows), every other row the products. With every value
// doubled instead, no row is binary, and P(w; 2X, lambda) = P(2w; X,
// lambda / 4): Newton's iterates correspond, so the two runs take the same
// iterations to the same primal, with w halved. A Hessian summed wrongly on
// either path would change the iterations or the optimum.
BOOST_AUTO_TEST_CASE(binary_rows_form_the_same_hessian_as_their_products) {
  dml::Rng rng(17);
  const int64_t rows = 1500, cols = 26;
  std::vector<int64_t> off{0};
  std::vector<uint32_t> idx;
  std::vector<float> ones, twos, y;
  for (int64_t i = 0; i < rows; ++i) {
    double margin = 0.0;
    for (uint32_t g = 0; g < 3; ++g) {  // three one-hot groups of 4
      const uint32_t j = 4 * g + static_cast<uint32_t>(rng.Uniform() * 4.0);
      idx.push_back(j);
      margin += (j % 3 == 0 ? 1.0 : -0.5);
    }
    for (uint32_t j = 12; j < cols; ++j) {
      if (rng.Uniform() < 0.3) {
        idx.push_back(j);
        margin += (j % 2 == 0 ? 0.7 : -0.4);
      }
    }
    off.push_back(static_cast<int64_t>(idx.size()));
    y.push_back(margin + rng.Uniform() - 0.5 > 0 ? 1.0f : -1.0f);
  }
  ones.assign(idx.size(), 1.0f);
  twos.assign(idx.size(), 2.0f);
  auto x1 = dml::CsrMatrix::FromArrays(rows, cols, off, idx, ones);
  auto x2 = dml::CsrMatrix::FromArrays(rows, cols, off, idx, twos);
  BOOST_REQUIRE(x1.ok());
  BOOST_REQUIRE(x2.ok());
  const dml::Dataset binary{*std::move(x1), y, dml::Task::kClassification, {}};
  const dml::Dataset doubled{*std::move(x2), y, dml::Task::kClassification, {}};
  for (auto kind : {dml::ModelKind::kLogisticL2, dml::ModelKind::kSquaredHingeSvm}) {
    for (int threads : {1, 2}) {
      const double lambda = 1e-3;
      auto a = dml::Train(binary, dml::ModelSpec{kind, lambda / 4.0, 0.5}, NewtonOptions(threads));
      auto b = dml::Train(doubled, dml::ModelSpec{kind, lambda, 0.5}, NewtonOptions(threads));
      BOOST_REQUIRE(a.ok());
      BOOST_REQUIRE(b.ok());
      BOOST_TEST((a->reason == dml::StopReason::kConverged));
      BOOST_TEST((b->reason == dml::StopReason::kConverged));
      BOOST_TEST(a->rounds == b->rounds, dml::ModelName(kind) << " iterations " << a->rounds
                                                                << " vs " << b->rounds);
      BOOST_TEST(a->rounds <= 12, dml::ModelName(kind) << " " << a->rounds << " iterations");
      BOOST_TEST(std::abs(a->primal - b->primal) <= 1e-12 * a->primal,
                 std::setprecision(17) << a->primal << " vs " << b->primal);
      for (std::size_t j = 0; j < a->w.size(); ++j) {
        BOOST_TEST(std::abs(a->w[j] - 2.0 * b->w[j]) <= 1e-7 * (MaxAbs(a->w) + 1e-12),
                   "w[" << j << "] " << a->w[j] << " vs 2 x " << b->w[j]);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(agrees_with_scd_where_scd_converges) {
  const dml::Dataset data = Generated(600, 50, 8, 1, dml::Task::kClassification, 0.2);
  for (auto kind : {dml::ModelKind::kLogisticL2, dml::ModelKind::kSquaredHingeSvm,
                    dml::ModelKind::kRidge}) {
    const dml::ModelSpec m{kind, 1e-3, 0.5};
    dml::SolverOptions scd;
    scd.stop.gap_rel = 1e-10;
    scd.stop.max_epochs = 20000;
    auto a = dml::Train(data, m, scd);
    auto b = dml::Train(data, m, NewtonOptions(2));
    BOOST_REQUIRE(a.ok());
    BOOST_REQUIRE(b.ok());
    BOOST_TEST((a->reason == dml::StopReason::kConverged));
    BOOST_TEST((b->reason == dml::StopReason::kConverged));
    BOOST_TEST(std::abs(a->primal - b->primal) <= 1e-9 * a->primal, dml::ModelName(kind));
    for (std::size_t j = 0; j < a->w.size(); ++j) {
      BOOST_TEST(std::abs(a->w[j] - b->w[j]) <= 1e-3 * (MaxAbs(a->w) + 1e-12));
    }
  }
}

// Hinge on unscaled tabular rows (OffsetProblem: units over 5 decades,
// offset columns). Dual CD ends its 1000 epochs far from the optimum;
// newton's smoothed stages certify a gap of 1e-4 of P. Its certificate is
// checked against what it can be checked on without its own code: its
// primal is P(w) summed here, its dual is below the primal of every other
// point (dual CD's, a tighter run's), and the tighter run's primal is
// within the looser run's gap of it.
BOOST_AUTO_TEST_CASE(hinge_is_certified_on_unscaled_rows_where_dual_cd_is_not) {
  const dml::Dataset data = dml::testing::OffsetProblem(2000, 30);
  const dml::ModelSpec m{dml::ModelKind::kHingeSvm, 1.0 / 2000.0, 0.5};  // LIBLINEAR's C = 1
  dml::SolverOptions scd;
  scd.kind = dml::SolverKind::kScd;
  scd.stop.gap_rel = 1e-4;
  auto cd = dml::Train(data, m, scd);
  BOOST_REQUIRE(cd.ok());
  BOOST_TEST((cd->reason == dml::StopReason::kMaxEpochs));
  BOOST_TEST(cd->gap > 0.1 * cd->primal, "dual CD's gap " << cd->gap);
  std::vector<double> primal;
  for (int threads : {1, 2}) {
    dml::SolverOptions o = NewtonOptions(threads);
    o.stop.gap_rel = 1e-4;
    auto r = dml::Train(data, m, o);
    BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    BOOST_TEST((r->reason == dml::StopReason::kConverged), r->note);
    BOOST_TEST(r->threads == threads);
    BOOST_TEST(r->gap <= 1e-4 * r->primal);
    BOOST_TEST(r->gap >= 0.0);
    auto p = dml::PrimalValue(data, m, r->w);
    BOOST_REQUIRE(p.ok());
    BOOST_TEST(std::abs(*p - r->primal) <= 1e-12 * r->primal,
               std::setprecision(17) << *p << " vs " << r->primal);
    // Dual CD's iterate is no better, and each dual bounds the other's primal.
    BOOST_TEST(r->primal < 0.9 * cd->primal, r->primal << " vs dual CD's " << cd->primal);
    BOOST_TEST(r->dual <= cd->primal);
    BOOST_TEST(cd->dual <= r->primal);
    primal.push_back(r->primal);
  }
  BOOST_TEST(std::abs(primal[0] - primal[1]) <= 1e-4 * primal[0]);
  dml::SolverOptions t = NewtonOptions();
  t.stop.gap_rel = 1e-6;
  auto tight = dml::Train(data, m, t);
  BOOST_REQUIRE(tight.ok());
  BOOST_TEST_MESSAGE("tight: " << dml::StopReasonName(tight->reason) << ", P " << tight->primal
                               << ", gap " << tight->gap << "; " << tight->note);
  BOOST_TEST((tight->reason == dml::StopReason::kConverged), tight->note);
  BOOST_TEST(tight->gap <= 1e-6 * tight->primal);
  auto pt = dml::PrimalValue(data, m, tight->w);
  BOOST_REQUIRE(pt.ok());
  BOOST_TEST(std::abs(*pt - tight->primal) <= 1e-12 * tight->primal);
  BOOST_TEST(primal[0] - tight->primal <= 1e-4 * primal[0] + 1e-15);
  BOOST_TEST(tight->dual <= primal[0]);
  BOOST_TEST(tight->primal <= primal[0] + tight->gap);
  BOOST_TEST(cd->dual <= tight->primal);
}

// Asked for more than the smallest smoothing can give, the smoothed hinge
// stops once its P_mu no longer moves (not after max_epochs iterations), on
// the best certificate it had, and says so.
BOOST_AUTO_TEST_CASE(hinge_stops_where_its_smallest_smoothing_stalls) {
  const dml::Dataset data = dml::testing::OffsetProblem(569, 30);
  const dml::ModelSpec m{dml::ModelKind::kHingeSvm, 1.0 / 569.0, 0.5};
  dml::SolverOptions o = NewtonOptions();
  o.stop.gap_rel = 1e-14;
  auto r = dml::Train(data, m, o);
  BOOST_REQUIRE(r.ok());
  BOOST_TEST_MESSAGE("1e-14: " << dml::StopReasonName(r->reason) << " after " << r->rounds
                               << " iterations, gap " << r->gap << "; " << r->note);
  BOOST_TEST((r->reason == dml::StopReason::kMaxEpochs));
  BOOST_TEST(r->rounds < 500);
  BOOST_TEST(r->note.find("no progress over 10 iterations at the smallest smoothing") !=
                 std::string::npos,
             r->note);
  BOOST_TEST(r->gap <= 1e-6 * r->primal);
  auto p = dml::PrimalValue(data, m, r->w);
  BOOST_REQUIRE(p.ok());
  BOOST_TEST(std::abs(*p - r->primal) <= 1e-12 * r->primal);
}

// Where dual CD converges (generated rows in one unit), the smoothed
// hinge's optimum is dual CD's: objectives within 1e-6 relative.
BOOST_AUTO_TEST_CASE(hinge_agrees_with_scd_where_scd_converges) {
  const dml::Dataset data = Generated(600, 50, 8, 1, dml::Task::kClassification, 0.2);
  for (double lambda : {1e-3, 1.0 / 600.0 / 10.0}) {
    const dml::ModelSpec m{dml::ModelKind::kHingeSvm, lambda, 0.5};
    dml::SolverOptions scd;
    scd.stop.gap_rel = 1e-10;
    scd.stop.max_epochs = 20000;
    auto a = dml::Train(data, m, scd);
    dml::SolverOptions o = NewtonOptions(2);
    o.stop.gap_rel = 1e-7;
    auto b = dml::Train(data, m, o);
    BOOST_REQUIRE(a.ok());
    BOOST_REQUIRE(b.ok());
    BOOST_TEST((a->reason == dml::StopReason::kConverged));
    BOOST_TEST((b->reason == dml::StopReason::kConverged), b->note);
    BOOST_TEST(std::abs(a->primal - b->primal) <= 1e-6 * a->primal,
               std::setprecision(17) << a->primal << " vs " << b->primal);
    BOOST_TEST(b->dual <= a->primal);
    BOOST_TEST(a->dual <= b->primal);
  }
}

// auto's hinge by dual CD that uses its epochs up short of the rule (tall
// rows in one unit, a tight rule) hands its w to the smoothed-hinge
// Newton, which certifies the rule; the result's primal is P(w) and
// within the gaps of dual CD's after 20000 epochs (whose gap stays above
// 1e-8 there). With a target, no hand-over.
BOOST_AUTO_TEST_CASE(auto_hinge_hands_a_stalled_dual_cd_over_to_newton) {
  const dml::Dataset data = Generated(3000, 40, 8, 4, dml::Task::kClassification, 0.3);
  const dml::ModelSpec m{dml::ModelKind::kHingeSvm, 1e-5, 0.5};
  dml::SolverOptions o;
  o.kind = dml::SolverKind::kAuto;
  o.stop.gap_rel = 1e-8;
  o.stop.max_epochs = 150;
  auto r = dml::Train(data, m, o);
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  BOOST_TEST((r->reason == dml::StopReason::kConverged), r->note);
  BOOST_TEST(r->gap <= 1e-8 * r->primal);
  BOOST_TEST(r->note.find("dual coordinate descent ended its 150 epochs at a gap of ") !=
                 std::string::npos,
             r->note);
  BOOST_TEST(r->note.find("the smoothed-hinge Newton from its w then certified") !=
                 std::string::npos,
             r->note);
  BOOST_TEST(r->epochs > 150.0);
  // Newton's progress continues dual CD's (rounds and seconds go on).
  BOOST_REQUIRE(!r->history.empty());
  for (std::size_t k = 1; k < r->history.size(); ++k) {
    BOOST_TEST(r->history[k].round >= r->history[k - 1].round);
    BOOST_TEST(r->history[k].seconds >= r->history[k - 1].seconds);
  }
  BOOST_TEST(r->history.back().round > 150);
  auto p = dml::PrimalValue(data, m, r->w);
  BOOST_REQUIRE(p.ok());
  BOOST_TEST(std::abs(*p - r->primal) <= 1e-12 * r->primal);
  dml::SolverOptions scd;
  scd.stop.gap_rel = 1e-10;
  scd.stop.max_epochs = 20000;
  auto ref = dml::Train(data, m, scd);
  BOOST_REQUIRE(ref.ok());
  BOOST_TEST_MESSAGE("dual CD, 20000 epochs: " << dml::StopReasonName(ref->reason) << ", P "
                                                << ref->primal << ", gap " << ref->gap);
  // Each primal is within its own gap above min P.
  BOOST_TEST(std::abs(ref->primal - r->primal) <= std::max(ref->gap, r->gap),
             std::setprecision(17) << ref->primal << " (gap " << ref->gap << ") vs " << r->primal
                                   << " (gap " << r->gap << ")");
  BOOST_TEST(r->primal <= ref->primal, "newton's certified point is the better");
  BOOST_TEST(r->dual <= ref->primal);
  BOOST_TEST(ref->dual <= r->primal);
  dml::SolverOptions t = o;
  t.stop.target_primal = 0.0;  // never reached: dual CD's epochs, no hand-over
  auto tr = dml::Train(data, m, t);
  BOOST_REQUIRE(tr.ok());
  BOOST_TEST((tr->reason == dml::StopReason::kMaxEpochs));
  BOOST_TEST(tr->note.find("smoothed-hinge") == std::string::npos, tr->note);
}

BOOST_AUTO_TEST_CASE(auto_runs_newton_for_smooth_models_and_scd_for_the_others) {
  using dml::ModelKind;
  using dml::SolverKind;
  const dml::Dataset tall = UnscaledProblem(40, 0.0);  // 40 x 4, one unit
  auto pick = [](ModelKind k, const dml::Dataset& d, int threads) {
    return dml::AutoSolver({k, 1e-3, 0.5}, d, threads);
  };
  BOOST_TEST((pick(ModelKind::kLogisticL2, tall, 1) == SolverKind::kNewton));
  BOOST_TEST((pick(ModelKind::kSquaredHingeSvm, tall, 1) == SolverKind::kNewton));
  BOOST_TEST((pick(ModelKind::kRidge, tall, 2) == SolverKind::kNewton));
  BOOST_TEST((pick(ModelKind::kHingeSvm, tall, 1) == SolverKind::kScd));
  // Hinge: the threads where they keep per-thread replicas of w (at most
  // 4096 features, rows of at least 128 nonzeros), else one.
  BOOST_TEST((pick(ModelKind::kHingeSvm, tall, 2) == SolverKind::kScd));
  const dml::Dataset long_rows = Generated(50, 200, 150, 6);
  BOOST_TEST((pick(ModelKind::kHingeSvm, long_rows, 2) == SolverKind::kAsyncScd));
  BOOST_TEST((pick(ModelKind::kHingeSvm, long_rows, 1) == SolverKind::kScd));
  // L1-logistic: two threads on tall data or long columns, one on wide.
  BOOST_TEST((pick(ModelKind::kLogisticL1, tall, 2) == SolverKind::kAsyncScd));
  const dml::Dataset long_columns = Generated(5000, 4, 4, 5);
  BOOST_TEST((pick(ModelKind::kLogisticL1, long_columns, 2) == SolverKind::kAsyncScd));
  BOOST_TEST((pick(ModelKind::kLogisticL1, long_columns, 1) == SolverKind::kScd));
  BOOST_TEST((pick(ModelKind::kLasso, tall, 2) == SolverKind::kScd));
  // Wide (more features than examples, as documents are): dual CD for the
  // models whose dual step is closed-form; newton stays for logistic.
  dml::Dataset wide;  // 6 x 12, two nonzeros a row
  {
    std::vector<int64_t> off;
    std::vector<uint32_t> idx;
    std::vector<float> val;
    for (uint32_t i = 0; i < 6; ++i) {
      off.push_back(2 * i);
      idx.insert(idx.end(), {2 * i, 2 * i + 1});
      val.insert(val.end(), {1.0f, 0.5f});
      wide.y.push_back(i % 2 ? 1.0f : -1.0f);
    }
    off.push_back(12);
    auto x = dml::CsrMatrix::FromArrays(6, 12, off, idx, val);
    BOOST_REQUIRE(x.ok());
    wide.x = *std::move(x);
  }
  BOOST_TEST((pick(ModelKind::kSquaredHingeSvm, wide, 1) == SolverKind::kScd));
  BOOST_TEST((pick(ModelKind::kRidge, wide, 2) == SolverKind::kScd));
  BOOST_TEST((pick(ModelKind::kLogisticL2, wide, 2) == SolverKind::kNewton));
  BOOST_TEST((pick(ModelKind::kLogisticL1, wide, 2) == SolverKind::kScd));
  BOOST_TEST((pick(ModelKind::kHingeSvm, wide, 2) == SolverKind::kScd));
  // Fewer threads than asked: the summary says so.
  dml::SolverOptions two;
  two.kind = SolverKind::kAuto;
  two.threads = 2;
  auto hinge = dml::Train(tall, {ModelKind::kHingeSvm, 1e-2, 0.5}, two);
  BOOST_REQUIRE(hinge.ok());
  BOOST_TEST(hinge->note == "solver auto ran scd's epochs on 1 thread of 2 (hinge: per-thread copies of w "
                            "need at most 4096 features and rows of at least 128 nonzeros on "
                            "average; elsewhere the asynchronous engine's threads lost to one); "
                            "its exact certificates ran on a second thread, beside the epochs",
             hinge->note);
  BOOST_TEST(hinge->threads == 2);
  const dml::Dataset data = UnscaledProblem(40, 4.0);
  dml::SolverOptions o;
  o.kind = dml::SolverKind::kAuto;
  auto r = dml::Train(data, {dml::ModelKind::kLogisticL2, 1.0 / 2000.0, 0.5}, o);
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(r->note.rfind("solver auto ran newton", 0) == 0, r->note);
  BOOST_TEST((r->reason == dml::StopReason::kConverged));
  BOOST_TEST(r->gap <= 1e-6 * r->primal);
  // Hinge on those units: newton on the smoothed hinge (dual CD crawls),
  // but not on more features than examples (its CG crawls there).
  BOOST_TEST((pick(ModelKind::kHingeSvm, data, 2) == SolverKind::kNewton));
  {
    const dml::Dataset wide_unscaled = Generated(30, 40, 40, 1, dml::Task::kClassification, 0.0, 4.0);
    BOOST_TEST((pick(ModelKind::kHingeSvm, wide_unscaled, 1) == SolverKind::kScd));
    dml::SolverOptions few;
    few.kind = SolverKind::kAuto;
    few.stop.max_epochs = 5;
    auto wide_hinge = dml::Train(wide_unscaled, {ModelKind::kHingeSvm, 1e-4, 0.5}, few);
    BOOST_REQUIRE(wide_hinge.ok());
    BOOST_TEST(wide_hinge->note.find("scale the features (solver newton's smoothed hinge is slow "
                                     "on more features than examples)") != std::string::npos,
               wide_hinge->note);
    BOOST_TEST((pick(ModelKind::kSquaredHingeSvm, wide_unscaled, 1) == SolverKind::kNewton));
  }
  auto h = dml::Train(data, {dml::ModelKind::kHingeSvm, 1e-2, 0.5}, o);
  BOOST_REQUIRE(h.ok());
  BOOST_TEST(h->note.rfind("solver auto ran newton; truncated Newton on the hinge smoothed", 0) == 0,
             h->note);
  BOOST_TEST((h->reason == dml::StopReason::kConverged));
}

BOOST_AUTO_TEST_CASE(stops_on_target_epochs_and_cancel_and_refuses_nonsmooth_models) {
  const dml::Dataset data = UnscaledProblem(40, 4.0);
  const dml::ModelSpec m{dml::ModelKind::kLogisticL2, 1.0 / 2000.0, 0.5};
  // Target: a primal 1% above the optimum is reached before convergence;
  // two iterations end on max epochs above it; a set cancel flag stops at
  // once. For logistic, and for hinge (its smoothed stages).
  std::atomic<bool> cancel{true};
  auto rules = [&](const dml::ModelSpec& spec, const dml::SolverOptions& base) {
    const std::string name(dml::ModelName(spec.kind));
    auto full = dml::Train(data, spec, base);
    BOOST_REQUIRE(full.ok());
    BOOST_TEST((full->reason == dml::StopReason::kConverged), name << ": " << full->note);
    dml::SolverOptions t = base;
    t.stop.gap_rel = 0;
    t.stop.target_primal = full->primal * 1.01;
    auto tr = dml::Train(data, spec, t);
    BOOST_REQUIRE(tr.ok());
    BOOST_TEST((tr->reason == dml::StopReason::kTargetReached), name);
    BOOST_TEST(tr->primal <= full->primal * 1.01, name);
    BOOST_TEST(tr->rounds < full->rounds, name);
    dml::SolverOptions e = base;
    e.stop.max_epochs = 2;
    auto er = dml::Train(data, spec, e);
    BOOST_REQUIRE(er.ok());
    BOOST_TEST((er->reason == dml::StopReason::kMaxEpochs), name);
    BOOST_TEST(er->rounds == 2, name);
    BOOST_TEST(er->primal > full->primal, name);
    dml::SolverOptions c = base;
    c.stop.cancel = &cancel;
    auto cr = dml::Train(data, spec, c);
    BOOST_REQUIRE(cr.ok());
    BOOST_TEST((cr->reason == dml::StopReason::kCancelled), name);
    BOOST_TEST(cr->rounds == 0, name);
  };
  rules(m, NewtonOptions());
  dml::SolverOptions hinge = NewtonOptions();
  hinge.stop.gap_rel = 1e-6;
  rules({dml::ModelKind::kHingeSvm, 1.0 / 2000.0, 0.5}, hinge);
  for (auto kind : {dml::ModelKind::kLasso, dml::ModelKind::kElasticNet}) {
    auto bad = dml::Train(data, {kind, 1e-3, 0.5}, NewtonOptions());
    BOOST_REQUIRE(!bad.ok());
    BOOST_TEST(std::string(bad.status().message()).find("solver newton needs a twice-differentiable "
                                                        "loss") == 0,
               bad.status().message());
  }
}

// The result's certificate is the last iteration's, its primal summed over
// margins recomputed from w (Newton's OnFreshMargins): the primal of w alone
// (CertifyIterateNewton's, the same bits but for the threads' split of
// the sum), and a gap that bounds the suboptimality.
BOOST_AUTO_TEST_CASE(result_certificate_is_of_w_alone) {
  const dml::Dataset data = Generated(3000, 40, 10, 1, dml::Task::kClassification, 0.3);
  for (auto kind : {dml::ModelKind::kLogisticL2, dml::ModelKind::kSquaredHingeSvm,
                    dml::ModelKind::kRidge}) {
    const dml::ModelSpec m{kind, 1e-4, 0.5};
    auto tight = dml::Train(data, m, NewtonOptions());
    BOOST_REQUIRE(tight.ok());
    const double p_top = tight->primal;  // above min P
    for (double rel : {1e-2, 1e-4, 1e-7}) {
      for (int threads : {1, 2}) {
        dml::SolverOptions o = NewtonOptions(threads);
        o.stop.gap_rel = rel;
        auto r = dml::Train(data, m, o);
        BOOST_REQUIRE(r.ok());
        BOOST_TEST((r->reason == dml::StopReason::kConverged), dml::ModelName(kind) << " " << rel);
        BOOST_TEST(r->gap <= rel * r->primal);
        // P(w) - min P <= gap, min P <= p_top; D <= min P.
        BOOST_TEST(r->gap >= r->primal - p_top - 1e-15 * r->primal);
        BOOST_TEST(r->dual <= p_top + 1e-15 * r->primal);
        auto c = dml::CertifyIterateNewton(data, m, r->w, 20);
        BOOST_REQUIRE(c.ok());
        BOOST_TEST(std::abs(c->primal - r->primal) <= (threads == 1 ? 0.0 : 1e-14) * r->primal,
                   dml::ModelName(kind) << " " << rel << " " << threads << ": " << c->primal
                                        << " vs " << r->primal);
      }
    }
  }
}

// Features of 1e20: the two parts of the dual are 1e37 and cancel. A
// certificate must not claim more than its rounding allows: "converged"
// came with a gap of 9e21 for squared hinge before the dual's rounding
// bound (DualRoundingBound) entered the gap.
BOOST_AUTO_TEST_CASE(huge_features_never_converge_on_a_rounding_artifact) {
  auto x = dml::CsrMatrix::FromArrays(4, 2, {0, 2, 4, 6, 7}, {0, 1, 0, 1, 0, 1, 1},
                                      {1e20f, 1.0f, -1e20f, 2.0f, 3e19f, -1.0f, 5.0f});
  BOOST_REQUIRE(x.ok());
  dml::Dataset data;
  data.x = std::move(*x);
  data.y = {1, -1, 1, -1};
  data.task = dml::Task::kClassification;
  for (auto kind : {dml::ModelKind::kLogisticL2, dml::ModelKind::kSquaredHingeSvm,
                    dml::ModelKind::kRidge, dml::ModelKind::kHingeSvm}) {
    const dml::ModelSpec m{kind, 0.25, 0.5};
    dml::SolverOptions o = NewtonOptions();
    o.stop.gap_rel = 1e-6;
    auto r = dml::Train(data, m, o);
    BOOST_REQUIRE(r.ok());
    BOOST_TEST_MESSAGE(dml::ModelName(kind) << ": " << dml::StopReasonName(r->reason) << ", P "
                                            << r->primal << ", gap " << r->gap << "; " << r->note);
    BOOST_TEST(r->gap >= 0.0);
    if (r->reason == dml::StopReason::kConverged) {
      BOOST_TEST(r->gap <= 1e-6 * r->primal, dml::ModelName(kind));
      auto c = dml::CertifyIterateNewton(data, m, r->w, 20);
      BOOST_REQUIRE(c.ok());
      BOOST_TEST(c->primal == r->primal);
    } else {
      // Not converged: said so, with the gap that says why.
      BOOST_TEST((r->reason == dml::StopReason::kMaxEpochs));
      BOOST_TEST(r->gap > 1e-6 * r->primal);
    }
  }
}

// Dual coordinate descent that runs out of epochs on unscaled features
// says why in its note (and what helps); on scaled data it says nothing.
BOOST_AUTO_TEST_CASE(scd_out_of_epochs_on_unscaled_features_says_why) {
  const dml::Dataset data = UnscaledProblem(40, 4.0);
  dml::SolverOptions o;
  o.kind = dml::SolverKind::kScd;
  o.stop.max_epochs = 20;
  auto h = dml::Train(data, {dml::ModelKind::kHingeSvm, 1.0 / 2000.0, 0.5}, o);
  BOOST_REQUIRE(h.ok());
  BOOST_TEST((h->reason == dml::StopReason::kMaxEpochs));
  BOOST_TEST(h->note.find("the features' units differ by orders of magnitude") != std::string::npos,
             h->note);
  BOOST_TEST(h->note.find("solver newton is unaffected by the units") != std::string::npos,
             h->note);
  auto l = dml::Train(data, {dml::ModelKind::kLogisticL2, 1.0 / 2000.0, 0.5}, o);
  BOOST_REQUIRE(l.ok());
  BOOST_TEST(l->note.find("solver newton is unaffected by the units") != std::string::npos, l->note);
  const dml::Dataset scaled = UnscaledProblem(40, 0.0);
  auto s = dml::Train(scaled, {dml::ModelKind::kHingeSvm, 1.0 / 2000.0, 0.5}, o);
  BOOST_REQUIRE(s.ok());
  BOOST_TEST(s->note.find("units") == std::string::npos, s->note);
}

// ChunkRunner keeps its threads between passes: every chunk runs once a call,
// with its bounds, chunk 0 on the caller, the others on its workers (the
// same ones call after call, however many chunks each call has), and an
// exception from any chunk reaches the caller after all chunks ended.
BOOST_AUTO_TEST_CASE(chunk_runner_runs_every_chunk_on_kept_threads) {
  dml::internal::ChunkRunner runner;
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<std::thread::id> first_ids;
  for (int call = 0; call < 200; ++call) {
    const std::size_t chunks = 1 + static_cast<std::size_t>(call % 4);  // 1..4
    const std::size_t n = 1000 + static_cast<std::size_t>(call);
    const std::vector<std::size_t> bounds = dml::internal::EvenBounds(n, static_cast<int>(chunks), 1);
    BOOST_REQUIRE(bounds.size() == chunks + 1);
    std::vector<int> seen(n, 0);
    std::vector<std::thread::id> ids(chunks);
    std::vector<std::pair<std::size_t, std::size_t>> got(chunks);
    runner.Run(bounds, [&](std::size_t c, std::size_t b, std::size_t e) {
      ids[c] = std::this_thread::get_id();
      got[c] = {b, e};
      for (std::size_t i = b; i < e; ++i) ++seen[i];
    });
    for (std::size_t c = 0; c < chunks; ++c) {
      BOOST_TEST(got[c].first == bounds[c]);
      BOOST_TEST(got[c].second == bounds[c + 1]);
    }
    BOOST_TEST(std::count(seen.begin(), seen.end(), 1) == static_cast<std::ptrdiff_t>(n));
    BOOST_TEST((ids[0] == caller));
    for (std::size_t c = 1; c < chunks; ++c) BOOST_TEST((ids[c] != caller));
    if (chunks == 4) {
      if (first_ids.empty()) {
        first_ids = ids;
      } else {
        BOOST_TEST((ids == first_ids));  // the same workers, not new threads
      }
    }
  }
  // A throwing chunk: rethrown on the caller, after the other chunks ran.
  const std::vector<std::size_t> bounds{0, 10, 20, 30};
  std::atomic<int> ran{0};
  BOOST_CHECK_THROW(runner.Run(bounds,
                               [&](std::size_t c, std::size_t, std::size_t) {
                                 ++ran;
                                 if (c == 2) throw std::runtime_error("chunk 2");
                               }),
                    std::runtime_error);
  BOOST_TEST(ran.load() == 3);
  // ... and the runner still works afterwards.
  std::atomic<int> sum{0};
  runner.Run(bounds, [&](std::size_t, std::size_t b, std::size_t e) { sum += static_cast<int>(e - b); });
  BOOST_TEST(sum.load() == 30);
  // More chunks than threads: thread t runs chunks t, t + T, ... once each;
  // one thread runs them all on the caller.
  for (std::size_t threads : {2u, 1u}) {
    dml::internal::ChunkRunner limited;
    limited.LimitThreads(threads);
    const std::vector<std::size_t> five = dml::internal::EvenBounds(500, 5, 1);
    BOOST_REQUIRE(five.size() == 6);
    std::vector<int> runs(5, 0);
    std::vector<std::thread::id> on(5);
    limited.Run(five, [&](std::size_t c, std::size_t, std::size_t) {
      ++runs[c];
      on[c] = std::this_thread::get_id();
    });
    for (std::size_t c = 0; c < 5; ++c) {
      BOOST_TEST(runs[c] == 1);
      BOOST_TEST((on[c] == on[c % threads]), "chunk " << c);
      BOOST_TEST(((on[c] == caller) == (c % threads == 0)), "chunk " << c);
    }
  }
}

// Fitting the threads, the passes split in two wherever two threads could
// share them, one thread included: one and two threads give the same bits.
BOOST_AUTO_TEST_CASE(one_and_two_threads_give_the_same_bits) {
  const dml::Dataset data = Generated(16000, 60, 10, 8, dml::Task::kClassification, 0.3);
  BOOST_REQUIRE(data.x.nnz() >= 2 * 65536);
  for (auto kind : {dml::ModelKind::kLogisticL2, dml::ModelKind::kHingeSvm}) {
    const dml::ModelSpec m{kind, 1e-4, 0.5};
    std::vector<dml::TrainResult> runs;
    for (int threads : {1, 2}) {
      dml::SolverOptions o;
      o.kind = dml::SolverKind::kNewton;
      o.threads = threads;
      o.stop.gap_rel = 1e-3;
      auto r = dml::Train(data, m, o);
      BOOST_REQUIRE(r.ok());
      BOOST_TEST(r->threads == threads);
      runs.push_back(*std::move(r));
    }
    BOOST_TEST(runs[0].primal == runs[1].primal, dml::ModelName(kind));
    BOOST_TEST(runs[0].gap == runs[1].gap, dml::ModelName(kind));
    BOOST_TEST(runs[0].rounds == runs[1].rounds, dml::ModelName(kind));
    BOOST_TEST((runs[0].w == runs[1].w), dml::ModelName(kind));
  }
}
