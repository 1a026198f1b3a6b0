#pragma once
// Building blocks shared by every encoder and decoder of wire.capnp
// Envelopes (dml/net/codec.cpp, actors/dml/actors/wire.cpp): bulk copies of
// primitive lists, flattening, and the one defensive "open an envelope"
// path. Includes Cap'n Proto headers: include it only from .cpp files.
// Thread-safety: stateless functions.

#include <capnp/any.h>
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>
#include <kj/io.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dml/net/codec.hpp"
#include "dml/net/wire.capnp.h"

namespace dml::net::internal {

static_assert(kWireSchemaVersion == wire::SCHEMA_VERSION,
              "kWireSchemaVersion must match the schemaVersion constant in wire.capnp");

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
inline constexpr bool kLittleEndianHost = true;
#else
inline constexpr bool kLittleEndianHost = false;
#endif

inline constexpr std::size_t kWordBytes = sizeof(capnp::word);
/// Cap'n Proto list lengths are 29-bit.
inline constexpr std::size_t kMaxListElements = (std::size_t{1} << 29) - 1;

inline std::size_t WordsFor4ByteList(std::size_t n) {
  return (n * 4 + kWordBytes - 1) / kWordBytes;
}
inline std::size_t WordsForList(std::size_t n, std::size_t elem_bytes) {
  return (n * elem_bytes + kWordBytes - 1) / kWordBytes;
}

/// Fills a freshly initialised primitive list from `src` (list.size() == n)
/// with one memcpy on little-endian hosts.
template <class T>
void FillList(typename capnp::List<T>::Builder list, const T* src, std::size_t n) {
  if (n == 0) return;
  if constexpr (kLittleEndianHost) {
    // The list was just allocated by this builder with its natural element
    // size, so its bytes are n * sizeof(T) contiguous bytes in a segment the
    // builder owns (writable; the reader API merely exposes them as const).
    kj::ArrayPtr<const kj::byte> raw = capnp::AnyList::Reader(list.asReader()).getRawBytes();
    std::memcpy(const_cast<kj::byte*>(raw.begin()), src, n * sizeof(T));
  } else {
    for (std::size_t i = 0; i < n; ++i) list.set(static_cast<unsigned>(i), src[i]);
  }
}

/// Copies a primitive list out. A list written with its natural element size
/// is one memcpy; anything else a conforming writer may produce (e.g. a
/// struct list, legal under schema evolution) goes through the accessors.
template <class T>
void ReadList(typename capnp::List<T>::Reader list, T* dst) {
  const std::size_t n = list.size();
  if (n == 0) return;
  if constexpr (kLittleEndianHost) {
    capnp::AnyList::Reader any(list);
    const capnp::ElementSize natural =
        sizeof(T) == 8 ? capnp::ElementSize::EIGHT_BYTES : capnp::ElementSize::FOUR_BYTES;
    if (any.getElementSize() == natural && (sizeof(T) == 4 || sizeof(T) == 8)) {
      kj::ArrayPtr<const kj::byte> raw = any.getRawBytes();
      if (raw.size() == n * sizeof(T)) {
        std::memcpy(dst, raw.begin(), n * sizeof(T));
        return;
      }
    }
  }
  for (std::size_t i = 0; i < n; ++i) dst[i] = list[static_cast<unsigned>(i)];
}

/// Serialises a builder into one flat array (segment table + segments).
std::string Flatten(capnp::MessageBuilder& builder);

/// InvalidArgument when a list of n entries cannot be one Cap'n Proto list.
absl::Status CheckListLength(std::size_t n, const char* what);

/// "a SparseVector", "a Vector", ... or "unknown payload kind N".
std::string DescribeKind(wire::Envelope::Which which);

/// Frames, limits and opens a message, checks its version, then hands the
/// Envelope to `read`, which returns the decoded value. Every Cap'n Proto
/// exception becomes DataLoss. Errors: see codec.hpp.
template <class T, class ReadFn>
absl::StatusOr<T> OpenEnvelope(std::string_view bytes, const DecodeLimits& limits,
                               ReadFn&& read) {
  if (bytes.empty()) return absl::DataLossError("empty message");
  if (bytes.size() > limits.max_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "message of %d bytes exceeds the limit of %d bytes", bytes.size(), limits.max_bytes));
  }
  if (bytes.size() % kWordBytes != 0) {
    return absl::DataLossError(absl::StrFormat(
        "message length %d is not a multiple of 8 bytes", bytes.size()));
  }
  const std::size_t words = bytes.size() / kWordBytes;

  // Cap'n Proto reads words in place and needs them 8-byte aligned.
  std::unique_ptr<capnp::word[]> aligned;
  const capnp::word* begin = reinterpret_cast<const capnp::word*>(bytes.data());
  if (reinterpret_cast<std::uintptr_t>(bytes.data()) % alignof(capnp::word) != 0) {
    aligned.reset(new capnp::word[words]);
    std::memcpy(aligned.get(), bytes.data(), bytes.size());
    begin = aligned.get();
  }

  capnp::ReaderOptions options;
  // Reading each object once traverses fewer words than the message holds;
  // anything beyond that is a pointer-aliasing amplification attack.
  options.traversalLimitInWords = words;
  try {
    capnp::FlatArrayMessageReader reader(kj::arrayPtr(begin, words), options);
    const capnp::word* end = reader.getEnd();
    if (end != begin + words) {
      return absl::DataLossError(absl::StrFormat(
          "%d trailing bytes after the message", (begin + words - end) * kWordBytes));
    }
    wire::Envelope::Reader envelope = reader.getRoot<wire::Envelope>();
    const uint16_t version = envelope.getSchemaVersion();
    if (version != kWireSchemaVersion) {
      return absl::InvalidArgumentError(
          absl::StrFormat("schema version %d, expected %d", version, kWireSchemaVersion));
    }
    return read(envelope);
  } catch (const kj::Exception& e) {
    return absl::DataLossError(
        absl::StrCat("corrupt Cap'n Proto message: ", e.getDescription().cStr()));
  }
}

/// OpenEnvelope, and the payload must be of kind `expected`.
template <class T, class ReadFn>
absl::StatusOr<T> DecodeEnvelope(std::string_view bytes, const DecodeLimits& limits,
                                 wire::Envelope::Which expected, ReadFn&& read) {
  return OpenEnvelope<T>(
      bytes, limits, [&](wire::Envelope::Reader envelope) -> absl::StatusOr<T> {
        const wire::Envelope::Which which = envelope.which();
        if (which != expected) {
          return absl::InvalidArgumentError(absl::StrCat("expected ", DescribeKind(expected),
                                                         ", got ", DescribeKind(which)));
        }
        return read(envelope);
      });
}

/// The payload kind of a message (framing, limits and version checked).
inline absl::StatusOr<wire::Envelope::Which> EnvelopeKind(std::string_view bytes,
                                                          const DecodeLimits& limits) {
  return OpenEnvelope<wire::Envelope::Which>(
      bytes, limits, [](wire::Envelope::Reader envelope) -> absl::StatusOr<wire::Envelope::Which> {
        return envelope.which();
      });
}

}  // namespace dml::net::internal
