#define BOOST_TEST_MODULE cache
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "dml/data/cache.hpp"
#include "dml/data/libsvm.hpp"
#include "dml/data/synthetic.hpp"

namespace fs = std::filesystem;

namespace dml {
namespace {

// Header field offsets, as documented in cache.hpp.
constexpr std::size_t kVersionAt = 8, kEndianAt = 12, kRowsAt = 16, kColsAt = 24, kNnzAt = 32,
                      kTaskAt = 40, kFlagsAt = 44, kPayloadSumAt = 80, kClassesAt = 88,
                      kHeaderSumAt = 120;

// A fresh directory per test case, removed afterwards.
struct TmpDir {
  fs::path dir;
  TmpDir() {
    const std::string test = boost::unit_test::framework::current_test_case().p_name.get();
    dir = fs::path(DML_TEST_TMP) / ("test_cache." + std::to_string(::getpid()) + "." + test);
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~TmpDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string operator()(const std::string& name) const { return (dir / name).string(); }
};

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  BOOST_REQUIRE(out.good());
}

template <typename T>
T Get(const std::string& b, std::size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}
template <typename T>
void Put(std::string& b, std::size_t at, T v) {
  std::memcpy(&b[at], &v, sizeof v);
}

uint64_t Pad8(uint64_t n) { return (n + 7) / 8 * 8; }

struct Sections {
  uint64_t offsets, indices, values, labels, end;
};
Sections SectionsOf(int64_t rows, int64_t nnz) {
  Sections s;
  s.offsets = kCacheHeaderBytes;
  s.indices = s.offsets + 8 * static_cast<uint64_t>(rows + 1);
  s.values = s.indices + Pad8(4 * static_cast<uint64_t>(nnz));
  s.labels = s.values + Pad8(4 * static_cast<uint64_t>(nnz));
  s.end = s.labels + Pad8(4 * static_cast<uint64_t>(rows));
  return s;
}

// Rewrites both checksums after a deliberate edit, per the documented
// format: the payload checksum chains Checksum64 over the four arrays.
void Reseal(std::string& b) {
  const int64_t rows = Get<int64_t>(b, kRowsAt), nnz = Get<int64_t>(b, kNnzAt);
  const Sections s = SectionsOf(rows, nnz);
  uint64_t h = Checksum64(b.data() + s.offsets, 8 * static_cast<std::size_t>(rows + 1), 0);
  h = Checksum64(b.data() + s.indices, 4 * static_cast<std::size_t>(nnz), h);
  h = Checksum64(b.data() + s.values, 4 * static_cast<std::size_t>(nnz), h);
  h = Checksum64(b.data() + s.labels, 4 * static_cast<std::size_t>(rows), h);
  Put<uint64_t>(b, kPayloadSumAt, h);
  Put<uint64_t>(b, kHeaderSumAt, Checksum64(b.data(), kHeaderSumAt));
}

// Only the header checksum (for header edits that must reach later checks).
void ResealHeader(std::string& b) {
  Put<uint64_t>(b, kHeaderSumAt, Checksum64(b.data(), kHeaderSumAt));
}

Dataset Synthetic(Task task, int64_t rows = 500, int64_t cols = 300, int64_t nnz = 7) {
  SyntheticOptions o;
  o.rows = rows;
  o.cols = cols;
  o.nnz_per_row = nnz;
  o.noise = 0.1;
  o.task = task;
  auto d = GenerateSynthetic(o);
  BOOST_REQUIRE_MESSAGE(d.ok(), d.status().ToString());
  return std::move(d->data);
}

void ExpectEqual(const Dataset& a, const Dataset& b) {
  BOOST_CHECK(a.x == b.x);
  BOOST_CHECK(a.y == b.y);
  BOOST_CHECK(a.task == b.task);
  BOOST_CHECK(a.classes == b.classes);
}

// Status code and message fragments.
template <typename T>
void ExpectError(const absl::StatusOr<T>& r, absl::StatusCode code,
                 std::vector<std::string> fragments) {
  BOOST_REQUIRE_MESSAGE(!r.ok(), "expected an error containing " << fragments.front());
  BOOST_CHECK_MESSAGE(r.status().code() == code, r.status().ToString());
  for (const std::string& f : fragments) {
    BOOST_CHECK_MESSAGE(std::string(r.status().message()).find(f) != std::string::npos,
                        "\"" << r.status().message() << "\" should contain \"" << f << "\"");
  }
}

void ExpectCorrupt(const std::string& cache, const std::string& bytes,
                   std::vector<std::string> fragments) {
  WriteBytes(cache, bytes);
  fragments.insert(fragments.begin(), cache + ": ");
  ExpectError(ReadCache(cache), absl::StatusCode::kDataLoss, fragments);
}

// A written cache as bytes.
std::string CacheBytes(const TmpDir& tmp, const Dataset& d) {
  const std::string path = tmp("bytes.cache");
  BOOST_REQUIRE(WriteCache(d, {}, path).ok());
  return ReadBytes(path);
}

void SetMtime(const std::string& path, int64_t sec, int64_t nsec) {
  struct timespec ts[2];
  ts[0].tv_sec = ts[1].tv_sec = sec;
  ts[0].tv_nsec = ts[1].tv_nsec = nsec;
  BOOST_REQUIRE(::utimensat(AT_FDCWD, path.c_str(), ts, 0) == 0);
}

struct FileId {
  ino_t ino;
  int64_t mtime_ns;
  bool operator==(const FileId& o) const { return ino == o.ino && mtime_ns == o.mtime_ns; }
};
FileId IdOf(const std::string& path) {
  struct stat st;
  BOOST_REQUIRE(::stat(path.c_str(), &st) == 0);
  return {st.st_ino, int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec};
}

bool NoTempFiles(const TmpDir& tmp) {
  for (const auto& e : fs::directory_iterator(tmp.dir)) {
    if (e.path().filename().string().find(".tmp.") != std::string::npos) return false;
  }
  return true;
}

constexpr const char* kText =
    "1 1:0.5 3:-2\n"
    "-1 2:1.25\n"
    "1 1:1 2:2 3:3\n"
    "-1 4:0.75\n"
    "1 2:-0.5 4:8\n";

}  // namespace

// ---------------------------------------------------------------------------
// Round trips and the byte layout.

BOOST_AUTO_TEST_CASE(round_trip_regression_and_classification) {
  TmpDir tmp;
  for (Task task : {Task::kRegression, Task::kClassification}) {
    const Dataset d = Synthetic(task);
    const std::string path = tmp("rt.cache");
    BOOST_REQUIRE(WriteCache(d, {}, path).ok());
    auto r = ReadCache(path);
    BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    ExpectEqual(*r, d);
    BOOST_CHECK_EQUAL(fs::file_size(path), SectionsOf(d.x.rows(), d.x.nnz()).end);
  }
  BOOST_CHECK(NoTempFiles(tmp));
}

BOOST_AUTO_TEST_CASE(round_trip_odd_sizes_empty_rows_and_no_rows) {
  TmpDir tmp;
  // 3 rows, 5 nonzeros: every array needs padding; row 1 is empty.
  auto x = CsrMatrix::FromArrays(3, 6, {0, 2, 2, 5}, {0, 5, 1, 2, 3}, {1, -2, 3.5f, 0, 1e-30f});
  BOOST_REQUIRE(x.ok());
  Dataset d{std::move(x).value(), {0.5f, -1.5f, 2}, Task::kRegression, {}};
  const std::string path = tmp("odd.cache");
  BOOST_REQUIRE(WriteCache(d, {}, path).ok());
  BOOST_CHECK_EQUAL(fs::file_size(path), 128u + 32 + 24 + 24 + 16);
  auto r = ReadCache(path);
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  ExpectEqual(*r, d);

  Dataset empty;  // 0 x 0, offsets {0}
  BOOST_REQUIRE(WriteCache(empty, {}, path).ok());
  BOOST_CHECK_EQUAL(fs::file_size(path), 136u);
  auto e = ReadCache(path);
  BOOST_REQUIRE_MESSAGE(e.ok(), e.status().ToString());
  ExpectEqual(*e, empty);
}

BOOST_AUTO_TEST_CASE(header_bytes_follow_the_documented_layout) {
  TmpDir tmp;
  const Dataset d = Synthetic(Task::kClassification, 37, 11, 3);
  const std::string b = CacheBytes(tmp, d);
  BOOST_CHECK_EQUAL(b.substr(0, 8), "DMLCACHE");
  BOOST_CHECK_EQUAL(Get<uint32_t>(b, kVersionAt), kCacheFormatVersion);
  BOOST_CHECK_EQUAL(b.substr(kEndianAt, 4), std::string("\x04\x03\x02\x01", 4));
  BOOST_CHECK_EQUAL(Get<int64_t>(b, kRowsAt), 37);
  BOOST_CHECK_EQUAL(Get<int64_t>(b, kColsAt), 11);
  BOOST_CHECK_EQUAL(Get<int64_t>(b, kNnzAt), 111);
  BOOST_CHECK_EQUAL(Get<uint32_t>(b, kTaskAt), 0u);
  BOOST_CHECK_EQUAL(Get<uint64_t>(b, kHeaderSumAt), Checksum64(b.data(), kHeaderSumAt));
  const Sections s = SectionsOf(37, 111);
  BOOST_CHECK_EQUAL(b.size(), s.end);
  BOOST_CHECK(std::memcmp(b.data() + s.offsets, d.x.offsets().data(), 8 * 38) == 0);
  BOOST_CHECK(std::memcmp(b.data() + s.indices, d.x.indices().data(), 4 * 111) == 0);
  BOOST_CHECK(std::memcmp(b.data() + s.values, d.x.values().data(), 4 * 111) == 0);
  BOOST_CHECK(std::memcmp(b.data() + s.labels, d.y.data(), 4 * 37) == 0);
  // Resealing an untouched file reproduces the writer's checksums.
  std::string copy = b;
  Reseal(copy);
  BOOST_CHECK(copy == b);
}

// The label values that became -1 and +1 come back from a cache (a model
// names them): a second run through --cache wrote a model without them.
BOOST_AUTO_TEST_CASE(label_classes_round_trip_and_an_older_cache_is_rebuilt) {
  TmpDir tmp;
  Dataset d = Synthetic(Task::kClassification, 40, 9, 3);
  d.classes = {4, 2};  // any order: the first is -1's
  const std::string b = CacheBytes(tmp, d);
  BOOST_CHECK_EQUAL(Get<uint32_t>(b, kFlagsAt), 0xCu);  // classes recorded, two of them
  BOOST_CHECK_EQUAL(Get<double>(b, kClassesAt), 4.0);
  BOOST_CHECK_EQUAL(Get<double>(b, kClassesAt + 8), 2.0);
  const std::string path = tmp("classes.cache");
  WriteBytes(path, b);
  auto r = ReadCache(path);
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  ExpectEqual(*r, d);
  // Equal classes under bit 3: corrupt, naming the field.
  std::string bad = b;
  Put<double>(bad, kClassesAt + 8, 4.0);
  ResealHeader(bad);
  WriteBytes(path, bad);
  ExpectError(ReadCache(path), absl::StatusCode::kDataLoss, {path, "bad classes 4 and 4"});

  // Through LoadWithCache: labels 2 and 4 in the text, the same classes
  // from the text and from the cache; a cache without bit 2 (older) is
  // rebuilt.
  const std::string src = tmp("24.svm");
  const std::string cache = tmp("24.cache");
  WriteBytes(src, "4 1:1\n2 2:1\n4 1:2\n");
  auto first = LoadWithCache(src, cache);
  BOOST_REQUIRE_MESSAGE(first.ok(), first.status().ToString());
  BOOST_CHECK((first->classes == std::vector<double>{2, 4}));
  std::string why = "not cleared";
  auto second = LoadWithCache(src, cache, {}, &why);
  BOOST_REQUIRE(second.ok());
  BOOST_CHECK_EQUAL(why, "");
  ExpectEqual(*second, *first);
  std::string old = ReadBytes(cache);
  Put<uint32_t>(old, kFlagsAt, Get<uint32_t>(old, kFlagsAt) & ~0xCu);
  Put<double>(old, kClassesAt, 0.0);
  Put<double>(old, kClassesAt + 8, 0.0);
  ResealHeader(old);
  WriteBytes(cache, old);
  const auto stat = *StatSource(src);
  BOOST_CHECK(ReadCache(cache, stat).ok());  // readable, without classes
  BOOST_CHECK(ReadCache(cache, stat)->classes.empty());
  auto third = LoadWithCache(src, cache, {}, &why);
  BOOST_REQUIRE(third.ok());
  ExpectEqual(*third, *first);
  BOOST_CHECK_MESSAGE(why.find("the cache records no label classes") != std::string::npos, why);
}

BOOST_AUTO_TEST_CASE(overwriting_a_cache_replaces_it) {
  TmpDir tmp;
  const std::string path = tmp("over.cache");
  const Dataset a = Synthetic(Task::kRegression, 100, 20, 4);
  const Dataset b = Synthetic(Task::kClassification, 50, 30, 5);
  BOOST_REQUIRE(WriteCache(a, {}, path).ok());
  BOOST_REQUIRE(WriteCache(b, {}, path).ok());
  auto r = ReadCache(path);
  BOOST_REQUIRE(r.ok());
  ExpectEqual(*r, b);
  BOOST_CHECK(NoTempFiles(tmp));
}

// ---------------------------------------------------------------------------
// Corruption: every kind is DataLoss naming the file and the field.

BOOST_AUTO_TEST_CASE(flipped_payload_bytes_fail_the_checksum) {
  TmpDir tmp;
  const Dataset d = Synthetic(Task::kRegression, 200, 50, 5);
  const std::string good = CacheBytes(tmp, d);
  const Sections s = SectionsOf(200, 1000);
  const std::string cache = tmp("c.cache");
  for (uint64_t at : {s.offsets, s.offsets + 13, s.indices + 2, s.values + 2001, s.labels,
                      s.labels + 4 * 199 + 3}) {
    for (unsigned char bit : {0x01, 0x80}) {
      std::string b = good;
      b[at] = static_cast<char>(b[at] ^ bit);
      BOOST_TEST_CONTEXT("byte " << at << ", bit " << int{bit}) {
        ExpectCorrupt(cache, b, {"payload checksum mismatch"});
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(nonzero_padding_is_rejected) {
  TmpDir tmp;
  // 3 rows and 5 nonzeros: padding after indices, values and labels.
  auto x = CsrMatrix::FromArrays(3, 6, {0, 2, 2, 5}, {0, 5, 1, 2, 3}, {1, 2, 3, 4, 5});
  BOOST_REQUIRE(x.ok());
  const std::string good = CacheBytes(tmp, Dataset{std::move(x).value(), {1, 2, 3}, Task::kRegression, {}});
  const Sections s = SectionsOf(3, 5);
  for (uint64_t at : {s.indices + 20, s.values + 23, s.labels + 12}) {
    std::string b = good;
    b[at] = 1;
    ExpectCorrupt(tmp("c.cache"), b, {"nonzero padding"});
  }
}

BOOST_AUTO_TEST_CASE(bad_magic_version_endianness_and_header_checksum) {
  TmpDir tmp;
  const std::string good = CacheBytes(tmp, Synthetic(Task::kRegression, 20, 10, 3));
  const std::string cache = tmp("c.cache");
  {
    std::string b = good;
    b[3] = 'X';
    ExpectCorrupt(cache, b, {"bad magic"});
  }
  {
    std::string b = good;
    Put<uint32_t>(b, kVersionAt, 7);
    ExpectCorrupt(cache, b, {"format version 7, expected 1"});
  }
  {
    std::string b = good;
    Put<uint32_t>(b, kEndianAt, 0x04030201u);  // as a big-endian writer would
    ExpectCorrupt(cache, b, {"endian marker"});
  }
  for (std::size_t at : {kRowsAt, kNnzAt + 7, kTaskAt, std::size_t{100}, kHeaderSumAt + 3}) {
    std::string b = good;
    b[at] = static_cast<char>(b[at] ^ 0x10);
    BOOST_TEST_CONTEXT("header byte " << at) { ExpectCorrupt(cache, b, {"header checksum mismatch"}); }
  }
  {
    std::string b = good;
    Put<uint32_t>(b, kTaskAt, 9);
    ResealHeader(b);
    ExpectCorrupt(cache, b, {"bad task 9"});
  }
}

BOOST_AUTO_TEST_CASE(truncated_files_are_rejected) {
  TmpDir tmp;
  const std::string good = CacheBytes(tmp, Synthetic(Task::kRegression, 100, 40, 6));
  const std::string cache = tmp("c.cache");
  // Inside the header.
  for (std::size_t n : {0, 1, 8, 64, 127}) {
    BOOST_TEST_CONTEXT("cut at " << n) {
      ExpectCorrupt(cache, good.substr(0, n),
                    {"truncated: file has " + std::to_string(n) + " bytes"});
    }
  }
  // After the header: the header still says how long the file must be.
  for (std::size_t n : {std::size_t{128}, std::size_t{129}, std::size_t{1000}, good.size() / 2,
                        good.size() - 8, good.size() - 1}) {
    BOOST_TEST_CONTEXT("cut at " << n) {
      ExpectCorrupt(cache, good.substr(0, n),
                    {"truncated: header says " + std::to_string(good.size()) + " bytes, file has " +
                     std::to_string(n)});
    }
  }
}

BOOST_AUTO_TEST_CASE(extended_files_are_rejected) {
  TmpDir tmp;
  const std::string good = CacheBytes(tmp, Synthetic(Task::kRegression, 100, 40, 6));
  for (std::size_t extra : {1, 7, 8, 4096}) {
    ExpectCorrupt(tmp("c.cache"), good + std::string(extra, '\0'),
                  {"trailing data: header says " + std::to_string(good.size()) + " bytes, file has " +
                   std::to_string(good.size() + extra)});
  }
}

BOOST_AUTO_TEST_CASE(absurd_header_sizes_fail_without_allocating) {
  TmpDir tmp;
  const std::string good = CacheBytes(tmp, Synthetic(Task::kRegression, 100, 40, 6));
  const std::string cache = tmp("c.cache");
  struct Case {
    std::size_t at;
    int64_t value;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {kNnzAt, int64_t{1} << 40, "truncated: header says"},  // 8 TB of arrays
      {kNnzAt, int64_t{1} << 62, "sizes overflow"},
      {kNnzAt, INT64_MAX, "sizes overflow"},
      {kNnzAt, -1, "bad nnz -1"},
      {kRowsAt, int64_t{1} << 61, "sizes overflow"},
      {kRowsAt, (int64_t{1} << 60) - 1, "truncated: header says"},
      {kRowsAt, -5, "bad rows -5"},
      {kColsAt, int64_t{1} << 33, "bad cols"},
      {kColsAt, -1, "bad cols"},
      {kRowsAt, 99, "trailing data"},  // one row fewer than stored
  };
  for (const Case& c : cases) {
    std::string b = good;
    Put<int64_t>(b, c.at, c.value);
    ResealHeader(b);
    BOOST_TEST_CONTEXT("field at " << c.at << " = " << c.value) {
      ExpectCorrupt(cache, b, {c.fragment});
    }
  }
}

BOOST_AUTO_TEST_CASE(consistent_files_with_invalid_contents_are_rejected) {
  TmpDir tmp;
  const Dataset d = Synthetic(Task::kClassification, 50, 40, 6);
  const std::string good = CacheBytes(tmp, d);
  const std::string cache = tmp("c.cache");
  const Sections s = SectionsOf(50, 300);
  {  // indices out of order in row 0
    std::string b = good;
    const uint32_t i0 = Get<uint32_t>(b, s.indices), i1 = Get<uint32_t>(b, s.indices + 4);
    Put<uint32_t>(b, s.indices, i1);
    Put<uint32_t>(b, s.indices + 4, i0);
    Reseal(b);
    ExpectCorrupt(cache, b, {"matrix: row 0", "not strictly increasing"});
  }
  {  // column index out of range
    std::string b = good;
    Put<uint32_t>(b, s.indices + 4 * 5, 40);
    Reseal(b);
    ExpectCorrupt(cache, b, {"matrix:", "out of range"});
  }
  {  // offsets that do not end at nnz
    std::string b = good;
    Put<int64_t>(b, s.offsets + 8 * 50, 299);
    Reseal(b);
    ExpectCorrupt(cache, b, {"matrix:", "offsets"});
  }
  {  // a classification label that is not +-1
    std::string b = good;
    Put<float>(b, s.labels + 4 * 3, 0.5f);
    Reseal(b);
    ExpectCorrupt(cache, b, {"label of row 3"});
  }
  {  // a non-finite value
    std::string b = good;
    Put<float>(b, s.values + 4 * 7, std::numeric_limits<float>::infinity());
    Reseal(b);
    ExpectCorrupt(cache, b, {"matrix:", "non-finite"});
  }
}

// ---------------------------------------------------------------------------
// Staleness, missing files, write errors.

BOOST_AUTO_TEST_CASE(stale_source_is_failed_precondition) {
  TmpDir tmp;
  const std::string src = tmp("src.svm");
  const std::string cache = tmp("src.cache");
  WriteBytes(src, kText);
  SetMtime(src, 1600000000, 123456789);
  auto source = StatSource(src);
  BOOST_REQUIRE(source.ok());
  BOOST_CHECK_EQUAL(source->path, src);
  BOOST_CHECK_EQUAL(source->size, static_cast<int64_t>(std::strlen(kText)));
  BOOST_CHECK_EQUAL(source->mtime_ns, int64_t{1600000000} * 1000000000 + 123456789);
  const Dataset d = Synthetic(Task::kRegression, 30, 10, 3);
  BOOST_REQUIRE(WriteCache(d, *source, cache).ok());

  auto fresh = ReadCache(cache, *StatSource(src));
  BOOST_REQUIRE_MESSAGE(fresh.ok(), fresh.status().ToString());
  ExpectEqual(*fresh, d);

  // Touched: same size, new mtime (even by one nanosecond).
  SetMtime(src, 1600000000, 123456790);
  ExpectError(ReadCache(cache, *StatSource(src)), absl::StatusCode::kFailedPrecondition,
              {cache + ": stale: source " + src + " changed", "mtime"});
  // Size changed, mtime restored.
  WriteBytes(src, std::string(kText) + "1 1:1\n");
  SetMtime(src, 1600000000, 123456789);
  ExpectError(ReadCache(cache, *StatSource(src)), absl::StatusCode::kFailedPrecondition,
              {"stale", "size " + std::to_string(std::strlen(kText))});
  // Without an expected source the cache is always fresh.
  BOOST_CHECK(ReadCache(cache).ok());
}

BOOST_AUTO_TEST_CASE(missing_files_are_not_found) {
  TmpDir tmp;
  ExpectError(ReadCache(tmp("none.cache")), absl::StatusCode::kNotFound, {tmp("none.cache")});
  ExpectError(StatSource(tmp("none.svm")), absl::StatusCode::kNotFound, {tmp("none.svm")});
  ExpectError(LoadWithCache(tmp("none.svm"), tmp("none.cache")), absl::StatusCode::kNotFound,
              {tmp("none.svm")});
}

BOOST_AUTO_TEST_CASE(given_label_classes_are_refused_as_a_cache_does_not_record_them) {
  TmpDir tmp;
  LibsvmOptions o;
  o.classes = {1, 2};
  ExpectError(LoadWithCache(tmp("none.svm"), tmp("none.cache"), o),
              absl::StatusCode::kInvalidArgument, {"does not record given label classes"});
}

BOOST_AUTO_TEST_CASE(write_errors_are_reported_and_leave_nothing_behind) {
  TmpDir tmp;
  Dataset d = Synthetic(Task::kRegression, 30, 10, 3);
  const absl::Status missing_dir = WriteCache(d, {}, tmp("no/such/dir.cache"));
  BOOST_CHECK(missing_dir.code() == absl::StatusCode::kNotFound);
  d.y.pop_back();
  const absl::Status bad_labels = WriteCache(d, {}, tmp("x.cache"));
  BOOST_CHECK(bad_labels.code() == absl::StatusCode::kInvalidArgument);
  BOOST_CHECK(!fs::exists(tmp("x.cache")));
  // Renaming onto a directory fails after the data was written.
  fs::create_directory(tmp("dir.cache"));
  fs::create_directory(tmp("dir.cache/child"));
  d.y.push_back(0);
  BOOST_CHECK(!WriteCache(d, {}, tmp("dir.cache")).ok());
  BOOST_CHECK(NoTempFiles(tmp));
}

// ---------------------------------------------------------------------------
// LoadWithCache.

BOOST_AUTO_TEST_CASE(load_with_cache_builds_uses_and_rebuilds) {
  TmpDir tmp;
  const std::string src = tmp("data.svm");
  const std::string cache = tmp("data.cache");
  WriteBytes(src, kText);
  auto direct = ReadLibsvm(src);
  BOOST_REQUIRE_MESSAGE(direct.ok(), direct.status().ToString());
  BOOST_REQUIRE_EQUAL(direct->x.rows(), 5);

  // Missing cache: parsed and written.
  auto first = LoadWithCache(src, cache);
  BOOST_REQUIRE_MESSAGE(first.ok(), first.status().ToString());
  ExpectEqual(*first, *direct);
  BOOST_REQUIRE(fs::exists(cache));
  auto cached = ReadCache(cache, *StatSource(src));
  BOOST_REQUIRE_MESSAGE(cached.ok(), cached.status().ToString());
  ExpectEqual(*cached, *direct);

  // Fresh cache: used, not rewritten, and nothing to say about it.
  const FileId id = IdOf(cache);
  std::string why = "not cleared";
  auto second = LoadWithCache(src, cache, {}, &why);
  BOOST_REQUIRE(second.ok());
  ExpectEqual(*second, *direct);
  BOOST_CHECK(IdOf(cache) == id);
  BOOST_CHECK_EQUAL(why, "");

  // Corrupt cache: rebuilt, and the result is the text's; the caller is
  // told why (the file and what was wrong).
  std::string b = ReadBytes(cache);
  b[b.size() - 5] ^= 0x40;
  WriteBytes(cache, b);
  BOOST_CHECK(ReadCache(cache).status().code() == absl::StatusCode::kDataLoss);
  auto third = LoadWithCache(src, cache, {}, &why);
  BOOST_REQUIRE_MESSAGE(third.ok(), third.status().ToString());
  ExpectEqual(*third, *direct);
  BOOST_CHECK(ReadCache(cache, *StatSource(src)).ok());
  BOOST_CHECK_EQUAL(why, cache + ": payload checksum mismatch");

  // Truncated to nothing: rebuilt.
  WriteBytes(cache, "");
  auto fourth = LoadWithCache(src, cache);
  BOOST_REQUIRE(fourth.ok());
  ExpectEqual(*fourth, *direct);
  BOOST_CHECK(ReadCache(cache, *StatSource(src)).ok());

  // Source edited: the new text wins.
  WriteBytes(src, std::string(kText) + "-1 5:2\n");
  auto edited = LoadWithCache(src, cache);
  BOOST_REQUIRE(edited.ok());
  BOOST_CHECK_EQUAL(edited->x.rows(), 6);
  BOOST_CHECK_EQUAL(edited->x.cols(), 5);
  ExpectEqual(*edited, *ReadLibsvm(src));
  BOOST_CHECK(NoTempFiles(tmp));
}

BOOST_AUTO_TEST_CASE(load_with_cache_rebuilds_when_options_change) {
  TmpDir tmp;
  const std::string src = tmp("data.svm");
  const std::string cache = tmp("data.cache");
  WriteBytes(src, kText);
  LibsvmOptions a;  // classification, two classes
  LibsvmOptions b;
  b.task = Task::kRegression;
  LibsvmOptions c;
  c.num_features = 10;
  LibsvmOptions e;
  e.binarize_threshold = 0.0;
  LibsvmOptions f;
  f.binarize_threshold = 0.5;
  for (const LibsvmOptions& o : {a, b, c, e, f, a, c}) {
    auto direct = ReadLibsvm(src, o);
    BOOST_REQUIRE(direct.ok());
    auto loaded = LoadWithCache(src, cache, o);
    BOOST_REQUIRE_MESSAGE(loaded.ok(), loaded.status().ToString());
    ExpectEqual(*loaded, *direct);
    // And again, now from the cache.
    const FileId id = IdOf(cache);
    auto again = LoadWithCache(src, cache, o);
    BOOST_REQUIRE(again.ok());
    ExpectEqual(*again, *direct);
    BOOST_CHECK(IdOf(cache) == id);
  }
  // The thread count is not part of the key.
  LibsvmOptions threads = c;
  threads.threads = 3;
  const FileId id = IdOf(cache);
  BOOST_CHECK(LoadWithCache(src, cache, threads).ok());
  BOOST_CHECK(IdOf(cache) == id);
}

BOOST_AUTO_TEST_CASE(load_with_cache_does_not_trust_caches_without_options) {
  TmpDir tmp;
  const std::string src = tmp("data.svm");
  const std::string cache = tmp("data.cache");
  WriteBytes(src, kText);
  // A cache with the right source identity but other data, written without
  // options: LoadWithCache must not return it.
  BOOST_REQUIRE(WriteCache(Synthetic(Task::kClassification, 9, 4, 2), *StatSource(src), cache).ok());
  auto loaded = LoadWithCache(src, cache);
  BOOST_REQUIRE(loaded.ok());
  ExpectEqual(*loaded, *ReadLibsvm(src));
}

BOOST_AUTO_TEST_CASE(load_with_cache_survives_an_unwritable_cache) {
  TmpDir tmp;
  const std::string src = tmp("data.svm");
  WriteBytes(src, kText);
  auto loaded = LoadWithCache(src, tmp("no/such/dir/data.cache"));
  BOOST_REQUIRE_MESSAGE(loaded.ok(), loaded.status().ToString());
  ExpectEqual(*loaded, *ReadLibsvm(src));
  // A parse error is still an error.
  WriteBytes(src, "1 1:x\n");
  BOOST_CHECK(LoadWithCache(src, tmp("bad.cache")).status().code() ==
              absl::StatusCode::kInvalidArgument);
  BOOST_CHECK(!fs::exists(tmp("bad.cache")));
}

// ---------------------------------------------------------------------------
// Checksum64.

BOOST_AUTO_TEST_CASE(checksum_matches_reference_xxh64) {
  // Values from the reference implementation (libxxhash 0.8.1, XXH64).
  BOOST_CHECK_EQUAL(Checksum64("", 0), 0xef46db3751d8e999ULL);
  BOOST_CHECK_EQUAL(Checksum64("a", 1), 0xd24ec4f1a98c6e5bULL);
  BOOST_CHECK_EQUAL(Checksum64("abc", 3), 0x44bc2cf5ad770999ULL);
  unsigned char seq[100];
  for (int i = 0; i < 100; ++i) seq[i] = static_cast<unsigned char>(i);
  BOOST_CHECK_EQUAL(Checksum64(seq, 100), 0x6ac1e58032166597ULL);
  BOOST_CHECK_EQUAL(Checksum64(seq, 100, 12345), 0x028ba1ae2de4de27ULL);
  const std::vector<std::pair<std::size_t, uint64_t>> prefixes = {
      {4, 0xffced8604453cc1eULL},  {7, 0x14cc643f630c72d2ULL},  {8, 0x884a173614b81b8dULL},
      {15, 0xa948f5f0f6abac2dULL}, {31, 0xc346d2b59b4d8ee1ULL}, {32, 0xcbf59c5116ff32b4ULL},
      {33, 0x0c535d1acafb8eadULL}, {64, 0xf7c67301db6713f0ULL}};
  for (const auto& [n, h] : prefixes) {
    BOOST_TEST_CONTEXT("length " << n) { BOOST_CHECK_EQUAL(Checksum64(seq, n), h); }
  }
}

BOOST_AUTO_TEST_CASE(checksum_properties) {
  std::vector<unsigned char> buf(200);
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<unsigned char>(i * 37 + 11);
  const uint64_t h = Checksum64(buf.data(), buf.size());
  BOOST_CHECK_EQUAL(Checksum64(buf.data(), buf.size()), h);  // deterministic
  BOOST_CHECK_NE(Checksum64(buf.data(), buf.size(), 1), h);  // seeded
  // Every single-bit change is seen.
  for (std::size_t byte = 0; byte < buf.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      buf[byte] ^= static_cast<unsigned char>(1u << bit);
      BOOST_CHECK_NE(Checksum64(buf.data(), buf.size()), h);
      buf[byte] ^= static_cast<unsigned char>(1u << bit);
    }
  }
  // Lengths 0..17 take every tail path (8-, 4- and 1-byte steps): the last
  // byte matters, and zero bytes still change the length's hash.
  std::vector<uint64_t> seen;
  for (std::size_t n = 0; n <= 17; ++n) {
    std::vector<unsigned char> zeros(n, 0);
    const uint64_t z = Checksum64(zeros.data(), n);
    for (uint64_t s : seen) BOOST_CHECK_NE(s, z);
    seen.push_back(z);
    if (n > 0) {
      zeros[n - 1] = 1;
      BOOST_CHECK_NE(Checksum64(zeros.data(), n), z);
      zeros[0] ^= 0x80;
      BOOST_CHECK_NE(Checksum64(zeros.data(), n), z);
    }
  }
  // Independent of alignment.
  std::vector<unsigned char> shifted(buf.size() + 3);
  std::memcpy(shifted.data() + 3, buf.data(), buf.size());
  BOOST_CHECK_EQUAL(Checksum64(shifted.data() + 3, buf.size()), h);
}

}  // namespace dml
