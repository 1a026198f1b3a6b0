// Model files: LIBLINEAR's format (read as liblinear-train writes it, written
// so liblinear-predict reads it) and the labels line of our text format.
#define BOOST_TEST_MODULE model_files
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "dml/objective/liblinear_model.hpp"
#include "dml/objective/model_io.hpp"
#include "dml/util/memory.hpp"

namespace {

std::string TmpPath(const std::string& name) { return std::string(DML_TEST_TMP) + "/" + name; }

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = TmpPath(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// One example with `cols` columns and these entries.
dml::CsrMatrix Row(int64_t cols, std::vector<uint32_t> index, std::vector<float> value) {
  const int64_t nnz = static_cast<int64_t>(index.size());
  auto x = dml::CsrMatrix::FromArrays(1, cols, {0, nnz}, std::move(index), std::move(value));
  BOOST_REQUIRE(x.ok());
  return *std::move(x);
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The head of `liblinear-train -s 2 -B 1` on heart_scale (LIBLINEAR 2.3.0),
// shortened to three features: each weight line ends with a space.
const char kSvcWithBias[] =
    "solver_type L2R_L2LOSS_SVC\n"
    "nr_class 2\n"
    "label 1 -1\n"
    "nr_feature 3\n"
    "bias 1\n"
    "w\n"
    "-0.12145856289115725 \n"
    "0.22154467222667479 \n"
    "0.5 \n"
    "-0.25 \n";

}  // namespace

BOOST_AUTO_TEST_CASE(reads_a_liblinear_classifier_with_a_bias) {
  auto m = dml::ReadLiblinearModel(Write("svc.model", kSvcWithBias));
  BOOST_REQUIRE_MESSAGE(m.ok(), m.status().ToString());
  BOOST_TEST(m->solver_type == "L2R_L2LOSS_SVC");
  BOOST_TEST(m->labels == (std::vector<double>{1, -1}), boost::test_tools::per_element());
  BOOST_TEST(m->nr_feature == 3);
  BOOST_TEST(m->bias == 1.0);
  BOOST_TEST(m->w == (std::vector<double>{-0.12145856289115725, 0.22154467222667479, 0.5, -0.25}),
             boost::test_tools::per_element());
  BOOST_TEST(!m->regression());
  BOOST_TEST(!m->probabilistic());
  // dec = w1 x1 + w3 x3 + w_bias * bias; index 7 is past nr_feature: ignored.
  const double dec = m->Decisions(Row(8, {0, 2, 7}, {2.0f, -1.0f, 100.0f})).at(0);
  BOOST_TEST(dec == -0.12145856289115725 * 2.0 + 0.5 * -1.0 + -0.25 * 1.0);
  BOOST_TEST(m->Label(dec) == -1.0);
  BOOST_TEST(m->Label(1e-9) == 1.0);
}

BOOST_AUTO_TEST_CASE(reads_a_regression_model_without_labels) {
  auto m = dml::ReadLiblinearModel(Write("svr.model",
      "solver_type L2R_L2LOSS_SVR\nnr_class 2\nnr_feature 2\nbias -1\nw\n1.5 \n-2 \n"));
  BOOST_REQUIRE_MESSAGE(m.ok(), m.status().ToString());
  BOOST_TEST(m->regression());
  BOOST_TEST(m->labels.empty());
  BOOST_TEST(m->Label(m->Decisions(Row(2, {0, 1}, {2.0f, 0.5f})).at(0)) == 2.0);
}

BOOST_AUTO_TEST_CASE(bad_liblinear_files_name_line_and_field) {
  auto error = [](const std::string& name, const std::string& text) {
    return std::string(dml::ReadLiblinearModel(Write(name, text)).status().message());
  };
  const std::string p = TmpPath("bad.model");
  BOOST_TEST(error("bad.model", "solver_type L2R_LR\nnr_class 3\nlabel 1 2 3\n") ==
             p + ":2: nr_class 3: multi-class models are not supported (dml models are binary)");
  BOOST_TEST(error("bad.model", "solver_type L2R_LR\nnr_class 2\nlabel 1 -1\nnr_feature 3\nbias -1\nw\n1 \n2 \n") ==
             p + ":9: the file ends after 2 of 3 weights");
  BOOST_TEST(error("bad.model", "solver_type L2R_LR\nnr_class 2\nlabel 1 -1\nnr_feature 2\nbias -1\nw\n1 \nx \n") ==
             p + ":8: weight 2: expected one finite number, got \"x\"");
  BOOST_TEST(error("bad.model", "solver_type ONECLASS_SVM\nnr_class 2\nrho 0.5\n") ==
             p + ":1: solver_type \"ONECLASS_SVM\": not a binary or regression solver of LIBLINEAR "
                 "(multi-class MCSVM_CS and one-class models are not supported)");
  BOOST_TEST(error("bad.model", "solver_type L2R_LR\nnr_class 2\nrho 0.5\n") ==
             p + ":3: rho: one-class SVM models are not supported");
  BOOST_TEST(error("bad.model", "solver_type FOO\nnr_class 2\nlabel 1 -1\nnr_feature 1\nbias -1\nw\n1\n") ==
             p + ":1: solver_type \"FOO\": not a binary or regression solver of LIBLINEAR "
                 "(multi-class MCSVM_CS and one-class models are not supported)");
  BOOST_TEST(error("bad.model", "nr_class 2\nlabel 1 -1\nnr_feature 1\nbias -1\nw\n1\n") ==
             p + ":5: no solver_type line before \"w\"");
  BOOST_TEST(error("bad.model", "solver_type L2R_LR\nnr_class 2\nnr_feature 1\nbias -1\nw\n1\n") ==
             p + ":5: a classification model needs nr_class 2 and two labels, got nr_class 2 and 0 label(s)");
  BOOST_TEST(error("bad.model", "solver_type L2R_LR\nnr_class 2\nlabel 1 -1\nnr_feature 1\nbias -1\nw\n1\n2\n") ==
             p + ":8: text after the last weight");
  BOOST_TEST(dml::ReadLiblinearModel(TmpPath("absent.model")).status().code() ==
             absl::StatusCode::kNotFound);
}

// A header that promises more weights than the memory holds is refused
// before they are reserved (nr_feature 2^34 was std::bad_alloc: an abort),
// and one that promises more than the file holds reserves only what it holds.
BOOST_AUTO_TEST_CASE(huge_feature_counts_are_refused_not_allocated) {
  const dml::ScopedMemoryLimit limit(int64_t{1} << 30);  // 1 GiB
  const std::string p = TmpPath("huge.model");
  auto error = [&](const std::string& text) {
    return std::string(dml::ReadLiblinearModel(Write("huge.model", text)).status().message());
  };
  BOOST_TEST(error("solver_type L2R_LR\nnr_class 2\nlabel 1 -1\nnr_feature 17179869184\nbias -1\nw\n1\n") ==
             p + ":6: the model has 17179869184 weights: reading it needs about 128.0 GiB for its "
                 "vectors, more than the 1.0 GiB of memory here");
  // 2^26 weights (512 MiB) fit: the header passes, the missing lines fail.
  BOOST_TEST(error("solver_type L2R_LR\nnr_class 2\nlabel 1 -1\nnr_feature 67108864\nbias -1\nw\n1\n") ==
             p + ":8: the file ends after 1 of 67108864 weights");
  const std::string text = TmpPath("huge.txt");
  {
    std::ofstream f(text);
    f << "dml-model 1\nmodel svm\nlambda 0.1\nl1_ratio 0.5\nfeatures 4294967296\nweights 1\n1 0.5\n";
  }
  BOOST_TEST(std::string(dml::ReadModelText(text).status().message()) ==
             text + ":5: the model has 4294967296 weights: reading it needs about 32.0 GiB for its "
                    "vectors, more than the 1.0 GiB of memory here");
}

BOOST_AUTO_TEST_CASE(written_liblinear_models_read_back_bit_for_bit) {
  const std::vector<double> w = {0.1, -1.0 / 3.0, 0.0, 6.02214076e23, -4.9e-324};
  const dml::ModelSpec logistic{dml::ModelKind::kLogisticL2, 0.01};
  const dml::LiblinearModel m = dml::ToLiblinear(logistic, w, 0.0, 1.0);
  BOOST_TEST(m.solver_type == "L2R_LR");
  BOOST_TEST(m.labels == (std::vector<double>{1, 0}), boost::test_tools::per_element());
  const std::string path = TmpPath("written.model");
  BOOST_REQUIRE(dml::WriteLiblinearModel(m, path).ok());
  const std::string head =
      "solver_type L2R_LR\nnr_class 2\nlabel 1 0\nnr_feature 5\nbias -1\nw\n0.10000000000000001 \n";
  BOOST_TEST(Slurp(path).substr(0, head.size()) == head);
  auto back = dml::ReadLiblinearModel(path);
  BOOST_REQUIRE_MESSAGE(back.ok(), back.status().ToString());
  BOOST_TEST(back->w == w, boost::test_tools::per_element());
  BOOST_TEST(back->probabilistic());
  BOOST_TEST(dml::ToLiblinear({dml::ModelKind::kHingeSvm, 1}, w).solver_type == "L2R_L1LOSS_SVC_DUAL");
  BOOST_TEST(dml::ToLiblinear({dml::ModelKind::kSquaredHingeSvm, 1}, w).solver_type ==
             "L2R_L2LOSS_SVC_DUAL");
  BOOST_TEST(dml::ToLiblinear({dml::ModelKind::kLogisticL1, 1}, w).solver_type == "L1R_LR");
  const dml::LiblinearModel ridge = dml::ToLiblinear({dml::ModelKind::kRidge, 1}, w);
  BOOST_TEST(ridge.regression());
  BOOST_REQUIRE(dml::WriteLiblinearModel(ridge, path).ok());
  BOOST_TEST(Slurp(path).find("label") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(our_text_models_keep_the_label_values) {
  const std::string path = TmpPath("labels.dml");
  dml::LinearModel m{{dml::ModelKind::kHingeSvm, 0.5}, {0.0, 2.5}, {3.0, 7.0}};
  BOOST_REQUIRE(dml::WriteModelText(m, path).ok());
  BOOST_TEST(Slurp(path) ==
             "dml-model 1\nmodel svm\nlambda 0.5\nl1_ratio 0.5\nlabels 3 7\nfeatures 2\nweights 1\n2 2.5\n");
  auto back = dml::ReadModelText(path);
  BOOST_REQUIRE_MESSAGE(back.ok(), back.status().ToString());
  BOOST_TEST(back->classes == (std::vector<double>{3, 7}), boost::test_tools::per_element());
  Write("labels.dml", "dml-model 1\nmodel svm\nlambda 0.5\nl1_ratio 0.5\nlabels 7 3\nfeatures 2\nweights 0\n");
  BOOST_TEST(std::string(dml::ReadModelText(path).status().message()) ==
             path + ":5: labels: expected two increasing numbers, got \"labels 7 3\"");
}

// --binarize's threshold travels with the model (dml-predict reads a test
// file with it); without labels, and finite.
BOOST_AUTO_TEST_CASE(our_text_models_keep_the_binarize_threshold) {
  const std::string path = TmpPath("binarize.dml");
  dml::LinearModel m{{dml::ModelKind::kLogisticL2, 0.5}, {0.0, 2.5}, {}};
  m.binarize = 10.5;
  BOOST_REQUIRE(dml::WriteModelText(m, path).ok());
  BOOST_TEST(Slurp(path) == "dml-model 1\nmodel logistic\nlambda 0.5\nl1_ratio 0.5\nbinarize 10.5\n"
                            "features 2\nweights 1\n2 2.5\n");
  auto back = dml::ReadModelText(path);
  BOOST_REQUIRE_MESSAGE(back.ok(), back.status().ToString());
  BOOST_TEST(back->binarize == 10.5);
  m.binarize = std::numeric_limits<double>::quiet_NaN();
  BOOST_REQUIRE(dml::WriteModelText(m, path).ok());
  BOOST_TEST(Slurp(path).find("binarize") == std::string::npos);
  BOOST_TEST(std::isnan(dml::ReadModelText(path)->binarize));
  Write("binarize.dml", "dml-model 1\nmodel logistic\nlambda 0.5\nl1_ratio 0.5\nbinarize inf\n"
                        "features 2\nweights 0\n");
  BOOST_TEST(std::string(dml::ReadModelText(path).status().message()) ==
             path + ":5: binarize: expected a finite number, got \"binarize inf\"");
  Write("binarize.dml", "dml-model 1\nmodel logistic\nlambda 0.5\nl1_ratio 0.5\nlabels 1 2\n"
                        "binarize 1.5\nfeatures 2\nweights 0\n");
  BOOST_TEST(std::string(dml::ReadModelText(path).status().message()) ==
             path + ":6: binarize: a model trained with a threshold has no labels line");
}

// A model the reader would refuse is not written: no file at all.
BOOST_AUTO_TEST_CASE(models_the_reader_would_refuse_are_not_written) {
  const std::string path = TmpPath("refused.model");
  std::remove(path.c_str());
  dml::LinearModel nan_weight{{dml::ModelKind::kLogisticL2, 1e-3}, {1, NAN, 3}, {}, -1};
  BOOST_TEST(dml::WriteModelText(nan_weight, path).message() ==
             path + ": not written: weight 2 is not finite");
  dml::LinearModel nan_lambda{{dml::ModelKind::kLogisticL2, NAN}, {1, 2}, {}, -1};
  BOOST_TEST(dml::WriteModelText(nan_lambda, path).message() ==
             path + ": not written: lambda must be positive and finite, got nan");
  std::FILE* f = std::fopen(path.c_str(), "r");
  BOOST_TEST(f == nullptr);
  if (f != nullptr) std::fclose(f);
}

BOOST_AUTO_TEST_CASE(liblinear_solver_numbers_and_bias) {
  BOOST_TEST((*dml::ModelOfLiblinearSolver(0) == dml::ModelKind::kLogisticL2));
  BOOST_TEST((*dml::ModelOfLiblinearSolver(7) == dml::ModelKind::kLogisticL2));
  BOOST_TEST((*dml::ModelOfLiblinearSolver(1) == dml::ModelKind::kSquaredHingeSvm));
  BOOST_TEST((*dml::ModelOfLiblinearSolver(2) == dml::ModelKind::kSquaredHingeSvm));
  BOOST_TEST((*dml::ModelOfLiblinearSolver(3) == dml::ModelKind::kHingeSvm));
  BOOST_TEST((*dml::ModelOfLiblinearSolver(6) == dml::ModelKind::kLogisticL1));
  BOOST_TEST(std::string(dml::ModelOfLiblinearSolver(4).status().message()) ==
             "-s 4 (MCSVM_CS, multi-class Crammer-Singer) is not available: dml models are binary");
  BOOST_TEST(std::string(dml::ModelOfLiblinearSolver(12).status().message()) ==
             "-s 12 (epsilon-insensitive support vector regression) is not available; use --model ridge");
  BOOST_TEST(std::string(dml::ModelOfLiblinearSolver(9).status().message()) ==
             "-s 9: not a LIBLINEAR solver number (0-7, 11-13, 21)");
  // With a bias the last weight is the bias feature's.
  const dml::LiblinearModel m = dml::ToLiblinear({dml::ModelKind::kLogisticL2, 1}, {1, 2, 3}, -1, 1, 0.5);
  BOOST_TEST(m.nr_feature == 2);
  BOOST_TEST(m.Decisions(Row(2, {1}, {4.0f})).at(0) == 2.0 * 4.0 + 3.0 * 0.5);
  // Our text format keeps the bias too.
  const std::string path = TmpPath("bias.dml");
  BOOST_REQUIRE(dml::WriteModelText({{dml::ModelKind::kLogisticL2, 1}, {1, 2, 3}, {}, 0.5}, path).ok());
  auto back = dml::ReadModelText(path);
  BOOST_REQUIRE_MESSAGE(back.ok(), back.status().ToString());
  BOOST_TEST(back->bias == 0.5);
  BOOST_TEST(Slurp(path).find("\nbias 0.5\nfeatures 3\n") != std::string::npos);
}
