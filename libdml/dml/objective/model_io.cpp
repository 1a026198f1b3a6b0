#include "dml/objective/model_io.hpp"

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
#include "dml/util/memory.hpp"
#include "dml/util/status.hpp"

namespace dml {
namespace {

using internal::ParseDouble;
using internal::ParseInt;

std::string ShortestDouble(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

}  // namespace

std::string TemporaryPathFor(const std::string& path) { return internal::TempPathFor(path); }

absl::Status WriteModelText(const LinearModel& model, const std::string& path) {
  // What ReadModelText would refuse is not written (nothing half-valid on disk).
  if (absl::Status s = Validate(model.spec); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not written: ", s.message()));
  }
  for (std::size_t j = 0; j < model.w.size(); ++j) {
    if (!std::isfinite(model.w[j])) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": not written: weight ", j + 1, " is not finite"));
    }
  }
  std::string out;
  int64_t nnz = 0;
  for (double v : model.w) nnz += v != 0.0;
  absl::StrAppend(&out, "dml-model 1\nmodel ", AsAbsl(ModelName(model.spec.kind)), "\nlambda ",
                  ShortestDouble(model.spec.lambda), "\nl1_ratio ",
                  ShortestDouble(model.spec.l1_ratio), "\n");
  if (model.classes.size() == 2) {
    absl::StrAppend(&out, "labels ", ShortestDouble(model.classes[0]), " ",
                    ShortestDouble(model.classes[1]), "\n");
  }
  if (std::isfinite(model.binarize)) {
    absl::StrAppend(&out, "binarize ", ShortestDouble(model.binarize), "\n");
  }
  if (model.bias >= 0) absl::StrAppend(&out, "bias ", ShortestDouble(model.bias), "\n");
  absl::StrAppend(&out, "features ", model.w.size(),
                  "\nweights ", nnz, "\n");
  for (std::size_t j = 0; j < model.w.size(); ++j) {
    if (model.w[j] != 0.0) absl::StrAppend(&out, j + 1, " ", ShortestDouble(model.w[j]), "\n");
  }
  return internal::WriteTextFile(path, out);
}

absl::StatusOr<LinearModel> ReadModelText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();

  LinearModel m;
  int line_no = 0;
  int64_t features = -1, weights = -1, read_weights = 0, last_index = 0;
  int binarize_line = 0;
  int stage = 0;  // 0 header, 1 model, 2 lambda, 3 l1_ratio, 4 features, 5 weights, 6 body
  auto err = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ":", line_no, ": ", what));
  };
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_no;
    absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> tok = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (stage == 4 && !tok.empty() && tok[0] == "labels") {
      double neg = 0, pos = 0;
      if (tok.size() != 3 || !ParseDouble(tok[1], neg) || !ParseDouble(tok[2], pos) || !(neg < pos)) {
        return err(absl::StrCat("labels: expected two increasing numbers, got \"", line, "\""));
      }
      m.classes = {neg, pos};
      continue;
    }
    if (stage == 4 && !tok.empty() && tok[0] == "binarize") {
      if (tok.size() != 2 || !ParseDouble(tok[1], m.binarize) || !std::isfinite(m.binarize)) {
        return err(absl::StrCat("binarize: expected a finite number, got \"", line, "\""));
      }
      binarize_line = line_no;
      continue;
    }
    if (stage == 4 && !tok.empty() && tok[0] == "bias") {
      if (tok.size() != 2 || !ParseDouble(tok[1], m.bias) || m.bias < 0) {
        return err(absl::StrCat("bias: expected a number >= 0, got \"", line, "\""));
      }
      continue;
    }
    if (tok.size() != 2) return err(absl::StrCat("expected two fields, got \"", line, "\""));
    static constexpr const char* kKeys[] = {"dml-model", "model", "lambda", "l1_ratio",
                                           "features", "weights"};
    if (stage < 6 && tok[0] != kKeys[stage]) {
      return err(absl::StrCat("expected \"", kKeys[stage], "\", got \"", tok[0], "\""));
    }
    switch (stage) {
      case 0:
        if (tok[1] != "1") return err(absl::StrCat("unsupported format version ", tok[1]));
        break;
      case 1: {
        auto kind = ParseModelKind(std::string_view(tok[1].data(), tok[1].size()));
        if (!kind.ok()) return err(kind.status().message());
        m.spec.kind = *kind;
        break;
      }
      case 2:
        if (!ParseDouble(tok[1], m.spec.lambda)) return err("lambda: expected a finite number");
        if (!(m.spec.lambda > 0)) {
          return err(absl::StrCat("lambda must be positive and finite, got ", m.spec.lambda));
        }
        break;
      case 3:
        if (!ParseDouble(tok[1], m.spec.l1_ratio)) return err("l1_ratio: expected a finite number");
        if (auto st = Validate(m.spec); !st.ok()) return err(st.message());
        break;
      case 4:
        if (!ParseInt(tok[1], features) || features < 0 || features > (int64_t{1} << 32)) {
          return err("features: expected a count in [0, 2^32]");
        }
        if (auto st = CheckModelMemory(features, 1, 0, "reading it", VectorOrigin::kModelFile); !st.ok()) {
          return err(st.message());
        }
        m.w.assign(static_cast<std::size_t>(features), 0.0);
        break;
      case 5:
        if (!ParseInt(tok[1], weights) || weights < 0 || weights > features) {
          return err("weights: expected a count in [0, features]");
        }
        break;
      default: {
        int64_t index;
        double value;
        if (!ParseInt(tok[0], index) || index < 1 || index > features) {
          return err(absl::StrCat("weight index must be in [1, ", features, "], got \"", tok[0], "\""));
        }
        if (index <= last_index) return err("weight indices must increase");
        if (!ParseDouble(tok[1], value)) return err("weight value: expected a finite number");
        if (read_weights == weights) return err("more weights than declared");
        m.w[index - 1] = value;
        last_index = index;
        ++read_weights;
      }
    }
    if (stage < 6) ++stage;
  }
  if (stage < 6) {
    static constexpr const char* kKeys[] = {"dml-model", "model", "lambda", "l1_ratio",
                                           "features", "weights"};
    return err(absl::StrCat("unexpected end of file: missing \"", kKeys[stage], "\""));
  }
  if (m.bias >= 0 && features == 0) return err("bias: a model with a bias needs its weight");
  if (std::isfinite(m.binarize) && !m.classes.empty()) {
    line_no = binarize_line;
    return err("binarize: a model trained with a threshold has no labels line");
  }
  if (read_weights != weights) {
    return err(absl::StrCat("declared ", weights, " weights, found ", read_weights));
  }
  return m;
}

}  // namespace dml
