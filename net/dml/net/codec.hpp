#pragma once
// What every reader and writer of wire.capnp shares: the schema version and
// the decoding limits. The codec itself is dml/net/payload_codec.hpp (the
// one codec of libdml's messages, checkpoints and files).
//
// Error codes of every decoder:
//   DataLoss          framing or structure: length not a multiple of 8,
//                     truncated, trailing bytes, bad pointers (Cap'n Proto's
//                     own checks, surfaced with its description);
//   ResourceExhausted the input is larger than DecodeLimits allow;
//   InvalidArgument   a well-formed message with the wrong schema version,
//                     the wrong payload kind, or content that breaks the
//                     payload's invariants.

#include <cstddef>
#include <cstdint>

namespace dml::net {

/// The schema version this build writes and the only one it reads; equals
/// the `schemaVersion` constant in wire.capnp (checked at compile time).
inline constexpr uint16_t kWireSchemaVersion = 1;

/// Bounds applied before any allocation that the input could drive.
struct DecodeLimits {
  /// Largest accepted message, in bytes. The Cap'n Proto traversal limit is
  /// set from the actual message length, so this is the only size knob.
  std::size_t max_bytes = std::size_t{1} << 30;  // 1 GiB
};

}  // namespace dml::net
