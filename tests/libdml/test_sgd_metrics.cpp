#define BOOST_TEST_MODULE sgd_metrics
#include <boost/test/unit_test.hpp>

// Metrics against hand-computed values; minibatch SGD against optima found in
// this file by slow, obviously correct methods (Newton's method, dual
// coordinate descent with its own duality gap, ISTA).

#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "dml/data/sparse.hpp"
#include "dml/data/synthetic.hpp"
#include "dml/metrics/metrics.hpp"
#include "dml/objective/evaluate.hpp"
#include "dml/objective/losses.hpp"
#include "dml/objective/model.hpp"
#include "dml/objective/regularizers.hpp"
#include "dml/solver/sgd.hpp"
#include "dml/solver/solver.hpp"
#include "dml/util/rng.hpp"
#include "unscaled_problem.hpp"

namespace {

using dml::CsrMatrix;
using dml::Dataset;
using dml::ModelKind;
using dml::ModelSpec;

template <typename T>
void CheckError(const T& result, const std::string& needle) {
  BOOST_REQUIRE(!result.ok());
  BOOST_CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
  BOOST_CHECK_MESSAGE(std::string(result.status().message()).find(needle) != std::string::npos,
                      "message \"" << result.status().message() << "\" lacks \"" << needle
                                   << "\"");
}
void CheckStatusError(const absl::Status& s, const std::string& needle) {
  BOOST_REQUIRE(!s.ok());
  BOOST_CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  BOOST_CHECK_MESSAGE(std::string(s.message()).find(needle) != std::string::npos,
                      "message \"" << s.message() << "\" lacks \"" << needle << "\"");
}

void CheckClose(const std::vector<double>& got, const std::vector<double>& want) {
  BOOST_REQUIRE(got.size() == want.size());
  for (std::size_t j = 0; j < got.size(); ++j) {
    BOOST_TEST(got[j] == want[j], boost::test_tools::tolerance(1e-15));
  }
}

// ---------------------------------------------------------------- metrics

// [[1, 0, 2],
//  [0, 3, 0]]
CsrMatrix SmallMatrix() {
  auto m = CsrMatrix::FromArrays(2, 3, {0, 2, 3}, {0, 2, 1}, {1.0f, 2.0f, 3.0f});
  BOOST_REQUIRE(m.ok());
  return *std::move(m);
}

BOOST_AUTO_TEST_CASE(predict_margins_with_narrower_and_wider_models) {
  const CsrMatrix x = SmallMatrix();
  const std::vector<double> same = dml::Predict(x, {0.5, -1.0, 0.25});
  BOOST_TEST(same == (std::vector<double>{1.0, -3.0}), boost::test_tools::per_element());
  // Feature 2 lies beyond a 2-weight model: it counts as 0.
  const std::vector<double> narrow = dml::Predict(x, {0.5, -1.0});
  BOOST_TEST(narrow == (std::vector<double>{0.5, -3.0}), boost::test_tools::per_element());
  // Weights beyond the data's columns are never read.
  const std::vector<double> wide = dml::Predict(x, {0.5, -1.0, 0.25, 100.0});
  BOOST_TEST(wide == (std::vector<double>{1.0, -3.0}), boost::test_tools::per_element());
  const std::vector<double> none = dml::Predict(x, {});
  BOOST_TEST(none == (std::vector<double>{0.0, 0.0}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(accuracy_zero_margin_predicts_negative_as_liblinear) {
  const std::vector<float> y = {1, -1, 1, -1};
  // Predictions +1 (0.5), -1 (0 goes to -1), -1, -1: right, right, wrong, right.
  auto acc = dml::Accuracy(y, std::vector<double>{0.5, 0.0, -2.0, -1.0});
  BOOST_REQUIRE(acc.ok());
  BOOST_TEST(*acc == 0.75);
  // -0.0 too (the sign bit is not a prediction).
  auto zero_neg = dml::Accuracy(std::vector<float>{-1, 1}, std::vector<double>{0.0, -0.0});
  BOOST_REQUIRE(zero_neg.ok());
  BOOST_TEST(*zero_neg == 0.5);
  CheckError(dml::Accuracy(y, std::vector<double>{1, 2, 3}), "4 labels but 3 margins");
  CheckError(dml::Accuracy(std::vector<float>{1, 0}, std::vector<double>{1, 2}),
             "label of example 1 is 0");
  CheckError(dml::Accuracy(std::vector<float>{}, std::vector<double>{}), "no examples");
}

BOOST_AUTO_TEST_CASE(auc_with_ties_by_average_ranks) {
  // Ascending: 0.1(-) rank 1; 0.4(+), 0.4(-) ranks 2,3 -> 2.5 each; 0.8(+)
  // rank 4. Positive rank sum 6.5, minus P(P+1)/2 = 3, over P N = 4: 0.875.
  // Pairwise: (0.8 vs 0.4) 1, (0.8 vs 0.1) 1, (0.4 vs 0.4) 1/2, (0.4 vs
  // 0.1) 1 -> 3.5 / 4.
  auto auc = dml::Auc(std::vector<float>{1, 1, -1, -1}, std::vector<double>{0.8, 0.4, 0.4, 0.1});
  BOOST_REQUIRE(auc.ok());
  BOOST_TEST(*auc == 0.875, boost::test_tools::tolerance(1e-15));

  auto perfect = dml::Auc(std::vector<float>{-1, 1, -1, 1}, std::vector<double>{-3, 2, -1, 5});
  BOOST_REQUIRE(perfect.ok());
  BOOST_TEST(*perfect == 1.0);
  auto reversed = dml::Auc(std::vector<float>{-1, 1, -1, 1}, std::vector<double>{3, -2, 1, -5});
  BOOST_REQUIRE(reversed.ok());
  BOOST_TEST(*reversed == 0.0);
  auto all_tied = dml::Auc(std::vector<float>{-1, 1, 1}, std::vector<double>{7, 7, 7});
  BOOST_REQUIRE(all_tied.ok());
  BOOST_TEST(*all_tied == 0.5);
  // y = (+,-,+,-,+), s = (3,3,1,2,2): pairs (pos, neg) -> 3>=3 half, 3>2 1;
  // 1<3 0, 1<2 0; 2<3 0, 2=2 half: total 2 of 6.
  auto mixed = dml::Auc(std::vector<float>{1, -1, 1, -1, 1}, std::vector<double>{3, 3, 1, 2, 2});
  BOOST_REQUIRE(mixed.ok());
  BOOST_TEST(*mixed == 2.0 / 6.0, boost::test_tools::tolerance(1e-15));

  CheckError(dml::Auc(std::vector<float>{1, 1}, std::vector<double>{0.1, 0.2}), "both classes");
  CheckError(dml::Auc(std::vector<float>{-1, -1}, std::vector<double>{0.1, 0.2}), "both classes");
  CheckError(dml::Auc(std::vector<float>{1, -1}, std::vector<double>{0.1}),
             "2 labels but 1 scores");
  CheckError(dml::Auc(std::vector<float>{1, -1}, std::vector<double>{0.1, std::nan("")}),
             "score of example 1");
}

// The radix sort's keys: signs, -0 against +0, subnormals, huge and tied
// scores, against the pairwise definition.
BOOST_AUTO_TEST_CASE(auc_matches_pairwise_count_on_awkward_scores) {
  const double pool[] = {-1e300, -3.5, -1.0, -1e-310, -0.0, 0.0, 1e-310, 2.5e-8, 1.0, 3.5, 1e300};
  std::vector<float> y;
  std::vector<double> s;
  std::uint64_t state = 12345;
  for (int i = 0; i < 700; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    s.push_back(pool[(state >> 33) % 11] * (i % 3 == 0 ? 1.0 : 1.0 + (i % 7) * 1e-3));
    y.push_back(((state >> 20) & 3) == 0 ? 1.0f : -1.0f);
  }
  double wins = 0.0, pairs = 0.0;
  for (std::size_t a = 0; a < y.size(); ++a) {
    for (std::size_t b = 0; b < y.size(); ++b) {
      if (y[a] <= 0 || y[b] > 0) continue;
      pairs += 1.0;
      wins += s[a] > s[b] ? 1.0 : s[a] == s[b] ? 0.5 : 0.0;
    }
  }
  auto auc = dml::Auc(y, s);
  BOOST_REQUIRE(auc.ok());
  BOOST_TEST(*auc == wins / pairs, boost::test_tools::tolerance(1e-13));
}

BOOST_AUTO_TEST_CASE(log_loss_matches_formula_and_is_stable) {
  const std::vector<float> y = {1, -1, 1};
  const std::vector<double> z = {2.0, 0.5, -1.0};
  const double direct =
      (std::log(1 + std::exp(-2.0)) + std::log(1 + std::exp(0.5)) + std::log(1 + std::exp(1.0))) /
      3.0;
  auto ll = dml::LogLoss(y, z);
  BOOST_REQUIRE(ll.ok());
  BOOST_TEST(*ll == direct, boost::test_tools::tolerance(1e-14));
  // log(1 + e^1000) = 1000 (to double precision), log(1 + e^-1000) = 0.
  auto extreme = dml::LogLoss(std::vector<float>{-1, 1}, std::vector<double>{1000.0, 1000.0});
  BOOST_REQUIRE(extreme.ok());
  BOOST_TEST(*extreme == 500.0, boost::test_tools::tolerance(1e-15));
  CheckError(dml::LogLoss(y, std::vector<double>{1.0}), "3 labels but 1 margins");
  CheckError(dml::LogLoss(std::vector<float>{2}, std::vector<double>{1.0}), "expected -1 or +1");
}

BOOST_AUTO_TEST_CASE(rmse_and_r2_exact) {
  const std::vector<float> y = {1, 2, 3};
  auto rmse = dml::Rmse(y, std::vector<double>{1, 2, 5});  // residuals 0,0,-2
  BOOST_REQUIRE(rmse.ok());
  BOOST_TEST(*rmse == std::sqrt(4.0 / 3.0), boost::test_tools::tolerance(1e-15));
  // mean 2, SS_tot = 2; SS_res = 4 -> R^2 = -1 (worse than the mean).
  auto r2_bad = dml::R2(y, std::vector<double>{1, 2, 5});
  BOOST_REQUIRE(r2_bad.ok());
  BOOST_TEST(*r2_bad == -1.0, boost::test_tools::tolerance(1e-15));
  // SS_res = 0.25 + 0 + 0.25 = 0.5 -> R^2 = 0.75.
  auto r2 = dml::R2(y, std::vector<double>{1.5, 2, 2.5});
  BOOST_REQUIRE(r2.ok());
  BOOST_TEST(*r2 == 0.75, boost::test_tools::tolerance(1e-15));
  auto exact = dml::R2(y, std::vector<double>{1, 2, 3});
  BOOST_REQUIRE(exact.ok());
  BOOST_TEST(*exact == 1.0);

  CheckError(dml::R2(std::vector<float>{4, 4, 4}, std::vector<double>{1, 2, 3}), "undefined");
  CheckError(dml::Rmse(y, std::vector<double>{1, 2}), "3 labels but 2 predictions");
  CheckError(dml::R2(y, std::vector<double>{1, 2, 3, 4}), "3 labels but 4 predictions");
  CheckError(dml::Rmse(y, std::vector<double>{1, INFINITY, 3}), "prediction of example 1");
  CheckError(dml::Rmse(std::vector<float>{}, std::vector<double>{}), "no examples");
}

// ---------------------------------------------------------------- SGD

Dataset MakeData(dml::Task task, double noise, uint64_t seed, double density = 1.0) {
  dml::SyntheticOptions o;
  o.rows = 500;
  o.cols = 30;
  o.nnz_per_row = 10;
  o.noise = noise;
  o.task = task;
  o.seed = seed;
  o.model_density = density;
  o.threads = 1;
  auto s = dml::GenerateSynthetic(o);
  BOOST_REQUIRE_MESSAGE(s.ok(), s.status().ToString());
  return std::move(s->data);
}

double Primal(const Dataset& data, const ModelSpec& model, const std::vector<double>& w) {
  auto p = dml::PrimalValue(data, model, w);
  BOOST_REQUIRE_MESSAGE(p.ok(), p.status().ToString());
  return *p;
}

std::vector<double> Margins(const Dataset& data, const std::vector<double>& w) {
  return dml::Predict(data.x, w);
}

// Solves A x = b (A dense d x d, row-major) by Gaussian elimination with
// partial pivoting.
std::vector<double> Solve(std::vector<double> a, std::vector<double> b) {
  const std::size_t d = b.size();
  for (std::size_t c = 0; c < d; ++c) {
    std::size_t piv = c;
    for (std::size_t r = c + 1; r < d; ++r) {
      if (std::abs(a[r * d + c]) > std::abs(a[piv * d + c])) piv = r;
    }
    for (std::size_t k = 0; k < d; ++k) std::swap(a[c * d + k], a[piv * d + k]);
    std::swap(b[c], b[piv]);
    for (std::size_t r = c + 1; r < d; ++r) {
      const double f = a[r * d + c] / a[c * d + c];
      for (std::size_t k = c; k < d; ++k) a[r * d + k] -= f * a[c * d + k];
      b[r] -= f * b[c];
    }
  }
  std::vector<double> x(d);
  for (std::size_t c = d; c-- > 0;) {
    double s = b[c];
    for (std::size_t k = c + 1; k < d; ++k) s -= a[c * d + k] * x[k];
    x[c] = s / a[c * d + c];
  }
  return x;
}

// Newton's method for a twice-differentiable loss + lambda ||w||^2 / 2, with
// a dense Hessian: exact for ridge in one step, quadratic convergence for
// logistic. Stops when the gradient vanishes to rounding.
template <typename Loss>
std::vector<double> NewtonReference(const Dataset& data, double lambda) {
  const std::size_t d = static_cast<std::size_t>(data.x.cols());
  const double n = static_cast<double>(data.x.rows());
  std::vector<double> w(d, 0.0);
  for (int it = 0; it < 50; ++it) {
    const std::vector<double> z = Margins(data, w);
    std::vector<double> g(d), h(d * d, 0.0);
    for (std::size_t j = 0; j < d; ++j) {
      g[j] = lambda * w[j];
      h[j * d + j] = lambda;
    }
    for (int64_t i = 0; i < data.x.rows(); ++i) {
      const dml::SparseView r = data.x.outer(i);
      const double d1 = Loss::Derivative(data.y[i], z[i]) / n;
      const double d2 = Loss::Second(data.y[i], z[i]) / n;
      for (std::size_t p = 0; p < r.size; ++p) {
        g[r.index[p]] += d1 * r.value[p];
        for (std::size_t q = 0; q < r.size; ++q) {
          h[r.index[p] * d + r.index[q]] += d2 * r.value[p] * r.value[q];
        }
      }
    }
    double gnorm = 0.0;
    for (double gj : g) gnorm = std::max(gnorm, std::abs(gj));
    if (gnorm < 1e-14) break;
    const std::vector<double> step = Solve(h, g);
    for (std::size_t j = 0; j < d; ++j) w[j] -= step[j];
  }
  return w;
}

// Hinge-loss SVM by dual coordinate descent (Hsieh et al., ICML 2008, Alg. 1)
// on min 1/2 |w|^2 + C sum hinge with C = 1/(lambda n), which is P / lambda.
// Runs until its own duality gap is below 1e-9 relative.
std::vector<double> HingeReference(const Dataset& data, double lambda) {
  const int64_t n = data.x.rows();
  const double c = 1.0 / (lambda * static_cast<double>(n));
  std::vector<double> w(static_cast<std::size_t>(data.x.cols()), 0.0), alpha(n, 0.0);
  const std::vector<double> q = data.x.OuterSquaredNorms();
  for (int epoch = 0; epoch < 5000; ++epoch) {
    for (int64_t i = 0; i < n; ++i) {
      if (q[i] == 0) continue;
      const dml::SparseView r = data.x.outer(i);
      double z = 0.0;
      for (std::size_t p = 0; p < r.size; ++p) z += r.value[p] * w[r.index[p]];
      const double grad = data.y[i] * z - 1.0;
      const double next = std::min(c, std::max(0.0, alpha[i] - grad / q[i]));
      const double delta = (next - alpha[i]) * data.y[i];
      alpha[i] = next;
      for (std::size_t p = 0; p < r.size; ++p) w[r.index[p]] += delta * r.value[p];
    }
    double primal = 0.0, dual = 0.0, ww = 0.0;
    for (double wj : w) ww += wj * wj;
    const std::vector<double> z = Margins(data, w);
    for (int64_t i = 0; i < n; ++i) {
      primal += c * std::max(0.0, 1.0 - data.y[i] * z[i]);
      dual += alpha[i];
    }
    primal += 0.5 * ww;
    dual -= 0.5 * ww;
    if (primal - dual <= 1e-9 * primal) break;
  }
  return w;
}

// ISTA with step 1/L, L the largest eigenvalue of X^T X / n by power
// iteration, for squared loss + lambda ||w||_1. Monotone; run to a fixed point.
std::vector<double> LassoReference(const Dataset& data, double lambda) {
  const std::size_t d = static_cast<std::size_t>(data.x.cols());
  const double n = static_cast<double>(data.x.rows());
  auto xtx = [&](const std::vector<double>& v) {  // X^T X v / n
    const std::vector<double> z = Margins(data, v);
    std::vector<double> out(d, 0.0);
    for (int64_t i = 0; i < data.x.rows(); ++i) {
      const dml::SparseView r = data.x.outer(i);
      for (std::size_t p = 0; p < r.size; ++p) out[r.index[p]] += z[i] * r.value[p] / n;
    }
    return out;
  };
  std::vector<double> v(d, 1.0);
  double big_l = 0.0;
  for (int it = 0; it < 500; ++it) {
    std::vector<double> u = xtx(v);
    double norm = 0.0;
    for (double x : u) norm += x * x;
    norm = std::sqrt(norm);
    for (std::size_t j = 0; j < d; ++j) v[j] = u[j] / norm;
    big_l = norm;
  }
  big_l *= 1.01;  // a safe upper bound
  std::vector<double> w(d, 0.0);
  for (int it = 0; it < 100000; ++it) {
    const std::vector<double> z = Margins(data, w);
    std::vector<double> g(d, 0.0);
    for (int64_t i = 0; i < data.x.rows(); ++i) {
      const dml::SparseView r = data.x.outer(i);
      for (std::size_t p = 0; p < r.size; ++p) g[r.index[p]] += (z[i] - data.y[i]) * r.value[p] / n;
    }
    double change = 0.0;
    for (std::size_t j = 0; j < d; ++j) {
      const double next = dml::reg::SoftThreshold(w[j] - g[j] / big_l, lambda / big_l);
      change = std::max(change, std::abs(next - w[j]));
      w[j] = next;
    }
    if (change < 1e-15) break;
  }
  return w;
}

dml::SolverOptions SgdOptions(int epochs, int batch, double step0, double decay) {
  dml::SolverOptions o;
  o.kind = dml::SolverKind::kSgd;
  o.stop.max_epochs = epochs;
  o.sgd.batch_size = batch;
  o.sgd.step0 = step0;
  o.sgd.step_decay = decay;
  o.seed = 7;
  return o;
}

dml::TrainResult TrainOk(const Dataset& data, const ModelSpec& model,
                         const dml::SolverOptions& options) {
  auto r = dml::Train(data, model, options);
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  return *std::move(r);
}

double RelativeSuboptimality(double p, double p_star) { return (p - p_star) / std::abs(p_star); }

// SVRG's estimate: at the snapshot it is mu itself; over all rows as one
// batch it is the full loss gradient at w (unbiased), for any snapshot.
BOOST_AUTO_TEST_CASE(svrg_gradient_is_mu_at_the_snapshot_and_exact_over_all_rows) {
  const Dataset data = MakeData(dml::Task::kClassification, 0.3, 31);
  const ModelSpec model{ModelKind::kLogisticL2, 1e-2, 0.5};
  const int64_t n = data.x.rows();
  std::vector<double> snap(data.x.cols()), w(data.x.cols());
  dml::Rng rng(5);
  for (std::size_t j = 0; j < w.size(); ++j) {
    snap[j] = rng.Uniform() - 0.5;
    w[j] = rng.Uniform() - 0.5;
  }
  auto anchor = dml::LossDerivatives(data, model, snap);
  BOOST_REQUIRE(anchor.ok());
  std::vector<int64_t> all(n);
  std::iota(all.begin(), all.end(), int64_t{0});
  auto mu = dml::MinibatchGradient(data, model, all, snap, false);
  BOOST_REQUIRE(mu.ok());
  const std::vector<int64_t> batch{3, 17, 17, 200};
  auto at_snap = dml::SvrgGradient(data, model, batch, snap, *anchor, *mu);
  BOOST_REQUIRE(at_snap.ok());
  for (std::size_t j = 0; j < w.size(); ++j) BOOST_TEST(std::abs((*at_snap)[j] - (*mu)[j]) < 1e-15);
  auto full = dml::SvrgGradient(data, model, all, w, *anchor, *mu);
  auto want = dml::MinibatchGradient(data, model, all, w, false);
  BOOST_REQUIRE(full.ok() && want.ok());
  for (std::size_t j = 0; j < w.size(); ++j) BOOST_TEST(std::abs((*full)[j] - (*want)[j]) < 1e-12);
  auto bad = dml::SvrgGradient(data, model, batch, w, std::vector<double>(3), *mu);
  BOOST_REQUIRE(!bad.ok());
  BOOST_TEST(std::string(bad.status().message()) ==
             "SvrgGradient: 3 anchor derivatives for 500 rows, 30 mean-gradient entries for 30 weights");
}

// SAGA's part: the loss' now minus the one remembered, over the batch;
// the memory takes the loss' now (a row drawn twice counts once); from
// empty memories, one pass of batches and the mean that the shards keep
// (the pushes times |B| / n) is the full loss gradient at w.
BOOST_AUTO_TEST_CASE(saga_gradient_remembers_each_row_and_its_mean_is_the_full_gradient) {
  const Dataset data = MakeData(dml::Task::kClassification, 0.3, 31);
  const ModelSpec model{ModelKind::kLogisticL2, 1e-2, 0.5};
  const int64_t n = data.x.rows();
  std::vector<double> w(data.x.cols());
  dml::Rng rng(5);
  for (double& x : w) x = rng.Uniform() - 0.5;
  auto now = dml::LossDerivatives(data, model, w);
  BOOST_REQUIRE(now.ok());
  std::vector<double> memory(static_cast<std::size_t>(n), 0.0);
  memory[17] = 0.25;
  const std::vector<int64_t> batch{3, 17, 17, 200};
  auto g = dml::SagaGradient(data, model, batch, w, memory);
  BOOST_REQUIRE(g.ok());
  // By hand: (1/4) [(l'_3 - 0) x_3 + (l'_17 - 0.25) x_17 + 0 + l'_200 x_200].
  std::vector<double> want(w.size(), 0.0);
  const double coef[] = {(*now)[3] / 4, ((*now)[17] - 0.25) / 4, (*now)[200] / 4};
  const int64_t rows[] = {3, 17, 200};
  for (int r = 0; r < 3; ++r) {
    const dml::SparseView v = data.x.outer(rows[r]);
    for (std::size_t k = 0; k < v.size; ++k) want[v.index[k]] += coef[r] * v.value[k];
  }
  for (std::size_t j = 0; j < w.size(); ++j) BOOST_TEST(std::abs((*g)[j] - want[j]) < 1e-15);
  for (int64_t i : rows) BOOST_TEST(memory[i] == (*now)[i]);
  BOOST_TEST(memory[4] == 0.0);
  // From empty memories: every row once, in batches of 50; the mean.
  std::fill(memory.begin(), memory.end(), 0.0);
  std::vector<double> mean(w.size(), 0.0);
  for (int64_t b = 0; b < n; b += 50) {
    std::vector<int64_t> part(50);
    std::iota(part.begin(), part.end(), b);
    auto p = dml::SagaGradient(data, model, part, w, memory);
    BOOST_REQUIRE(p.ok());
    for (std::size_t j = 0; j < w.size(); ++j) mean[j] += (*p)[j] * 50.0 / static_cast<double>(n);
  }
  std::vector<int64_t> all(n);
  std::iota(all.begin(), all.end(), int64_t{0});
  auto full = dml::MinibatchGradient(data, model, all, w, false);
  BOOST_REQUIRE(full.ok());
  for (std::size_t j = 0; j < w.size(); ++j) BOOST_TEST(std::abs(mean[j] - (*full)[j]) < 1e-13);
  std::vector<double> short_memory(3, 0.0);
  auto bad = dml::SagaGradient(data, model, batch, w, short_memory);
  BOOST_REQUIRE(!bad.ok());
  BOOST_TEST(std::string(bad.status().message()) ==
             "SagaGradient: 3 remembered derivatives for 500 rows");
}

// The average covers the iterates from the last power of two but one:
// after 1..7 it is mean(2..7); after 8, mean(4..8).
BOOST_AUTO_TEST_CASE(iterate_average_keeps_at_least_the_last_half) {
  dml::IterateAverage a;
  const double want[] = {1.0, 1.5, 2.0, 3.0, 3.5, 4.0, 4.5, 6.0};
  for (int i = 1; i <= 8; ++i) {
    a.Add({static_cast<double>(i), -2.0 * i});
    BOOST_TEST(a.Value()[0] == want[i - 1], "after " << i);
    BOOST_TEST(a.Value()[1] == -2.0 * want[i - 1]);
    BOOST_TEST(a.Added() == i);
  }
  BOOST_TEST(a.Count() == 5);  // 4..8
}

// Ridge on features 30 times larger: the old fixed step 0.5 diverges (an
// error naming the step), the calibrated one is found on a sample and
// reaches the Newton optimum; the calibration is deterministic.
BOOST_AUTO_TEST_CASE(calibrated_step_where_a_fixed_one_diverges) {
  const Dataset base = MakeData(dml::Task::kRegression, 0.3, 21);
  std::vector<float> vals = base.x.values();
  for (float& v : vals) v *= 30.0f;
  auto x = CsrMatrix::FromArrays(base.x.rows(), base.x.cols(), base.x.offsets(), base.x.indices(),
                                 vals);
  BOOST_REQUIRE(x.ok());
  const Dataset data{std::move(*x), base.y, base.task, {}};
  const ModelSpec model{ModelKind::kRidge, 1e-2, 0.5};
  const double p_star = Primal(data, model, NewtonReference<dml::loss::Squared>(data, model.lambda));
  dml::SolverOptions fixed = SgdOptions(40, 64, 0.5, -1.0);
  auto bad = dml::Train(data, model, fixed);
  BOOST_REQUIRE(!bad.ok());
  BOOST_TEST(std::string(bad.status().message()).find("sgd step0 = 0.5 is too large") !=
             std::string::npos, bad.status().message());
  auto eta = dml::CalibrateStep(data, model, 64, 7);
  BOOST_REQUIRE(eta.ok());
  BOOST_TEST(*eta < 0.5);
  BOOST_TEST(*eta > 0.0);
  BOOST_TEST(*dml::CalibrateStep(data, model, 64, 7) == *eta);
  dml::SolverOptions automatic = SgdOptions(40, 64, 0.0, -1.0);
  const dml::TrainResult r = TrainOk(data, model, automatic);
  BOOST_TEST_MESSAGE("calibrated step0 " << *eta << ": P " << r.primal << " vs P* " << p_star);
  BOOST_TEST(RelativeSuboptimality(r.primal, p_star) <= 1e-3);
  BOOST_TEST(r.dual <= p_star * (1 + 1e-12));
}

// Logistic on unscaled tabular columns (offsets, units over 5 decades):
// far above the stable step the loss, being bounded, oscillates at huge
// values whose order over the steps is noise, so a walk that stopped at
// the first step not better than the last returned 0.5 (then 1e4 times
// P*); trials ending above P(0) count as diverged and the walk goes on.
BOOST_AUTO_TEST_CASE(calibration_walks_past_steps_that_end_above_the_origin) {
  const Dataset data = dml::testing::OffsetProblem(569, 30, 3.0, 41);
  const ModelSpec model{ModelKind::kLogisticL2, 1e-4, 0.5};
  const auto factors = dml::FeatureStepFactors(dml::ColumnSquareSums(data), data.x.rows(), model);
  BOOST_REQUIRE(!factors.empty());  // units differ: per-feature steps are on
  auto eta = dml::CalibrateStep(data, model, 64, 7, factors);
  BOOST_REQUIRE(eta.ok());
  BOOST_TEST_MESSAGE("calibrated step0 " << *eta);
  BOOST_TEST(*eta < 1e-3);
  dml::SolverOptions o = SgdOptions(50, 0, *eta, -1.0);
  const dml::TrainResult r = TrainOk(data, model, o);
  BOOST_TEST(r.primal < std::log(2.0));  // below P(0): it moved the right way
  dml::SolverOptions newton;
  newton.kind = dml::SolverKind::kNewton;
  newton.stop.gap_rel = 1e-12;
  const dml::TrainResult opt = TrainOk(data, model, newton);
  BOOST_TEST(RelativeSuboptimality(r.primal, opt.primal) <= 0.05);
  // Where 0 is the optimum (lasso past lambda_max) no trial leaves P(0),
  // and that is no divergence: a step is still found.
  const ModelSpec flat{ModelKind::kLasso, 1e6, 1.0};
  auto at_zero = dml::CalibrateStep(data, flat, 64, 7);
  BOOST_REQUIRE_MESSAGE(at_zero.ok(), at_zero.status().ToString());
  BOOST_TEST(*at_zero > 0.0);
}

// The batch sized to the data: at least 32 steps an epoch per worker, at
// most kMaxAutoBatch rows.
BOOST_AUTO_TEST_CASE(auto_batch_gives_small_data_enough_steps) {
  BOOST_TEST(dml::AutoBatch(569, 4) == 4);       // 569 / 128
  BOOST_TEST(dml::AutoBatch(569, 1) == 17);      // 569 / 32
  BOOST_TEST(dml::AutoBatch(20, 4) == 1);        // at least one row
  BOOST_TEST(dml::AutoBatch(32561, 4) == 64);    // a9a: 254, capped
  BOOST_TEST(dml::AutoBatch(1000000, 0) == 64);  // no workers counts as one
  BOOST_TEST(dml::ResolveBatch(256, 569, 4) == 256);  // a batch given is kept
}

BOOST_AUTO_TEST_CASE(sgd_ridge_reaches_newton_optimum) {
  const Dataset data = MakeData(dml::Task::kRegression, 0.3, 11);
  const ModelSpec model{ModelKind::kRidge, 1e-2, 0.5};
  const double p_star = Primal(data, model, NewtonReference<dml::loss::Squared>(data, model.lambda));
  const dml::TrainResult r = TrainOk(data, model, SgdOptions(60, 10, 0.5, 0.005));
  BOOST_TEST_MESSAGE("ridge: P* = " << p_star << ", SGD " << r.primal);
  BOOST_TEST(r.primal >= p_star * (1 - 1e-12));
  BOOST_TEST(RelativeSuboptimality(r.primal, p_star) <= 1e-3);
  BOOST_TEST(r.primal == Primal(data, model, r.w), boost::test_tools::tolerance(1e-14));
  // The certificate of the iterate bounds its suboptimality.
  BOOST_TEST(r.gap >= 0.0);
  BOOST_TEST(r.dual <= p_star * (1 + 1e-12));
  BOOST_TEST(r.alpha.empty());
}

BOOST_AUTO_TEST_CASE(sgd_logistic_reaches_newton_optimum) {
  const Dataset data = MakeData(dml::Task::kClassification, 0.5, 12);
  const ModelSpec model{ModelKind::kLogisticL2, 1e-2, 0.5};
  const double p_star =
      Primal(data, model, NewtonReference<dml::loss::Logistic>(data, model.lambda));
  const dml::TrainResult r = TrainOk(data, model, SgdOptions(60, 10, 1.0, 0.01));
  BOOST_TEST_MESSAGE("logistic: P* = " << p_star << ", SGD " << r.primal);
  BOOST_TEST(r.primal >= p_star * (1 - 1e-12));
  BOOST_TEST(RelativeSuboptimality(r.primal, p_star) <= 1e-3);
}

BOOST_AUTO_TEST_CASE(sgd_momentum_reaches_newton_optimum) {
  const Dataset data = MakeData(dml::Task::kClassification, 0.5, 12);
  const ModelSpec model{ModelKind::kLogisticL2, 1e-2, 0.5};
  const double p_star =
      Primal(data, model, NewtonReference<dml::loss::Logistic>(data, model.lambda));
  dml::SolverOptions o = SgdOptions(60, 10, 0.1, 0.01);
  o.sgd.momentum = 0.9;
  const dml::TrainResult r = TrainOk(data, model, o);
  BOOST_TEST_MESSAGE("logistic + momentum: P* = " << p_star << ", SGD " << r.primal);
  BOOST_TEST(RelativeSuboptimality(r.primal, p_star) <= 1e-3);
  // Momentum changes the iterates (it is not silently ignored).
  const dml::TrainResult plain = TrainOk(data, model, SgdOptions(1, 10, 0.1, 0.01));
  dml::SolverOptions one = SgdOptions(1, 10, 0.1, 0.01);
  one.sgd.momentum = 0.9;
  BOOST_TEST(TrainOk(data, model, one).w != plain.w);
}

BOOST_AUTO_TEST_CASE(sgd_hinge_svm_close_to_dual_cd) {
  const Dataset data = MakeData(dml::Task::kClassification, 0.5, 13);
  const ModelSpec model{ModelKind::kHingeSvm, 1e-2, 0.5};
  const double p_star = Primal(data, model, HingeReference(data, model.lambda));
  const dml::TrainResult r = TrainOk(data, model, SgdOptions(60, 10, 1.0, 0.01));
  BOOST_TEST_MESSAGE("hinge: P* = " << p_star << ", SGD " << r.primal);
  BOOST_TEST(r.primal >= p_star * (1 - 1e-9));
  BOOST_TEST(RelativeSuboptimality(r.primal, p_star) <= 1e-2);
  // The primal decreases overall: the last report is far below the first.
  BOOST_REQUIRE(r.history.size() == 60u);
  BOOST_TEST(r.history.back().primal <= r.history.front().primal);
}

BOOST_AUTO_TEST_CASE(sgd_lasso_proximal_close_to_ista) {
  const Dataset data = MakeData(dml::Task::kRegression, 0.1, 14, 0.3);
  const ModelSpec model{ModelKind::kLasso, 2e-2, 1.0};
  const std::vector<double> w_star = LassoReference(data, model.lambda);
  const double p_star = Primal(data, model, w_star);
  const dml::TrainResult r = TrainOk(data, model, SgdOptions(80, 10, 0.5, 0.005));
  BOOST_TEST_MESSAGE("lasso: P* = " << p_star << ", SGD " << r.primal);
  BOOST_TEST(r.primal >= p_star * (1 - 1e-9));
  BOOST_TEST(RelativeSuboptimality(r.primal, p_star) <= 1e-3);
  // The soft-threshold gives exact zeros, as a subgradient step would not.
  int zeros_star = 0, zeros = 0;
  for (double wj : w_star) zeros_star += wj == 0.0;
  for (double wj : r.w) zeros += wj == 0.0;
  BOOST_TEST_MESSAGE("zeros: ISTA " << zeros_star << ", SGD " << zeros);
  BOOST_TEST(zeros_star > 0);
  BOOST_TEST(zeros > 0);
}

// TrainSgd's lazy scaled representation must give the same iterates as the
// dense SgdStep, given the documented example order (Rng(seed), a
// Fisher-Yates shuffle per epoch of the previous order) and step schedule.
void CheckLazyMatchesDense(const Dataset& data, const ModelSpec& model, double step0,
                           double decay, int batch, int epochs) {
  dml::SolverOptions o = SgdOptions(epochs, batch, step0, decay);
  o.sgd.average = false;  // the iterate itself, not the better certified average
  const dml::TrainResult r = TrainOk(data, model, o);
  const int64_t n = data.x.rows();
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), int64_t{0});
  dml::Rng rng(o.seed);
  std::vector<double> w(data.x.cols(), 0.0);
  int64_t t = 0;
  for (int e = 0; e < epochs; ++e) {
    rng.Shuffle(order);
    for (int64_t begin = 0; begin < n; begin += batch) {
      const std::vector<int64_t> rows(order.begin() + begin,
                                      order.begin() + std::min<int64_t>(n, begin + batch));
      const double step = step0 / (1.0 + decay * static_cast<double>(t++));
      BOOST_REQUIRE(dml::SgdStep(data, model, rows, step, w).ok());
    }
  }
  double scale = 0.0, diff = 0.0;
  int zeros_dense = 0, zeros_lazy = 0;
  for (std::size_t j = 0; j < w.size(); ++j) {
    scale = std::max(scale, std::abs(w[j]));
    diff = std::max(diff, std::abs(w[j] - r.w[j]));
    zeros_dense += w[j] == 0.0;
    zeros_lazy += r.w[j] == 0.0;
  }
  BOOST_TEST_MESSAGE(dml::ModelName(model.kind) << ": max |w| " << scale << ", max diff " << diff
                                                << ", zeros " << zeros_lazy);
  BOOST_TEST(scale > 0.0);
  BOOST_TEST(diff <= 1e-10 * scale);
  BOOST_TEST(zeros_dense == zeros_lazy);
}

BOOST_AUTO_TEST_CASE(lazy_sparse_updates_match_dense_steps) {
  const Dataset reg_data = MakeData(dml::Task::kRegression, 0.1, 15, 0.3);
  const Dataset cls_data = MakeData(dml::Task::kClassification, 0.3, 16);
  CheckLazyMatchesDense(reg_data, {ModelKind::kElasticNet, 2e-2, 0.5}, 0.5, 0.01, 7, 3);
  CheckLazyMatchesDense(reg_data, {ModelKind::kLasso, 5e-2, 1.0}, 0.5, 0.01, 13, 3);
  CheckLazyMatchesDense(cls_data, {ModelKind::kLogisticL1, 1e-2, 1.0}, 1.0, 0.01, 5, 2);
  CheckLazyMatchesDense(cls_data, {ModelKind::kSquaredHingeSvm, 1e-2, 0.5}, 0.2, 0.01, 9, 2);
  // Large lambda * step: the scale a falls below its floor many times, so the
  // periodic renormalisation runs; for hinge, 2500 steps each shrinking by
  // 1/1.5 would take a unrenormalised far below the smallest double.
  CheckLazyMatchesDense(reg_data, {ModelKind::kElasticNet, 0.5, 0.01}, 1.0, 0.0, 3, 2);
  CheckLazyMatchesDense(cls_data, {ModelKind::kHingeSvm, 0.5, 0.5}, 1.0, 0.0, 1, 5);
}

BOOST_AUTO_TEST_CASE(minibatch_gradient_matches_finite_differences) {
  const Dataset data = MakeData(dml::Task::kClassification, 0.3, 17);
  dml::Rng rng(3);
  std::vector<double> w(data.x.cols());
  for (double& wj : w) wj = (rng.Uniform() < 0.5 ? -1.0 : 1.0) * (0.2 + rng.Uniform());
  std::vector<int64_t> all(data.x.rows());
  std::iota(all.begin(), all.end(), int64_t{0});
  std::vector<int64_t> some = {4, 17, 17, 250, 499};  // a repeat counts twice
  const Dataset sub = [&] {
    Dataset s{data.x.GatherOuter(some), {}, data.task, {}};
    for (int64_t i : some) s.y.push_back(data.y[i]);
    return s;
  }();

  // Elastic net away from w_j = 0 and L2-logistic are smooth there.
  for (const ModelSpec& model : {ModelSpec{ModelKind::kLogisticL2, 0.1, 0.5},
                                 ModelSpec{ModelKind::kLogisticL1, 0.05, 1.0},
                                 ModelSpec{ModelKind::kSquaredHingeSvm, 0.05, 0.5}}) {
    for (const auto& [rows, ds] : {std::pair{&all, &data}, std::pair{&some, &sub}}) {
      auto g = dml::MinibatchGradient(data, model, *rows, w);
      BOOST_REQUIRE_MESSAGE(g.ok(), g.status().ToString());
      const double h = 1e-6;
      for (std::size_t j = 0; j < w.size(); ++j) {
        std::vector<double> plus = w, minus = w;
        plus[j] += h;
        minus[j] -= h;
        const double fd = (Primal(*ds, model, plus) - Primal(*ds, model, minus)) / (2 * h);
        BOOST_TEST((*g)[j] == fd, boost::test_tools::tolerance(1e-6));
      }
      // Without the regulariser: the difference is exactly lambda * R'(w).
      auto loss_only = dml::MinibatchGradient(data, model, *rows, w, false);
      BOOST_REQUIRE(loss_only.ok());
      const double eta = model.kind == ModelKind::kLogisticL1 ? 1.0 : 0.0;
      const dml::reg::ElasticNet r{model.lambda, eta};
      for (std::size_t j = 0; j < w.size(); ++j) {
        BOOST_TEST((*g)[j] - (*loss_only)[j] == r.Subgradient(w[j]),
                   boost::test_tools::tolerance(1e-12));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(sgd_step_and_gradient_errors) {
  const Dataset data = MakeData(dml::Task::kRegression, 0.1, 18);
  const ModelSpec ridge{ModelKind::kRidge, 1e-2, 0.5};
  std::vector<double> w(data.x.cols(), 0.0);
  CheckStatusError(dml::SgdStep(data, ridge, {0, 999}, 0.1, w), "row 999");
  CheckStatusError(dml::SgdStep(data, ridge, {-1}, 0.1, w), "row -1");
  CheckStatusError(dml::SgdStep(data, ridge, {}, 0.1, w), "empty minibatch");
  CheckStatusError(dml::SgdStep(data, ridge, {0}, 0.0, w), "step");
  CheckStatusError(dml::SgdStep(data, ridge, {0}, std::nan(""), w), "step");
  // Regression labels are not -1/+1.
  CheckStatusError(dml::SgdStep(data, {ModelKind::kLogisticL2, 1e-2, 0.5}, {0}, 0.1, w),
                   "labels in {-1,+1}");
  std::vector<double> short_w(5, 0.0);
  CheckError(dml::MinibatchGradient(data, ridge, {0}, short_w), "5 weights");
  CheckStatusError(dml::ProximalRegularizerStep({ModelKind::kRidge, -1.0, 0.5}, 0.1, w),
                   "lambda");
  // The prox alone: L1 soft-thresholds, L2 shrinks by 1/(1 + step lambda).
  std::vector<double> v = {0.5, -0.05, 2.0};
  BOOST_REQUIRE(dml::ProximalRegularizerStep({ModelKind::kLasso, 1.0, 1.0}, 0.1, v).ok());
  CheckClose(v, {0.4, 0.0, 1.9});
  v = {0.5, -0.05, 2.0};
  BOOST_REQUIRE(dml::ProximalRegularizerStep({ModelKind::kRidge, 1.0, 0.5}, 0.25, v).ok());
  CheckClose(v, {0.4, -0.04, 1.6});
}

BOOST_AUTO_TEST_CASE(sgd_stop_rules) {
  const Dataset data = MakeData(dml::Task::kClassification, 0.3, 19);
  const ModelSpec model{ModelKind::kLogisticL2, 1e-2, 0.5};
  const double p0 = Primal(data, model, std::vector<double>(data.x.cols(), 0.0));

  {  // Cancel set before the start: nothing runs.
    std::atomic<bool> cancel{true};
    dml::SolverOptions o = SgdOptions(50, 10, 1.0, 0.01);
    o.stop.cancel = &cancel;
    const dml::TrainResult r = TrainOk(data, model, o);
    BOOST_CHECK(r.reason == dml::StopReason::kCancelled);
    BOOST_TEST(r.epochs == 0);
    BOOST_TEST(r.history.empty());
    BOOST_TEST(r.primal == p0, boost::test_tools::tolerance(1e-14));
  }
  {  // Cancel from the epoch callback: stops before the next epoch.
    std::atomic<bool> cancel{false};
    dml::SolverOptions o = SgdOptions(50, 10, 1.0, 0.01);
    o.stop.cancel = &cancel;
    o.on_epoch = [&](const dml::Progress& rep) {
      if (rep.round == 3) cancel = true;
    };
    const dml::TrainResult r = TrainOk(data, model, o);
    BOOST_CHECK(r.reason == dml::StopReason::kCancelled);
    BOOST_TEST(r.epochs == 3);
  }
  {  // max_epochs, one report per epoch, each with the iterate's certificate.
    std::vector<int> seen;
    dml::SolverOptions o = SgdOptions(4, 10, 1.0, 0.01);
    o.on_epoch = [&](const dml::Progress& rep) { seen.push_back(rep.round); };
    o.stop.gap_rel = 0;
    const dml::TrainResult r = TrainOk(data, model, o);
    BOOST_CHECK(r.reason == dml::StopReason::kMaxEpochs);
    BOOST_TEST(r.epochs == 4);
    BOOST_TEST(seen == (std::vector<int>{1, 2, 3, 4}), boost::test_tools::per_element());
    BOOST_REQUIRE(r.history.size() == 4u);
    for (const dml::Progress& rep : r.history) {
      BOOST_TEST(std::isfinite(rep.gap));
      BOOST_TEST(rep.gap >= 0.0);
      BOOST_TEST(rep.gap == rep.primal - rep.dual);
      BOOST_TEST(rep.nnz_touched == data.x.nnz());
    }
    BOOST_TEST(r.history.back().primal == r.primal, boost::test_tools::tolerance(1e-14));
    BOOST_TEST(r.primal < p0);
  }
  {  // eval_every = 3 with 7 epochs: reports after 3, 6 and the last.
    dml::SolverOptions o = SgdOptions(7, 10, 1.0, 0.01);
    o.eval_every = 3;
    const dml::TrainResult r = TrainOk(data, model, o);
    BOOST_REQUIRE(r.history.size() == 3u);
    BOOST_TEST(r.history[0].round == 3);
    BOOST_TEST(r.history[1].round == 6);
    BOOST_TEST(r.history[2].round == 7);
    BOOST_TEST(r.epochs == 7);
  }
  {  // eval_every = 0 means every epoch for SGD.
    dml::SolverOptions o = SgdOptions(3, 10, 1.0, 0.01);
    o.eval_every = 0;
    BOOST_TEST(TrainOk(data, model, o).history.size() == 3u);
  }
  {  // target_primal: an easy target stops well before max_epochs.
    const dml::TrainResult full = TrainOk(data, model, SgdOptions(20, 10, 1.0, 0.01));
    dml::SolverOptions o = SgdOptions(20, 10, 1.0, 0.01);
    const double target = full.history[2].primal;  // reached after epoch 3
    o.stop.target_primal = target;
    const dml::TrainResult r = TrainOk(data, model, o);
    BOOST_CHECK(r.reason == dml::StopReason::kTargetReached);
    BOOST_TEST(r.epochs <= 3);
    BOOST_TEST(r.primal <= target);
  }
  {  // max_epochs = 0: the zero model.
    const dml::TrainResult r = TrainOk(data, model, SgdOptions(0, 10, 1.0, 0.01));
    BOOST_CHECK(r.reason == dml::StopReason::kMaxEpochs);
    BOOST_TEST(r.epochs == 0);
    BOOST_TEST(r.primal == p0, boost::test_tools::tolerance(1e-14));
  }
  {  // A spent time budget stops before the first epoch.
    dml::SolverOptions o = SgdOptions(50, 10, 1.0, 0.01);
    o.stop.max_seconds = 0.0;
    const dml::TrainResult r = TrainOk(data, model, o);
    BOOST_CHECK(r.reason == dml::StopReason::kTimeBudget);
    BOOST_TEST(r.epochs == 0);
  }
  {  // Same seed, same model; a different seed differs.
    const dml::TrainResult a = TrainOk(data, model, SgdOptions(2, 10, 1.0, 0.01));
    const dml::TrainResult b = TrainOk(data, model, SgdOptions(2, 10, 1.0, 0.01));
    dml::SolverOptions o = SgdOptions(2, 10, 1.0, 0.01);
    o.seed = 8;
    BOOST_TEST(a.w == b.w);
    BOOST_TEST(TrainOk(data, model, o).w != a.w);
  }
}

BOOST_AUTO_TEST_CASE(sgd_divergence_is_an_error) {
  const Dataset data = MakeData(dml::Task::kRegression, 0.1, 20);
  auto r = dml::Train(data, {ModelKind::kRidge, 1e-2, 0.5}, SgdOptions(5, 1, 1e6, 0.0));
  CheckError(r, "diverged");
}

}  // namespace

// FeatureStepFactors on columns whose mean squares are known: f_j = k /
// (q_j + lambda), q_j over the rows where j is nonzero, rounded to a power
// of two, k keeping sum f_j c_j = sum c_j (c_j over all rows), an empty
// column 1; and the column sums add over row partitions.
BOOST_AUTO_TEST_CASE(feature_step_factors_from_column_mean_squares) {
  // 40 rows; column 0 all 2 (q = c = 4), column 1 every 4th 1 (q = 1,
  // c = 0.25), column 2 empty, column 3 all 0.01 (q = c = 1e-4).
  std::vector<int64_t> off{0};
  std::vector<uint32_t> idx;
  std::vector<float> val;
  std::vector<float> y;
  for (int i = 0; i < 40; ++i) {
    y.push_back(i % 2 == 0 ? 1.0f : -1.0f);
    idx.push_back(0);
    val.push_back(2.0f);
    if (i % 4 == 0) {
      idx.push_back(1);
      val.push_back(1.0f);
    }
    idx.push_back(3);
    val.push_back(0.01f);
    off.push_back(static_cast<int64_t>(idx.size()));
  }
  auto x = CsrMatrix::FromArrays(40, 4, off, idx, val);
  BOOST_REQUIRE(x.ok());
  const Dataset data{std::move(*x), y, dml::Task::kClassification, {}};
  const std::vector<double> sums = dml::ColumnSquareSums(data);
  BOOST_REQUIRE(sums.size() == 8u);
  BOOST_TEST(sums[0] == 160.0);
  BOOST_TEST(sums[1] == 10.0);
  BOOST_TEST(sums[2] == 0.0);
  BOOST_TEST(std::abs(sums[3] - 4e-3) < 1e-9);
  BOOST_TEST(sums[4] == 40.0);  // nonzeros per column
  BOOST_TEST(sums[5] == 10.0);
  BOOST_TEST(sums[6] == 0.0);
  BOOST_TEST(sums[7] == 40.0);
  const ModelSpec model{ModelKind::kLogisticL2, 1e-2, 0.5};
  const auto f = dml::FeatureStepFactors(sums, 40, model);
  BOOST_REQUIRE(f.size() == 4u);
  const double c3 = double(0.01f) * double(0.01f);
  const double c[] = {4.0, 0.25, 0.0, c3};
  const double q[] = {4.0, 1.0, 0.0, c3};
  const double k = (c[0] + c[1] + c[3]) /
                   (c[0] / (q[0] + 1e-2) + c[1] / (q[1] + 1e-2) + c[3] / (q[3] + 1e-2));
  for (int j : {0, 1, 3}) {
    const double want = std::ldexp(1.0, static_cast<int>(std::lround(std::log2(k / (q[j] + 1e-2)))));
    BOOST_TEST(f[j] == want, "feature " << j);
  }
  BOOST_TEST(f[2] == 1.0);
  BOOST_TEST(f[0] < f[1]);  // column 1's values are smaller, not just rarer
  BOOST_TEST(f[1] < f[3]);
  // Shares over two row partitions add up to the whole.
  Dataset top{data.x.SliceOuter(0, 1), {1}, data.task, {}};
  Dataset rest{data.x.SliceOuter(1, 40), std::vector<float>(y.begin() + 1, y.end()), data.task, {}};
  const auto a = dml::ColumnSquareSums(top);
  const auto b = dml::ColumnSquareSums(rest);
  for (int j = 0; j < 8; ++j) BOOST_TEST(a[j] + b[j] == sums[j]);
  BOOST_TEST(dml::FeatureStepFactors(sums, 0, model).empty());
  BOOST_TEST(dml::FeatureStepFactors(std::vector<double>(8, 0.0), 4, model).empty());
  BOOST_TEST(dml::FeatureStepFactors(std::vector<double>(7, 1.0), 4, model).empty());
  // The 95th percentile of q within 100 times the 5th: one step (4 columns:
  // the 3rd smallest over the smallest); columns with fewer than 10
  // nonzeros do not count.
  BOOST_TEST(dml::FeatureStepFactors({10, 990, 500, 30, 10, 10, 10, 10}, 40, model).empty());
  BOOST_TEST(dml::FeatureStepFactors({10, 1500, 1010, 30, 10, 10, 10, 10}, 40, model).size() == 4u);
  BOOST_TEST(dml::FeatureStepFactors({10, 1500, 1010, 30, 10, 10, 9, 10}, 40, model).empty());
  // Lazy L2 keeps a scale per group of equal factors.
  const dml::FeatureStepGroups g = dml::GroupFeatureSteps({1.0, 4.0, 1.0, 0.5}, 4);
  BOOST_TEST(g.of == (std::vector<uint16_t>{0, 1, 0, 2}), boost::test_tools::per_element());
  BOOST_TEST(g.factor == (std::vector<double>{1.0, 4.0, 0.5}), boost::test_tools::per_element());
  const dml::FeatureStepGroups none = dml::GroupFeatureSteps({}, 3);
  BOOST_TEST(none.of == (std::vector<uint16_t>{0, 0, 0}), boost::test_tools::per_element());
  BOOST_TEST(none.factor == (std::vector<double>{1.0}), boost::test_tools::per_element());
  // Wrong lengths are refused by SgdStep.
  std::vector<double> w(4, 0.0);
  auto s = dml::SgdStep(data, model, {0, 1}, 0.1, w, std::vector<double>(3, 1.0));
  BOOST_TEST(std::string(s.message()) == "feature step factors: 3 for a model of 4");
  s = dml::SgdStep(data, model, {0, 1}, 0.1, w, {1.0, 1.0, -1.0, 1.0});
  BOOST_TEST(std::string(s.message()) == "feature step factor 2 is -1; must be positive");
}

// Features in units over 4 decades (SyntheticOptions::scale_decades),
// logistic, lambda 1e-3, default flags: with per-feature steps SGD stops on
// its certificate at relative gap 1e-3 within 100 epochs (lazy and
// momentum steppers), and its model is within 1e-3 of the optimum; with
// one step for all it is still far from it after the same epochs.
BOOST_AUTO_TEST_CASE(per_feature_steps_on_unscaled_features) {
  const Dataset data = dml::testing::UnscaledProblem();
  const ModelSpec model{ModelKind::kLogisticL2, 1e-3, 0.5};
  dml::SolverOptions scd;
  scd.stop.gap_rel = 1e-12;
  scd.stop.max_epochs = 100000;
  const double p_star = TrainOk(data, model, scd).primal;
  for (double momentum : {0.0, 0.5}) {
    dml::SolverOptions o;
    o.kind = dml::SolverKind::kSgd;
    o.stop.gap_rel = 1e-3;
    o.stop.max_epochs = 100;
    o.sgd.momentum = momentum;
    const dml::TrainResult r = TrainOk(data, model, o);
    BOOST_TEST_MESSAGE("momentum " << momentum << ": " << r.epochs << " epochs, subopt "
                                   << RelativeSuboptimality(r.primal, p_star) << " gap "
                                   << r.gap / r.primal);
    BOOST_TEST((r.reason == dml::StopReason::kConverged));
    BOOST_TEST(r.gap <= 1e-3 * r.primal);
    BOOST_TEST(RelativeSuboptimality(r.primal, p_star) <= 1e-3);
    BOOST_TEST(r.dual <= p_star * (1 + 1e-12));
    o.sgd.feature_steps = false;
    const dml::TrainResult one = TrainOk(data, model, o);
    BOOST_TEST_MESSAGE("one step: subopt " << RelativeSuboptimality(one.primal, p_star));
    BOOST_TEST((one.reason == dml::StopReason::kMaxEpochs));
    BOOST_TEST(RelativeSuboptimality(one.primal, p_star) > 3e-3);
  }
}

// The lazy model takes SgdStep's steps: after 300 steps of varying size
// (a reload from a moved w half-way, as a worker's exchange does) it holds
// the dense iterate to rounding, for an L2, an elastic-net and an L1 model,
// with and without per-feature steps.
BOOST_AUTO_TEST_CASE(lazy_sgd_model_takes_sgd_steps) {
  dml::SyntheticOptions o;
  o.rows = 400;
  o.cols = 300;
  o.nnz_per_row = 7;
  o.noise = 0.3;
  o.task = dml::Task::kClassification;
  o.threads = 1;
  auto g = dml::GenerateSynthetic(o);
  BOOST_REQUIRE(g.ok());
  const Dataset& data = g->data;
  for (ModelKind kind : {ModelKind::kLogisticL2, ModelKind::kElasticNet, ModelKind::kLogisticL1,
                         ModelKind::kHingeSvm}) {
    for (bool with_factors : {false, true}) {
      BOOST_TEST_CONTEXT(dml::ModelName(kind) << " factors " << with_factors) {
        ModelSpec m{kind, 2e-3, 0.5};
        std::vector<double> factors;
        if (with_factors) {
          for (int64_t j = 0; j < data.x.cols(); ++j) factors.push_back(j % 3 == 0 ? 0.5 : 2.0);
        }
        auto lazy = dml::MakeLazySgdModel(data, m, 16, factors);
        BOOST_REQUIRE(lazy.ok());
        std::vector<double> dense(static_cast<std::size_t>(data.x.cols()), 0.0);
        (*lazy)->Load(dense);
        dml::Rng rng(9);
        for (int t = 0; t < 300; ++t) {
          std::vector<int64_t> rows(static_cast<std::size_t>(1 + t % 16));
          for (int64_t& r : rows) r = static_cast<int64_t>(rng.Below(400));
          const double step = 0.5 / (1.0 + 0.01 * t);
          BOOST_REQUIRE(dml::SgdStep(data, m, rows, step, dense, factors).ok());
          BOOST_REQUIRE((*lazy)->Step(rows, step).ok());
          if (t == 150) {
            for (double& w : dense) w *= 0.75;  // an exchange moves the model
            (*lazy)->Load(dense);
          }
        }
        std::vector<double> held;
        (*lazy)->Store(held);
        BOOST_REQUIRE(held.size() == dense.size());
        double scale = 0.0;
        int zeros_dense = 0, zeros_lazy = 0;
        for (std::size_t j = 0; j < dense.size(); ++j) {
          scale = std::max(scale, std::abs(dense[j]));
          zeros_dense += dense[j] == 0.0;
          zeros_lazy += held[j] == 0.0;
        }
        BOOST_TEST(scale > 0.0);
        for (std::size_t j = 0; j < dense.size(); ++j) {
          BOOST_TEST(std::abs(held[j] - dense[j]) <= 1e-10 * scale);
        }
        if (kind == ModelKind::kLogisticL1) BOOST_TEST(zeros_lazy == zeros_dense);
      }
    }
  }
  ModelSpec m{ModelKind::kLogisticL2, 1e-3, 0.5};
  auto lazy = dml::MakeLazySgdModel(data, m, 4);
  BOOST_REQUIRE(lazy.ok());
  CheckStatusError((*lazy)->Step({1, 2, 3, 4, 5}, 0.1), "a batch of 5 rows; the lazy model takes at most 4");
  CheckStatusError((*lazy)->Step({1, 400}, 0.1), "400");
  CheckStatusError((*lazy)->Step({1}, -1.0), "step");
}
