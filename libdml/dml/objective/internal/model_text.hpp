#pragma once
// What the model file readers and writers share: whole-token number parsing
// and writing a buffer to a file with one error per failure.

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
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

/// Writes `text` to `path` (in place). Errors: Unavailable naming the path.
inline absl::Status WriteTextFile(const std::string& path, const std::string& text) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) return absl::UnavailableError(absl::StrCat(path, ": cannot open for writing"));
  if (std::fwrite(text.data(), 1, text.size(), f.get()) != text.size() || std::fflush(f.get()) != 0) {
    return absl::UnavailableError(absl::StrCat(path, ": write failed"));
  }
  return absl::OkStatus();
}

}  // namespace dml::internal
