#pragma once
// The LIBSVM reader's tokenizer and number parsing: character classes, token
// boundaries, tokens quoted for error messages, and the float parser
// (Clinger's exact fast path, then std::from_chars). What sits on the
// per-token path is inline here; the error-only slow paths are in
// libsvm_text.cpp. Internal: included by dml/data/libsvm*.cpp only.

#include <algorithm>
#include <cfloat>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>

namespace dml::internal::libsvm {

// ---------------------------------------------------------------------------
// Character classes.

enum : uint8_t { kOther = 0, kSpace = 1, kHash = 2, kDigit = 4 };

struct CharTable {
  uint8_t c[256];
  constexpr CharTable() : c() {
    c[static_cast<uint8_t>(' ')] = kSpace;
    c[static_cast<uint8_t>('\t')] = kSpace;
    c[static_cast<uint8_t>('\r')] = kSpace;
    c[static_cast<uint8_t>('\v')] = kSpace;
    c[static_cast<uint8_t>('\f')] = kSpace;
    c[static_cast<uint8_t>('#')] = kHash;
    for (int d = '0'; d <= '9'; ++d) c[d] = kDigit;
  }
};
inline constexpr CharTable kChars;

inline uint8_t Class(char ch) { return kChars.c[static_cast<uint8_t>(ch)]; }
inline bool IsDigit(char ch) { return Class(ch) == kDigit; }
// A token ends at whitespace, at a comment or at the end of the line.
inline bool EndsToken(const char* p, const char* e) {
  return p == e || (Class(*p) & (kSpace | kHash)) != 0;
}
inline const char* SkipSpace(const char* p, const char* e) {
  while (p < e && Class(*p) == kSpace) ++p;
  return p;
}
inline const char* TokenEnd(const char* p, const char* e) {
  while (!EndsToken(p, e)) ++p;
  return p;
}

// The token at p quoted for an error message: escaped, and cut if long.
std::string Quote(const char* p, const char* e);

// The digits of an index token, cut if long (the token is known to start with
// `digits` decimal digits).
std::string Digits(const char* p, const char* e);

// ---------------------------------------------------------------------------
// Number parsing.

enum class FloatResult { kOk, kSyntax, kNonFinite, kOutOfRange };

// For a decimal number that from_chars found out of range: whether it is too
// large (rather than too small).
bool TooLarge(const char* p, const char* e);

// Clinger's fast path for the plain decimals that fill most files ("1",
// "-0.320755"): when the digits, read as an integer m, and 10^f (f digits
// after the point) are both exact in T, m / 10^f in T is one correctly
// rounded IEEE division, i.e. exactly what from_chars returns. Anything else
// (exponents, long mantissas) returns false and goes to from_chars.
template <typename T>
struct FastLimits;
template <>
struct FastLimits<float> {
  static constexpr uint64_t kMaxMantissa = uint64_t{1} << 24;
  static constexpr int kMaxFrac = 10;  // 10^10 = 2^10 * 5^10, 5^10 < 2^24
};
template <>
struct FastLimits<double> {
  static constexpr uint64_t kMaxMantissa = uint64_t{1} << 53;
  static constexpr int kMaxFrac = 22;  // 5^22 < 2^53
};
inline constexpr double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                    1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                    1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

template <typename T>
inline bool FastDecimal(const char* p, const char* e, T* out, const char** end) {
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0  // no excess precision (x87)
  const bool neg = p < e && *p == '-';
  p += neg;
  uint64_t m = 0;
  int digits = 0, frac = 0;
  for (; p < e && IsDigit(*p) && digits < 19; ++p, ++digits) m = m * 10 + static_cast<uint64_t>(*p - '0');
  if (p < e && *p == '.') {
    for (++p; p < e && IsDigit(*p) && digits < 19; ++p, ++digits, ++frac) {
      m = m * 10 + static_cast<uint64_t>(*p - '0');
    }
  }
  if (digits == 0 || !EndsToken(p, e) || m > FastLimits<T>::kMaxMantissa ||
      frac > FastLimits<T>::kMaxFrac) {
    return false;
  }
  // Both operands are exact in T (powers of ten up to kMaxFrac are).
  const T v = static_cast<T>(m) / static_cast<T>(kPow10[frac]);
  *out = neg ? -v : v;
  *end = p;
  return true;
#else
  (void)p;
  (void)e;
  (void)out;
  (void)end;
  return false;
#endif
}

// Parses a float or double token at [p, e) that must end at a token boundary;
// accepts a leading '+'. On success *end is past the number.
template <typename T>
inline FloatResult ParseReal(const char* p, const char* e, T* out, const char** end) {
  const char* q = p;
  if (q < e && *q == '+') {
    ++q;
    if (q < e && (*q == '-' || *q == '+')) return FloatResult::kSyntax;
  }
  if (FastDecimal(q, e, out, end)) return FloatResult::kOk;
  T v;
  auto r = std::from_chars(q, e, v);
  if (r.ec == std::errc()) {
    if (!EndsToken(r.ptr, e)) return FloatResult::kSyntax;
    if (!std::isfinite(v)) return FloatResult::kNonFinite;
    *out = v;
    *end = r.ptr;
    return FloatResult::kOk;
  }
  if (r.ec != std::errc::result_out_of_range || !EndsToken(r.ptr, e)) {
    return FloatResult::kSyntax;
  }
  // Out of range for T: overflow is an error, underflow rounds to zero.
  if (TooLarge(q, r.ptr)) return FloatResult::kOutOfRange;
  *out = *q == '-' ? -T(0) : T(0);
  *end = r.ptr;
  return FloatResult::kOk;
}

}  // namespace dml::internal::libsvm
