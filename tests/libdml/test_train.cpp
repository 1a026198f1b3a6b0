#define BOOST_TEST_MODULE train
#include <boost/test/unit_test.hpp>

#include <cmath>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "dml/data/synthetic.hpp"
#include "dml/objective/evaluate.hpp"
#include "dml/objective/model.hpp"
#include "dml/objective/model_io.hpp"
#include "dml/solver/solver.hpp"

namespace {

std::string TmpPath(const std::string& name) { return std::string(DML_TEST_TMP) + "/" + name; }

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

dml::Dataset Small(dml::Task task) {
  dml::SyntheticOptions o;
  o.rows = 200;
  o.cols = 20;
  o.nnz_per_row = 5;
  o.task = task;
  o.noise = 0.1;
  auto s = dml::GenerateSynthetic(o);
  BOOST_REQUIRE(s.ok());
  return std::move(s->data);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(names)

BOOST_AUTO_TEST_CASE(model_and_solver_names_round_trip) {
  for (auto k : {dml::ModelKind::kRidge, dml::ModelKind::kLasso, dml::ModelKind::kElasticNet,
                 dml::ModelKind::kLogisticL2, dml::ModelKind::kLogisticL1,
                 dml::ModelKind::kHingeSvm, dml::ModelKind::kSquaredHingeSvm}) {
    auto parsed = dml::ParseModelKind(dml::ModelName(k));
    BOOST_REQUIRE(parsed.ok());
    BOOST_TEST((*parsed == k));
  }
  BOOST_TEST(dml::ParseModelKind("svr").status().message() ==
             "unknown model \"svr\"; expected one of ridge, lasso, elastic-net, logistic, "
             "logistic-l1, svm, svm-squared");
  for (auto k : {dml::SolverKind::kScd, dml::SolverKind::kAsyncScd, dml::SolverKind::kSgd,
                 dml::SolverKind::kNewton, dml::SolverKind::kAuto, dml::SolverKind::kTpaScd}) {
    auto parsed = dml::ParseSolverKind(dml::SolverName(k));
    BOOST_REQUIRE(parsed.ok());
    BOOST_TEST((*parsed == k));
  }
  BOOST_TEST(dml::ParseSolverKind("lbfgs").status().message() ==
             "unknown solver \"lbfgs\"; expected one of scd, async-scd, sgd, newton, auto, tpa-scd, duhl");
  BOOST_TEST((dml::FormulationOf(dml::ModelKind::kLasso) == dml::Formulation::kPrimal));
  BOOST_TEST((dml::FormulationOf(dml::ModelKind::kHingeSvm) == dml::Formulation::kDual));
  BOOST_TEST(dml::LambdaFromC(2.0, 100) == 0.005);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(train_validation)

BOOST_AUTO_TEST_CASE(rejects_bad_model_options_and_labels) {
  const dml::Dataset cls = Small(dml::Task::kClassification);
  const dml::Dataset reg = Small(dml::Task::kRegression);
  dml::SolverOptions opt;
  dml::ModelSpec spec;

  spec.lambda = -1;
  BOOST_TEST(dml::Train(cls, spec, opt).status().message() ==
             "lambda must be positive and finite, got -1");
  spec.lambda = 1e-320;
  BOOST_TEST(dml::Train(cls, spec, opt).status().message() ==
             "lambda 9.99989e-321 is below the smallest normal double (2.22507e-308): the "
             "weights' scale 1/lambda overflows");
  spec.lambda = 1e-3;
  spec.kind = dml::ModelKind::kElasticNet;
  spec.l1_ratio = 1.5;
  BOOST_TEST(dml::Train(reg, spec, opt).status().message() == "l1_ratio must be in (0, 1], got 1.5");

  spec = dml::ModelSpec{};
  opt.threads = 0;
  BOOST_TEST(dml::Train(cls, spec, opt).status().message() == "threads must be >= 1, got 0");
  opt = dml::SolverOptions{};
  opt.kind = dml::SolverKind::kSgd;
  opt.sgd.batch_size = -1;
  BOOST_TEST(dml::Train(cls, spec, opt).status().message() ==
             "sgd batch_size must be >= 0 (0: auto), got -1");

  // Regression labels are not {-1,+1}: a classification model says which example.
  opt = dml::SolverOptions{};
  auto st = dml::Train(reg, spec, opt).status();
  BOOST_TEST(st.code() == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(std::string(st.message()).find("model logistic needs labels in {-1,+1}; example 0") == 0);

  dml::Dataset broken = cls;
  broken.y.pop_back();
  BOOST_TEST(dml::Train(broken, spec, opt).status().message() == "data has 200 rows but 199 labels");

  // An out-of-range kind, and NaN stop rules, are refused (they trained).
  dml::ModelSpec odd;
  odd.kind = static_cast<dml::ModelKind>(42);
  BOOST_TEST(dml::Train(cls, odd, opt).status().message() == "model kind 42 is not a ModelKind");
  dml::SolverOptions nan_budget;
  nan_budget.stop.max_seconds = NAN;
  BOOST_TEST(dml::Train(cls, spec, nan_budget).status().message() ==
             "max_seconds and target_primal must be numbers (infinity: no time budget), not NaN");
  // A lambda so small that the certificate leaves double's range is an
  // error, not "converged" on an infinite primal (dual CD for logistic).
  {
    dml::ModelSpec tiny;
    tiny.kind = dml::ModelKind::kLogisticL2;
    tiny.lambda = 1e-300;
    dml::SolverOptions scd;
    scd.kind = dml::SolverKind::kScd;
    auto r = dml::Train(cls, tiny, scd);
    BOOST_TEST((r.status().code() == absl::StatusCode::kFailedPrecondition), r.status().ToString());
    BOOST_TEST(std::string(r.status().message()).find("training ended with a certificate that is not finite") == 0u,
               r.status().message());
  }
}

BOOST_AUTO_TEST_CASE(every_model_and_solver_trains_through_the_factory) {
  // The factory must reach a real solver for every (model, solver) pair and
  // the result must carry an exact certificate consistent with Evaluate.
  for (auto k : {dml::ModelKind::kRidge, dml::ModelKind::kLasso, dml::ModelKind::kElasticNet,
                 dml::ModelKind::kLogisticL2, dml::ModelKind::kLogisticL1,
                 dml::ModelKind::kHingeSvm, dml::ModelKind::kSquaredHingeSvm}) {
    const dml::Dataset& d = dml::TaskOf(k) == dml::Task::kClassification
                                ? Small(dml::Task::kClassification)
                                : Small(dml::Task::kRegression);
    dml::ModelSpec spec{k, 1e-2, 0.5};
    for (auto s : {dml::SolverKind::kScd, dml::SolverKind::kAsyncScd}) {
      dml::SolverOptions opt;
      opt.kind = s;
      opt.threads = 2;
      opt.stop.gap_rel = 1e-8;
      auto r = dml::Train(d, spec, opt);
      BOOST_REQUIRE_MESSAGE(r.ok(), dml::ModelName(k) << "/" << dml::SolverName(s) << ": "
                                                      << r.status().message());
      BOOST_TEST((r->reason == dml::StopReason::kConverged));
      // One result type: the library fills the fields a job fills too.
      BOOST_TEST((r->model.kind == k && r->model.lambda == spec.lambda));
      BOOST_TEST(r->rounds == static_cast<int>(r->epochs));
      BOOST_TEST(r->epochs >= 1.0);
      BOOST_TEST(r->history.back().round == r->rounds);
      auto cert = dml::Evaluate(d, spec, r->w, r->alpha);
      BOOST_REQUIRE(cert.ok());
      BOOST_TEST(cert->gap >= 0.0);
      BOOST_TEST(cert->gap <= 1e-8 * std::abs(cert->primal) + 1e-12);
      BOOST_TEST(r->primal == cert->primal, boost::test_tools::tolerance(1e-9));
      auto p = dml::PrimalValue(d, spec, r->w);
      BOOST_REQUIRE(p.ok());
      BOOST_TEST(*p == cert->primal, boost::test_tools::tolerance(1e-9));
    }
  }
}

// Two examples, one of them with feature `index` (1-based): a model of
// `index` weights over 2 nonzeros, as one stray index in a file makes.
dml::Dataset StrayIndex(int64_t index) {
  dml::Dataset d;
  d.x = dml::CsrMatrix::FromArraysUnchecked(2, index, {0, 1, 2},
                                            {0u, static_cast<uint32_t>(index - 1)}, {1.0f, 1.0f});
  d.y = {1.0f, -1.0f};
  d.task = dml::Task::kClassification;
  return d;
}

BOOST_AUTO_TEST_CASE(a_model_over_the_memory_is_refused_before_any_vector) {
  const dml::ScopedMemoryLimit limit(int64_t{1} << 30);  // 1 GiB
  dml::ModelSpec spec{dml::ModelKind::kLogisticL2, 1e-2, 0.0};
  dml::SolverOptions opt;
  // 2^27 weights: three vectors (what any solver holds) are 3 GiB.
  auto r = dml::Train(StrayIndex(int64_t{1} << 27), spec, opt);
  BOOST_TEST((r.status().code() == absl::StatusCode::kResourceExhausted));
  BOOST_TEST(r.status().message() ==
             "the model has 134217728 weights (the data's largest feature index + 1): training "
             "needs about 3.0 GiB for its vectors, more than the 1.0 GiB of memory here; renumber "
             "the features (or hash them into fewer), or drop the examples with stray indices");
  // 2^24 weights, 2 of them used: Newton's ten vectors would be 1.25 GiB,
  // but it trains on the used columns (DropUnusedColumns) and the rest of w
  // is 0.
  opt.kind = dml::SolverKind::kNewton;
  opt.stop.gap_rel = 1e-6;
  auto stray = dml::Train(StrayIndex(int64_t{1} << 24), spec, opt);
  BOOST_REQUIRE_MESSAGE(stray.ok(), stray.status().message());
  BOOST_TEST(stray->w.size() == std::size_t{1} << 24);
  BOOST_TEST(stray->note.find("16777214 of the 16777216 features occur in no example") !=
                 std::string::npos,
             stray->note);
  // 2^25 used features (one row holds them all): 256 MiB a vector. Newton's
  // ten are 2.5 GiB: refused, naming the solver, while dual SCD's two train.
  const int64_t d = int64_t{1} << 25;
  std::vector<uint32_t> idx(static_cast<std::size_t>(d) + 1);
  for (int64_t j = 0; j < d; ++j) idx[static_cast<std::size_t>(j) + 1] = static_cast<uint32_t>(j);
  dml::Dataset wide;
  wide.x = dml::CsrMatrix::FromArraysUnchecked(2, d, {0, 1, d + 1}, std::move(idx),
                                               std::vector<float>(static_cast<std::size_t>(d) + 1,
                                                                  1.0f));
  wide.y = {-1.0f, 1.0f};
  wide.task = dml::Task::kClassification;
  const dml::ScopedMemoryLimit two_gib(int64_t{2} << 30);
  auto over = dml::Train(wide, spec, opt);
  BOOST_TEST((over.status().code() == absl::StatusCode::kResourceExhausted));
  BOOST_TEST(over.status().message().find("solver newton needs about 2.5 GiB for its vectors, "
                                          "more than the 2.0 GiB") != std::string::npos,
             over.status().message());
  spec.kind = dml::ModelKind::kHingeSvm;
  opt.kind = dml::SolverKind::kScd;
  auto dual = dml::Train(wide, spec, opt);
  BOOST_REQUIRE_MESSAGE(dual.ok(), dual.status().message());
  BOOST_TEST((dual->reason == dml::StopReason::kConverged));
}

// Features no example uses are left out of training and come back as 0:
// the data with its 20 columns spread over 100k indices trains to the very
// same bits as the compact data, for every model; a few unused columns are
// kept (no note).
BOOST_AUTO_TEST_CASE(unused_features_are_dropped_and_come_back_as_zero) {
  for (auto k : {dml::ModelKind::kRidge, dml::ModelKind::kLasso, dml::ModelKind::kElasticNet,
                 dml::ModelKind::kLogisticL2, dml::ModelKind::kLogisticL1,
                 dml::ModelKind::kHingeSvm, dml::ModelKind::kSquaredHingeSvm}) {
    const dml::Dataset d = Small(dml::TaskOf(k));
    for (int64_t stride : {5000, 2}) {
      dml::Dataset spread = d;
      std::vector<uint32_t> idx = d.x.indices();
      for (uint32_t& j : idx) j = static_cast<uint32_t>(j * stride);
      spread.x = dml::CsrMatrix::FromArraysUnchecked(d.x.rows(), d.x.cols() * stride,
                                                     d.x.offsets(), idx, d.x.values());
      const dml::ModelSpec spec{k, 1e-2, 0.5};
      dml::SolverOptions opt;
      opt.kind = dml::SolverKind::kAuto;
      opt.stop.gap_rel = 1e-8;
      auto a = dml::Train(d, spec, opt);
      auto b = dml::Train(spread, spec, opt);
      BOOST_REQUIRE(a.ok());
      BOOST_REQUIRE_MESSAGE(b.ok(), b.status().message());
      BOOST_TEST(b->w.size() == static_cast<std::size_t>(spread.x.cols()));
      const bool dropped = b->note.find("features occur in no example") != std::string::npos;
      BOOST_TEST(dropped == (stride == 5000), dml::ModelName(k) << ": " << b->note);
      // The result's primal is that of the wide w on the wide data.
      auto p = dml::PrimalValue(spread, spec, b->w);
      BOOST_REQUIRE_MESSAGE(p.ok(), dml::ModelName(k) << ": " << p.status().message());
      BOOST_TEST(*p == b->primal, boost::test_tools::tolerance(1e-12));
      BOOST_TEST(b->gap <= 1e-8 * std::abs(b->primal) + 1e-12);
      BOOST_TEST((b->reason == dml::StopReason::kConverged));
      if (stride != 5000) continue;
      // The compact data is the same matrix: the same run, bit for bit.
      BOOST_TEST(b->primal == a->primal);
      BOOST_TEST(b->dual == a->dual);
      for (std::size_t j = 0; j < b->w.size(); ++j) {
        const double want = j % 5000 == 0 ? a->w[j / 5000] : 0.0;
        if (b->w[j] != want) BOOST_FAIL(dml::ModelName(k) << ": w[" << j << "] " << b->w[j]);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(the_memory_limit_defaults_to_the_machine) {
  {
    const dml::ScopedMemoryLimit limit(12345);
    BOOST_TEST(dml::MemoryLimit() == 12345);
  }
  const int64_t machine = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  BOOST_TEST(dml::MemoryLimit() > 0);
  BOOST_TEST(dml::MemoryLimit() <= machine);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(model_file)

BOOST_AUTO_TEST_CASE(round_trip_is_exact) {
  dml::LinearModel m;
  m.spec = {dml::ModelKind::kElasticNet, 3.0e-5, 0.25};
  m.w = {0.0, 1.0 / 3.0, 0.0, -2.5e-17, 12345.678901234567, 0.0};
  const std::string path = TmpPath("model_rt.txt");
  BOOST_REQUIRE(dml::WriteModelText(m, path).ok());
  auto back = dml::ReadModelText(path);
  BOOST_REQUIRE(back.ok());
  BOOST_TEST((back->spec.kind == m.spec.kind));
  BOOST_TEST(back->spec.lambda == m.spec.lambda);
  BOOST_TEST(back->spec.l1_ratio == m.spec.l1_ratio);
  BOOST_TEST(back->w == m.w, boost::test_tools::per_element());
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BOOST_TEST(text ==
             "dml-model 1\nmodel elastic-net\nlambda 3e-05\nl1_ratio 0.25\nfeatures 6\nweights 3\n"
             "2 0.3333333333333333\n4 -2.5e-17\n5 12345.678901234567\n");
}

BOOST_AUTO_TEST_CASE(malformed_files_name_line_and_field) {
  const std::string path = TmpPath("model_bad.txt");
  const std::string head = "dml-model 1\nmodel svm\nlambda 0.1\nl1_ratio 0.5\nfeatures 3\n";
  struct Case {
    std::string text;
    std::string message;
  } cases[] = {
      {"dml-model 2\n", ":1: unsupported format version 2"},
      {"dml-model 1\nmodel svr\n", ":2: unknown model \"svr\"; expected one of ridge, lasso, "
                                   "elastic-net, logistic, logistic-l1, svm, svm-squared"},
      {"dml-model 1\nmodel svm\nlambda x\n", ":3: lambda: expected a finite number"},
      {"dml-model 1\nmodel svm\nlambda 0\nl1_ratio 0.5\nfeatures 0\nweights 0\n",
       ":3: lambda must be positive and finite, got 0"},
      {head + "weights 1\n4 1.0\n", ":7: weight index must be in [1, 3], got \"4\""},
      {head + "weights 2\n2 1.0\n2 1.0\n", ":8: weight indices must increase"},
      {head + "weights 2\n1 1.0\n", ":8: declared 2 weights, found 1"},
      {head + "weights 1\n1 nan\n", ":7: weight value: expected a finite number"},
      {head, ":6: unexpected end of file: missing \"weights\""},
      {"# comment\nmodel svm\n", ":2: expected \"dml-model\", got \"model\""},
  };
  for (const Case& c : cases) {
    WriteFile(path, c.text);
    auto r = dml::ReadModelText(path);
    BOOST_TEST(r.status().message() == path + c.message);
  }
  BOOST_TEST(dml::ReadModelText(TmpPath("missing-model.txt")).status().code() ==
             absl::StatusCode::kNotFound);
}

BOOST_AUTO_TEST_SUITE_END()
