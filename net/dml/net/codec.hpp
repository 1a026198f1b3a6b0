#pragma once
// The one codec between libdml's plain payload structs and the Cap'n Proto
// wire format in dml/net/wire.capnp. Output is a single flat message: the
// standard Cap'n Proto segment table followed by the segments (what
// capnp::messageToFlatArray produces), so any Cap'n Proto implementation can
// read it with the schema.
//
// Decoding treats its input as hostile: it never throws, aborts or reads out
// of bounds, and every failure is a Status whose message says what was wrong.
// Error codes:
//   DataLoss          framing or structure: length not a multiple of 8,
//                     truncated, trailing bytes, bad pointers (Cap'n Proto's
//                     own checks, surfaced with its description);
//   ResourceExhausted the input is larger than DecodeLimits allow;
//   InvalidArgument   a well-formed message with the wrong schema version,
//                     the wrong payload kind, or content that breaks the
//                     struct's invariants (see dml/net/messages.hpp).
// Encoding validates the same invariants, so we never send what a peer would
// refuse. All functions are thread-safe.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dml/net/messages.hpp"

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

/// Checks SparseVec's invariants; InvalidArgument naming the first offending
/// position otherwise.
absl::Status ValidateSparse(const SparseVec& v);
/// Checks DenseVec's invariants (all values finite).
absl::Status ValidateDense(const DenseVec& v);

/// Encodes `v` as an Envelope{schemaVersion, sparseVector}. The index and
/// value arrays are copied into the message with one memcpy each.
/// Errors: InvalidArgument if `v` breaks its invariants or has more than
/// 2^29 - 1 nonzeros (Cap'n Proto's list length limit).
absl::StatusOr<std::string> EncodeSparse(const SparseVec& v);

/// Decodes a message produced by EncodeSparse (by any writer of the schema).
/// `bytes` need not be aligned (an unaligned input is copied once).
absl::StatusOr<SparseVec> DecodeSparse(std::string_view bytes, const DecodeLimits& limits = {});

/// Encodes `v` as an Envelope{schemaVersion, denseVector}.
/// Errors: InvalidArgument on a non-finite value or more than 2^29 - 1 values.
absl::StatusOr<std::string> EncodeDense(const DenseVec& v);

/// Decodes a message produced by EncodeDense; errors as for DecodeSparse.
absl::StatusOr<DenseVec> DecodeDense(std::string_view bytes, const DecodeLimits& limits = {});

}  // namespace dml::net
