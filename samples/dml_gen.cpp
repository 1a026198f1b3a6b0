// dml-gen: writes a synthetic LIBSVM file with a planted model (and optionally the model itself).
//
//   dml-gen --rows N --cols D --nnz-per-row K [--noise S] [--density F]
//           [--task classification|regression] [--seed N] [--scale-decades D]
//           --out FILE [--planted FILE]
// --scale-decades D: feature units spread over D decades (unscaled data).
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "dml/data/libsvm.hpp"
#include "dml/data/synthetic.hpp"
#include "cli_flags.hpp"

namespace {
constexpr const char* kUsage =
    "usage: dml-gen --rows N --cols D --nnz-per-row K [--noise S] [--density F]\n"
    "               [--task classification|regression] [--seed N] [--scale-decades D]\n"
    "               --out FILE [--planted FILE]\n"
    "  writes a synthetic LIBSVM file from a planted model (and the model to --planted)\n";

int Fail(const std::string& m) {
  std::fprintf(stderr, "dml-gen: %s\n", m.c_str());
  return 2;
}
template <typename T>
bool Parse(const std::string& s, T& out) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}
}  // namespace

int main(int argc, char** argv) {
  dml::SyntheticOptions o;
  std::string out, planted;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc) return Fail("option " + flag + " needs a value");
    const std::string v = argv[++i];
    bool ok = true;
    if (flag == "--rows") ok = Parse(v, o.rows);
    else if (flag == "--cols") ok = Parse(v, o.cols);
    else if (flag == "--nnz-per-row") ok = Parse(v, o.nnz_per_row);
    else if (flag == "--noise") ok = Parse(v, o.noise);
    else if (flag == "--density") ok = Parse(v, o.model_density);
    else if (flag == "--seed") ok = Parse(v, o.seed);
    else if (flag == "--scale-decades") ok = Parse(v, o.scale_decades);
    else if (flag == "--out") out = v;
    else if (flag == "--planted") planted = v;
    else if (flag == "--task") {
      if (v == "classification") o.task = dml::Task::kClassification;
      else if (v == "regression") o.task = dml::Task::kRegression;
      else return Fail("--task: expected classification or regression, got \"" + v + "\"");
    } else {
      return Fail("unknown option " + flag);
    }
    if (!ok) return Fail(flag + ": expected a number, got \"" + v + "\"");
  }
  if (out.empty()) return Fail("--out FILE is required");
  if (!planted.empty() && dml::samples::WouldOverwrite(out) && dml::samples::SameFile(out, planted)) {
    return Fail("--out and --planted name the same file, " + out);
  }
  auto s = dml::GenerateSynthetic(o);
  if (!s.ok()) return Fail(std::string(s.status().message()));
  for (float y : s->data.y) {
    if (!std::isfinite(y)) {
      char noise[32];
      std::snprintf(noise, sizeof noise, "%g", o.noise);
      return Fail(std::string("the generated labels are not finite (--noise ") + noise +
                  " and the planted model overflow float); " + out + " is left as it was");
    }
  }
  if (auto st = dml::WriteLibsvm(s->data, out); !st.ok()) return Fail(std::string(st.message()));
  if (!planted.empty()) {
    std::ofstream p(planted);
    p.precision(17);
    for (double w : s->planted) p << w << "\n";
    p.close();  // a full disk shows at the flush
    if (!p) return Fail(planted + ": write failed");
  }
  return 0;
}
