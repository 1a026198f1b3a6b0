// LIBSVM writer: 1-based indices and the shortest round-trip text of each
// float (std::to_chars), so that ReadLibsvm gives back the same matrix and
// labels; non-finite labels and values are refused.

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dml/data/libsvm.hpp"

namespace dml {

absl::Status WriteLibsvm(const Dataset& data, const std::string& path) {
  const CsrMatrix& x = data.x;
  if (static_cast<int64_t>(data.y.size()) != x.rows()) {
    return absl::InvalidArgumentError(absl::StrCat("WriteLibsvm: ", data.y.size(), " labels for ",
                                                   x.rows(), " rows"));
  }
  // Checked before the file is opened, so that bad data leaves whatever
  // was at `path` alone (a generator's overflow had emptied it).
  for (int64_t r = 0; r < x.rows(); ++r) {
    if (!std::isfinite(data.y[r])) {
      return absl::InvalidArgumentError(absl::StrCat("WriteLibsvm: row ", r, ": non-finite label"));
    }
  }
  for (std::size_t k = 0; k < x.values().size(); ++k) {
    if (std::isfinite(x.values()[k])) continue;
    const auto row = std::upper_bound(x.offsets().begin(), x.offsets().end(),
                                      static_cast<int64_t>(k)) - x.offsets().begin() - 1;
    return absl::InvalidArgumentError(absl::StrCat("WriteLibsvm: row ", row, ", column ",
                                                   x.indices()[k], ": non-finite value"));
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return absl::ErrnoToStatus(errno, path);

  constexpr std::size_t kBuf = 1 << 20;
  constexpr std::size_t kSlack = 64;  // one `index:value ` entry fits
  std::unique_ptr<char[]> buf(new char[kBuf + 4 * kSlack]);
  char* p = buf.get();
  bool io_error = false;
  auto flush = [&] {
    const std::size_t n = static_cast<std::size_t>(p - buf.get());
    if (n > 0 && std::fwrite(buf.get(), 1, n, f) != n) io_error = true;
    p = buf.get();
  };
  for (int64_t r = 0; r < x.rows() && !io_error; ++r) {
    p = std::to_chars(p, p + kSlack, data.y[r]).ptr;
    const SparseView row = x.outer(r);
    for (std::size_t k = 0; k < row.size; ++k) {
      *p++ = ' ';
      p = std::to_chars(p, p + kSlack, uint64_t{row.index[k]} + 1).ptr;
      *p++ = ':';
      p = std::to_chars(p, p + kSlack, row.value[k]).ptr;
      if (static_cast<std::size_t>(p - buf.get()) >= kBuf) flush();
    }
    *p++ = '\n';
    if (static_cast<std::size_t>(p - buf.get()) >= kBuf) flush();
  }
  if (!io_error) flush();
  const int werr = errno;
  if (std::fclose(f) != 0 && !io_error) {
    return absl::ErrnoToStatus(errno, absl::StrCat(path, ": close failed"));
  }
  if (io_error) return absl::ErrnoToStatus(werr != 0 ? werr : EIO, absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

}  // namespace dml
