// dml-predict: applies a linear model (ours or LIBLINEAR's) to LIBSVM data.
//
//   dml-predict [-b 0|1] [-q] TEST_FILE MODEL_FILE OUTPUT_FILE
//
// Like liblinear-predict: OUTPUT_FILE gets one prediction per line, the
// label (classification, as the shortest text of its double: %g for the
// integers below a million) or the value (regression, as %.17g); with
// -b 1 (logistic models) a "labels A B" header and then "label p_A p_B"
// lines. MODEL_FILE is a dml-train model (`dml-model 1`) or a LIBLINEAR one
// (`solver_type ...`), told apart by its first line. Prints accuracy, AUC and
// log-loss (classification) or MSE, RMSE and R^2 (regression) unless -q.
//
// Labels: a LIBLINEAR model names its two labels, and so does a dml model
// trained on a file with two label values (its "labels" line); the test
// labels are compared with them as doubles, and one that is neither is an
// error at its line and column. Without that line (generated training data)
// the test file's labels are mapped as the trainer maps them: two distinct
// values, the smaller one -1; or values within {-1, 0, +1} with 0 as -1.
//
// Exit status: 0 on success, 2 on a bad flag, model or data file.

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <functional>
#include <cerrno>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "dml/data/libsvm.hpp"
#include "dml/metrics/metrics.hpp"
#include "dml/net/payload_codec.hpp"
#include "dml/objective/liblinear_model.hpp"
#include "dml/objective/model_io.hpp"
#include "cli_flags.hpp"

namespace {

int Fail(const std::string& msg) {
  std::fprintf(stderr, "dml-predict: %s\n", msg.c_str());
  return 2;
}

constexpr const char* kUsage =
    "usage: dml-predict [-b 0|1] [-q] TEST_FILE MODEL_FILE OUTPUT_FILE\n"
    "  -b 1   write probabilities (logistic models only; default 0)\n"
    "  -q     print no metrics\n"
    "MODEL_FILE: a dml-train model (-o) or a LIBLINEAR model (liblinear-train)\n";

struct Options {
  bool probabilities = false;
  bool quiet = false;
  std::string test, model, output;
};

absl::StatusOr<Options> ParseFlags(int argc, char** argv) {
  Options o;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-q") {
      o.quiet = true;
    } else if (a == "-b") {
      if (i + 1 >= argc) return absl::InvalidArgumentError("-b: expected 0 or 1");
      const std::string v = argv[++i];
      if (v != "0" && v != "1") return absl::InvalidArgumentError("-b: expected 0 or 1, got \"" + v + "\"");
      o.probabilities = v == "1";
    } else if (a.size() > 1 && a[0] == '-') {
      return absl::InvalidArgumentError("unknown flag " + a);
    } else {
      positional.push_back(a);
    }
  }
  if (positional.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat("expected TEST_FILE MODEL_FILE OUTPUT_FILE, got ",
                                                   positional.size(), " file name(s)"));
  }
  o.test = positional[0];
  o.model = positional[1];
  o.output = positional[2];
  return o;
}

std::string FirstWord(const std::string& path) {
  std::ifstream in(path);
  std::string w;
  in >> w;
  return w;
}

// A dml model as a LIBLINEAR one over the test file's label values (read
// by `raw_test`, as written, only where the model names none).
absl::StatusOr<dml::LiblinearModel> FromDmlModel(
    absl::StatusOr<dml::LinearModel> m,
    const std::function<absl::StatusOr<const dml::Dataset*>()>& raw_test, double* binarize) {
  if (!m.ok()) return m.status();
  *binarize = m->binarize;
  if (dml::TaskOf(m->spec.kind) == dml::Task::kRegression) {
    return dml::ToLiblinear(m->spec, m->w, -1.0, 1.0, m->bias);
  }
  if (m->classes.size() == 2) {
    return dml::ToLiblinear(m->spec, m->w, m->classes[0], m->classes[1], m->bias);
  }
  if (std::isfinite(m->binarize)) return dml::ToLiblinear(m->spec, m->w, -1.0, 1.0, m->bias);
  absl::StatusOr<const dml::Dataset*> raw = raw_test();
  if (!raw.ok()) return raw.status();
  const dml::Dataset& test = **raw;
  std::set<float> values(test.y.begin(), test.y.end());
  double negative = -1, positive = 1;
  const bool signs = std::all_of(values.begin(), values.end(),
                                 [](float v) { return v == -1.0f || v == 0.0f || v == 1.0f; });
  if (signs) {
    if (values.count(0.0f)) negative = 0;
    if (values.count(0.0f) && values.count(-1.0f)) {
      return absl::InvalidArgumentError(
          "test labels include both -1 and 0: a binary model needs two label values");
    }
  } else if (values.size() == 2) {
    negative = *values.begin();
    positive = *values.rbegin();
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "test labels take ", values.size(), " distinct values outside {-1, 0, +1}; a dml model "
        "needs two (the smaller one is the model's -1)"));
  }
  return dml::ToLiblinear(m->spec, m->w, negative, positive, m->bias);
}

// A label as the shortest text that reads back as the same double: the
// data's own value (%g as LIBLINEAR prints made 16777217 "1.67772e+07"),
// the same text as %g for the integers below a million that labels mostly are.
std::string LabelText(double label) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, label);
  return std::string(buf, r.ptr);
}

void PrintMetrics(const dml::LiblinearModel& m, const dml::Dataset& test,
                  const std::vector<double>& dec, FILE* to) {
  auto show = [](const absl::StatusOr<double>& v) {
    return v.ok() ? absl::StrCat(*v) : absl::StrCat("n/a (", v.status().message(), ")");
  };
  const std::size_t n = test.y.size();
  if (m.regression()) {
    auto rmse = dml::Rmse(test.y, dec);
    std::fprintf(to, "mse %s  rmse %s  r2 %s  (%zu examples)\n",
                rmse.ok() ? absl::StrCat(*rmse * *rmse).c_str() : "n/a", show(rmse).c_str(),
                show(dml::R2(test.y, dec)).c_str(), n);
    return;
  }
  std::vector<float> y_pm(n);
  std::size_t right = 0;
  for (std::size_t i = 0; i < n; ++i) {
    y_pm[i] = test.y[i];  // -1/+1: the model's labels mapped when read
    right += (dec[i] > 0 ? 1.0f : -1.0f) == test.y[i];
  }
  std::fprintf(to, "accuracy %.4f%% (%zu/%zu)  auc %s  log-loss %s\n",
              n ? 100.0 * static_cast<double>(right) / static_cast<double>(n) : 0.0, right, n,
              show(dml::Auc(y_pm, dec)).c_str(),
              m.probabilistic() ? show(dml::LogLoss(y_pm, dec)).c_str() : "n/a (not a logistic model)");
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "-h" || std::string(argv[i]) == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  auto opts = ParseFlags(argc, argv);
  if (!opts.ok()) {
    std::fputs(kUsage, stderr);
    return Fail(std::string(opts.status().message()));
  }
  // The predictions must not overwrite what is read (a swapped argument).
  for (const auto& [what, path] : {std::pair<const char*, const std::string&>{"the test data", opts->test},
                                   {"the model", opts->model}}) {
    if (dml::samples::WouldOverwrite(opts->output) && dml::samples::SameFile(opts->output, path)) {
      return Fail(opts->output + " is also " + what + "; writing the predictions would destroy it");
    }
  }
  // The test file as written (labels as floats): read only for a dml
  // classifier that names no labels, which takes them from the file.
  std::optional<dml::Dataset> raw;
  auto raw_test = [&]() -> absl::StatusOr<const dml::Dataset*> {
    if (!raw) {
      dml::LibsvmOptions lo;
      lo.task = dml::Task::kRegression;
      auto t = dml::ReadLibsvm(opts->test, lo);
      if (!t.ok()) return t.status();
      raw = *std::move(t);
    }
    return &*raw;
  };
  if (struct stat info {}; ::stat(opts->model.c_str(), &info) != 0 || S_ISDIR(info.st_mode)) {
    return Fail(opts->model + ": " +
                (S_ISDIR(info.st_mode) ? std::string("is a directory, not a model file")
                                       : "cannot open the model: " + std::string(std::strerror(errno))));
  }
  const std::string kind = FirstWord(opts->model);
  double binarize = std::numeric_limits<double>::quiet_NaN();  // the model's --binarize
  absl::StatusOr<dml::LiblinearModel> model = absl::UnknownError("");
  if (kind == "dml-model") {
    model = FromDmlModel(dml::ReadModelText(opts->model), raw_test, &binarize);
  } else if (kind == "solver_type") {
    model = dml::ReadLiblinearModel(opts->model);
  } else {
    // Binary: a Cap'n Proto ModelFile (dml-train --model-format capnp), or nothing we read.
    auto file = dml::net::ReadModelFile(opts->model);
    // A file that decoded as a model file but whose contents changed since
    // it was written: say that, not "none of the formats".
    const bool changed = !file.ok() && dml::net::ChangedSinceWritten(file.status());
    model = file.ok() ? FromDmlModel(file->model, raw_test, &binarize)
            : changed ? absl::Status(file.status())
                      : absl::InvalidArgumentError(absl::StrCat(
                            opts->model, ": neither a dml text model (\"dml-model 1\"), a LIBLINEAR "
                            "model (\"solver_type ...\") nor a dml Cap'n Proto model file (",
                            file.status().message(), ")"));
  }
  if (!model.ok()) return Fail(std::string(model.status().message()));
  // Classification: the labels map to the model's +1 (labels[0], dec > 0)
  // and -1 as doubles, in the parser (a label that is neither is an error
  // at its line); taken from the file itself, the raw floats map exactly.
  absl::StatusOr<dml::Dataset> test = absl::UnknownError("");
  if (raw && !model->regression()) {
    dml::Dataset t = *std::move(raw);
    for (float& y : t.y) {
      if (y != model->labels[0] && y != model->labels[1]) {
        return Fail(absl::StrCat(opts->test, ": a label is ", y, "; the model's labels are ",
                                 model->labels[0], " and ", model->labels[1]));
      }
      y = y == model->labels[0] ? 1.0f : -1.0f;
    }
    test = std::move(t);
  } else {
    dml::LibsvmOptions lo;
    lo.task = model->regression() ? dml::Task::kRegression : dml::Task::kClassification;
    if (std::isfinite(binarize)) {
      lo.binarize_threshold = binarize;  // as the model was trained: label > it is +1
    } else if (!model->regression()) {
      lo.classes = {model->labels[1], model->labels[0]};
    }
    test = dml::ReadLibsvm(opts->test, lo);
  }
  if (!test.ok()) return Fail(std::string(test.status().message()));
  // LIBLINEAR's predict gives features the model never saw weight 0; so do
  // we, but not without a word (a model of other data predicts nonsense).
  if (test->x.cols() > model->nr_feature) {
    std::fprintf(stderr,
                 "dml-predict: note: %s has features up to %lld, the model %lld: the %lld past "
                 "them count 0 (as LIBLINEAR's predict)\n",
                 opts->test.c_str(), static_cast<long long>(test->x.cols()),
                 static_cast<long long>(model->nr_feature),
                 static_cast<long long>(test->x.cols() - model->nr_feature));
  }
  if (opts->probabilities && !model->probabilistic()) {
    return Fail("-b 1: probabilities need a logistic model; this one is " + model->solver_type);
  }
  const std::vector<double> dec = model->Decisions(test->x);
  std::unique_ptr<FILE, int (*)(FILE*)> out(std::fopen(opts->output.c_str(), "w"), &std::fclose);
  if (!out) return Fail(opts->output + ": cannot open for writing");
  if (opts->probabilities) {
    std::fprintf(out.get(), "labels %s %s\n", LabelText(model->labels[0]).c_str(),
                 LabelText(model->labels[1]).c_str());
  }
  for (double d : dec) {
    if (model->regression()) {
      std::fprintf(out.get(), "%.17g\n", d);
    } else if (opts->probabilities) {
      const double p = 1.0 / (1.0 + std::exp(-d));
      std::fprintf(out.get(), "%s %g %g\n", LabelText(model->Label(d)).c_str(), p, 1.0 - p);
    } else {
      std::fprintf(out.get(), "%s\n", LabelText(model->Label(d)).c_str());
    }
  }
  if (std::fflush(out.get()) != 0) return Fail(opts->output + ": write failed");
  // Predictions written to standard output: the metrics line goes to
  // stderr, so that the stream holds the predictions alone (it had
  // overwritten the first ones).
  if (!opts->quiet) {
    PrintMetrics(*model, *test, dec,
                 dml::samples::IsStandardOutput(opts->output) ? stderr : stdout);
  }
  return 0;
}
