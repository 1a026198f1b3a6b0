// Binary dataset cache: writer, memory-mapped reader, and Checksum64 (XXH64).
//
// The reader trusts nothing in the file: it checks the header (magic,
// version, endianness, header checksum, field ranges), derives the array
// sizes from rows and nnz with overflow-checked arithmetic and requires the
// file to be exactly that long before touching the payload, then checks the
// payload checksum, the padding and the labels, and finally copies the
// arrays out of the mapping into CsrMatrix::FromArrays, which checks the
// matrix invariants. Every allocation is bounded by the real file size, so a
// bad header can never cause a huge allocation or an out-of-bounds read. The
// header is pread before anything is mapped, so stale and corrupt-header
// caches cost one small read. (As with any mapped file, truncating the cache
// in place while it is being read raises SIGBUS; WriteCache never does that,
// it renames a new file over the old one.)

#include "dml/data/cache.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "dml/util/status.hpp"

namespace dml {
namespace {

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && \
    __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
constexpr bool kLittleEndianHost = false;
#else
constexpr bool kLittleEndianHost = true;
#endif

// ---------------------------------------------------------------------------
// XXH64 (Yann Collet, https://github.com/Cyan4973/xxHash, BSD-2), written
// from its specification. Inputs are read as little-endian words on every
// host, so the value does not depend on the platform.

constexpr uint64_t kP1 = 11400714785074694791ULL;
constexpr uint64_t kP2 = 14029467366897019727ULL;
constexpr uint64_t kP3 = 1609587929392839161ULL;
constexpr uint64_t kP4 = 9650029242287828579ULL;
constexpr uint64_t kP5 = 2870177450012600261ULL;

inline uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

inline uint64_t Load64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  if constexpr (!kLittleEndianHost) v = __builtin_bswap64(v);
  return v;
}
inline uint64_t Load32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  if constexpr (!kLittleEndianHost) v = __builtin_bswap32(v);
  return v;
}

inline uint64_t Round(uint64_t acc, uint64_t input) {
  acc += input * kP2;
  acc = Rotl(acc, 31);
  return acc * kP1;
}
inline uint64_t MergeRound(uint64_t acc, uint64_t val) {
  acc ^= Round(0, val);
  return acc * kP1 + kP4;
}

// ---------------------------------------------------------------------------
// File layout.

constexpr char kMagic[8] = {'D', 'M', 'L', 'C', 'A', 'C', 'H', 'E'};
constexpr uint32_t kEndianMarker = 0x01020304u;
constexpr uint32_t kFlagHasOptions = 1u << 0;
constexpr uint32_t kFlagHasThreshold = 1u << 1;
/// Written by a writer that records Dataset::classes (every cache since they
/// are): a cache without it may have lost them and is stale for LoadWithCache.
constexpr uint32_t kFlagClassesRecorded = 1u << 2;
/// classes[] holds the label values that became -1 and +1.
constexpr uint32_t kFlagTwoClasses = 1u << 3;
constexpr uint32_t kKnownFlags =
    kFlagHasOptions | kFlagHasThreshold | kFlagClassesRecorded | kFlagTwoClasses;
constexpr uint32_t kTaskClassification = 0;
constexpr uint32_t kTaskRegression = 1;

struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t endian;
  int64_t rows;
  int64_t cols;
  int64_t nnz;
  uint32_t task;
  uint32_t flags;
  double threshold;
  int64_t num_features;
  int64_t source_size;
  int64_t source_mtime_ns;
  uint64_t payload_checksum;
  double classes[2];
  uint64_t reserved[2];
  uint64_t header_checksum;
};
static_assert(sizeof(FileHeader) == kCacheHeaderBytes, "cache header must be 128 bytes");
static_assert(offsetof(FileHeader, version) == 8 && offsetof(FileHeader, rows) == 16 &&
                  offsetof(FileHeader, nnz) == 32 && offsetof(FileHeader, task) == 40 &&
                  offsetof(FileHeader, threshold) == 48 &&
                  offsetof(FileHeader, source_size) == 64 &&
                  offsetof(FileHeader, payload_checksum) == 80 &&
                  offsetof(FileHeader, classes) == 88 &&
                  offsetof(FileHeader, header_checksum) == 120,
              "cache header layout is documented in cache.hpp");

uint64_t HeaderChecksum(const FileHeader& h) {
  return Checksum64(&h, offsetof(FileHeader, header_checksum));
}

// Byte positions of the arrays in the file.
struct Sections {
  uint64_t offsets = 0, indices = 0, values = 0, labels = 0, end = 0;
};

bool AddChecked(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_add_overflow(a, b, out); }
bool MulChecked(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }
bool Pad8(uint64_t n, uint64_t* out) {
  if (!AddChecked(n, 7, out)) return false;
  *out &= ~uint64_t{7};
  return true;
}

// False if the sizes overflow 64 bits. rows and nnz must be >= 0.
bool ComputeSections(int64_t rows, int64_t nnz, Sections* s) {
  const uint64_t r = static_cast<uint64_t>(rows), z = static_cast<uint64_t>(nnz);
  uint64_t offsets_bytes, inner_bytes, label_bytes, r1;
  if (!AddChecked(r, 1, &r1) || !MulChecked(r1, 8, &offsets_bytes) ||
      !MulChecked(z, 4, &inner_bytes) || !Pad8(inner_bytes, &inner_bytes) ||
      !MulChecked(r, 4, &label_bytes) || !Pad8(label_bytes, &label_bytes)) {
    return false;
  }
  s->offsets = kCacheHeaderBytes;
  return AddChecked(s->offsets, offsets_bytes, &s->indices) &&
         AddChecked(s->indices, inner_bytes, &s->values) &&
         AddChecked(s->values, inner_bytes, &s->labels) &&
         AddChecked(s->labels, label_bytes, &s->end);
}

uint64_t PayloadChecksum(const int64_t* offsets, std::size_t rows1, const uint32_t* indices,
                         const float* values, std::size_t nnz, const float* labels,
                         std::size_t rows) {
  uint64_t h = Checksum64(offsets, rows1 * sizeof(int64_t), 0);
  h = Checksum64(indices, nnz * sizeof(uint32_t), h);
  h = Checksum64(values, nnz * sizeof(float), h);
  return Checksum64(labels, rows * sizeof(float), h);
}

const char* TaskName(Task t) { return t == Task::kClassification ? "classification" : "regression"; }

std::string ThresholdText(bool has, double v) {
  return has ? absl::StrCat(v) : std::string("unset");
}

// ---------------------------------------------------------------------------
// POSIX helpers.

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Reset(); }
  int get() const { return fd_; }
  // Closes now, reporting close's errno (0 on success).
  int Close() {
    int err = 0;
    if (fd_ >= 0 && ::close(fd_) != 0) err = errno;
    fd_ = -1;
    return err;
  }

 private:
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd_;
};

class Mapping {
 public:
  Mapping(void* addr, std::size_t size) : addr_(addr), size_(size) {}
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (addr_ != MAP_FAILED && addr_ != nullptr) ::munmap(addr_, size_);
  }
  const unsigned char* data() const { return static_cast<const unsigned char*>(addr_); }

 private:
  void* addr_;
  std::size_t size_;
};

// A temporary file that is unlinked unless committed.
class TempFile {
 public:
  explicit TempFile(std::string path) : path_(std::move(path)) {}
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (!committed_) ::unlink(path_.c_str());
  }
  const std::string& path() const { return path_; }
  void Commit() { committed_ = true; }

 private:
  std::string path_;
  bool committed_ = false;
};

absl::Status ErrnoError(int err, const std::string& path, absl::string_view what) {
  return absl::ErrnoToStatus(err, absl::StrCat(path, ": ", what));
}

absl::Status WriteAll(int fd, const void* data, std::size_t bytes, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const std::size_t chunk = bytes < (std::size_t{1} << 30) ? bytes : (std::size_t{1} << 30);
    const ssize_t n = ::write(fd, p, chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, path, "write failed");
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status WritePadded(int fd, const void* data, std::size_t bytes, const std::string& path) {
  static constexpr char kZeros[8] = {};
  DML_RETURN_IF_ERROR(WriteAll(fd, data, bytes, path));
  const std::size_t pad = (8 - bytes % 8) % 8;
  return WriteAll(fd, kZeros, pad, path);
}

// Opens a new, unique file next to `cache_path` (O_EXCL, so never someone
// else's file).
absl::StatusOr<int> CreateTemp(const std::string& cache_path, std::string* tmp_path) {
  static std::atomic<uint64_t> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    *tmp_path = absl::StrCat(cache_path, ".tmp.", static_cast<int64_t>(::getpid()), ".",
                             counter.fetch_add(1, std::memory_order_relaxed));
    const int fd = ::open(tmp_path->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) return fd;
    if (errno != EEXIST) {
      return ErrnoError(errno, cache_path, absl::StrCat("cannot create ", *tmp_path));
    }
  }
  return absl::AlreadyExistsError(absl::StrCat(cache_path, ": no free temporary file name"));
}

// The parse options recorded with a cache (LoadWithCache only).
struct ParseKey {
  Task task;
  bool has_threshold;
  double threshold;
  int64_t num_features;
};

ParseKey KeyOf(const LibsvmOptions& o) {
  return {o.task, o.binarize_threshold.has_value(), o.binarize_threshold.value_or(0.0),
          o.num_features};
}

absl::Status WriteCacheImpl(const Dataset& data, const CacheSource& source,
                            const std::string& cache_path, const ParseKey* key) {
  if (!kLittleEndianHost) {
    return absl::UnimplementedError("the dataset cache is little-endian only");
  }
  const CsrMatrix& x = data.x;
  if (static_cast<int64_t>(data.y.size()) != x.rows()) {
    return absl::InvalidArgumentError(absl::StrCat("WriteCache: ", data.y.size(),
                                                   " labels for ", x.rows(), " rows"));
  }
  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kCacheFormatVersion;
  h.endian = kEndianMarker;
  h.rows = x.rows();
  h.cols = x.cols();
  h.nnz = x.nnz();
  h.task = data.task == Task::kClassification ? kTaskClassification : kTaskRegression;
  if (key != nullptr) {
    h.flags = kFlagHasOptions | (key->has_threshold ? kFlagHasThreshold : 0u);
    h.threshold = key->has_threshold ? key->threshold : 0.0;
    h.num_features = key->num_features;
  }
  h.flags |= kFlagClassesRecorded;
  if (data.classes.size() == 2) {
    h.flags |= kFlagTwoClasses;
    h.classes[0] = data.classes[0];
    h.classes[1] = data.classes[1];
  }
  h.source_size = source.size;
  h.source_mtime_ns = source.mtime_ns;
  h.payload_checksum =
      PayloadChecksum(x.offsets().data(), x.offsets().size(), x.indices().data(),
                      x.values().data(), x.indices().size(), data.y.data(), data.y.size());
  h.header_checksum = HeaderChecksum(h);

  // The cache replaces what is there by rename: only a regular file (or
  // none), never a device or a directory (as root, /dev/null would go).
  if (struct stat there {}; ::stat(cache_path.c_str(), &there) == 0 && !S_ISREG(there.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(cache_path, ": not a regular file; a cache is not written over it"));
  }
  std::string tmp_path;
  DML_ASSIGN_OR_RETURN(int raw_fd, CreateTemp(cache_path, &tmp_path));
  Fd fd(raw_fd);
  TempFile tmp(tmp_path);
  DML_RETURN_IF_ERROR(WriteAll(fd.get(), &h, sizeof h, tmp.path()));
  DML_RETURN_IF_ERROR(
      WritePadded(fd.get(), x.offsets().data(), x.offsets().size() * sizeof(int64_t), tmp.path()));
  DML_RETURN_IF_ERROR(
      WritePadded(fd.get(), x.indices().data(), x.indices().size() * sizeof(uint32_t), tmp.path()));
  DML_RETURN_IF_ERROR(
      WritePadded(fd.get(), x.values().data(), x.values().size() * sizeof(float), tmp.path()));
  DML_RETURN_IF_ERROR(
      WritePadded(fd.get(), data.y.data(), data.y.size() * sizeof(float), tmp.path()));
  // No fsync: a cache torn by a crash fails its checksum and is rebuilt.
  if (const int err = fd.Close(); err != 0) return ErrnoError(err, tmp.path(), "close failed");
  if (::rename(tmp.path().c_str(), cache_path.c_str()) != 0) {
    return ErrnoError(errno, cache_path, absl::StrCat("cannot rename ", tmp.path(), " to it"));
  }
  tmp.Commit();
  return absl::OkStatus();
}

absl::Status Corrupt(const std::string& path, absl::string_view what) {
  return absl::DataLossError(absl::StrCat(path, ": ", what));
}

absl::StatusOr<Dataset> ReadCacheImpl(const std::string& path, const CacheSource& expected,
                                      const ParseKey* key) {
  if (!kLittleEndianHost) {
    return absl::UnimplementedError("the dataset cache is little-endian only");
  }
  int raw_fd;
  do {
    raw_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (raw_fd < 0 && errno == EINTR);
  if (raw_fd < 0) return ErrnoError(errno, path, "cannot open cache");
  Fd fd(raw_fd);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoError(errno, path, "cannot stat cache");
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": not a regular file"));
  }
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < kCacheHeaderBytes) {
    return Corrupt(path, absl::StrCat("truncated: file has ", file_size,
                                      " bytes, less than the ", kCacheHeaderBytes,
                                      "-byte header"));
  }
  if (file_size > std::numeric_limits<std::size_t>::max()) {
    return Corrupt(path, absl::StrCat("file of ", file_size, " bytes cannot be mapped"));
  }

  // The header is read on its own, so that a corrupt or stale cache is
  // refused without mapping (or reading) its payload.
  FileHeader h;
  std::size_t got = 0;
  while (got < sizeof h) {
    const ssize_t n = ::pread(fd.get(), reinterpret_cast<char*>(&h) + got, sizeof h - got,
                              static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(errno, path, "read failed");
    if (n == 0) return Corrupt(path, "truncated while reading the header");
    got += static_cast<std::size_t>(n);
  }
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) {
    return Corrupt(path, absl::StrCat("bad magic \"",
                                      absl::CHexEscape(absl::string_view(h.magic, sizeof h.magic)),
                                      "\", expected \"DMLCACHE\""));
  }
  if (h.version != kCacheFormatVersion) {
    return Corrupt(path, absl::StrCat("format version ", h.version, ", expected ",
                                      kCacheFormatVersion));
  }
  if (h.endian != kEndianMarker) {
    return Corrupt(path, absl::StrCat("bad endian marker 0x", absl::Hex(h.endian, absl::kZeroPad8),
                                      ", expected 0x", absl::Hex(kEndianMarker, absl::kZeroPad8)));
  }
  if (HeaderChecksum(h) != h.header_checksum) return Corrupt(path, "header checksum mismatch");
  if (h.rows < 0) return Corrupt(path, absl::StrCat("bad rows ", h.rows));
  if (h.cols < 0 || h.cols > int64_t{std::numeric_limits<uint32_t>::max()} + 1) {
    return Corrupt(path, absl::StrCat("bad cols ", h.cols));
  }
  if (h.nnz < 0) return Corrupt(path, absl::StrCat("bad nnz ", h.nnz));
  if (h.task != kTaskClassification && h.task != kTaskRegression) {
    return Corrupt(path, absl::StrCat("bad task ", h.task));
  }
  if ((h.flags & ~kKnownFlags) != 0) return Corrupt(path, absl::StrCat("bad flags ", h.flags));
  if ((h.flags & kFlagTwoClasses) != 0 &&
      (h.task != kTaskClassification || !std::isfinite(h.classes[0]) ||
       !std::isfinite(h.classes[1]) || h.classes[0] == h.classes[1])) {
    return Corrupt(path, absl::StrCat("bad classes ", h.classes[0], " and ", h.classes[1]));
  }
  Sections sec;
  if (!ComputeSections(h.rows, h.nnz, &sec)) {
    return Corrupt(path, absl::StrCat("sizes overflow: rows ", h.rows, ", nnz ", h.nnz));
  }
  if (sec.end > file_size) {
    return Corrupt(path, absl::StrCat("truncated: header says ", sec.end, " bytes, file has ",
                                      file_size));
  }
  if (sec.end < file_size) {
    return Corrupt(path, absl::StrCat("trailing data: header says ", sec.end,
                                      " bytes, file has ", file_size));
  }

  // Staleness: cheap, so before hashing the payload.
  if (!expected.path.empty() &&
      (h.source_size != expected.size || h.source_mtime_ns != expected.mtime_ns)) {
    std::string what;
    if (h.source_size != expected.size) {
      absl::StrAppend(&what, "size ", h.source_size, " -> ", expected.size);
    }
    if (h.source_mtime_ns != expected.mtime_ns) {
      absl::StrAppend(&what, what.empty() ? "" : ", ", "mtime_ns ", h.source_mtime_ns, " -> ",
                      expected.mtime_ns);
    }
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": stale: source ", expected.path, " changed (", what, ")"));
  }
  const Task task = h.task == kTaskClassification ? Task::kClassification : Task::kRegression;
  if (key != nullptr) {
    const bool has_options = (h.flags & kFlagHasOptions) != 0;
    const bool has_threshold = (h.flags & kFlagHasThreshold) != 0;
    std::string what;
    if (!has_options) {
      what = "the cache records no parse options";
    } else if ((h.flags & kFlagClassesRecorded) == 0) {
      what = "the cache records no label classes (written by an older libdml)";
    } else if (task != key->task) {
      what = absl::StrCat("task ", TaskName(key->task), ", cache has ", TaskName(task));
    } else if (has_threshold != key->has_threshold ||
               (has_threshold && std::memcmp(&h.threshold, &key->threshold, sizeof(double)) != 0)) {
      what = absl::StrCat("binarize_threshold ", ThresholdText(key->has_threshold, key->threshold),
                          ", cache has ", ThresholdText(has_threshold, h.threshold));
    } else if (h.num_features != key->num_features) {
      what = absl::StrCat("num_features ", key->num_features, ", cache has ", h.num_features);
    }
    if (!what.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": stale: parse options changed (", what, ")"));
    }
  }

  // The payload is read in full (checksum, then copies), so populate the
  // mapping up front rather than page by page.
  const std::size_t map_size = static_cast<std::size_t>(file_size);
  int map_flags = MAP_PRIVATE;
#if defined(MAP_POPULATE)
  map_flags |= MAP_POPULATE;
#endif
  void* addr = ::mmap(nullptr, map_size, PROT_READ, map_flags, fd.get(), 0);
  if (addr == MAP_FAILED) return ErrnoError(errno, path, "cannot map cache");
  Mapping map(addr, map_size);
  fd.Close();  // the mapping keeps the file alive
  const unsigned char* base = map.data();
  // The header was checked as read; the mapping must show the same one (a
  // writer replaces caches by rename, but someone may write in place).
  if (std::memcmp(base, &h, sizeof h) != 0) return Corrupt(path, "header changed while reading");

  const std::size_t rows = static_cast<std::size_t>(h.rows);
  const std::size_t nnz = static_cast<std::size_t>(h.nnz);
  // The mapping is page-aligned and every section starts on 8 bytes, so the
  // typed pointers below are aligned.
  const auto* offsets = reinterpret_cast<const int64_t*>(base + sec.offsets);
  const auto* indices = reinterpret_cast<const uint32_t*>(base + sec.indices);
  const auto* values = reinterpret_cast<const float*>(base + sec.values);
  const auto* labels = reinterpret_cast<const float*>(base + sec.labels);
  if (PayloadChecksum(offsets, rows + 1, indices, values, nnz, labels, rows) !=
      h.payload_checksum) {
    return Corrupt(path, "payload checksum mismatch");
  }
  const auto padding_is_zero = [&](uint64_t begin, uint64_t end) {
    for (uint64_t i = begin; i < end; ++i) {
      if (base[i] != 0) return false;
    }
    return true;
  };
  if (!padding_is_zero(sec.indices + nnz * 4, sec.values) ||
      !padding_is_zero(sec.values + nnz * 4, sec.labels) ||
      !padding_is_zero(sec.labels + rows * 4, sec.end)) {
    return Corrupt(path, "nonzero padding");
  }
  for (std::size_t i = 0; i < rows; ++i) {
    const float v = labels[i];
    if (!std::isfinite(v) || (task == Task::kClassification && v != 1.0f && v != -1.0f)) {
      return Corrupt(path, absl::StrCat("label of row ", i, " is ", v,
                                        task == Task::kClassification ? ", expected -1 or +1"
                                                                      : ", expected a finite value"));
    }
  }

  auto x = CsrMatrix::FromArrays(h.rows, h.cols, std::vector<int64_t>(offsets, offsets + rows + 1),
                                 std::vector<uint32_t>(indices, indices + nnz),
                                 std::vector<float>(values, values + nnz));
  if (!x.ok()) return Corrupt(path, absl::StrCat("matrix: ", x.status().message()));
  Dataset out;
  out.x = std::move(x).value();
  out.y.assign(labels, labels + rows);
  out.task = task;
  if ((h.flags & kFlagTwoClasses) != 0) out.classes = {h.classes[0], h.classes[1]};
  return out;
}

}  // namespace

uint64_t Checksum64(const void* data, std::size_t bytes, uint64_t seed) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  const unsigned char* const end = p + bytes;
  uint64_t h;
  if (bytes >= 32) {
    // Four independent lanes of 8 bytes each keep the multipliers busy.
    uint64_t v1 = seed + kP1 + kP2, v2 = seed + kP2, v3 = seed, v4 = seed - kP1;
    const unsigned char* const limit = end - 32;
    do {
      v1 = Round(v1, Load64(p));
      v2 = Round(v2, Load64(p + 8));
      v3 = Round(v3, Load64(p + 16));
      v4 = Round(v4, Load64(p + 24));
      p += 32;
    } while (p <= limit);
    h = Rotl(v1, 1) + Rotl(v2, 7) + Rotl(v3, 12) + Rotl(v4, 18);
    h = MergeRound(h, v1);
    h = MergeRound(h, v2);
    h = MergeRound(h, v3);
    h = MergeRound(h, v4);
  } else {
    h = seed + kP5;
  }
  h += static_cast<uint64_t>(bytes);
  for (; p + 8 <= end; p += 8) {
    h ^= Round(0, Load64(p));
    h = Rotl(h, 27) * kP1 + kP4;
  }
  if (p + 4 <= end) {
    h ^= Load32(p) * kP1;
    h = Rotl(h, 23) * kP2 + kP3;
    p += 4;
  }
  for (; p < end; ++p) {
    h ^= (*p) * kP5;
    h = Rotl(h, 11) * kP1;
  }
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

absl::StatusOr<CacheSource> StatSource(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoError(errno, path, "cannot stat");
  CacheSource s;
  s.path = path;
  s.size = static_cast<int64_t>(st.st_size);
  s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 +
               static_cast<int64_t>(st.st_mtim.tv_nsec);
  return s;
}

absl::Status WriteCache(const Dataset& data, const CacheSource& source,
                        const std::string& cache_path) {
  return WriteCacheImpl(data, source, cache_path, nullptr);
}

absl::StatusOr<Dataset> ReadCache(const std::string& cache_path, const CacheSource& expected) {
  return ReadCacheImpl(cache_path, expected, nullptr);
}

absl::StatusOr<Dataset> LoadWithCache(const std::string& path, const std::string& cache_path,
                                      const LibsvmOptions& options, std::string* rebuilt) {
  if (rebuilt != nullptr) rebuilt->clear();
  if (!options.classes.empty()) {
    return absl::InvalidArgumentError(
        "LoadWithCache: a cache does not record given label classes (LibsvmOptions::classes); "
        "read such a file with ReadLibsvm");
  }
  // Stat before parsing: if the text changes while it is parsed, the cache
  // records the old identity and the next load rebuilds it.
  DML_ASSIGN_OR_RETURN(CacheSource source, StatSource(path));
  const ParseKey key = KeyOf(options);
  auto cached = ReadCacheImpl(cache_path, source, &key);
  if (cached.ok()) return cached;
  if (rebuilt != nullptr) *rebuilt = std::string(cached.status().message());
  DML_ASSIGN_OR_RETURN(Dataset data, ReadLibsvm(path, options));
  // The cache only saves time: failing to write it must not fail the load.
  (void)WriteCacheImpl(data, source, cache_path, &key);
  return data;
}

}  // namespace dml
