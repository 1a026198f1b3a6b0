#pragma once
// Binary cache of a parsed dataset, for fast reloads of the same text file.
//
// Layout (little-endian, fixed header then 8-byte aligned arrays): magic
// "DMLCACHE", format version, rows, cols, nnz, task, the source file's size
// and modification time, a 64-bit checksum of everything after the header,
// then offsets (int64), indices (uint32), values (float32), labels (float32).
// The file is memory-mapped for reading.
//
// Errors: a cache whose magic, version, sizes or checksum are wrong is
// DataLoss naming the file and the field; one whose source changed since it
// was written is FailedPrecondition ("stale"). Neither is ever half-loaded.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "dml/data/libsvm.hpp"
#include "dml/data/sparse.hpp"

namespace dml {

inline constexpr uint32_t kCacheFormatVersion = 1;

/// Identity of the text file a cache was made from; an empty path means
/// "no source" (always fresh).
struct CacheSource {
  std::string path;
  int64_t size = 0;
  int64_t mtime_ns = 0;
};

/// Stats `path` for WriteCache/ReadCache's staleness check.
absl::StatusOr<CacheSource> StatSource(const std::string& path);

absl::Status WriteCache(const Dataset& data, const CacheSource& source,
                        const std::string& cache_path);

/// Loads a cache; if `expected` has a path, the cache must have been written
/// from a file of the same size and mtime.
absl::StatusOr<Dataset> ReadCache(const std::string& cache_path,
                                  const CacheSource& expected = {});

/// Loads `path` through a cache at `cache_path`: a fresh, valid cache is
/// used; a missing, stale or corrupt one is rebuilt from the text file.
absl::StatusOr<Dataset> LoadWithCache(const std::string& path, const std::string& cache_path,
                                      const LibsvmOptions& options = {});

/// 64-bit checksum used by the cache (and by net/ for checkpoints).
uint64_t Checksum64(const void* data, std::size_t bytes, uint64_t seed = 0);

}  // namespace dml
