#pragma once
// Binary cache of a parsed dataset, for fast reloads of the same text file.
//
// Layout, little-endian: a 128-byte header, then four arrays, each starting
// on an 8-byte boundary and zero-padded to the next one.
//
//   offset  field
//        0  magic "DMLCACHE" (8 bytes)
//        8  uint32 format version (kCacheFormatVersion)
//       12  uint32 endianness marker 0x01020304
//       16  int64 rows, 24 int64 cols, 32 int64 nnz
//       40  uint32 task (0 classification, 1 regression)
//       44  uint32 flags (bit 0: parse options recorded, bit 1: threshold set,
//           bit 2: label classes recorded, bit 3: two classes at 88)
//       48  float64 binarize_threshold, 56 int64 num_features (parse options)
//       64  int64 source size, 72 int64 source mtime (ns since the epoch)
//       80  uint64 payload checksum
//       88  float64 the label value that became -1, 96 the one that became +1
//           (Dataset::classes; zero without bit 3)
//      104  16 reserved bytes (zero)
//      120  uint64 header checksum: Checksum64 of bytes [0, 120)
//      128  offsets (int64, rows + 1), indices (uint32, nnz),
//           values (float32, nnz), labels (float32, rows)
//
// The payload checksum chains Checksum64 over the four arrays' bytes (without
// padding), each call seeded with the previous result starting from 0; the
// padding must be zero. The file size must be exactly what rows and nnz imply.
// The file is memory-mapped for reading and written to a temporary file in
// the same directory that is then renamed over the cache, so readers never
// see a half-written cache (a crash may leave a `<cache>.tmp.*` file behind).
//
// Errors: a cache whose magic, version, sizes or checksum are wrong is
// DataLoss naming the file and the field; one whose source changed since it
// was written is FailedPrecondition ("stale"). Neither is ever half-loaded.
// Staleness is judged by size and modification time, so a same-size rewrite
// within the file system's timestamp granularity goes unnoticed.
// Thread-safety: the functions are reentrant; concurrent writers of the same
// cache path each rename a complete file, and the last one wins.

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "dml/data/libsvm.hpp"
#include "dml/data/sparse.hpp"

namespace dml {

/// Format version written at offset 8; a cache with another one is DataLoss.
inline constexpr uint32_t kCacheFormatVersion = 1;
/// Size of the fixed header; the arrays start here.
inline constexpr std::size_t kCacheHeaderBytes = 128;

/// Identity of the text file a cache was made from; an empty path means
/// "no source" (always fresh).
struct CacheSource {
  std::string path;      ///< The text file; empty = no source.
  int64_t size = 0;      ///< Its size in bytes.
  int64_t mtime_ns = 0;  ///< Its modification time, ns since the epoch.
};

/// Stats `path` for WriteCache/ReadCache's staleness check. Errors: the
/// stat's errno as a status (NotFound for a missing file).
absl::StatusOr<CacheSource> StatSource(const std::string& path);

/// Writes `data` with `source`'s size and mtime (atomically, see above).
/// Records no parse options, so LoadWithCache treats the result as stale.
/// Errors: InvalidArgument if labels and rows disagree; the errno of a
/// failed create, write or rename; Unimplemented on a big-endian host.
absl::Status WriteCache(const Dataset& data, const CacheSource& source,
                        const std::string& cache_path);

/// Loads a cache; if `expected` has a path, the cache must have been written
/// from a file of the same size and mtime. Errors: NotFound (no cache),
/// DataLoss (corrupt), FailedPrecondition (stale), Unimplemented on a
/// big-endian host.
absl::StatusOr<Dataset> ReadCache(const std::string& cache_path,
                                  const CacheSource& expected = {});

/// Loads `path` through a cache at `cache_path`: a fresh, valid cache is
/// used; a missing, stale or corrupt one is rebuilt from the text file. The
/// cache records the options that change the result (task,
/// binarize_threshold, num_features) and a cache made with other options is
/// stale. Failing to write the cache does not fail the load. `rebuilt`
/// (optional) receives why the cache was not used (ReadCache's error: no
/// cache, stale, or corrupt naming the file and field), or "" when it was.
/// Errors: those of StatSource(path) and ReadLibsvm; InvalidArgument for
/// options.classes (not recorded in a cache).
absl::StatusOr<Dataset> LoadWithCache(const std::string& path, const std::string& cache_path,
                                      const LibsvmOptions& options = {},
                                      std::string* rebuilt = nullptr);

/// 64-bit checksum used by the cache (and by net/ for checkpoint and model
/// files, wire.capnp fileDigest): XXH64
/// (xxHash's 64-bit hash, identical output on every platform), about as fast
/// as memory can be read. Not cryptographic.
uint64_t Checksum64(const void* data, std::size_t bytes, uint64_t seed = 0);

}  // namespace dml
