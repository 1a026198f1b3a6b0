#define BOOST_TEST_MODULE libsvm
#include <boost/test/unit_test.hpp>

// Tests for the LIBSVM reader/writer: exact arrays on literal inputs, the
// exact `name:line:column: ` of every error (also across thread chunks),
// compressed files against the plain parse, the shared datasets against
// counts taken independently with awk, and write/read round trips.

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "dml/data/libsvm.hpp"
#include "shared_data.hpp"

namespace {

using dml::Dataset;
using dml::LibsvmOptions;
using dml::Task;

const std::string kShared = DML_SHARED_DIR;
const std::string kTmp = DML_TEST_TMP;

Dataset MustParse(std::string_view text, LibsvmOptions opts = {}) {
  auto d = dml::ParseLibsvm(text, opts, "t");
  BOOST_REQUIRE_MESSAGE(d.ok(), d.status().ToString());
  return *std::move(d);
}

// The message of a parse that must fail with InvalidArgument.
std::string ErrorOf(std::string_view text, LibsvmOptions opts = {}, std::string_view name = "t") {
  auto d = dml::ParseLibsvm(text, opts, name);
  BOOST_REQUIRE(!d.ok());
  BOOST_TEST(d.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(d.status().message());
}

LibsvmOptions Regression() {
  LibsvmOptions o;
  o.task = Task::kRegression;
  return o;
}

void ExpectSame(const Dataset& a, const Dataset& b) {
  BOOST_TEST(a.x.rows() == b.x.rows());
  BOOST_TEST(a.x.cols() == b.x.cols());
  BOOST_TEST(a.x.offsets() == b.x.offsets(), boost::test_tools::per_element());
  BOOST_TEST(a.x.indices() == b.x.indices(), boost::test_tools::per_element());
  BOOST_TEST(a.x.values() == b.x.values(), boost::test_tools::per_element());
  BOOST_TEST(a.y == b.y, boost::test_tools::per_element());
  BOOST_TEST((a.task == b.task));
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  BOOST_REQUIRE(f.good());
}

bool HaveTool(const std::string& tool) {
  return std::system(("command -v " + tool + " >/dev/null 2>&1").c_str()) == 0;
}

}  // namespace

BOOST_AUTO_TEST_CASE(parses_small_literal_exactly) {
  const Dataset d = MustParse("+1 1:0.5 3:-2\n-1 2:1e-3\n+1\n-1 4:7 1:0.25\n");
  BOOST_TEST(d.x.rows() == 4);
  BOOST_TEST(d.x.cols() == 4);
  BOOST_TEST((d.task == Task::kClassification));
  BOOST_TEST(d.x.offsets() == (std::vector<int64_t>{0, 2, 3, 3, 5}), boost::test_tools::per_element());
  BOOST_TEST(d.x.indices() == (std::vector<uint32_t>{0, 2, 1, 0, 3}), boost::test_tools::per_element());
  BOOST_TEST(d.x.values() == (std::vector<float>{0.5f, -2.0f, 1e-3f, 0.25f, 7.0f}),
             boost::test_tools::per_element());
  BOOST_TEST(d.y == (std::vector<float>{1, -1, 1, -1}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(accepts_comments_qid_crlf_blank_lines_and_spacing) {
  const Dataset plain = MustParse("1 1:1 3:2.5\n-1 2:-4\n1\n-1 1:+0.5 4:1\n");
  const std::string messy =
      "# header comment\n"
      "\n"
      "  1 qid:3 1:1 3:2.5   # trailing comment\r\n"
      "   \t \r\n"
      "#\n"
      "-1\tqid:4\t2:-4\t\t\n"
      "+1#label only, comment glued on\n"
      "-1 4:1 1:+0.5";  // unsorted, no final newline
  ExpectSame(MustParse(messy), plain);
  // Every thread count gives the same answer on a tiny input too.
  for (int t : {1, 2, 3, 8, 64}) {
    LibsvmOptions o;
    o.threads = t;
    ExpectSame(MustParse(messy, o), plain);
  }
  // A lone '#' line and a lone comment are not examples.
  BOOST_TEST(MustParse("#\n1\n#x\n").x.rows() == 1);
}

BOOST_AUTO_TEST_CASE(sorts_unsorted_rows_with_their_values) {
  const Dataset d = MustParse("1 9:9 2:2 5:5 1:1\n-1 3:3 1:1\n", Regression());
  BOOST_TEST(d.x.indices() == (std::vector<uint32_t>{0, 1, 4, 8, 0, 2}), boost::test_tools::per_element());
  BOOST_TEST(d.x.values() == (std::vector<float>{1, 2, 5, 9, 1, 3}), boost::test_tools::per_element());
  BOOST_TEST(d.y == (std::vector<float>{1, -1}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(maps_classification_labels) {
  auto labels = [](std::string_view text, LibsvmOptions o = {}) { return MustParse(text, o).y; };
  using V = std::vector<float>;
  BOOST_TEST(labels("-1\n+1\n1\n-1 1:1\n") == (V{-1, 1, 1, -1}), boost::test_tools::per_element());
  BOOST_TEST(labels("0\n1\n1.0\n0 2:1\n") == (V{-1, 1, 1, -1}), boost::test_tools::per_element());
  BOOST_TEST(labels("2\n1\n2\n") == (V{1, -1, 1}), boost::test_tools::per_element());
  BOOST_TEST(labels("1.5e0\n+3\n") == (V{-1, 1}), boost::test_tools::per_element());
  // One class: <= 0 is the negative class.
  BOOST_TEST(labels("0\n0\n") == (V{-1, -1}), boost::test_tools::per_element());
  BOOST_TEST(labels("-1\n") == (V{-1}), boost::test_tools::per_element());
  BOOST_TEST(labels("2\n2\n") == (V{1, 1}), boost::test_tools::per_element());
  // The two values that became -1 and +1 are kept (a model names them).
  using D = std::vector<double>;
  BOOST_TEST(MustParse("2\n1\n2\n", {}).classes == (D{1, 2}), boost::test_tools::per_element());
  BOOST_TEST(MustParse("1.5e0\n+3\n", {}).classes == (D{1.5, 3}), boost::test_tools::per_element());
  BOOST_TEST(MustParse("2\n2\n", {}).classes.empty());
  // Threshold: any number of classes.
  LibsvmOptions thr;
  thr.binarize_threshold = 10.5;
  BOOST_TEST(labels("1\n10\n11\n20\n10.5\n10.6\n", thr) == (V{-1, -1, 1, 1, -1, 1}),
             boost::test_tools::per_element());
  // Regression keeps the values.
  const Dataset r = MustParse("2.5\n-7\n1e-3 1:1\n+0\n", Regression());
  BOOST_TEST(r.y == (V{2.5f, -7.0f, 1e-3f, 0.0f}), boost::test_tools::per_element());
  BOOST_TEST((r.task == Task::kRegression));
  BOOST_TEST(r.classes.empty());
}

// A test file maps as the training set did: one class, or the +1 class
// first, must not flip (the smaller value of a one-class file used to become -1).
BOOST_AUTO_TEST_CASE(given_classes_map_labels_as_the_model_does) {
  using V = std::vector<float>;
  using D = std::vector<double>;
  LibsvmOptions o;
  o.classes = {1, 2};  // 1 -> -1, 2 -> +1
  BOOST_TEST(MustParse("1 1:1\n1\n", o).y == (V{-1, -1}), boost::test_tools::per_element());
  BOOST_TEST(MustParse("2 1:1\n2\n", o).y == (V{1, 1}), boost::test_tools::per_element());
  BOOST_TEST(MustParse("2\n1\n", o).y == (V{1, -1}), boost::test_tools::per_element());
  BOOST_TEST(MustParse("2\n", o).classes == (D{1, 2}), boost::test_tools::per_element());
  // Either order: the first value is -1's (a LIBLINEAR model may list +1 first).
  o.classes = {5, -3};
  BOOST_TEST(MustParse("-3\n5\n5\n", o).y == (V{1, -1, -1}), boost::test_tools::per_element());
  // Without them, the same one-class file maps by sign.
  BOOST_TEST(MustParse("1\n1\n").y == (V{1, 1}), boost::test_tools::per_element());
  o.classes = {1, 2};
  BOOST_TEST(ErrorOf("1 1:1\n2\n\n  3 1:1\n", o) ==
             "t:4:3: label 3 is neither of the model's classes 1 (-1) and 2 (+1)");
  o.classes = {1};
  BOOST_TEST(ErrorOf("1\n", o) ==
             "classes must be two distinct finite label values (-1's, then +1's), got 1 values");
  o.classes = {2, 2};
  BOOST_TEST(ErrorOf("1\n", o).rfind("classes must be two distinct", 0) == 0);
  // A threshold decides alone.
  o.classes = {1, 2};
  o.binarize_threshold = 1.5;
  BOOST_TEST(MustParse("3\n0\n", o).y == (V{1, -1}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(third_class_is_an_error_at_its_first_line) {
  BOOST_TEST(ErrorOf("1 1:1\n2 1:1\n\n1\n3 1:1\n3\n") ==
             "t:5:1: label 3 is a third distinct value (after 1 and 2); classification takes "
             "two classes: set binarize_threshold or use regression");
  BOOST_TEST(ErrorOf("0\n1\n  -1 2:1\n").rfind("t:3:3: label -1 is a third distinct value", 0) == 0);
  // A syntax error before the third class wins, and one after it loses.
  BOOST_TEST(ErrorOf("0\n1\nx\n2\n").rfind("t:3:1: expected a numeric label", 0) == 0);
  BOOST_TEST(ErrorOf("0\n1\n2 x\n").rfind("t:3:1: label 2 is a third", 0) == 0);
  // Regression and thresholds take any number of values.
  BOOST_TEST(MustParse("0\n1\n2\n", Regression()).x.rows() == 3);
}

BOOST_AUTO_TEST_CASE(errors_name_line_and_column) {
  struct Case {
    std::string text;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"abc 1:2\n", "t:1:1: expected a numeric label, got \"abc\""},
      // A NUL byte in a comment, as a stream would stop at it.
      {std::string("1 1:2 # x\0y\n", 12), "t:1:10: a NUL byte in a comment: binary data, not LIBSVM text"},
      {std::string("# a\0b\n1 1:2\n", 12), "t:1:4: a NUL byte in a comment: binary data, not LIBSVM text"},
      {"1 2:3\n1 5 6:1\n", "t:2:3: expected ':' after feature index, got \"5\""},
      {"1 2x:3\n", "t:1:3: expected ':' after feature index, got \"2x:3\""},
      {"1 0:1\n", "t:1:3: feature index must be >= 1, got 0"},
      {"1 -3:1\n", "t:1:3: feature index -3 is negative (must be >= 1)"},
      {"1 2:x\n", "t:1:5: expected a numeric value after ':', got \"x\""},
      {"1 2:1.5abc\n", "t:1:5: expected a numeric value after ':', got \"1.5abc\""},
      {"1 2:nan\n", "t:1:5: non-finite value \"nan\""},
      {"1 2:-Infinity 3:1\n", "t:1:5: non-finite value \"-Infinity\""},
      {"1 2:inf\n", "t:1:5: non-finite value \"inf\""},
      {"nan 1:1\n", "t:1:1: non-finite label \"nan\""},
      {"-inf\n", "t:1:1: non-finite label \"-inf\""},
      {"1 5000000000:1\n", "t:1:3: feature index 5000000000 overflows 32-bit indices"},
      {"1 4294967297:1\n", "t:1:3: feature index 4294967297 overflows 32-bit indices"},
      {"1 7:1 3:2 7:3\n", "t:1:11: duplicate feature index 7"},
      {"1 2:1 2:2\n", "t:1:7: duplicate feature index 2"},
      // The first token that repeats an index, in line order.
      {"1 9:1 5:1 9:2 5:2\n", "t:1:11: duplicate feature index 9"},
      // A duplicate before a syntax error in the same line is the first error.
      {"1 3:1 2:1 3:2 x\n", "t:1:11: duplicate feature index 3"},
      {"", "t:1:1: empty file: no examples"},
      {"\n\n# only comments\n  \r\n", "t:1:1: empty file: no examples"},
      {":\n", "t:1:1: expected a numeric label, got \":\""},
      {"1 :5\n", "t:1:3: expected a feature index, got \":5\""},
      {"1 1:\n", "t:1:5: expected a numeric value after ':', got \"\""},
      {"1 1:", "t:1:5: expected a numeric value after ':', got \"\""},
      {"1 1:2:3\n", "t:1:5: expected a numeric value after ':', got \"2:3\""},
      {"1 1\n", "t:1:3: expected ':' after feature index, got \"1\""},
      {"+ 1:1\n", "t:1:1: expected a numeric label, got \"+\""},
      {"+-1 1:1\n", "t:1:1: expected a numeric label, got \"+-1\""},
      {"1 1:+-2\n", "t:1:5: expected a numeric value after ':', got \"+-2\""},
      {"1 1:0x10\n", "t:1:5: expected a numeric value after ':', got \"0x10\""},
      {"1 2:1e39\n", "t:1:5: value \"1e39\" is out of range for float"},
      {"1e400\n", "t:1:1: label \"1e400\" is out of range"},
      // Positions after blank lines, comments and CRLF.
      {"1 1:1\r\n\r\n# c\r\n-1 1:1 2:?\r\n", "t:4:10: expected a numeric value after ':', got \"?\""},
      {"1 1:1\n\t-1\t+2:1\n", "t:2:5: expected a feature index, got \"+2:1\""},
  };
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT("input " << c.text) { BOOST_TEST(ErrorOf(c.text) == c.message); }
  }
  // The name is the prefix.
  BOOST_TEST(ErrorOf("x\n", {}, "data/a.svm") == "data/a.svm:1:1: expected a numeric label, got \"x\"");
}

BOOST_AUTO_TEST_CASE(survives_hostile_input) {
  // Embedded NUL bytes are ordinary (bad) characters.
  const std::string nul("1 1:\0 2:3\n", 10);
  BOOST_TEST(ErrorOf(nul) == "t:1:5: expected a numeric value after ':', got \"\\x00\"");
  const std::string nul_label("\0 1:1\n", 6);
  BOOST_TEST(ErrorOf(nul_label).rfind("t:1:1: expected a numeric label", 0) == 0);
  // Very long numbers: the value overflows float, the index overflows 32 bits;
  // both messages quote a shortened token.
  const std::string long_value = "1 1:" + std::string(5000, '7') + "\n";
  const std::string v = ErrorOf(long_value);
  BOOST_TEST(v.rfind("t:1:5: value \"7777", 0) == 0);
  BOOST_TEST(v.find("...\" is out of range for float") != std::string::npos);
  BOOST_TEST(v.size() < 200u);
  const std::string long_index = "1 " + std::string(3000, '9') + ":1\n";
  const std::string i = ErrorOf(long_index);
  BOOST_TEST(i.rfind("t:1:3: feature index 9999", 0) == 0);
  BOOST_TEST(i.find("... overflows 32-bit indices") != std::string::npos);
  // A long number that fits is parsed exactly, leading zeros and all.
  const Dataset ok = MustParse("1 " + std::string(500, '0') + "3:0." + std::string(399, '0') + "1e400\n");
  BOOST_TEST(ok.x.indices() == (std::vector<uint32_t>{2}), boost::test_tools::per_element());
  BOOST_TEST(ok.x.values()[0] == 1.0f);
  // Underflow rounds to zero rather than failing.
  BOOST_TEST(MustParse("1 1:1e-60\n").x.values()[0] == 0.0f);
  const float neg_zero = MustParse("1 1:-0." + std::string(80, '0') + "7e+3\n").x.values()[0];
  BOOST_TEST(neg_zero == 0.0f);
  BOOST_TEST(std::signbit(neg_zero));
  BOOST_TEST(MustParse("1e-99999999999999999999\n", Regression()).y[0] == 0.0f);
  BOOST_TEST(ErrorOf("1 1:0.0000000000001e99999999999999999999\n") ==
             "t:1:5: value \"0.0000000000001e99999999999999999999\" is out of range for float");
  // The largest 1-based index that fits.
  const Dataset wide = MustParse("1 4294967296:1\n");
  BOOST_TEST(wide.x.cols() == int64_t{4294967296});
  BOOST_TEST(wide.x.indices()[0] == 4294967295u);
  // Assorted junk must fail cleanly, never crash or hang.
  for (std::string junk : {"#", ":", "1:", ":5", "1 :", "1 1::1", "\r", "\r\n\r\n", "qid:1", "1 qid:",
                           "1 -", "1 -:1", "-", "1 1:1 #", "\xff\xfe", "1 1:1\n\xff"}) {
    BOOST_TEST_CONTEXT("junk " << junk) {
      auto d = dml::ParseLibsvm(junk, {}, "t");
      if (!d.ok()) BOOST_TEST(d.status().message().substr(0, 2) == "t:");
    }
  }
}

BOOST_AUTO_TEST_CASE(num_features_widens_and_bounds) {
  LibsvmOptions o;
  o.num_features = 10;
  const Dataset d = MustParse("1 1:1 3:1\n-1 2:1\n", o);
  BOOST_TEST(d.x.cols() == 10);
  BOOST_TEST(d.x.nnz() == 3);
  BOOST_TEST(MustParse("1 10:1\n", o).x.cols() == 10);
  BOOST_TEST(ErrorOf("1 1:1\n-1 2:1 11:1\n", o) == "t:2:8: feature index 11 exceeds num_features = 10");
  o.num_features = -1;
  BOOST_TEST(!dml::ParseLibsvm("1 1:1\n", o, "t").ok());
}

namespace {

// A few MB of random rows with comments, blank lines and CRLF mixed in;
// `line_of_row` gives the 1-based line of each example.
std::string Generate(int rows, uint32_t seed, std::vector<int>* line_of_row) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> nnz(0, 30), idx(1, 5000), kind(0, 40);
  std::uniform_real_distribution<float> val(-10.0f, 10.0f);
  std::string s;
  int line = 0;
  char buf[64];
  for (int r = 0; r < rows; ++r) {
    const int k = kind(rng);
    if (k == 0) {
      s += "# a comment line\n";
      ++line;
    } else if (k == 1) {
      s += "\n";
      ++line;
    }
    ++line;
    if (line_of_row) line_of_row->push_back(line);
    s += (rng() & 1) ? "+1" : "-1";
    const int n = nnz(rng);
    std::vector<int> used;
    for (int j = 0; j < n; ++j) {
      int i = idx(rng);
      bool dup = false;
      for (int u : used) dup = dup || u == i;
      if (dup) continue;
      used.push_back(i);
      s += ' ';
      s += std::to_string(i);
      s += ':';
      auto res = std::to_chars(buf, buf + sizeof buf, val(rng));
      s.append(buf, res.ptr);
    }
    s += (k == 2) ? " \r\n" : "\n";
  }
  return s;
}

}  // namespace

BOOST_AUTO_TEST_CASE(threads_agree_and_error_lines_are_exact) {
  std::vector<int> lines;
  const std::string text = Generate(60000, 7, &lines);
  LibsvmOptions one;
  one.threads = 1;
  const Dataset ref = MustParse(text, one);
  BOOST_TEST(ref.x.rows() == 60000);
  for (int t : {2, 4, 7}) {
    LibsvmOptions o;
    o.threads = t;
    BOOST_TEST_CONTEXT("threads " << t) { ExpectSame(MustParse(text, o), ref); }
  }
  LibsvmOptions four;
  four.threads = 4;
  // An error deep in the file (in the third of four chunks): replace the
  // label of the example at row 41234.
  {
    const int row = 41234;
    std::string bad = text;
    std::size_t pos = 0;
    for (int l = 1; l < lines[row]; ++l) pos = bad.find('\n', pos) + 1;
    bad.replace(pos, 2, "zz");
    const std::string expect = "t:" + std::to_string(lines[row]) + ":1: expected a numeric label, got \"zz\"";
    BOOST_TEST(ErrorOf(bad, four) == expect);
    BOOST_TEST(ErrorOf(bad, one) == expect);
    // A second error in a later chunk does not hide the first one.
    std::size_t late = bad.size() - 3000;
    late = bad.find('\n', late) + 1;
    bad.replace(late, 2, "yy");
    BOOST_TEST(ErrorOf(bad, four) == expect);
  }
  // A third class deep in the file is found across chunks.
  {
    const int row = 50001;
    std::string bad = text;
    std::size_t pos = 0;
    for (int l = 1; l < lines[row]; ++l) pos = bad.find('\n', pos) + 1;
    bad.replace(pos, 2, "+7");
    const std::string expect = "t:" + std::to_string(lines[row]) + ":1: label 7 is a third distinct value";
    BOOST_TEST(ErrorOf(bad, four).rfind(expect, 0) == 0);
    BOOST_TEST(ErrorOf(bad, one).rfind(expect, 0) == 0);
  }
}

BOOST_AUTO_TEST_CASE(reads_compressed_files_like_plain_ones) {
  const std::string text = Generate(3000, 11, nullptr);
  const std::string plain = kTmp + "/libsvm_compressed.svm";
  WriteText(plain, text);
  auto ref = dml::ReadLibsvm(plain);
  BOOST_REQUIRE(ref.ok());
  BOOST_TEST(ref->x.rows() == 3000);
  struct Tool {
    const char* name;
    const char* ext;
  };
  for (Tool tool : {Tool{"gzip", ".gz"}, Tool{"bzip2", ".bz2"}, Tool{"xz", ".xz"}}) {
    BOOST_TEST_CONTEXT(tool.name) {
      if (!HaveTool(tool.name)) {
        BOOST_TEST_MESSAGE("skipping " << tool.name << ": tool not installed");
        continue;
      }
      const std::string packed = plain + tool.ext;
      const std::string cmd = std::string(tool.name) + " -c '" + plain + "' > '" + packed + "'";
      BOOST_REQUIRE(std::system(cmd.c_str()) == 0);
      auto d = dml::ReadLibsvm(packed);
      BOOST_REQUIRE_MESSAGE(d.ok(), d.status().ToString());
      ExpectSame(*d, *ref);
      auto contents = dml::ReadFileContents(packed);
      BOOST_REQUIRE(contents.ok());
      BOOST_TEST(*contents == text);
      // Two streams back to back (pigz/pbzip2 style) decode as one text.
      const std::string twice = packed + ".twice" + tool.ext;
      BOOST_REQUIRE(std::system(("cat '" + packed + "' '" + packed + "' > '" + twice + "'").c_str()) == 0);
      auto both = dml::ReadFileContents(twice);
      BOOST_REQUIRE_MESSAGE(both.ok(), both.status().ToString());
      BOOST_TEST(*both == text + text);
      // A truncated archive is an error, not a crash.
      const std::string cut = packed + ".cut" + tool.ext;
      BOOST_REQUIRE(std::system(("head -c 2000 '" + packed + "' > '" + cut + "'").c_str()) == 0);
      auto truncated = dml::ReadLibsvm(cut);
      BOOST_TEST(!truncated.ok());
      BOOST_TEST(std::string(truncated.status().message()).find(cut) != std::string::npos);
      // Zeros after two lines (a bomb of them decompresses without end):
      // refused as they arrive, at the first one's line and column.
      const std::string zeros = plain + ".zeros" + tool.ext;
      BOOST_REQUIRE(std::system(("(printf '1 1:1\\n-1 2:1\\n'; head -c 3000000 /dev/zero) | " +
                                 std::string(tool.name) + " -c > '" + zeros + "'")
                                    .c_str()) == 0);
      auto bomb = dml::ReadFileContents(zeros);
      BOOST_TEST((bomb.status().code() == absl::StatusCode::kInvalidArgument));
      BOOST_TEST(bomb.status().message() ==
                 zeros + ":3:1: a NUL byte: binary data, not LIBSVM text (read stopped)");
    }
  }
}

// A device that never ends is refused at its first NUL byte, not read
// until memory runs out.
BOOST_AUTO_TEST_CASE(an_endless_stream_of_zeros_is_refused) {
  auto d = dml::ReadLibsvm("/dev/zero");
  BOOST_TEST((d.status().code() == absl::StatusCode::kInvalidArgument));
  BOOST_TEST(d.status().message() == "/dev/zero:1:1: a NUL byte: binary data, not LIBSVM text (read stopped)");
}

BOOST_AUTO_TEST_CASE(missing_files_are_not_found) {
  const std::string path = kTmp + "/no/such/file.svm";
  auto d = dml::ReadLibsvm(path);
  BOOST_TEST(d.status().code() == absl::StatusCode::kNotFound);
  BOOST_TEST(std::string(d.status().message()).find(path) != std::string::npos);
  BOOST_TEST(std::string(d.status().message()).find("No such file or directory") != std::string::npos);
  BOOST_TEST(dml::ReadFileContents(path + ".gz").status().code() == absl::StatusCode::kNotFound);
  // A directory is an error too.
  BOOST_TEST(!dml::ReadLibsvm(kTmp).ok());
}

BOOST_AUTO_TEST_CASE(loads_heart_scale, *boost::unit_test::precondition(dml::testing::SharedDataPresent)) {
  // Reference numbers from awk over the file: 270 rows, largest index 13,
  // 3378 index:value pairs, 120 lines labelled +1, values summing to
  // -666.4008603 (column 13 alone: -41).
  auto d = dml::ReadLibsvm(kShared + "/data/heart_scale");
  BOOST_REQUIRE_MESSAGE(d.ok(), d.status().ToString());
  BOOST_TEST(d->x.rows() == 270);
  BOOST_TEST(d->x.cols() == 13);
  BOOST_TEST(d->x.nnz() == 3378);
  int positives = 0;
  for (float y : d->y) positives += y == 1.0f;
  BOOST_TEST(positives == 120);
  double sum = 0, sum13 = 0;
  for (std::size_t k = 0; k < d->x.values().size(); ++k) {
    sum += d->x.values()[k];
    if (d->x.indices()[k] == 12) sum13 += d->x.values()[k];
  }
  BOOST_TEST(sum == -666.4008603, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(sum13 == -41.0);
  // First row: +1 1:0.708333 2:1 3:1 4:-0.320755 ...; last row: +1 1:0.583333 ...
  BOOST_TEST(d->y[0] == 1.0f);
  BOOST_TEST(d->y[1] == -1.0f);
  const dml::SparseView r0 = d->x.outer(0);
  BOOST_TEST(r0.size == 12u);
  BOOST_TEST(r0.index[0] == 0u);
  BOOST_TEST(r0.value[0] == 0.708333f);
  BOOST_TEST(r0.index[3] == 3u);
  BOOST_TEST(r0.value[3] == -0.320755f);
  BOOST_TEST(r0.index[10] == 11u);  // column 11 (1-based) is absent in row 0
  const dml::SparseView last = d->x.outer(269);
  BOOST_TEST(last.value[0] == 0.583333f);
  BOOST_TEST(d->y[269] == 1.0f);
}

BOOST_AUTO_TEST_CASE(loads_a9a_and_news20, *boost::unit_test::precondition(dml::testing::SharedDataPresent)) {
  // awk: a9a has 32561 rows, largest index 123, 451592 pairs, 7841 of +1.
  auto a9a = dml::ReadLibsvm(kShared + "/data/a9a.xz");
  BOOST_REQUIRE_MESSAGE(a9a.ok(), a9a.status().ToString());
  BOOST_TEST(a9a->x.rows() == 32561);
  BOOST_TEST(a9a->x.cols() == 123);
  BOOST_TEST(a9a->x.nnz() == 451592);
  int positives = 0;
  for (float y : a9a->y) positives += y == 1.0f;
  BOOST_TEST(positives == 7841);
  // First row: -1 3:1 11:1 14:1 ...
  BOOST_TEST(a9a->y[0] == -1.0f);
  BOOST_TEST(a9a->x.outer(0).index[0] == 2u);
  BOOST_TEST(a9a->x.outer(0).index[1] == 10u);

  // news20 has 20 classes (awk: 15935 rows, largest index 62061, 1272569
  // pairs, 7984 rows with label > 10.5): an error without a threshold.
  const std::string news = kShared + "/data/news20.bz2";
  auto text = dml::ReadFileContents(news);
  BOOST_REQUIRE(text.ok());
  auto multi = dml::ParseLibsvm(*text, {}, news);
  BOOST_TEST(!multi.ok());
  BOOST_TEST(std::string(multi.status().message()).find("third distinct value") != std::string::npos);
  LibsvmOptions o;
  o.binarize_threshold = 10.5;
  auto d = dml::ParseLibsvm(*text, o, news);
  BOOST_REQUIRE_MESSAGE(d.ok(), d.status().ToString());
  BOOST_TEST(d->x.rows() == 15935);
  BOOST_TEST(d->x.cols() == 62061);
  BOOST_TEST(d->x.nnz() == 1272569);
  positives = 0;
  for (float y : d->y) positives += y == 1.0f;
  BOOST_TEST(positives == 7984);
}

namespace {

Dataset RandomDataset(int rows, int cols, Task task, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<int64_t> off{0};
  std::vector<uint32_t> idx;
  std::vector<float> val;
  std::vector<float> y;
  // Awkward floats on purpose: subnormals, extremes, many digits.
  const float special[] = {std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
                           std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                           0.1f, 1.0f / 3.0f, 16777217.0f, 1e-30f, 0.0f};
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      if (rng() % 4 != 0) continue;
      idx.push_back(static_cast<uint32_t>(c));
      const unsigned pick = rng() % 12;
      val.push_back(pick < 9 ? special[pick] : u(rng) * std::pow(10.0f, static_cast<float>(rng() % 20) - 10));
    }
    off.push_back(static_cast<int64_t>(idx.size()));
    y.push_back(task == Task::kClassification ? ((rng() & 1) ? 1.0f : -1.0f) : u(rng) * 1000.0f);
  }
  auto m = dml::CsrMatrix::FromArrays(rows, cols, off, idx, val);
  BOOST_REQUIRE(m.ok());
  Dataset d;
  d.x = *std::move(m);
  d.y = y;
  d.task = task;
  return d;
}

}  // namespace

BOOST_AUTO_TEST_CASE(write_read_round_trip_is_exact) {
  for (Task task : {Task::kClassification, Task::kRegression}) {
    const Dataset d = RandomDataset(500, 40, task, task == Task::kRegression ? 3 : 4);
    const std::string path = kTmp + "/libsvm_round_trip.svm";
    BOOST_REQUIRE(dml::WriteLibsvm(d, path).ok());
    LibsvmOptions o;
    o.task = task;
    o.num_features = d.x.cols();
    for (int t : {1, 3}) {
      o.threads = t;
      auto back = dml::ReadLibsvm(path, o);
      BOOST_REQUIRE_MESSAGE(back.ok(), back.status().ToString());
      ExpectSame(*back, d);
    }
  }
  // The text itself: 1-based indices, shortest float text.
  const Dataset small = MustParse("1 3:0.1 1:2.5\n-1\n", Regression());
  const std::string path = kTmp + "/libsvm_small.svm";
  BOOST_REQUIRE(dml::WriteLibsvm(small, path).ok());
  auto text = dml::ReadFileContents(path);
  BOOST_REQUIRE(text.ok());
  BOOST_TEST(*text == "1 1:2.5 3:0.1\n-1\n");
  // An unwritable path is an error.
  BOOST_TEST(!dml::WriteLibsvm(small, kTmp + "/no/such/dir/out.svm").ok());
  // Non-finite data: an error naming the row, and the file left as it was.
  Dataset bad = small;
  bad.y[1] = std::numeric_limits<float>::infinity();
  auto st = dml::WriteLibsvm(bad, path);
  BOOST_TEST(st.message() == "WriteLibsvm: row 1: non-finite label");
  bad = small;
  auto values = bad.x.values();
  values[1] = std::nanf("");
  bad.x = dml::CsrMatrix::FromArraysUnchecked(2, 3, bad.x.offsets(), bad.x.indices(), values);
  st = dml::WriteLibsvm(bad, path);
  BOOST_TEST(st.message() == "WriteLibsvm: row 0, column 2: non-finite value");
  BOOST_TEST(*dml::ReadFileContents(path) == "1 1:2.5 3:0.1\n-1\n");
}
