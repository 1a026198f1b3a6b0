#pragma once
// Command-line flags for the samples: `--flag value`, `--flag=value`,
// boolean switches, positional arguments, and numbers that must parse whole.
// Header-only; errors are returned as one line naming the flag.

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <map>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace dml::samples {

/// Parsed flags: values by flag name (switches map to "1"), then positionals.
struct Args {
  std::map<std::string, std::string> values;
  std::vector<std::string> positional;
};

/// Parses argv. `value_flags` take a value; `switches` maps each switch as
/// typed to the name it is stored under ("-q" -> "--quiet"). Errors: an
/// unknown flag or a missing value, in `error`.
template <std::size_t N>
bool ParseArgs(int argc, char** argv, const char* const (&value_flags)[N],
               const std::map<std::string, std::string>& switches, Args& args, std::string& error) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (auto sw = switches.find(a); sw != switches.end()) {
      args.values[sw->second] = "1";
      continue;
    }
    if (a.size() > 1 && a[0] == '-') {
      std::string value;
      bool inline_value = false;
      if (auto eq = a.find('='); eq != std::string::npos && a.rfind("--", 0) == 0) {
        value = a.substr(eq + 1);
        a = a.substr(0, eq);
        inline_value = true;
      }
      bool known = false;
      for (const char* f : value_flags) known |= a == f;
      if (!known) {
        error = "unknown option " + a + " (see --help)";
        return false;
      }
      if (!inline_value) {
        if (i + 1 >= argc) {
          error = "option " + a + " needs a value";
          return false;
        }
        value = argv[++i];
      }
      args.values[a] = value;
    } else {
      args.positional.push_back(a);
    }
  }
  return true;
}

/// The whole of `s` as a number (finite, for floating point).
template <typename T>
bool ParseNumber(const std::string& s, T& out) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(out)) return false;
  }
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

/// Looks up a numeric flag (any of `names`); false + error if it does not parse.
template <typename T>
bool Number(const Args& args, std::initializer_list<const char*> names, T& out, std::string& error) {
  for (const char* n : names) {
    auto it = args.values.find(n);
    if (it == args.values.end()) continue;
    if (!ParseNumber(it->second, out)) {
      error = std::string(n) + (std::is_integral_v<T> ? ": expected an integer, got \""
                                                        : ": expected a number, got \"") +
              it->second + "\"";
      return false;
    }
  }
  return true;
}

/// A flag's value, or `def`.
inline std::string Get(const Args& args, const char* name, const std::string& def = "") {
  auto it = args.values.find(name);
  return it == args.values.end() ? def : it->second;
}

// Where `path` is, for comparing paths: its real path where it exists,
// else its directory's real path and its name ("" where neither resolves).
inline std::string Canonical(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) != nullptr) return buf;
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, std::max<std::size_t>(slash, 1));
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (::realpath(dir.c_str(), buf) == nullptr) return "";
  return std::string(buf) + "/" + name;
}

/// Whether paths `a` and `b` name the same file (the same inode where both
/// exist, else the same resolved path).
inline bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0) {
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  }
  const std::string ca = Canonical(a);
  return a == b || (!ca.empty() && ca == Canonical(b));
}

/// Whether `path` is the file standard output goes to (/dev/stdout, or the
/// file or pipe behind `> FILE` / `|`), other than a device: the program's
/// own lines there would be interleaved with, or overwrite, what is written
/// to `path`. A device (a terminal, /dev/null) has no offset to clash over.
inline bool IsStandardOutput(const std::string& path) {
  struct stat path_info {}, out_info {};
  return ::stat(path.c_str(), &path_info) == 0 && ::fstat(STDOUT_FILENO, &out_info) == 0 &&
         path_info.st_dev == out_info.st_dev && path_info.st_ino == out_info.st_ino &&
         !S_ISCHR(out_info.st_mode);
}

/// Whether writing `path` would replace a file's contents: it is a regular
/// file or does not exist yet (a device or a terminal is written through).
inline bool WouldOverwrite(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) != 0 || S_ISREG(info.st_mode);
}

}  // namespace dml::samples
