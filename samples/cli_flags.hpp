#pragma once
// Command-line flags for the samples: `--flag value`, `--flag=value`,
// boolean switches, positional arguments, and numbers that must parse whole.
// Header-only; errors are returned as one line naming the flag.

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
      error = std::string(n) + ": expected a number, got \"" + it->second + "\"";
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

}  // namespace dml::samples
