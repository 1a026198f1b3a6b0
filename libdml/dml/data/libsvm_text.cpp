// The LIBSVM reader's error-only slow paths of tokenizing and number parsing
// (see internal/libsvm_text.hpp): quoting a token for a message and telling
// an out-of-range number's overflow from its underflow.

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "dml/data/internal/libsvm_text.hpp"

namespace dml::internal::libsvm {

std::string Quote(const char* p, const char* e) {
  constexpr std::ptrdiff_t kMax = 40;
  const char* end = TokenEnd(p, e);
  const bool cut = end - p > kMax;
  absl::string_view tok(p, static_cast<std::size_t>(cut ? kMax : end - p));
  return absl::StrCat("\"", absl::CHexEscape(tok), cut ? "...\"" : "\"");
}

std::string Digits(const char* p, const char* e) {
  const char* q = p;
  while (q < e && IsDigit(*q)) ++q;
  constexpr std::ptrdiff_t kMax = 40;
  if (q - p > kMax) return absl::StrCat(absl::string_view(p, kMax), "...");
  return std::string(p, static_cast<std::size_t>(q - p));
}

// Its decimal exponent is computed from the position of the first
// significant digit and the (saturated) exponent part; no locale-dependent
// strtod.
bool TooLarge(const char* p, const char* e) {
  if (p < e && (*p == '-' || *p == '+')) ++p;
  int64_t int_digits = 0;  // significant digits before the point
  int64_t frac_zeros = 0;  // zeros after the point before the first significant digit
  bool seen = false;
  for (; p < e && IsDigit(*p); ++p) {
    seen = seen || *p != '0';
    int_digits += seen;
  }
  if (p < e && *p == '.') {
    for (++p; p < e && IsDigit(*p); ++p) {
      if (seen) continue;
      if (*p == '0') {
        ++frac_zeros;
      } else {
        seen = true;
      }
    }
  }
  int64_t exp = 0;
  if (p < e && (*p == 'e' || *p == 'E')) {
    ++p;
    bool neg = false;
    if (p < e && (*p == '-' || *p == '+')) neg = *p++ == '-';
    for (; p < e && IsDigit(*p); ++p) exp = std::min<int64_t>(exp * 10 + (*p - '0'), int64_t{1} << 40);
    if (neg) exp = -exp;
  }
  const int64_t magnitude = int_digits > 0 ? int_digits - 1 + exp : -frac_zeros - 1 + exp;
  return magnitude >= 0;
}

}  // namespace dml::internal::libsvm
