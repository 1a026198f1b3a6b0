// Checkpoint and model files: one Envelope each (dml/net/payload_codec.hpp),
// written to a temporary name, synced and renamed over the old file, so a
// crash mid-write leaves the previous one (dml::internal::WriteTextFile).
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "dml/net/payload_codec.hpp"
#include "dml/objective/internal/model_text.hpp"

namespace dml::net {
namespace {

absl::Status WriteAtomically(const std::string& path, const absl::StatusOr<std::string>& bytes) {
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", bytes.status().message()));
  }
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory"));
  }
  // The text model files' writer: a temporary renamed over the file, or in
  // place for a device, a FIFO or a symbolic link (see WriteTextFile).
  return dml::internal::WriteTextFile(path, *bytes);
}

template <class T>
absl::StatusOr<T> ReadEnvelopeFile(const std::string& path, const char* what) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open ", what, ": ",
                                            std::strerror(errno)));
  }
  struct stat info {};
  if (::fstat(::fileno(f), &info) == 0 && S_ISDIR(info.st_mode)) {
    std::fclose(f);
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, not a ", what));
  }
  std::string bytes;
  char buf[1 << 16];
  std::size_t got;
  while ((got = std::fread(buf, 1, sizeof(buf), f)) > 0) bytes.append(buf, got);
  std::fclose(f);
  T out;
  if (auto s = FromFileBytes(bytes, &out); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
  }
  return out;
}

}  // namespace

absl::Status WriteCheckpointFile(const std::string& path, const job_checkpoint& c) {
  return WriteAtomically(path, ToFileBytes(c));
}

absl::StatusOr<job_checkpoint> ReadCheckpointFile(const std::string& path) {
  return ReadEnvelopeFile<job_checkpoint>(path, "checkpoint");
}

absl::Status WriteModelFile(const std::string& path, const model_file& m) {
  return WriteAtomically(path, ToFileBytes(m));
}

absl::StatusOr<model_file> ReadModelFile(const std::string& path) {
  return ReadEnvelopeFile<model_file>(path, "model file");
}

}  // namespace dml::net
