#pragma once
// What the model file readers and writers share: whole-token number parsing
// and writing a buffer to a file with one error per failure.

#include <charconv>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <cstdio>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <memory>
#include <string>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace dml::internal {

/// The whole of `s` as a finite double.
inline bool ParseDouble(absl::string_view s, double& out) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && std::isfinite(out);
}

/// The whole of `s` as an integer.
inline bool ParseInt(absl::string_view s, int64_t& out) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

/// Writes `text` to `path` in place. Errors: Unavailable naming the path
/// and the system's reason (a full disk is an error, also at close).
inline absl::Status WriteTextFileInPlace(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return absl::UnavailableError(
        absl::StrCat(path, ": cannot open for writing: ", std::strerror(errno)));
  }
  const bool written =
      std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0;
  const int err = errno;
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed) {
    return absl::UnavailableError(
        absl::StrCat(path, ": write failed: ", std::strerror(written ? errno : err)));
  }
  return absl::OkStatus();
}

/// Writes `text` to `path`. A regular file (or none) in a writable
/// directory goes through `path`.tmp.<pid>, renamed over it once complete
/// (keeping its mode), so an interrupted write never leaves the old file
/// truncated and the new one half-written. Written in place instead: a
/// symbolic link (its target, as a user of /dev/stdout or of a link
/// expects), a device or FIFO (renaming would replace the node), and a file
/// whose directory this process cannot write. Errors as
/// WriteTextFileInPlace; a failed write removes the temporary file.
/// Where WriteTextFile writes before renaming: `path`.tmp.<pid>.
inline std::string TempPathFor(const std::string& path) {
  return path + ".tmp." + std::to_string(static_cast<long long>(::getpid()));
}

inline absl::Status WriteTextFile(const std::string& path, const std::string& text) {
  struct stat info {};
  const bool exists = ::lstat(path.c_str(), &info) == 0;
  if (exists && !S_ISREG(info.st_mode)) return WriteTextFileInPlace(path, text);
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, std::max<std::size_t>(slash, 1));
  if (::access(dir.c_str(), W_OK | X_OK) != 0) return WriteTextFileInPlace(path, text);
  const std::string tmp = TempPathFor(path);
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    return absl::UnavailableError(
        absl::StrCat(path, ": cannot open ", tmp, " for writing: ", std::strerror(errno)));
  }
  int err = 0;
  if (exists && ::fchmod(::fileno(f), info.st_mode & 07777) != 0) err = errno ? errno : EIO;
  if (err == 0 && (std::fwrite(text.data(), 1, text.size(), f) != text.size() ||
                   std::fflush(f) != 0 || ::fsync(::fileno(f)) != 0)) {
    err = errno ? errno : EIO;
  }
  if (std::fclose(f) != 0 && err == 0) err = errno ? errno : EIO;
  if (err == 0 && std::rename(tmp.c_str(), path.c_str()) != 0) err = errno ? errno : EIO;
  if (err != 0) {
    std::remove(tmp.c_str());
    return absl::UnavailableError(absl::StrCat(path, ": write failed: ", std::strerror(err)));
  }
  return absl::OkStatus();
}

}  // namespace dml::internal
