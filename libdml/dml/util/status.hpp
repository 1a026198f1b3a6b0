#pragma once
// Status helpers for Abseil 20220623, which ships no status macros.

#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dml {
/// Debian's Abseil 20220623 has its own absl::string_view (not an alias of
/// std::string_view), so absl::StrCat rejects std::string_view: convert.
inline absl::string_view AsAbsl(std::string_view s) { return {s.data(), s.size()}; }
}  // namespace dml

#define DML_STATUS_CONCAT_INNER(a, b) a##b
#define DML_STATUS_CONCAT(a, b) DML_STATUS_CONCAT_INNER(a, b)

/// Returns from the enclosing function with `expr`'s status if it is not OK.
#define DML_RETURN_IF_ERROR(expr)                       \
  do {                                                  \
    ::absl::Status dml_status_ = (expr);                \
    if (!dml_status_.ok()) return dml_status_;          \
  } while (false)

/// `DML_ASSIGN_OR_RETURN(auto x, F())`: binds the value of a StatusOr or
/// returns its status from the enclosing function.
#define DML_ASSIGN_OR_RETURN(lhs, expr)                                        \
  DML_ASSIGN_OR_RETURN_IMPL(DML_STATUS_CONCAT(dml_statusor_, __LINE__), lhs, expr)
#define DML_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return std::move(tmp).status();  \
  lhs = std::move(tmp).value()
