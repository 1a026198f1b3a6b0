#include "dml/objective/liblinear_model.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "dml/objective/internal/model_text.hpp"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "dml/metrics/metrics.hpp"
#include "dml/util/memory.hpp"

namespace dml {
namespace {

using internal::ParseDouble;
using internal::ParseInt;

// Reads the header and weight lines; `Fail` carries the path:line prefix.
class Reader {
 public:
  Reader(std::string path, std::string text) : path_(std::move(path)), text_(std::move(text)) {
    lines_ = absl::StrSplit(text_, '\n');
  }

  absl::StatusOr<LiblinearModel> Read() {
    LiblinearModel m;
    int64_t nr_class = -1;
    bool have_bias = false;
    for (;;) {
      absl::string_view line;
      if (!Next(line)) return Fail("missing the \"w\" line that starts the weights");
      std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (f.empty()) return Fail("empty line in the header");
      const absl::string_view key = f[0];
      if (key == "w" && f.size() == 1) break;
      if (key == "solver_type" && f.size() == 2) {
        // LIBLINEAR's binary and regression solvers (linear.cpp's
        // solver_type_table); MCSVM_CS is multi-class, ONECLASS_SVM has rho.
        static constexpr absl::string_view kKnown[] = {
            "L2R_LR",       "L2R_L2LOSS_SVC_DUAL", "L2R_L2LOSS_SVC", "L2R_L1LOSS_SVC_DUAL",
            "L1R_L2LOSS_SVC", "L1R_LR",            "L2R_LR_DUAL",    "L2R_L2LOSS_SVR",
            "L2R_L2LOSS_SVR_DUAL", "L2R_L1LOSS_SVR_DUAL"};
        if (std::find(std::begin(kKnown), std::end(kKnown), f[1]) == std::end(kKnown)) {
          return Fail(absl::StrCat("solver_type \"", f[1], "\": not a binary or regression solver "
                                   "of LIBLINEAR (multi-class MCSVM_CS and one-class models are "
                                   "not supported)"));
        }
        m.solver_type = std::string(f[1]);
      } else if (key == "nr_class" && f.size() == 2) {
        if (!ParseInt(f[1], nr_class) || nr_class < 1) return Fail("nr_class: expected a count");
        if (nr_class > 2) {
          return Fail(absl::StrCat("nr_class ", nr_class,
                                   ": multi-class models are not supported (dml models are binary)"));
        }
      } else if (key == "label") {
        for (std::size_t i = 1; i < f.size(); ++i) {
          double l = 0;
          if (!ParseDouble(f[i], l)) return Fail(absl::StrCat("label: \"", f[i], "\" is not a number"));
          m.labels.push_back(l);
        }
      } else if (key == "nr_feature" && f.size() == 2) {
        if (!ParseInt(f[1], m.nr_feature) || m.nr_feature < 0 || m.nr_feature > (int64_t{1} << 34)) {
          return Fail("nr_feature: expected a feature count");
        }
      } else if (key == "bias" && f.size() == 2) {
        if (!ParseDouble(f[1], m.bias)) return Fail("bias: expected a number");
        have_bias = true;
      } else if (key == "rho") {
        return Fail("rho: one-class SVM models are not supported");
      } else {
        return Fail(absl::StrCat("unexpected header line \"", line, "\""));
      }
    }
    if (m.solver_type.empty()) return Fail("no solver_type line before \"w\"");
    if (nr_class < 0 || !have_bias) return Fail("nr_class and bias must come before \"w\"");
    if (!m.regression() && (nr_class != 2 || m.labels.size() != 2)) {
      return Fail(absl::StrCat("a classification model needs nr_class 2 and two labels, got nr_class ",
                               nr_class, " and ", m.labels.size(), " label(s)"));
    }
    if (m.regression()) m.labels.clear();
    const int64_t rows = m.nr_feature + (m.bias >= 0 ? 1 : 0);
    if (auto st = CheckModelMemory(rows, 1, 0, "reading it", VectorOrigin::kModelFile); !st.ok()) {
      return Fail(std::string(st.message()));
    }
    // One weight a line: a header that promises more than the file holds
    // reserves no more than it holds.
    m.w.reserve(std::min(static_cast<std::size_t>(rows), lines_.size() - at_));
    for (int64_t i = 0; i < rows; ++i) {
      absl::string_view line;
      if (!Next(line)) {
        return Fail(absl::StrCat("the file ends after ", i, " of ", rows, " weights"));
      }
      std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      double v = 0;
      if (f.size() != 1 || !ParseDouble(f[0], v)) {
        return Fail(absl::StrCat("weight ", i + 1, ": expected one finite number, got \"", line, "\""));
      }
      m.w.push_back(v);
    }
    absl::string_view rest;
    while (Next(rest)) {
      if (!absl::StripAsciiWhitespace(rest).empty()) return Fail("text after the last weight");
    }
    return m;
  }

 private:
  bool Next(absl::string_view& line) {
    if (at_ >= lines_.size()) return false;
    line = absl::StripTrailingAsciiWhitespace(lines_[at_++]);
    // A file ends with '\n': the split's last, empty piece is no line.
    return !(at_ == lines_.size() && line.empty());
  }
  absl::Status Fail(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(path_, ":", at_, ": ", what));
  }

  std::string path_;
  std::string text_;
  std::vector<absl::string_view> lines_;
  std::size_t at_ = 0;
};

}  // namespace

bool LiblinearModel::regression() const {
  return solver_type == "L2R_L2LOSS_SVR" || solver_type == "L2R_L2LOSS_SVR_DUAL" ||
         solver_type == "L2R_L1LOSS_SVR_DUAL";
}

bool LiblinearModel::probabilistic() const {
  return solver_type == "L2R_LR" || solver_type == "L1R_LR" || solver_type == "L2R_LR_DUAL";
}

std::vector<double> LiblinearModel::Decisions(const CsrMatrix& x) const {
  // The bias weight is not a feature's: Predict sees the first nr_feature.
  const auto features = w.begin() + nr_feature;
  std::vector<double> dec = Predict(x, std::vector<double>(w.begin(), features));
  if (bias >= 0) {
    for (double& d : dec) d += *features * bias;
  }
  return dec;
}

double LiblinearModel::Label(double decision) const {
  if (regression()) return decision;
  return decision > 0 ? labels[0] : labels[1];
}

absl::StatusOr<LiblinearModel> ReadLiblinearModel(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  return Reader(path, ss.str()).Read();
}

absl::Status WriteLiblinearModel(const LiblinearModel& m, const std::string& path) {
  std::string out = absl::StrCat("solver_type ", m.solver_type, "\nnr_class 2\n");
  if (!m.regression()) {
    char a[32], b[32];
    std::snprintf(a, sizeof a, "%.17g", m.labels.at(0));
    std::snprintf(b, sizeof b, "%.17g", m.labels.at(1));
    absl::StrAppend(&out, "label ", a, " ", b, "\n");
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", m.bias);
  absl::StrAppend(&out, "nr_feature ", m.nr_feature, "\nbias ", buf, "\nw\n");
  for (double v : m.w) {
    std::snprintf(buf, sizeof buf, "%.17g ", v);  // save_model's trailing space
    absl::StrAppend(&out, buf, "\n");
  }
  return internal::WriteTextFile(path, out);
}

absl::StatusOr<ModelKind> ModelOfLiblinearSolver(int solver) {
  switch (solver) {
    case 0: case 7: return ModelKind::kLogisticL2;        // L2R_LR, L2R_LR_DUAL
    case 1: case 2: return ModelKind::kSquaredHingeSvm;   // L2R_L2LOSS_SVC_DUAL, L2R_L2LOSS_SVC
    case 3: return ModelKind::kHingeSvm;                  // L2R_L1LOSS_SVC_DUAL
    case 6: return ModelKind::kLogisticL1;                // L1R_LR
    case 4: return absl::InvalidArgumentError("-s 4 (MCSVM_CS, multi-class Crammer-Singer) is not available: dml models are binary");
    case 5: return absl::InvalidArgumentError("-s 5 (L1R_L2LOSS_SVC, L1-regularized squared hinge) is not available; -s 6 (L1-logistic) is");
    case 11: case 12: case 13:
      return absl::InvalidArgumentError(absl::StrCat("-s ", solver, " (epsilon-insensitive support vector regression) is not available; use --model ridge"));
    case 21: return absl::InvalidArgumentError("-s 21 (ONECLASS_SVM) is not available");
  }
  return absl::InvalidArgumentError(absl::StrCat("-s ", solver, ": not a LIBLINEAR solver number (0-7, 11-13, 21)"));
}

LiblinearModel ToLiblinear(const ModelSpec& spec, const std::vector<double>& w, double negative,
                           double positive, double bias) {
  LiblinearModel m;
  switch (spec.kind) {
    case ModelKind::kLogisticL2: m.solver_type = "L2R_LR"; break;
    case ModelKind::kLogisticL1: m.solver_type = "L1R_LR"; break;
    case ModelKind::kHingeSvm: m.solver_type = "L2R_L1LOSS_SVC_DUAL"; break;
    case ModelKind::kSquaredHingeSvm: m.solver_type = "L2R_L2LOSS_SVC_DUAL"; break;
    default: m.solver_type = "L2R_L2LOSS_SVR"; break;
  }
  if (!m.regression()) m.labels = {positive, negative};
  m.bias = bias >= 0 ? bias : -1.0;
  m.nr_feature = static_cast<int64_t>(w.size()) - (bias >= 0 && !w.empty() ? 1 : 0);
  m.w = w;
  return m;
}

}  // namespace dml
