// Checkpoint and model files: one Envelope each (dml/net/payload_codec.hpp),
// written to a temporary name, synced and renamed over the old file, so a
// crash mid-write leaves the previous one.
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
  // Only a regular file (or none) is replaced by a renamed copy: renaming
  // over a device or a FIFO (-o /dev/null, run as root) would replace the
  // node itself. Those are written in place; a directory is an error.
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
    if (S_ISDIR(info.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory"));
    }
    return dml::internal::WriteTextFileInPlace(path, *bytes);
  }
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    return absl::UnavailableError(absl::StrCat(path, ": cannot write: ", std::strerror(errno)));
  }
  const bool ok = std::fwrite(bytes->data(), 1, bytes->size(), f) == bytes->size() &&
                  std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  std::fclose(f);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::UnavailableError(absl::StrCat(path, ": write failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
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
