// LIBSVM files: reading a whole file into memory, decompressing .gz, .bz2
// and .xz (concatenated streams too, as pigz and pbzip2 write them) when
// libdml was built with the matching library, and handing the text to
// ParseLibsvm (libsvm.cpp).

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include <sys/stat.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dml/data/internal/libsvm.hpp"
#include "dml/data/libsvm.hpp"

#if defined(DML_HAVE_ZLIB)
#include <zlib.h>
#endif
#if defined(DML_HAVE_BZIP2)
#include <bzlib.h>
#endif
#if defined(DML_HAVE_LZMA)
#include <lzma.h>
#endif

namespace dml {
namespace {

using internal::libsvm::ResizeFresh;

// File reading and decompression.

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A NUL byte in out[from, size()), as an error at its line and column:
// LIBSVM text has none, and a stream of them (/dev/zero, a decompression
// bomb of zeros) would otherwise be read until memory runs out. Checked as
// streams and decompressed output arrive; a regular file's size bounds it,
// and the parser reports its NUL bytes by token.
absl::Status NoNulFrom(std::string_view out, std::size_t from, const std::string& path) {
  if (from >= out.size()) return absl::OkStatus();
  const void* hit = std::memchr(out.data() + from, '\0', out.size() - from);
  if (hit == nullptr) return absl::OkStatus();
  const std::size_t at = static_cast<std::size_t>(static_cast<const char*>(hit) - out.data());
  const std::size_t line = 1 + static_cast<std::size_t>(std::count(out.data(), out.data() + at, '\n'));
  const std::size_t nl = at == 0 ? std::string_view::npos : out.rfind('\n', at - 1);
  const std::size_t col = nl == std::string_view::npos ? at + 1 : at - nl;
  return absl::InvalidArgumentError(absl::StrCat(
      path, ":", line, ":", col, ": a NUL byte: binary data, not LIBSVM text (read stopped)"));
}

// `text`: the file is LIBSVM text itself (not compressed): a stream of it is
// checked for NUL bytes as it arrives (compressed input is checked after
// decompression: its headers hold NUL bytes).
absl::StatusOr<std::string> ReadRaw(const std::string& path, bool text) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return absl::ErrnoToStatus(errno, path);
  struct stat st {};
  if (fstat(fileno(f), &st) != 0) {
    const int err = errno;
    std::fclose(f);
    return absl::ErrnoToStatus(err, path);
  }
  if (S_ISDIR(st.st_mode)) {
    std::fclose(f);
    return absl::ErrnoToStatus(EISDIR, path);
  }
  std::string out;
  // Regular files are read in one call; pipes and growing files by blocks.
  if (S_ISREG(st.st_mode) && st.st_size > 0) {
    ResizeFresh(&out, static_cast<std::size_t>(st.st_size));
    out.resize(std::fread(out.data(), 1, out.size(), f));
  }
  const bool stream = text && !S_ISREG(st.st_mode);
  char buf[1 << 16];
  while (!std::ferror(f)) {
    const std::size_t got = std::fread(buf, 1, sizeof buf, f);
    if (got == 0) break;
    out.append(buf, got);
    if (stream) {
      if (absl::Status s = NoNulFrom(out, out.size() - got, path); !s.ok()) {
        std::fclose(f);
        return s;
      }
    }
  }
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) return absl::ErrnoToStatus(err != 0 ? err : EIO, absl::StrCat(path, ": read failed"));
  return out;
}

// Output growth for the decompressors: start at 4x the input.
void Grow(std::string* out, std::size_t used) {
  std::size_t cap = std::max<std::size_t>(out->size() * 2, 1 << 20);
  out->resize(std::max(cap, used + (1 << 20)));
}

#if defined(DML_HAVE_ZLIB)
absl::StatusOr<std::string> Gunzip(const std::string& in, const std::string& path) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 32) != Z_OK) return absl::InternalError("inflateInit2 failed");
  std::string out(std::max<std::size_t>(in.size() * 4, 1 << 16), '\0');
  std::size_t used = 0, pos = 0;
  while (true) {
    if (used == out.size()) Grow(&out, used);
    const std::size_t in_avail = std::min<std::size_t>(in.size() - pos, 1u << 30);
    const std::size_t out_avail = std::min<std::size_t>(out.size() - used, 1u << 30);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + pos));
    z.avail_in = static_cast<uInt>(in_avail);
    z.next_out = reinterpret_cast<Bytef*>(out.data() + used);
    z.avail_out = static_cast<uInt>(out_avail);
    const int rc = inflate(&z, Z_NO_FLUSH);
    pos += in_avail - z.avail_in;
    const std::size_t was = used;
    used += out_avail - z.avail_out;
    if (absl::Status s = NoNulFrom(std::string_view(out.data(), used), was, path); !s.ok()) {
      inflateEnd(&z);
      return s;
    }
    if (rc == Z_STREAM_END) {
      // Concatenated gzip members (e.g. from pigz) follow each other.
      if (pos < in.size()) {
        inflateReset(&z);
        continue;
      }
      break;
    }
    if (rc == Z_BUF_ERROR && pos == in.size() && z.avail_out > 0) {
      inflateEnd(&z);
      return absl::InvalidArgumentError(absl::StrCat(path, ": truncated gzip stream"));
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      std::string msg = z.msg ? z.msg : "corrupt data";
      inflateEnd(&z);
      return absl::InvalidArgumentError(absl::StrCat(path, ": gzip: ", msg));
    }
  }
  inflateEnd(&z);
  out.resize(used);
  return out;
}
#endif

#if defined(DML_HAVE_BZIP2)
absl::StatusOr<std::string> Bunzip2(const std::string& in, const std::string& path) {
  std::string out(std::max<std::size_t>(in.size() * 5, 1 << 16), '\0');
  std::size_t used = 0, pos = 0;
  while (pos < in.size()) {  // one pass per concatenated stream (pbzip2)
    bz_stream b{};
    if (BZ2_bzDecompressInit(&b, 0, 0) != BZ_OK) return absl::InternalError("BZ2_bzDecompressInit failed");
    int rc = BZ_OK;
    while (true) {
      if (used == out.size()) Grow(&out, used);
      const std::size_t in_avail = std::min<std::size_t>(in.size() - pos, 1u << 30);
      const std::size_t out_avail = std::min<std::size_t>(out.size() - used, 1u << 30);
      b.next_in = const_cast<char*>(in.data() + pos);
      b.avail_in = static_cast<unsigned>(in_avail);
      b.next_out = out.data() + used;
      b.avail_out = static_cast<unsigned>(out_avail);
      rc = BZ2_bzDecompress(&b);
      pos += in_avail - b.avail_in;
      const std::size_t was = used;
      used += out_avail - b.avail_out;
      if (absl::Status s = NoNulFrom(std::string_view(out.data(), used), was, path); !s.ok()) {
        BZ2_bzDecompressEnd(&b);
        return s;
      }
      if (rc == BZ_STREAM_END) break;
      if (rc != BZ_OK) break;
      if (pos == in.size() && b.avail_out > 0) {
        rc = BZ_UNEXPECTED_EOF;
        break;
      }
    }
    BZ2_bzDecompressEnd(&b);
    if (rc != BZ_STREAM_END) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, rc == BZ_UNEXPECTED_EOF ? ": truncated bzip2 stream"
                                                     : ": corrupt bzip2 data"));
    }
  }
  out.resize(used);
  return out;
}
#endif

#if defined(DML_HAVE_LZMA)
absl::StatusOr<std::string> Unxz(const std::string& in, const std::string& path) {
  lzma_stream s = LZMA_STREAM_INIT;
  if (lzma_stream_decoder(&s, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK) {
    return absl::InternalError("lzma_stream_decoder failed");
  }
  std::string out(std::max<std::size_t>(in.size() * 6, 1 << 16), '\0');
  std::size_t used = 0;
  s.next_in = reinterpret_cast<const uint8_t*>(in.data());
  s.avail_in = in.size();
  lzma_ret rc = LZMA_OK;
  while (true) {
    if (used == out.size()) Grow(&out, used);
    s.next_out = reinterpret_cast<uint8_t*>(out.data() + used);
    s.avail_out = out.size() - used;
    const std::size_t before = s.avail_out;
    rc = lzma_code(&s, LZMA_FINISH);  // all input is present
    const std::size_t was = used;
    used += before - s.avail_out;
    if (absl::Status st = NoNulFrom(std::string_view(out.data(), used), was, path); !st.ok()) {
      lzma_end(&s);
      return st;
    }
    if (rc == LZMA_STREAM_END) break;
    if (rc != LZMA_OK) break;
  }
  lzma_end(&s);
  if (rc == LZMA_BUF_ERROR) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": truncated xz stream"));
  }
  if (rc != LZMA_STREAM_END) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": corrupt xz data (lzma error ", static_cast<int>(rc), ")"));
  }
  out.resize(used);
  return out;
}
#endif

}  // namespace

absl::StatusOr<std::string> ReadFileContents(const std::string& path) {
  const bool gz = EndsWith(path, ".gz");
  const bool bz2 = EndsWith(path, ".bz2");
  const bool xz = EndsWith(path, ".xz");
#if !defined(DML_HAVE_ZLIB)
  if (gz) {
    return absl::UnimplementedError(
        absl::StrCat(path, ": reading .gz files needs zlib, and libdml was built without it"));
  }
#endif
#if !defined(DML_HAVE_BZIP2)
  if (bz2) {
    return absl::UnimplementedError(
        absl::StrCat(path, ": reading .bz2 files needs libbz2, and libdml was built without it"));
  }
#endif
#if !defined(DML_HAVE_LZMA)
  if (xz) {
    return absl::UnimplementedError(
        absl::StrCat(path, ": reading .xz files needs liblzma, and libdml was built without it"));
  }
#endif
  auto raw = ReadRaw(path, !gz && !bz2 && !xz);
  if (!raw.ok()) return raw.status();
#if defined(DML_HAVE_ZLIB)
  if (gz) return Gunzip(*raw, path);
#endif
#if defined(DML_HAVE_BZIP2)
  if (bz2) return Bunzip2(*raw, path);
#endif
#if defined(DML_HAVE_LZMA)
  if (xz) return Unxz(*raw, path);
#endif
  (void)gz;
  (void)bz2;
  (void)xz;
  return raw;
}

absl::StatusOr<Dataset> ReadLibsvm(const std::string& path, const LibsvmOptions& options) {
  auto text = ReadFileContents(path);
  if (!text.ok()) return text.status();
  return ParseLibsvm(*text, options, path);
}

}  // namespace dml
