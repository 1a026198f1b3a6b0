#define BOOST_TEST_MODULE objective_primal
#include <boost/test/unit_test.hpp>

// The primal objectives (lasso, elastic net, L1-logistic), their certificates
// and the primal solvers: the gap against its definition and an independent
// dual value, KKT conditions, a closed form (orthogonal design), an
// independent proximal-gradient reference, the asynchronous solver, the stop
// rules and the CoCoA+ local solver.

#include <algorithm>
#include <iomanip>
#include <random>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dml/data/sparse.hpp"
#include "dml/data/synthetic.hpp"
#include "dml/objective/elastic_net.hpp"
#include "dml/objective/evaluate.hpp"
#include "dml/objective/lasso.hpp"
#include "dml/objective/logistic_l1.hpp"
#include "dml/objective/model.hpp"
#include "dml/solver/cocoa_local.hpp"
#include "dml/solver/internal/solvers.hpp"
#include "dml/solver/solver.hpp"
#include "dml/util/rng.hpp"

namespace {

using dml::ModelKind;

double RelDiff(double a, double b) {
  return std::abs(a - b) / std::max({std::abs(a), std::abs(b), 1e-300});
}

/// gap == primal - dual up to the rounding of the subtraction.
bool GapIsPrimalMinusDual(double primal, double dual, double gap) {
  return std::abs(gap - (primal - dual)) <= 1e-14 * std::max(1.0, std::abs(primal));
}

double XLogX(double x) { return x > 0 ? x * std::log(x) : 0.0; }

// ---------------------------------------------------------------- data

dml::Dataset Synthetic(int64_t rows, int64_t cols, dml::Task task, double noise, uint64_t seed,
                       int64_t nnz_per_row = 12, double model_density = 0.2) {
  dml::SyntheticOptions o;
  o.rows = rows;
  o.cols = cols;
  o.nnz_per_row = nnz_per_row;
  o.model_density = model_density;
  o.noise = noise;
  o.task = task;
  o.seed = seed;
  o.threads = 1;
  auto s = dml::GenerateSynthetic(o);
  BOOST_REQUIRE_MESSAGE(s.ok(), s.status().ToString());
  return std::move(s->data);
}

dml::Dataset Regression(uint64_t seed = 7) {
  return Synthetic(400, 60, dml::Task::kRegression, 0.1, seed);
}
dml::Dataset Classification(uint64_t seed = 11) {
  return Synthetic(400, 60, dml::Task::kClassification, 0.5, seed);
}

/// The derivative of the mean loss at v for one example, written out here.
double LossDerivative(ModelKind kind, double y, double v) {
  if (kind == ModelKind::kLogisticL1) return -y / (1.0 + std::exp(y * v));
  return v - y;
}
double LossValue(ModelKind kind, double y, double v) {
  if (kind == ModelKind::kLogisticL1) {
    const double m = y * v;
    return m > 0 ? std::log1p(std::exp(-m)) : -m + std::log1p(std::exp(m));
  }
  return 0.5 * (v - y) * (v - y);
}

/// v = A w and s = A^T u, u_i = loss'(y_i, v_i) / n, in plain loops.
struct Margins {
  std::vector<double> v;
  std::vector<double> s;
};
Margins ComputeMargins(const dml::Dataset& data, ModelKind kind, const std::vector<double>& w) {
  const int64_t n = data.x.rows();
  Margins m{std::vector<double>(n, 0.0), std::vector<double>(data.x.cols(), 0.0)};
  for (int64_t i = 0; i < n; ++i) {
    const dml::SparseView r = data.x.outer(i);
    for (std::size_t k = 0; k < r.size; ++k) m.v[i] += r.value[k] * w[r.index[k]];
  }
  for (int64_t i = 0; i < n; ++i) {
    const double u = LossDerivative(kind, data.y[i], m.v[i]) / n;
    const dml::SparseView r = data.x.outer(i);
    for (std::size_t k = 0; k < r.size; ++k) m.s[r.index[k]] += r.value[k] * u;
  }
  return m;
}

double Eta(const dml::ModelSpec& spec) {
  return spec.kind == ModelKind::kElasticNet ? spec.l1_ratio : 1.0;
}

/// lambda_max = max_j |a_j^T grad f(0)|: the smallest lambda with w* = 0 (L1 part).
double LambdaMax(const dml::Dataset& data, ModelKind kind) {
  const Margins m = ComputeMargins(data, kind, std::vector<double>(data.x.cols(), 0.0));
  double mx = 0;
  for (double s : m.s) mx = std::max(mx, std::abs(s));
  return mx;
}

dml::ModelSpec Spec(const dml::Dataset& data, ModelKind kind, double fraction, double eta = 0.5) {
  dml::ModelSpec spec;
  spec.kind = kind;
  spec.l1_ratio = eta;
  spec.lambda = fraction * LambdaMax(data, kind) / (kind == ModelKind::kElasticNet ? eta : 1.0);
  return spec;
}

/// The dual value the other way round: D = -f*(u) - sum_j g_j*(-a_j^T u),
/// with f* and g* written out here.
double IndependentDual(const dml::Dataset& data, const dml::ModelSpec& spec,
                       const std::vector<double>& w) {
  const int64_t n = data.x.rows();
  const Margins m = ComputeMargins(data, spec.kind, w);
  double fstar = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double y = data.y[i];
    const double u = LossDerivative(spec.kind, y, m.v[i]) / n;
    if (spec.kind == ModelKind::kLogisticL1) {
      // f_i(v) = log(1 + exp(-y v)) / n: f_i*(u) = (b log b + (1-b) log(1-b)) / n, b = -n u y.
      const double b = -n * u * y;
      fstar += (XLogX(b) + XLogX(1 - b)) / n;
    } else {
      // f_i(v) = (v - y)^2 / (2n): f_i*(u) = n u^2 / 2 + y u.
      fstar += n * u * u / 2 + y * u;
    }
  }
  const double lambda = spec.lambda;
  const double eta = Eta(spec);
  double p0 = 0.0;
  for (int64_t i = 0; i < n; ++i) p0 += LossValue(spec.kind, data.y[i], 0.0);
  p0 /= n;
  double wmax = 0;
  for (double x : w) wmax = std::max(wmax, std::abs(x));
  const double bound = std::max(p0 / lambda, wmax);
  double gstar = 0.0;
  for (double s : m.s) {
    const double excess = std::max(0.0, std::abs(s) - lambda * eta);
    gstar += eta < 1.0 ? excess * excess / (2 * lambda * (1 - eta)) : bound * excess;
  }
  return -fstar - gstar;
}

/// The scaled dual of the pure-L1 models, from the definitions: u_i =
/// loss'(v_i)/n, t = min(1, lambda / max_j |a_j^T u|) makes t u feasible
/// (|a_j^T t u| <= lambda), D = -(1/n) sum_i loss*(n t u_i). -inf for
/// elastic net below eta = 1 (no such point needed).
double ScaledDual(const dml::Dataset& data, const dml::ModelSpec& spec,
                  const std::vector<double>& w) {
  if (spec.kind == ModelKind::kElasticNet && Eta(spec) < 1.0) {
    return -std::numeric_limits<double>::infinity();
  }
  const int64_t n = data.x.rows();
  const Margins m = ComputeMargins(data, spec.kind, w);
  double s_max = 0.0;
  for (double s : m.s) s_max = std::max(s_max, std::abs(s));
  const double t = std::min(1.0, spec.lambda / s_max);
  double fstar = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double y = data.y[i];
    const double a = t * LossDerivative(spec.kind, y, m.v[i]);  // n t u_i
    if (spec.kind == ModelKind::kLogisticL1) {
      const double b = -a * y;
      fstar += XLogX(b) + XLogX(1 - b);
    } else {
      fstar += a * a / 2 + y * a;
    }
  }
  return -fstar / n;
}

/// What EvaluatePrimal reports: the better of the two duals.
double BestDual(const dml::Dataset& data, const dml::ModelSpec& spec,
                const std::vector<double>& w) {
  return std::max(IndependentDual(data, spec, w), ScaledDual(data, spec, w));
}

/// Max KKT violation at w: |a_j^T u| <= lambda eta where w_j == 0, and
/// a_j^T u = -lambda (eta sign(w_j) + (1 - eta) w_j) where w_j != 0.
double KktViolation(const dml::Dataset& data, const dml::ModelSpec& spec,
                    const std::vector<double>& w) {
  const Margins m = ComputeMargins(data, spec.kind, w);
  const double l1 = spec.lambda * Eta(spec);
  const double l2 = spec.lambda * (1 - Eta(spec));
  double worst = 0.0;
  for (std::size_t j = 0; j < w.size(); ++j) {
    if (w[j] == 0.0) {
      worst = std::max(worst, std::abs(m.s[j]) - l1);
    } else {
      worst = std::max(worst, std::abs(m.s[j] + l1 * (w[j] > 0 ? 1 : -1) + l2 * w[j]));
    }
  }
  return worst;
}

dml::SolverOptions Options(double gap_rel = 1e-10) {
  dml::SolverOptions o;
  o.stop.gap_rel = gap_rel;
  o.stop.max_epochs = 20000;
  return o;
}

dml::TrainResult MustTrain(const dml::Dataset& data, const dml::ModelSpec& spec,
                           const dml::SolverOptions& o) {
  auto r = dml::Train(data, spec, o);
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  return std::move(r).value();
}

dml::Certificate MustEvaluate(const dml::Dataset& data, const dml::ModelSpec& spec,
                              const std::vector<double>& w, bool per_coordinate = false) {
  auto c = dml::EvaluatePrimal(data, spec, w, per_coordinate);
  BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  return std::move(c).value();
}

struct Problem {
  std::string name;
  dml::Dataset data;
  dml::ModelSpec spec;
};

std::vector<Problem> Problems() {
  std::vector<Problem> p;
  dml::Dataset reg = Regression();
  dml::Dataset cls = Classification();
  p.push_back({"lasso", reg, Spec(reg, ModelKind::kLasso, 0.1)});
  p.push_back({"elastic-net", reg, Spec(reg, ModelKind::kElasticNet, 0.1, 0.5)});
  p.push_back({"logistic-l1", cls, Spec(cls, ModelKind::kLogisticL1, 0.05)});
  return p;
}

// ------------------------------------------------------ the certificate

BOOST_AUTO_TEST_CASE(certificate_matches_its_definition) {
  for (const Problem& p : Problems()) {
    BOOST_TEST_CONTEXT(p.name) {
      // An arbitrary point, one far outside the ball ||w||_1 <= P(0)/lambda,
      // and zero.
      std::vector<double> w(p.data.x.cols());
      for (std::size_t j = 0; j < w.size(); ++j) w[j] = (j % 3 == 0) ? 0.0 : 0.05 * std::sin(j + 1.0);
      std::vector<double> far = w;
      far[1] = 1e4;
      for (const auto& point : {w, far, std::vector<double>(w.size(), 0.0)}) {
        const dml::Certificate c = MustEvaluate(p.data, p.spec, point, true);
        BOOST_TEST(std::isfinite(c.gap));
        BOOST_TEST(c.gap >= 0.0);
        BOOST_TEST(GapIsPrimalMinusDual(c.primal, c.dual, c.gap));
        // Per-coordinate gaps are non-negative and sum to the separable gap
        // exactly, which the scaled dual can only improve on.
        double sum = 0.0;
        for (double g : c.coordinate_gaps) {
          BOOST_TEST(g >= 0.0);
          sum += g;
        }
        BOOST_TEST(sum == c.separable_gap);
        BOOST_TEST(c.gap <= c.separable_gap);
        // The primal against evaluate.cpp's PrimalValue (losses.hpp).
        auto pv = dml::PrimalValue(p.data, p.spec, point);
        BOOST_REQUIRE(pv.ok());
        BOOST_TEST(RelDiff(c.primal, *pv) < 1e-12);
        // The dual computed from the conjugates directly (a dual that
        // rounding put above the primal is reported as the primal).
        const double best = std::min(BestDual(p.data, p.spec, point), c.primal);
        // (Relative to the primal as well: far from the optimum the scaled
        // dual is a tiny value left by cancelling terms.)
        BOOST_TEST(std::abs(c.dual - best) <= 1e-9 * (std::abs(best) + std::abs(c.primal)),
                   std::setprecision(17) << "dual " << c.dual << " vs " << best << " primal "
                                         << c.primal);
      }
    }
  }
}

// The scaled dual is a lower bound on min P (so the gap bounds the
// suboptimality at any point) and, near the optimum, far tighter than the
// bounded-support one: lasso and L1-logistic at points around w*.
BOOST_AUTO_TEST_CASE(scaled_dual_bounds_the_optimum_and_is_tight_near_it) {
  for (const Problem& p : Problems()) {
    if (p.spec.kind == ModelKind::kElasticNet) continue;
    BOOST_TEST_CONTEXT(p.name) {
      const dml::TrainResult opt = MustTrain(p.data, p.spec, Options(1e-13));
      const double p_star = opt.primal - opt.gap;  // a lower bound on min P
      for (double eps : {1e-1, 1e-2, 1e-3, 1e-4}) {
        std::vector<double> w = opt.w;
        for (std::size_t j = 0; j < w.size(); ++j) w[j] += eps * std::sin(3.0 * j + 1.0);
        const dml::Certificate c = MustEvaluate(p.data, p.spec, w);
        BOOST_TEST(c.dual <= opt.primal + 1e-12, "eps " << eps << " dual " << c.dual);
        BOOST_TEST(c.gap >= c.primal - opt.primal - 1e-12, "eps " << eps);
        BOOST_TEST(c.primal - p_star >= 0.0);
        if (eps <= 1e-3) {
          BOOST_TEST(c.gap < 0.1 * c.separable_gap,
                     "eps " << eps << " gap " << c.gap << " separable " << c.separable_gap);
        }
      }
    }
  }
}

// A solver's sums (newGLMNET's StateCertificate) give EvaluatePrimal's
// certificate: here summed in plain loops, in another order than its.
BOOST_AUTO_TEST_CASE(certificate_from_sums_is_evaluate_primal) {
  for (const Problem& p : Problems()) {
    if (p.spec.kind == ModelKind::kElasticNet) continue;
    BOOST_TEST_CONTEXT(p.name) {
      std::vector<double> w(p.data.x.cols());
      for (std::size_t j = 0; j < w.size(); ++j) w[j] = (j % 3 == 0) ? 0.0 : 0.05 * std::sin(j + 1.0);
      const Margins m = ComputeMargins(p.data, p.spec.kind, w);
      double loss_sum = 0.0;
      std::vector<double> derivative(p.data.y.size());
      for (std::size_t i = 0; i < derivative.size(); ++i) {
        loss_sum += LossValue(p.spec.kind, p.data.y[i], m.v[i]);
        derivative[i] = LossDerivative(p.spec.kind, p.data.y[i], m.v[i]);
      }
      auto c = dml::CertifyPrimalFromSums(p.spec, p.data.y, w, loss_sum, m.s, derivative);
      BOOST_REQUIRE(c.ok());
      const dml::Certificate e = MustEvaluate(p.data, p.spec, w);
      BOOST_TEST(c->primal == e.primal, boost::test_tools::tolerance(1e-13));
      BOOST_TEST(c->dual == e.dual, boost::test_tools::tolerance(1e-12));
      BOOST_TEST(c->gap == e.gap, boost::test_tools::tolerance(1e-12));
      BOOST_TEST(c->separable_gap == e.separable_gap, boost::test_tools::tolerance(1e-12));
      BOOST_TEST(c->gap < c->separable_gap);  // the scaled dual took part
      derivative.pop_back();
      auto bad = dml::CertifyPrimalFromSums(p.spec, p.data.y, w, loss_sum, m.s, derivative);
      BOOST_REQUIRE(!bad.ok());
      BOOST_TEST(std::string(bad.status().message()).find("399 derivatives") != std::string::npos,
                 bad.status().message());
    }
  }
  const dml::Dataset data = Regression();
  auto ridge = dml::CertifyPrimalFromSums(dml::ModelSpec{ModelKind::kRidge, 0.1, 0.5}, data.y,
                                          std::vector<double>(data.x.cols()), 1.0,
                                          std::vector<double>(data.x.cols()),
                                          std::vector<double>(data.y.size()));
  BOOST_REQUIRE(!ridge.ok());
  BOOST_TEST(std::string(ridge.status().message()).find("is not lasso or L1-logistic") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(certificate_elastic_net_with_eta_one_is_lasso) {
  const dml::Dataset data = Regression();
  dml::ModelSpec lasso = Spec(data, ModelKind::kLasso, 0.2);
  dml::ModelSpec enet = lasso;
  enet.kind = ModelKind::kElasticNet;
  enet.l1_ratio = 1.0;
  std::vector<double> w(data.x.cols(), 0.01);
  const dml::Certificate a = MustEvaluate(data, lasso, w);
  const dml::Certificate b = MustEvaluate(data, enet, w);
  BOOST_TEST(a.primal == b.primal, boost::test_tools::tolerance(1e-14));
  BOOST_TEST(a.gap == b.gap, boost::test_tools::tolerance(1e-14));
}

BOOST_AUTO_TEST_CASE(certificate_errors) {
  const dml::Dataset data = Regression();
  const dml::ModelSpec spec = Spec(data, ModelKind::kLasso, 0.1);
  std::vector<double> w(data.x.cols(), 0.0);
  {
    dml::ModelSpec ridge = spec;
    ridge.kind = ModelKind::kRidge;
    auto c = dml::EvaluatePrimal(data, ridge, w);
    BOOST_TEST(c.status().code() == absl::StatusCode::kInvalidArgument);
  }
  {
    auto c = dml::EvaluatePrimal(data, spec, std::vector<double>(3, 0.0));
    BOOST_TEST(c.status().code() == absl::StatusCode::kInvalidArgument);
    BOOST_TEST(std::string(c.status().message()).find("3 weights") != std::string::npos);
  }
  {
    std::vector<double> bad = w;
    bad[5] = std::nan("");
    auto c = dml::EvaluatePrimal(data, spec, bad);
    BOOST_TEST(c.status().code() == absl::StatusCode::kInvalidArgument);
    BOOST_TEST(std::string(c.status().message()).find("feature 5") != std::string::npos);
  }
  {
    dml::ModelSpec l1 = spec;
    l1.kind = ModelKind::kLogisticL1;
    auto c = dml::EvaluatePrimal(data, l1, w);  // real-valued labels
    BOOST_TEST(c.status().code() == absl::StatusCode::kInvalidArgument);
    BOOST_TEST(std::string(c.status().message()).find("{-1,+1}") != std::string::npos);
  }
  {
    dml::ModelSpec neg = spec;
    neg.lambda = -1;
    BOOST_TEST(!dml::EvaluatePrimal(data, neg, w).ok());
  }
}

// ------------------------------------------------- the coordinate steps

struct PlainAccess {
  static constexpr bool kPlain = true;
  static double Load(const double* p) { return *p; }
  static void Add(double* p, double x) { *p += x; }
  static void Mul(double* p, double x) { *p *= x; }
};

/// The CDN step's gradient and Hessian pass, its loss-from-state shortcut
/// and its SIMD paths against direct formulas; every accepted step
/// decreases the objective; binary (constant) and real-valued columns.
BOOST_AUTO_TEST_CASE(logistic_step_matches_direct_computation) {
  dml::Dataset data = Classification(3);
  // Make every third column binary so both column kinds are exercised.
  {
    const dml::CsrMatrix& x = data.x;
    std::vector<float> values = x.values();
    for (std::size_t k = 0; k < values.size(); ++k) {
      if (x.indices()[k] % 3 == 0) values[k] = 1.0f;
    }
    data.x = dml::CsrMatrix::FromArraysUnchecked(x.rows(), x.cols(), x.offsets(), x.indices(),
                                                 std::move(values));
  }
  const dml::ModelSpec spec = Spec(data, ModelKind::kLogisticL1, 0.05);
  const int64_t n = data.x.rows(), d = data.x.cols();
  const dml::CscMatrix a = data.x.Convert();
  const auto cols = dml::LogisticL1Objective::PrepareColumns(a, data.y);
  int constant = 0;
  for (const auto& c : cols) constant += c.constant;
  BOOST_TEST(constant >= d / 3);

  std::vector<double> w(d);
  for (int64_t j = 0; j < d; ++j) w[j] = (j % 4 == 0) ? 0.0 : 0.3 * std::cos(2.0 * j);
  std::vector<double> scratch(n);
  for (bool avx2 : {false, true}) {
    dml::LogisticL1Objective obj = dml::LogisticL1Objective::Make(spec, data.y);
    if (avx2 && !obj.avx2) continue;  // no AVX2 on this CPU
    obj.avx2 = avx2;
    BOOST_TEST_CONTEXT("avx2 " << avx2) {
      std::vector<double> x = w;
      Margins m = ComputeMargins(data, spec.kind, x);
      std::vector<double> e(n);
      dml::LogisticL1Objective::InitState(m.v, data.y, e.data());
      // The loss from the state.
      double loss = 0;
      for (int64_t i = 0; i < n; ++i) loss += LossValue(spec.kind, data.y[i], m.v[i]);
      BOOST_TEST(RelDiff(obj.LossFromState(e.data(), n, cols, x), loss / n) < 1e-13);
      double previous = MustEvaluate(data, spec, x).primal;
      for (int64_t j = 0; j < d; ++j) {
        m = ComputeMargins(data, spec.kind, x);
        const auto step = obj.Step<PlainAccess>(a.outer(j), cols[j], e.data(), scratch.data(), x[j], 1.0);
        BOOST_TEST(std::abs(step.grad - m.s[j]) <= 1e-14 + 1e-12 * std::abs(m.s[j]));
        x[j] = step.w;
        const double now = MustEvaluate(data, spec, x).primal;
        BOOST_TEST(now <= previous + 1e-15);
        previous = now;
      }
      // e still is exp(A x).
      m = ComputeMargins(data, spec.kind, x);
      for (int64_t i = 0; i < n; ++i) BOOST_TEST(RelDiff(e[i], std::exp(m.v[i])) < 1e-12);
    }
  }
}

// The library's lambda_max against this file's own (from the margins'
// derivatives): at lambda_max the optimum is 0, just below it is not.
BOOST_AUTO_TEST_CASE(l1_lambda_max_is_where_the_optimum_leaves_zero) {
  for (const Problem& p : Problems()) {
    BOOST_TEST_CONTEXT(p.name) {
      auto lm = dml::L1LambdaMax(p.data, p.spec.kind);
      BOOST_REQUIRE_MESSAGE(lm.ok(), lm.status().ToString());
      BOOST_TEST(*lm == LambdaMax(p.data, p.spec.kind), boost::test_tools::tolerance(1e-12));
      dml::ModelSpec spec = p.spec;
      spec.lambda = *lm / Eta(spec);
      const dml::TrainResult at = MustTrain(p.data, spec, Options());
      BOOST_TEST(std::all_of(at.w.begin(), at.w.end(), [](double x) { return x == 0.0; }));
      spec.lambda = 0.99 * *lm / Eta(spec);
      const dml::TrainResult below = MustTrain(p.data, spec, Options());
      BOOST_TEST(std::any_of(below.w.begin(), below.w.end(), [](double x) { return x != 0.0; }));
    }
  }
  auto ridge = dml::L1LambdaMax(Regression(), ModelKind::kRidge);
  BOOST_TEST(ridge.status().code() == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(std::string(ridge.status().message()) == "L1LambdaMax: model ridge has no L1 part");
}

// ------------------------------------------------------------ the solvers

BOOST_AUTO_TEST_CASE(sequential_solver_certifies_the_optimum) {
  for (const Problem& p : Problems()) {
    BOOST_TEST_CONTEXT(p.name) {
      dml::SolverOptions o = Options();
      const dml::TrainResult r = MustTrain(p.data, p.spec, o);
      BOOST_TEST(static_cast<int>(r.reason) == static_cast<int>(dml::StopReason::kConverged));
      BOOST_TEST(r.alpha.empty());
      BOOST_REQUIRE(r.w.size() == static_cast<std::size_t>(p.data.x.cols()));
      BOOST_TEST(r.gap <= 1e-10 * std::abs(r.primal));
      BOOST_TEST(r.gap >= 0.0);
      BOOST_TEST(GapIsPrimalMinusDual(r.primal, r.dual, r.gap));
      BOOST_REQUIRE(!r.history.empty());
      // eval_every = 1: a certificate once a pass's worth of nonzeros was
      // read since the last one (epoch 1 reads them all; shrunk epochs less).
      BOOST_TEST(r.history.front().round == 1);
      BOOST_TEST(static_cast<int>(r.history.size()) <= r.epochs);
      BOOST_TEST(r.history.back().round == r.epochs);
      for (const dml::Progress& e : r.history) {
        BOOST_TEST(e.gap >= 0.0);
        BOOST_TEST(GapIsPrimalMinusDual(e.primal, e.dual, e.gap));
        BOOST_TEST(e.nnz_touched > 0);
      }
      // The result is the exact certificate of the returned w.
      const dml::Certificate c = MustEvaluate(p.data, p.spec, r.w, true);
      BOOST_TEST(c.primal == r.primal, boost::test_tools::tolerance(1e-14));
      BOOST_TEST(c.gap == r.gap, boost::test_tools::tolerance(1e-9));
      BOOST_TEST(RelDiff(r.dual, BestDual(p.data, p.spec, r.w)) < 1e-9);
      // KKT at the optimum.
      const double kkt = KktViolation(p.data, p.spec, r.w);
      BOOST_TEST(kkt <= 1e-4 * p.spec.lambda, "KKT violation " << kkt);
      // A sparse solution, not all zero.
      const auto nonzero = std::count_if(r.w.begin(), r.w.end(), [](double x) { return x != 0; });
      BOOST_TEST(nonzero > 0);
      BOOST_TEST(nonzero < static_cast<long>(r.w.size()));
    }
  }
}

BOOST_AUTO_TEST_CASE(shrinking_does_not_change_the_optimum) {
  for (const Problem& p : Problems()) {
    BOOST_TEST_CONTEXT(p.name) {
      dml::SolverOptions o = Options();
      o.shrinking = true;
      o.eval_every = 0;
      const dml::TrainResult a = MustTrain(p.data, p.spec, o);
      o.shrinking = false;
      const dml::TrainResult b = MustTrain(p.data, p.spec, o);
      BOOST_TEST(a.gap <= 1e-10 * std::abs(a.primal));
      BOOST_TEST(b.gap <= 1e-10 * std::abs(b.primal));
      BOOST_TEST(RelDiff(a.primal, b.primal) < 1e-9);
      // eval_every = 0: only certified epochs are reported, the last one
      // being the one that satisfied the rule.
      BOOST_REQUIRE(!a.history.empty());
      BOOST_TEST(static_cast<int>(a.history.size()) < a.epochs);
      BOOST_TEST(a.history.back().gap <= 1e-10 * std::abs(a.history.back().primal));
    }
  }
}

/// Lasso with orthogonal columns separates into d scalar problems:
/// w_j = SoftThreshold(a_j^T y / n, lambda) / (||a_j||^2 / n).
BOOST_AUTO_TEST_CASE(lasso_orthogonal_design_closed_form) {
  const int64_t d = 6, n = 3 * d;
  std::vector<int64_t> off{0};
  std::vector<uint32_t> idx;
  std::vector<float> val;
  std::vector<float> y;
  // Row i has one nonzero, in column i / 3: the columns have disjoint support.
  for (int64_t i = 0; i < n; ++i) {
    idx.push_back(static_cast<uint32_t>(i / 3));
    val.push_back(static_cast<float>(0.5 + 0.25 * (i % 3) + 0.1 * (i / 3)));
    off.push_back(static_cast<int64_t>(idx.size()));
    y.push_back(static_cast<float>(std::sin(1.7 * i) * (1 + i / 3)));
  }
  auto x = dml::CsrMatrix::FromArrays(n, d, off, idx, val);
  BOOST_REQUIRE(x.ok());
  const dml::Dataset data{std::move(*x), y, dml::Task::kRegression, {}};
  dml::ModelSpec spec;
  spec.kind = ModelKind::kLasso;
  spec.lambda = 0.15;
  std::vector<double> expected(d);
  int zeros = 0;
  for (int64_t j = 0; j < d; ++j) {
    double ay = 0, aa = 0;
    for (int64_t i = 3 * j; i < 3 * j + 3; ++i) {
      ay += static_cast<double>(val[i]) * y[i];
      aa += static_cast<double>(val[i]) * val[i];
    }
    const double c = ay / n;
    const double t = c > spec.lambda ? c - spec.lambda : (c < -spec.lambda ? c + spec.lambda : 0.0);
    expected[j] = t / (aa / n);
    zeros += expected[j] == 0.0;
  }
  BOOST_REQUIRE(zeros > 0);
  BOOST_REQUIRE(zeros < d);
  for (dml::SolverKind kind : {dml::SolverKind::kScd, dml::SolverKind::kAsyncScd}) {
    dml::SolverOptions o = Options(1e-14);
    o.kind = kind;
    const dml::TrainResult r = MustTrain(data, spec, o);
    for (int64_t j = 0; j < d; ++j) {
      BOOST_TEST(r.w[j] == expected[j], boost::test_tools::tolerance(1e-12));
      if (expected[j] == 0.0) BOOST_TEST(r.w[j] == 0.0);
    }
    // One exact step per coordinate is the optimum: a zero gap (up to rounding).
    BOOST_TEST(r.gap <= 1e-14 * r.primal);
  }
}

/// ISTA (proximal gradient with step 1/L), in plain loops, run to
/// convergence: an independent solver for all three objectives.
std::vector<double> Ista(const dml::Dataset& data, const dml::ModelSpec& spec, int iterations) {
  const int64_t n = data.x.rows(), d = data.x.cols();
  // L = largest eigenvalue of A^T A / n (times 1/4 for the logistic loss),
  // by power iteration.
  std::vector<double> q(d, 1.0), z(n);
  double eig = 0.0;
  for (int it = 0; it < 300; ++it) {
    std::fill(z.begin(), z.end(), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      const dml::SparseView r = data.x.outer(i);
      for (std::size_t k = 0; k < r.size; ++k) z[i] += r.value[k] * q[r.index[k]];
    }
    std::vector<double> next(d, 0.0);
    for (int64_t i = 0; i < n; ++i) {
      const dml::SparseView r = data.x.outer(i);
      for (std::size_t k = 0; k < r.size; ++k) next[r.index[k]] += r.value[k] * z[i];
    }
    double norm = 0;
    for (double x : next) norm += x * x;
    norm = std::sqrt(norm);
    eig = norm;  // ||A^T A q|| with ||q|| = 1
    for (int64_t j = 0; j < d; ++j) q[j] = next[j] / norm;
  }
  const double lip = 1.0001 * eig / n * (spec.kind == ModelKind::kLogisticL1 ? 0.25 : 1.0);
  const double l1 = spec.lambda * Eta(spec) / lip;
  const double shrink = 1.0 + spec.lambda * (1 - Eta(spec)) / lip;
  std::vector<double> w(d, 0.0);
  for (int it = 0; it < iterations; ++it) {
    const Margins m = ComputeMargins(data, spec.kind, w);
    for (int64_t j = 0; j < d; ++j) {
      const double c = w[j] - m.s[j] / lip;
      const double t = c > l1 ? c - l1 : (c < -l1 ? c + l1 : 0.0);
      w[j] = t / shrink;
    }
  }
  return w;
}

BOOST_AUTO_TEST_CASE(agrees_with_an_independent_proximal_gradient_solver) {
  for (const Problem& p : Problems()) {
    BOOST_TEST_CONTEXT(p.name) {
      const std::vector<double> ref = Ista(p.data, p.spec, 6000);
      const dml::Certificate ref_cert = MustEvaluate(p.data, p.spec, ref);
      const dml::TrainResult r = MustTrain(p.data, p.spec, Options());
      BOOST_TEST(RelDiff(r.primal, ref_cert.primal) < 1e-6,
                 "ours " << r.primal << " ISTA " << ref_cert.primal);
      // Weak duality both ways: our certified dual bounds ISTA's primal.
      BOOST_TEST(r.dual <= ref_cert.primal + 1e-12);
      BOOST_TEST(ref_cert.dual <= r.primal + 1e-12);
      double diff = 0, norm = 0;
      for (std::size_t j = 0; j < ref.size(); ++j) {
        diff = std::max(diff, std::abs(ref[j] - r.w[j]));
        norm = std::max(norm, std::abs(r.w[j]));
      }
      BOOST_TEST(diff <= 1e-3 * norm, "max |w - w_ista| = " << diff);
    }
  }
}

BOOST_AUTO_TEST_CASE(async_solver_reaches_the_same_optimum) {
  for (const Problem& p : Problems()) {
    BOOST_TEST_CONTEXT(p.name) {
      const dml::TrainResult seq = MustTrain(p.data, p.spec, Options());
      for (int threads : {1, 2}) {
        for (int eval_every : {1, 0}) {
          BOOST_TEST_CONTEXT("threads " << threads << " eval_every " << eval_every) {
            dml::SolverOptions o = Options();
            o.kind = dml::SolverKind::kAsyncScd;
            o.threads = threads;
            o.eval_every = eval_every;
            const dml::TrainResult r = MustTrain(p.data, p.spec, o);
            BOOST_TEST(static_cast<int>(r.reason) == static_cast<int>(dml::StopReason::kConverged));
            BOOST_TEST(r.gap >= 0.0);
            BOOST_TEST(r.gap <= 1e-10 * std::abs(r.primal));
            BOOST_TEST(RelDiff(r.primal, seq.primal) < 1e-6);
            for (const dml::Progress& e : r.history) {
              BOOST_TEST(e.gap >= 0.0);
              BOOST_TEST(GapIsPrimalMinusDual(e.primal, e.dual, e.gap));
            }
            const dml::Certificate c = MustEvaluate(p.data, p.spec, r.w);
            BOOST_TEST(c.gap == r.gap, boost::test_tools::tolerance(1e-9));
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(async_solver_with_more_threads_than_features) {
  const dml::Dataset data = Synthetic(200, 3, dml::Task::kRegression, 0.1, 5);
  const dml::ModelSpec spec = Spec(data, ModelKind::kLasso, 0.1);
  dml::SolverOptions o = Options();
  o.kind = dml::SolverKind::kAsyncScd;
  o.threads = 8;
  const dml::TrainResult r = MustTrain(data, spec, o);
  BOOST_TEST(r.gap <= 1e-10 * std::abs(r.primal));
}

// ------------------------------------------------------------ stop rules

BOOST_AUTO_TEST_CASE(stop_rules) {
  for (const Problem& p : Problems()) {
    for (dml::SolverKind kind : {dml::SolverKind::kScd, dml::SolverKind::kAsyncScd}) {
      BOOST_TEST_CONTEXT(p.name << " " << dml::SolverName(kind)) {
        dml::SolverOptions base = Options();
        base.kind = kind;
        base.threads = kind == dml::SolverKind::kAsyncScd ? 2 : 1;
        const dml::Certificate at_zero =
            MustEvaluate(p.data, p.spec, std::vector<double>(p.data.x.cols(), 0.0));
        {  // max_epochs
          dml::SolverOptions o = base;
          o.stop.max_epochs = 3;
          const dml::TrainResult r = MustTrain(p.data, p.spec, o);
          BOOST_TEST(static_cast<int>(r.reason) == static_cast<int>(dml::StopReason::kMaxEpochs));
          BOOST_TEST(r.epochs == 3);
          BOOST_TEST(r.history.size() <= 3u);
          BOOST_REQUIRE(!r.history.empty());
          BOOST_TEST(r.history.front().round == 1);
          // The returned certificate is the last entry.
          BOOST_TEST(r.history.back().round == 3);
          BOOST_TEST(r.history.back().primal == r.primal);
          BOOST_TEST(r.primal < at_zero.primal);
          const dml::Certificate c = MustEvaluate(p.data, p.spec, r.w);
          BOOST_TEST(c.primal == r.primal, boost::test_tools::tolerance(1e-14));
          BOOST_TEST(c.gap == r.gap, boost::test_tools::tolerance(1e-9));
        }
        {  // a cancel flag set before the start
          std::atomic<bool> cancel{true};
          dml::SolverOptions o = base;
          o.stop.cancel = &cancel;
          const dml::TrainResult r = MustTrain(p.data, p.spec, o);
          BOOST_TEST(static_cast<int>(r.reason) == static_cast<int>(dml::StopReason::kCancelled));
          BOOST_TEST(r.epochs == 0);
          BOOST_TEST(r.history.empty());
          BOOST_TEST(std::all_of(r.w.begin(), r.w.end(), [](double x) { return x == 0.0; }));
          BOOST_TEST(r.primal == at_zero.primal, boost::test_tools::tolerance(1e-14));
          BOOST_TEST(r.gap == at_zero.gap, boost::test_tools::tolerance(1e-12));
        }
        {  // cancelled from the callback after two epochs
          std::atomic<bool> cancel{false};
          dml::SolverOptions o = base;
          o.stop.cancel = &cancel;
          o.on_epoch = [&](const dml::Progress& e) {
            if (e.round == 2) cancel = true;
          };
          const dml::TrainResult r = MustTrain(p.data, p.spec, o);
          BOOST_TEST(static_cast<int>(r.reason) == static_cast<int>(dml::StopReason::kCancelled));
          BOOST_TEST(r.epochs == 2);
        }
        for (int eval_every : {1, 0}) {  // target primal
          const dml::TrainResult opt = MustTrain(p.data, p.spec, base);
          dml::SolverOptions o = base;
          o.eval_every = eval_every;
          o.stop.gap_rel = 0.0;
          o.stop.target_primal = opt.primal + 1e-3 * (at_zero.primal - opt.primal);
          const dml::TrainResult r = MustTrain(p.data, p.spec, o);
          BOOST_TEST(static_cast<int>(r.reason) ==
                     static_cast<int>(dml::StopReason::kTargetReached));
          BOOST_TEST(r.primal <= *o.stop.target_primal);
          BOOST_REQUIRE(!r.history.empty());
          BOOST_TEST(r.history.back().primal <= *o.stop.target_primal);
          BOOST_TEST(r.epochs < opt.epochs);
          const dml::Certificate c = MustEvaluate(p.data, p.spec, r.w);
          BOOST_TEST(c.primal == r.primal, boost::test_tools::tolerance(1e-14));
        }
        {  // eval_every = 3: a certificate per 3 passes' worth of work; an
           // epoch reads at most one pass, so they are 3 or more epochs apart
          dml::SolverOptions o = base;
          o.eval_every = 3;
          o.stop.max_epochs = 7;
          o.stop.gap_rel = 0.0;
          o.shrinking = false;  // every epoch one pass: on epochs 3 and 6
          // A hundredth of the lambda, so that most coordinates move each
          // epoch (work counts what is read, not what the moves write),
          // then the final certificate on epoch 7.
          dml::ModelSpec dense_model = p.spec;
          dense_model.lambda *= 0.01;
          const dml::TrainResult r = MustTrain(p.data, dense_model, o);
          BOOST_TEST(r.epochs == 7);
          BOOST_REQUIRE_MESSAGE(r.history.size() == 3u, r.history.size() << " entries, first round " << (r.history.empty() ? -1 : r.history[0].round));
          BOOST_TEST(r.history[0].round == 3);
          BOOST_TEST(r.history[1].round == 6);
          BOOST_TEST(r.history[2].round == 7);
          BOOST_TEST(r.history[2].primal == r.primal);
          o.shrinking = true;
          o.stop.max_epochs = 40;
          const dml::TrainResult s = MustTrain(p.data, p.spec, o);
          BOOST_REQUIRE(!s.history.empty());
          BOOST_TEST(s.history[0].round >= 3);
          // (Once the gap is at rounding level the running estimate says
          // the rule holds, and certificates come as it asks.)
          for (std::size_t i = 1; i < s.history.size(); ++i) {
            if (s.history[i - 1].gap <= 1e-12 * std::abs(s.history[i - 1].primal)) break;
            BOOST_TEST(s.history[i].round - s.history[i - 1].round >= 3,
                       "rounds " << s.history[i - 1].round << " gap " << s.history[i - 1].gap
                                 << ", " << s.history[i].round << " gap " << s.history[i].gap);
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(max_epochs_zero_returns_the_zero_model) {
  const Problem p = Problems()[2];
  dml::SolverOptions o = Options();
  o.stop.max_epochs = 0;
  const dml::TrainResult r = MustTrain(p.data, p.spec, o);
  BOOST_TEST(r.epochs == 0);
  BOOST_TEST(r.primal == std::log(2.0), boost::test_tools::tolerance(1e-14));
  BOOST_TEST(r.gap >= 0.0);
}

// ------------------------------------------- newGLMNET (L1-logistic, kScd)

/// Cyclic coordinate descent on the L1-logistic objective in plain loops,
/// independent of the library's solvers: per feature, proximal Newton steps
/// on the exact one-variable objective, each backtracked until it does not
/// increase that objective, v = A w kept in double. Slow, simple, and run to
/// convergence as the reference.
std::vector<double> CyclicCdLogisticL1(const dml::Dataset& data, double lambda, int epochs) {
  const dml::CscMatrix a = data.x.Convert();
  const int64_t n = a.rows(), d = a.cols();
  std::vector<double> w(d, 0.0), v(n, 0.0);
  auto coordinate_objective = [&](const dml::SparseView& col, double wj, double step) {
    double f = 0.0;  // the loss of the column's rows after w_j += step, plus the L1 term
    for (std::size_t k = 0; k < col.size; ++k) {
      const double m = data.y[col.index[k]] * (v[col.index[k]] + step * col.value[k]);
      f += (m > 0 ? std::log1p(std::exp(-m)) : -m + std::log1p(std::exp(m))) / n;
    }
    return f + lambda * std::abs(wj + step);
  };
  for (int epoch = 0; epoch < epochs; ++epoch) {
    for (int64_t j = 0; j < d; ++j) {
      const dml::SparseView col = a.outer(j);
      if (col.size == 0) continue;
      for (int newton = 0; newton < 5; ++newton) {
        double g = 0.0, h = 1e-12;
        for (std::size_t k = 0; k < col.size; ++k) {
          const double y = data.y[col.index[k]];
          const double s = 1.0 / (1.0 + std::exp(y * v[col.index[k]]));  // sigma(-y v)
          g += -y * s * col.value[k] / n;
          h += s * (1 - s) * col.value[k] * col.value[k] / n;
        }
        const double c = h * w[j] - g;
        double step = (c > lambda ? c - lambda : (c < -lambda ? c + lambda : 0.0)) / h - w[j];
        const double f0 = coordinate_objective(col, w[j], 0.0);
        while (step != 0.0 && coordinate_objective(col, w[j], step) > f0) step *= 0.5;
        if (step == 0.0) break;
        w[j] += step;
        for (std::size_t k = 0; k < col.size; ++k) v[col.index[k]] += step * col.value[k];
      }
    }
  }
  return w;
}

dml::Dataset FromRows(int64_t cols, const std::vector<std::vector<std::pair<uint32_t, float>>>& rows,
                      const std::vector<float>& y) {
  std::vector<int64_t> off{0};
  std::vector<uint32_t> idx;
  std::vector<float> val;
  for (const auto& r : rows) {
    for (const auto& [j, x] : r) {
      idx.push_back(j);
      val.push_back(x);
    }
    off.push_back(static_cast<int64_t>(idx.size()));
  }
  auto x = dml::CsrMatrix::FromArrays(static_cast<int64_t>(rows.size()), cols, off, idx, val);
  BOOST_REQUIRE_MESSAGE(x.ok(), x.status().ToString());
  dml::Dataset data;
  data.x = *std::move(x);
  data.y = y;
  data.task = dml::Task::kClassification;
  return data;
}

/// Classification data whose feature j is scaled by 10^(j mod 7 - 3) (raw
/// measurements over six orders of magnitude, as unscaled UCI sets come),
/// positive counts in the last features (as news20's raw counts), and two
/// all-zero columns.
dml::Dataset BadlyScaled(int64_t rows, int64_t cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<double> planted(cols);
  for (double& p : planted) p = normal(rng);
  std::vector<std::vector<std::pair<uint32_t, float>>> data_rows(rows);
  std::vector<float> y(rows);
  for (int64_t i = 0; i < rows; ++i) {
    double margin = 0.5 * normal(rng);
    for (int64_t j = 0; j < cols; ++j) {
      if (j == 3 || j == cols - 4) continue;  // all-zero columns
      if (j >= cols - 3) {                    // counts
        const int count = static_cast<int>(std::abs(normal(rng)) * 40.0);
        if (count == 0) continue;
        data_rows[i].push_back({static_cast<uint32_t>(j), static_cast<float>(count)});
        margin += 0.02 * planted[j] * count;
        continue;
      }
      if ((i + j) % 3 == 0) continue;  // sparse
      const double z = normal(rng);
      const double scale = std::pow(10.0, static_cast<double>(j % 7) - 3.0);
      data_rows[i].push_back({static_cast<uint32_t>(j), static_cast<float>(z * scale + scale)});
      margin += planted[j] * z;
    }
    y[i] = margin > 0 ? 1.0f : -1.0f;
  }
  return FromRows(cols, data_rows, y);
}

BOOST_AUTO_TEST_CASE(glmnet_matches_a_long_cyclic_cd_reference) {
  // kScd solves kLogisticL1 with newGLMNET; the reference is the plain
  // cyclic CD above, run long enough that its own certificate is tiny.
  const dml::Dataset data = Synthetic(300, 40, dml::Task::kClassification, 0.2, 21);
  const dml::ModelSpec spec = Spec(data, ModelKind::kLogisticL1, 0.02);
  const std::vector<double> ref = CyclicCdLogisticL1(data, spec.lambda, 3000);
  const dml::Certificate ref_cert = MustEvaluate(data, spec, ref);
  BOOST_REQUIRE(ref_cert.gap <= 1e-11 * ref_cert.primal);
  for (int eval_every : {1, 0}) {
    BOOST_TEST_CONTEXT("eval_every " << eval_every) {
      dml::SolverOptions o = Options(1e-10);
      o.eval_every = eval_every;
      const dml::TrainResult r = MustTrain(data, spec, o);
      BOOST_TEST(static_cast<int>(r.reason) == static_cast<int>(dml::StopReason::kConverged));
      BOOST_TEST(RelDiff(r.primal, ref_cert.primal) < 1e-7,
                 "glmnet " << r.primal << " reference " << ref_cert.primal);
      BOOST_TEST(r.gap >= 0.0);
      BOOST_TEST(r.gap <= 1e-10 * r.primal);
      BOOST_TEST(r.dual <= ref_cert.primal + 1e-15);
      // A second-order method: a handful of outer iterations, not hundreds
      // of epochs.
      BOOST_TEST(r.epochs <= 30);
      const dml::Certificate c = MustEvaluate(data, spec, r.w);
      BOOST_TEST(c.primal == r.primal, boost::test_tools::tolerance(1e-14));
      BOOST_TEST(c.gap == r.gap, boost::test_tools::tolerance(1e-9));
      double diff = 0, norm = 0;
      for (std::size_t j = 0; j < ref.size(); ++j) {
        diff = std::max(diff, std::abs(ref[j] - r.w[j]));
        norm = std::max(norm, std::abs(ref[j]));
      }
      BOOST_TEST(diff <= 1e-4 * norm, "max |w - w_ref| = " << diff);
    }
  }
}

// Periodic certificates (every outer iteration here) come from the
// solver's own sums after the margins are rebuilt (StateCertificate): a
// run cut after k iterations ends on one, which is EvaluatePrimal's at its w.
BOOST_AUTO_TEST_CASE(glmnet_periodic_certificates_are_evaluate_primal) {
  const dml::Dataset data = Synthetic(500, 40, dml::Task::kClassification, 0.2, 5);
  const dml::ModelSpec spec = Spec(data, ModelKind::kLogisticL1, 0.05);
  for (int threads : {1, 2}) {
    for (int epochs : {1, 2, 3, 4}) {
      BOOST_TEST_CONTEXT(threads << " threads, " << epochs << " epochs") {
        dml::SolverOptions o = Options(1e-14);
        o.eval_every = 1;
        o.eval_pacing = 0.0;
        o.threads = threads;
        o.fit_threads = false;
        o.stop.max_epochs = epochs;
        const dml::TrainResult r = MustTrain(data, spec, o);
        BOOST_TEST(static_cast<int>(r.reason) == static_cast<int>(dml::StopReason::kMaxEpochs));
        BOOST_TEST(static_cast<int>(r.history.size()) == epochs);
        const dml::Certificate c = MustEvaluate(data, spec, r.w);
        BOOST_TEST(c.primal == r.primal, boost::test_tools::tolerance(1e-13));
        BOOST_TEST(c.gap == r.gap, boost::test_tools::tolerance(1e-9));
        BOOST_TEST(r.history.back().gap == r.gap);
      }
    }
  }
}

// Columns with every row present take the inner CD's dense path (rows in
// order, no index reads); mixed with sparse ones, on one thread and with
// two sharing each column (the helper's half starts mid-column).
BOOST_AUTO_TEST_CASE(glmnet_on_dense_columns_matches_the_reference) {
  std::mt19937_64 rng(17);
  std::normal_distribution<double> normal;
  const int64_t rows = 500, cols = 10;
  std::vector<std::vector<std::pair<uint32_t, float>>> data_rows(rows);
  std::vector<float> y(rows);
  for (int64_t i = 0; i < rows; ++i) {
    double margin = 0.3 * normal(rng);
    for (int64_t j = 0; j < cols; ++j) {
      if (j >= 7 && (i + j) % 2 == 0) continue;  // columns 7..9 sparse, 0..6 dense
      const double z = normal(rng) * (1.0 + j);
      data_rows[i].push_back({static_cast<uint32_t>(j), static_cast<float>(z)});
      margin += (j % 3 == 0 ? 0.0 : 0.5) * z;
    }
    y[i] = margin > 0 ? 1.0f : -1.0f;
  }
  const dml::Dataset data = FromRows(cols, data_rows, y);
  const dml::ModelSpec spec = Spec(data, ModelKind::kLogisticL1, 0.05);
  const std::vector<double> ref = CyclicCdLogisticL1(data, spec.lambda, 3000);
  const dml::Certificate ref_cert = MustEvaluate(data, spec, ref);
  BOOST_REQUIRE(ref_cert.gap <= 1e-11 * ref_cert.primal);
  for (int threads : {1, 2}) {
    BOOST_TEST_CONTEXT("threads " << threads) {
      dml::SolverOptions o = Options(1e-10);
      o.kind = threads == 1 ? dml::SolverKind::kScd : dml::SolverKind::kAsyncScd;
      o.threads = threads;
      o.fit_threads = false;  // two threads share every column, however short
      const dml::TrainResult r = MustTrain(data, spec, o);
      BOOST_TEST(static_cast<int>(r.reason) == static_cast<int>(dml::StopReason::kConverged));
      BOOST_TEST(RelDiff(r.primal, ref_cert.primal) < 1e-8,
                 "glmnet " << r.primal << " reference " << ref_cert.primal);
      BOOST_TEST(r.gap <= 1e-10 * r.primal);
      const dml::Certificate c = MustEvaluate(data, spec, r.w);
      BOOST_TEST(c.gap == r.gap, boost::test_tools::tolerance(1e-9));
    }
  }
}

BOOST_AUTO_TEST_CASE(glmnet_on_badly_scaled_features) {
  const dml::Dataset data = BadlyScaled(400, 24, 5);
  for (double c : {0.1, 10.0}) {
    BOOST_TEST_CONTEXT("C " << c) {
      const dml::ModelSpec spec{ModelKind::kLogisticL1, dml::LambdaFromC(c, 400), 0.5};
      const std::vector<double> ref = CyclicCdLogisticL1(data, spec.lambda, 500);
      const dml::Certificate ref_cert = MustEvaluate(data, spec, ref);
      BOOST_REQUIRE(ref_cert.gap <= 1e-8 * ref_cert.primal);
      dml::SolverOptions o = Options(1e-9);
      o.eval_every = 0;
      const dml::TrainResult r = MustTrain(data, spec, o);
      BOOST_TEST(static_cast<int>(r.reason) == static_cast<int>(dml::StopReason::kConverged));
      BOOST_TEST(std::all_of(r.w.begin(), r.w.end(), [](double x) { return std::isfinite(x); }));
      BOOST_TEST(r.w[3] == 0.0);  // all-zero columns
      BOOST_TEST(r.w[20] == 0.0);
      BOOST_TEST(r.gap >= 0.0);
      BOOST_TEST(r.gap <= 1e-9 * r.primal);
      // The certified gap bounds the distance to the reference's primal.
      BOOST_TEST(r.primal <= ref_cert.primal + 1e-12);
      BOOST_TEST(RelDiff(r.primal, ref_cert.primal) < 1e-7,
                 "glmnet " << r.primal << " reference " << ref_cert.primal);
      const dml::Certificate cert = MustEvaluate(data, spec, r.w);
      BOOST_TEST(cert.primal == r.primal, boost::test_tools::tolerance(1e-14));
    }
  }
}

// With eval_every = 0 newGLMNET certifies when an estimate says the gap
// rule holds; the scaled-dual estimate says so where the bounded-support
// one (B = log 2 / lambda per unit of excess gradient) is still far off,
// and the exact certificate confirms it.
BOOST_AUTO_TEST_CASE(glmnet_stops_on_the_scaled_dual) {
  const dml::Dataset data = Classification();
  const dml::ModelSpec spec{ModelKind::kLogisticL1, dml::LambdaFromC(1.0, data.x.rows()), 0.5};
  for (int threads : {1, 2}) {
    BOOST_TEST_CONTEXT("threads " << threads) {
      dml::SolverOptions o = Options(1e-3);
      o.eval_every = 0;
      o.threads = threads;
      o.fit_threads = false;
      const dml::TrainResult r = MustTrain(data, spec, o);
      BOOST_TEST(static_cast<int>(r.reason) == static_cast<int>(dml::StopReason::kConverged));
      BOOST_TEST(r.gap <= 1e-3 * r.primal);
      const dml::Certificate c = MustEvaluate(data, spec, r.w);
      BOOST_TEST(c.gap == r.gap, boost::test_tools::tolerance(1e-9));
      BOOST_TEST(c.separable_gap > 1e-3 * c.primal,
                 "separable " << c.separable_gap << " primal " << c.primal);
    }
  }
}

/// One-hot rows, as categorical data comes (a9a, connect-4): `groups`
/// groups of `levels` binary features, one of each group set per row, so
/// every group's columns sum to the all-ones column (exactly collinear);
/// the first level of each group is set in 85% of the rows (nearly
/// constant columns); labels from a planted model with noise.
dml::Dataset OneHot(int64_t rows, int groups, int levels, uint64_t seed) {
  dml::Rng rng(seed);
  std::vector<double> truth(static_cast<std::size_t>(groups * levels));
  for (double& t : truth) t = 2.0 * rng.Uniform() - 1.0;
  std::vector<std::vector<std::pair<uint32_t, float>>> rs;
  std::vector<float> y;
  for (int64_t i = 0; i < rows; ++i) {
    std::vector<std::pair<uint32_t, float>> r;
    double z = 0.0;
    for (int g = 0; g < groups; ++g) {
      const double u = rng.Uniform();
      const int level = u < 0.85 ? 0 : 1 + static_cast<int>((u - 0.85) / 0.15 * (levels - 1));
      const uint32_t j = static_cast<uint32_t>(g * levels + std::min(level, levels - 1));
      r.push_back({j, 1.0f});
      z += truth[j];
    }
    rs.push_back(r);
    y.push_back(z + 2.0 * (rng.Uniform() - 0.5) > 0.0 ? 1.0f : -1.0f);
  }
  return FromRows(groups * levels, rs, y);
}

// On exactly collinear one-hot columns the inner CD stalls (it crawls
// along the quadratic model's flat directions: a9a spent 1000 cycles, 1770
// passes, an outer iteration); the stall ends the inner CD and the
// support's orthant Newton step finishes the model. The run reaches a
// tight certified gap, the optimum of a long cyclic CD, and reads a few
// hundred passes of the data (the 1000-cycle inner CD without the polish
// read thousands).
BOOST_AUTO_TEST_CASE(glmnet_on_collinear_one_hot_columns) {
  const dml::Dataset data = OneHot(4000, 14, 8, 19);
  const dml::ModelSpec spec{ModelKind::kLogisticL1, dml::LambdaFromC(1.0, 4000), 0.5};
  const std::vector<double> ref = CyclicCdLogisticL1(data, spec.lambda, 100);
  const dml::Certificate ref_cert = MustEvaluate(data, spec, ref);
  for (int threads : {1, 2}) {
    BOOST_TEST_CONTEXT("threads " << threads) {
      dml::SolverOptions o = Options(1e-6);
      o.threads = threads;
      o.eval_pacing = 0.0;  // every outer iteration in the history, with its reads
      o.stop.max_epochs = 300;
      const dml::TrainResult r = MustTrain(data, spec, o);
      BOOST_TEST(static_cast<int>(r.reason) == static_cast<int>(dml::StopReason::kConverged),
                 "epochs " << r.epochs << " gap " << r.gap);
      BOOST_TEST(r.gap <= 1e-6 * r.primal);
      BOOST_TEST(r.primal <= ref_cert.primal + 1e-6 * r.primal);
      const dml::Certificate c = MustEvaluate(data, spec, r.w);
      BOOST_TEST(c.primal == r.primal, boost::test_tools::tolerance(1e-12));
      double read = 0.0;
      for (const dml::Progress& p : r.history) read += static_cast<double>(p.nnz_touched);
      const double passes = read / static_cast<double>(data.x.nnz());
      BOOST_TEST(passes < 800.0, "passes " << passes << " epochs " << r.epochs);
      BOOST_TEST_MESSAGE("threads " << threads << " epochs " << r.epochs << " passes " << passes);
    }
  }
}

/// Dense rows over `cols` features that share one latent factor (pairwise
/// correlation about 0.8, as the columns of tabular sets often are), some
/// of them on larger scales; labels from a planted model with noise.
dml::Dataset CorrelatedDense(int64_t rows, int cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<double> planted(static_cast<std::size_t>(cols));
  for (double& p : planted) p = normal(rng);
  std::vector<std::vector<std::pair<uint32_t, float>>> rs(static_cast<std::size_t>(rows));
  std::vector<float> y;
  for (auto& r : rs) {
    const double latent = normal(rng);
    double margin = 0.5 * normal(rng);
    for (int j = 0; j < cols; ++j) {
      const double x = 2.0 * latent + normal(rng);
      margin += planted[static_cast<std::size_t>(j)] * x;
      r.push_back({static_cast<uint32_t>(j), static_cast<float>(x * (j % 3 == 0 ? 10.0 : 1.0))});
    }
    y.push_back(margin > 0.0 ? 1.0f : -1.0f);
  }
  return FromRows(cols, rs, y);
}

// Few dense, correlated features: forming the explicit Hessian of the
// active features costs a few passes, so newGLMNET solves each quadratic
// model over it (CD steps of O(features) flops, Newton on the support) to
// 1/100 of the current violation and converges as proximal Newton does:
// a 1e-10 certified gap in 15 outer iterations, where the column CD's
// loose models took 36 on this set; the primal is below a 300-epoch cyclic
// CD's.
BOOST_AUTO_TEST_CASE(glmnet_explicit_hessian_on_few_dense_features) {
  const dml::Dataset data = CorrelatedDense(1000, 24, 5);
  const dml::ModelSpec spec{ModelKind::kLogisticL1, dml::LambdaFromC(10.0, 1000), 0.5};
  const std::vector<double> ref = CyclicCdLogisticL1(data, spec.lambda, 300);
  const dml::Certificate ref_cert = MustEvaluate(data, spec, ref);
  for (int threads : {1, 2}) {
    BOOST_TEST_CONTEXT("threads " << threads) {
      dml::SolverOptions o = Options(1e-10);
      o.threads = threads;
      o.fit_threads = false;  // two threads form the Hessian however small
      const dml::TrainResult r = MustTrain(data, spec, o);
      BOOST_TEST(static_cast<int>(r.reason) == static_cast<int>(dml::StopReason::kConverged));
      BOOST_TEST(r.gap <= 1e-10 * r.primal);
      BOOST_TEST(r.epochs <= 20);
      BOOST_TEST(r.primal <= ref_cert.primal + 1e-10 * r.primal);
      const dml::Certificate c = MustEvaluate(data, spec, r.w);
      BOOST_TEST(c.primal == r.primal, boost::test_tools::tolerance(1e-12));
      BOOST_TEST_MESSAGE("threads " << threads << " epochs " << r.epochs);
    }
  }
}

// Wide data with little regularisation: the support (of 40000 features) is
// too large to factor, its coupled columns stall the inner CD, and
// truncated conjugate gradients on the support's Newton system (two passes
// over its columns an iteration) finish the direction: a 1e-6 certified
// gap in 51 outer iterations, where the CD's directions alone took 251.
BOOST_AUTO_TEST_CASE(glmnet_support_cg_on_wide_data) {
  const dml::Dataset data = Synthetic(2000, 40000, dml::Task::kClassification, 1.0, 3, 60);
  const dml::ModelSpec spec{ModelKind::kLogisticL1, dml::LambdaFromC(100.0, 2000), 0.5};
  dml::SolverOptions o = Options(1e-6);
  o.threads = 1;
  const dml::TrainResult r = MustTrain(data, spec, o);
  BOOST_TEST(static_cast<int>(r.reason) == static_cast<int>(dml::StopReason::kConverged));
  BOOST_TEST(r.gap <= 1e-6 * r.primal);
  BOOST_TEST(r.epochs < 80);
  const dml::Certificate c = MustEvaluate(data, spec, r.w);
  BOOST_TEST(c.primal == r.primal, boost::test_tools::tolerance(1e-12));
  BOOST_TEST_MESSAGE("epochs " << r.epochs);
}

BOOST_AUTO_TEST_CASE(glmnet_edge_cases) {
  {  // one example, one informative feature, one zero column: w = 0 unless
     // lambda < 1/2, where w solves sigma(-w x) x = lambda.
    const dml::Dataset data = FromRows(2, {{{0, 2.0f}}}, {1.0f});
    for (double lambda : {0.6, 0.1}) {
      const dml::ModelSpec spec{ModelKind::kLogisticL1, lambda, 0.5};
      const dml::TrainResult r = MustTrain(data, spec, Options(1e-12));
      BOOST_TEST(static_cast<int>(r.reason) == static_cast<int>(dml::StopReason::kConverged));
      BOOST_TEST(r.w[1] == 0.0);
      // 2 / (1 + exp(2 w)) = lambda  <=>  w = log(2 / lambda - 1) / 2.
      const double expected = lambda >= 1.0 ? 0.0 : std::log(2.0 / lambda - 1.0) / 2.0;
      BOOST_TEST(r.w[0] == expected, boost::test_tools::tolerance(1e-6));
      BOOST_TEST(r.gap >= 0.0);
    }
  }
  {  // lambda above lambda_max: the zero model, certified at once
    const dml::Dataset data = Classification();
    const dml::ModelSpec spec = Spec(data, ModelKind::kLogisticL1, 1.5);
    const dml::TrainResult r = MustTrain(data, spec, Options());
    BOOST_TEST(static_cast<int>(r.reason) == static_cast<int>(dml::StopReason::kConverged));
    BOOST_TEST(std::all_of(r.w.begin(), r.w.end(), [](double x) { return x == 0.0; }));
    BOOST_TEST(r.epochs == 1);
    BOOST_TEST(r.gap == 0.0);
  }
  {  // a column of huge values next to a column of tiny ones
    const dml::Dataset data =
        FromRows(2, {{{0, 3e6f}, {1, 1e-6f}}, {{0, -1e6f}}, {{1, -2e-6f}}, {{0, 5e5f}, {1, 4e-6f}}},
                 {1.0f, -1.0f, -1.0f, 1.0f});
    const dml::ModelSpec spec{ModelKind::kLogisticL1, 1e-3, 0.5};
    const dml::TrainResult r = MustTrain(data, spec, Options(1e-9));
    BOOST_TEST(std::isfinite(r.primal));
    BOOST_TEST(r.gap >= 0.0);
    BOOST_TEST(r.gap <= 1e-9 * r.primal);
    const std::vector<double> ref = CyclicCdLogisticL1(data, spec.lambda, 20000);
    BOOST_TEST(r.primal <= MustEvaluate(data, spec, ref).primal + 1e-12);
  }
}

// Both converged to a relative gap `tol`, with the same iterates up to the
// order of the partial sums; the second ran two threads.
void ExpectSameRunOnTwoThreads(const dml::TrainResult& one, const dml::TrainResult& two,
                               double tol) {
  for (const dml::TrainResult* r : {&one, &two}) {
    BOOST_TEST(static_cast<int>(r->reason) == static_cast<int>(dml::StopReason::kConverged));
    BOOST_TEST(r->gap >= 0.0);
    BOOST_TEST(r->gap <= tol * r->primal);
  }
  BOOST_TEST(RelDiff(one.primal, two.primal) < 1e-9);
  BOOST_TEST(std::abs(one.epochs - two.epochs) <= 1.0);
  BOOST_TEST(two.threads == 2);
}

BOOST_AUTO_TEST_CASE(glmnet_two_threads_share_the_inner_cd_of_long_columns) {
  // 8000 rows, 24 dense-ish columns (about 6000 nonzeros each, over
  // kSplitColumnNnz): two threads share every inner-CD visit, each over its
  // half of the rows. The same iterates up to the order of the sums, and
  // the same through Train (kAsyncScd runs newGLMNET with its threads).
  const dml::Dataset data =
      Synthetic(8000, 24, dml::Task::kClassification, 0.3, 12, /*nnz_per_row=*/18,
                /*model_density=*/0.5);
  const dml::ModelSpec spec = Spec(data, ModelKind::kLogisticL1, 0.02);
  dml::SolverOptions o = Options(1e-9);
  o.eval_every = 0;
  auto one = dml::internal::TrainGlmnetL1(data, spec, o);
  BOOST_REQUIRE(one.ok());
  o.threads = 2;
  o.kind = dml::SolverKind::kAsyncScd;
  auto two = dml::Train(data, spec, o);
  BOOST_REQUIRE_MESSAGE(two.ok(), two.status().ToString());
  ExpectSameRunOnTwoThreads(*one, *two, 1e-9);
  // Both ends of the weights agree (no half of X d was lost).
  for (std::size_t j = 0; j < one->w.size(); ++j) {
    BOOST_TEST(std::abs(one->w[j] - two->w[j]) <= 1e-6 * (1.0 + std::abs(one->w[j])), j);
  }
}

BOOST_AUTO_TEST_CASE(glmnet_threads_share_the_row_and_gradient_passes) {
  // Large enough for two chunks of rows and of nonzeros (the solver keeps
  // small problems on one thread), hence the internal entry point.
  const dml::Dataset data = Synthetic(40000, 300, dml::Task::kClassification, 0.3, 8);
  const dml::ModelSpec spec = Spec(data, ModelKind::kLogisticL1, 0.05);
  dml::SolverOptions o = Options(1e-8);
  o.eval_every = 0;
  auto one = dml::internal::TrainGlmnetL1(data, spec, o);
  BOOST_REQUIRE(one.ok());
  o.threads = 2;
  auto two = dml::internal::TrainGlmnetL1(data, spec, o);
  BOOST_REQUIRE(two.ok());
  ExpectSameRunOnTwoThreads(*one, *two, 1e-8);

  // A small problem stays on one thread and says why, unless told not to fit.
  const Problem p = Problems()[2];
  o.threads = 3;
  auto fitted = dml::internal::TrainGlmnetL1(p.data, p.spec, o);
  BOOST_REQUIRE(fitted.ok());
  BOOST_TEST(fitted->threads == 1);
  BOOST_TEST(fitted->note.find("newGLMNET ran 1 thread(s) of 3") == 0u);
  o.fit_threads = false;
  auto forced = dml::internal::TrainGlmnetL1(p.data, p.spec, o);
  BOOST_REQUIRE(forced.ok());
  BOOST_TEST(forced->threads == 3);
  BOOST_TEST(forced->note.empty());
  BOOST_TEST(forced->gap <= 1e-8 * forced->primal);
  BOOST_TEST(RelDiff(fitted->primal, forced->primal) < 1e-9);
}

// ---------------------------------------------------- CoCoA+ local solver

BOOST_AUTO_TEST_CASE(cocoa_local_solver_two_column_blocks) {
  for (const Problem& p : Problems()) {
    BOOST_TEST_CONTEXT(p.name) {
      const int64_t n = p.data.x.rows(), d = p.data.x.cols();
      const dml::CscMatrix a = p.data.x.Convert();
      const int64_t split[] = {0, d / 2, d};
      std::vector<std::unique_ptr<dml::LocalSolver>> workers;
      for (int k = 0; k < 2; ++k) {
        dml::LocalBlock block;
        block.cols = a.SliceOuter(split[k], split[k + 1]);
        block.y = p.data.y;
        block.n_global = n;
        block.loss_row_begin = n * k / 2;
        block.loss_row_end = n * (k + 1) / 2;
        auto s = dml::MakeLocalSolver(std::move(block), p.spec, 100 + k);
        BOOST_REQUIRE_MESSAGE(s.ok(), s.status().ToString());
        workers.push_back(std::move(*s));
      }
      const double gamma = 1.0, sigma_prime = 2.0;  // sigma' = gamma K
      std::vector<double> v(n, 0.0);
      double previous = std::numeric_limits<double>::infinity();
      std::vector<double> w(d);
      for (int round = 0; round < 3000; ++round) {
        std::vector<dml::LocalUpdate> updates;
        for (int k = 0; k < 2; ++k) {
          auto u = workers[k]->Solve(v, sigma_prime, gamma, split[k + 1] - split[k]);
          BOOST_REQUIRE_MESSAGE(u.ok(), u.status().ToString());
          BOOST_REQUIRE(u->delta_shared.size() == static_cast<std::size_t>(n));
          updates.push_back(std::move(*u));
        }
        for (int k = 0; k < 2; ++k) {
          for (int64_t i = 0; i < n; ++i) v[i] += gamma * updates[k].delta_shared[i];
          const std::vector<double>& c = workers[k]->coordinates();
          std::copy(c.begin(), c.end(), w.begin() + split[k]);
        }
        if (round % 50 == 49) {
          const dml::Certificate c = MustEvaluate(p.data, p.spec, w);
          BOOST_TEST(c.primal <= previous + 1e-12);  // monotone: sigma' = gamma K is safe
          // The blocks' certificate shares add up to the exact certificate.
          dml::BlockCertificate sum;
          for (const auto& wk : workers) {
            auto b = wk->Certify(v);
            BOOST_REQUIRE(b.ok());
            sum.loss_sum += b->loss_sum;
            sum.gap_sum += b->gap_sum;
            sum.reg_sum += b->reg_sum;
          }
          BOOST_TEST(std::abs(sum.loss_sum / n + sum.reg_sum - c.primal) <= 1e-9 * std::abs(c.primal));
          BOOST_TEST(std::abs(sum.gap_sum - c.separable_gap) <= 1e-9 * std::abs(c.primal) + 1e-12);
          previous = c.primal;
          if (c.gap <= 1e-9 * std::abs(c.primal)) break;
        }
      }
      // v is still A w.
      const Margins m = ComputeMargins(p.data, p.spec.kind, w);
      for (int64_t i = 0; i < n; ++i) BOOST_TEST(std::abs(v[i] - m.v[i]) < 1e-9);
      const dml::Certificate c = MustEvaluate(p.data, p.spec, w);
      BOOST_TEST(c.gap <= 1e-9 * std::abs(c.primal));
      const dml::TrainResult seq = MustTrain(p.data, p.spec, Options());
      BOOST_TEST(RelDiff(c.primal, seq.primal) < 1e-6);
    }
  }
}

BOOST_AUTO_TEST_CASE(cocoa_local_solver_errors) {
  const Problem p = Problems()[0];
  const dml::CscMatrix a = p.data.x.Convert();
  {
    dml::LocalBlock block;
    block.cols = a.SliceOuter(0, 0);
    block.y = p.data.y;
    BOOST_TEST(!dml::MakeLocalSolver(std::move(block), p.spec, 1).ok());
  }
  {
    dml::LocalBlock block;
    block.cols = a.SliceOuter(0, 5);
    block.y = std::vector<float>(3, 1.0f);
    BOOST_TEST(!dml::MakeLocalSolver(std::move(block), p.spec, 1).ok());
  }
  {
    dml::LocalBlock block;
    block.cols = a.SliceOuter(0, 5);
    block.y = p.data.y;  // real-valued
    dml::ModelSpec l1 = p.spec;
    l1.kind = ModelKind::kLogisticL1;
    auto s = dml::MakeLocalSolver(std::move(block), l1, 1);
    BOOST_TEST(s.status().code() == absl::StatusCode::kInvalidArgument);
  }
  dml::LocalBlock block;
  block.cols = a.SliceOuter(0, 5);
  block.y = p.data.y;
  auto s = dml::MakeLocalSolver(std::move(block), p.spec, 1);
  BOOST_REQUIRE(s.ok());
  BOOST_TEST(!(*s)->Solve(std::vector<double>(3, 0.0), 2.0, 1.0, 5).ok());
  BOOST_TEST(!(*s)->Solve(std::vector<double>(p.data.x.rows(), 0.0), 0.0, 1.0, 5).ok());
  BOOST_TEST(!(*s)->set_coordinates(std::vector<double>(4, 0.0)).ok());
  BOOST_TEST((*s)->set_coordinates(std::vector<double>(5, 0.5)).ok());
  BOOST_TEST((*s)->coordinates()[4] == 0.5);
}

}  // namespace

// The multiplicative state e = exp(v) cannot come back once a factor has
// driven an entry to a subnormal or zero (found on news20's raw counts: the
// primal went 0.69 -> 1.8 -> 1e11 because every later line search used
// e = 0). Step must flag that, so the solvers rebuild e from v = A w.
BOOST_AUTO_TEST_CASE(logistic_step_flags_a_state_that_left_the_normal_range) {
  // One feature; row 0 (y = +1, v = 0) pulls w up, which drives row 1
  // (x = -10, y = -1, v = -705) to v ~ -725: exp(v) is subnormal.
  auto x = dml::CsrMatrix::FromArrays(2, 1, {0, 1, 2}, {0, 0}, {1.0f, -10.0f});
  BOOST_REQUIRE(x.ok());
  dml::Dataset data;
  data.x = *std::move(x);
  data.y = {1.0f, -1.0f};
  data.task = dml::Task::kClassification;
  const dml::ModelSpec spec{ModelKind::kLogisticL1, 1e-4, 0.5};
  const dml::CscMatrix a = data.x.Convert();
  const auto cols = dml::LogisticL1Objective::PrepareColumns(a, data.y);
  const auto obj = dml::LogisticL1Objective::Make(spec, data.y);
  std::vector<double> e(2), scratch(2);
  dml::LogisticL1Objective::InitState({0.0, -705.0}, data.y, e.data());
  BOOST_REQUIRE(e[1] >= std::numeric_limits<double>::min());
  const auto step = obj.Step<PlainAccess>(a.outer(0), cols[0], e.data(), scratch.data(), 0.0, 1.0);
  BOOST_TEST(step.w > 1.0);
  BOOST_TEST(e[1] < std::numeric_limits<double>::min());  // the scenario happened
  BOOST_TEST(step.resync);
  // A step that keeps the state normal does not ask for a rebuild.
  dml::LogisticL1Objective::InitState({0.0, 0.0}, data.y, e.data());
  const auto calm = obj.Step<PlainAccess>(a.outer(0), cols[0], e.data(), scratch.data(), 0.0, 1.0);
  BOOST_TEST(calm.w != 0.0);
  BOOST_TEST(!calm.resync);
}

// Shrunk features come back without any certificate (eval_every = 0), on
// a9a's shape: one-hot categories in groups whose choices are correlated
// (a feature at 0 with a small gradient early is shrunk; its gradient grows
// as the correlated features move). Before LIBLINEAR's unshrinking rule was
// added, such runs settled on the active set's optimum (a9a's lasso at
// 1e-3: 0.45% above the optimum; here 0.2-0.4%, sequential and async).
BOOST_AUTO_TEST_CASE(features_shrunk_early_come_back_without_certificates) {
  const int groups = 12, categories = 10, n = 3000;
  dml::Rng rng(1);
  auto normal = [&rng] {  // Box-Muller
    const double u = 1.0 - rng.Uniform(), v = rng.Uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * M_PI * v);
  };
  std::vector<double> planted(groups * categories);
  for (double& w : planted) w = rng.Uniform() < 0.5 ? normal() : 0.0;
  std::vector<int64_t> off{0};
  std::vector<uint32_t> idx;
  std::vector<float> val;
  std::vector<float> y;
  for (int i = 0; i < n; ++i) {
    int c = static_cast<int>(rng.Below(categories));
    double score = 0.5 * normal();
    for (int g = 0; g < groups; ++g) {
      if (rng.Uniform() > 0.7) c = static_cast<int>(rng.Below(categories));
      idx.push_back(static_cast<uint32_t>(g * categories + c));
      val.push_back(1.0f);
      score += planted[g * categories + c];
    }
    y.push_back(score > 0 ? 1.0f : -1.0f);
    off.push_back(static_cast<int64_t>(idx.size()));
  }
  auto x = dml::CsrMatrix::FromArrays(n, groups * categories, off, idx, val);
  BOOST_REQUIRE_MESSAGE(x.ok(), x.status().ToString());
  dml::Dataset data;
  data.x = *std::move(x);
  data.y = std::move(y);
  data.task = dml::Task::kRegression;
  for (double lambda : {1e-3, 3e-3}) {
    BOOST_TEST_CONTEXT("lambda " << lambda) {
      dml::ModelSpec spec;
      spec.kind = ModelKind::kLasso;
      spec.lambda = lambda;
      dml::SolverOptions exact = Options(1e-12);
      exact.shrinking = false;
      const dml::TrainResult opt = MustTrain(data, spec, exact);
      for (dml::SolverKind kind : {dml::SolverKind::kScd, dml::SolverKind::kAsyncScd}) {
        dml::SolverOptions o = Options(0.0);
        o.kind = kind;
        o.threads = kind == dml::SolverKind::kAsyncScd ? 2 : 1;
        o.eval_every = 0;
        o.stop.max_epochs = 1000;
        const dml::TrainResult r = MustTrain(data, spec, o);
        BOOST_TEST(r.primal - opt.primal <= 1e-7 * opt.primal,
                   dml::SolverName(kind) << ": P " << r.primal << " against " << opt.primal);
      }
    }
  }
}
