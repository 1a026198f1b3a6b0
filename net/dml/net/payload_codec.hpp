#pragma once
// The one codec of libdml's wire format: every actor payload
// (dml/net/payloads.hpp), checkpoints and bulk references to and from one
// Cap'n Proto Envelope of dml/net/wire.capnp. The actors' CAF messages
// carry exactly these bytes (actors/dml/actors/wire.cpp is only the shim
// into CAF's serializer); tests and the fuzz target call the same
// functions.
//
// Decoding treats input as hostile (never throws, aborts or over-reads) and
// returns: DataLoss for framing and structure, ResourceExhausted above the
// limits, InvalidArgument for a wrong version or payload kind or a broken
// invariant, naming the field (and the position for lists). Encoding checks
// the same invariants, so we never send what a peer would refuse.
// Thread-safe (stateless).

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dml/net/bulk.hpp"
#include "dml/net/codec.hpp"
#include "dml/net/payloads.hpp"

namespace dml::net {

/// Flat Envelope bytes of a payload, and back. Errors: see above.
#define DML_PAYLOAD_CODEC(T)                                   \
  absl::StatusOr<std::string> ToWire(const T& x);             \
  absl::Status FromWire(std::string_view bytes, T* out,        \
                        const DecodeLimits& limits = DecodeLimits{});

DML_PAYLOAD_CODEC(job_checkpoint)
DML_PAYLOAD_CODEC(model_file)
DML_PAYLOAD_CODEC(dvec)
DML_PAYLOAD_CODEC(sparse_dvec)
DML_PAYLOAD_CODEC(key_list)
DML_PAYLOAD_CODEC(block_sums)
DML_PAYLOAD_CODEC(worker_report)
DML_PAYLOAD_CODEC(shard_stats)
DML_PAYLOAD_CODEC(int64_list)
DML_PAYLOAD_CODEC(worker_spec)
DML_PAYLOAD_CODEC(shard_config)
DML_PAYLOAD_CODEC(dense_block)
DML_PAYLOAD_CODEC(kv_message)
DML_PAYLOAD_CODEC(Progress)
/// A BulkVector envelope: a large dvec by reference to its sender's bulk
/// channel (dml/net/bulk.hpp), valid only inside a CAF message.
DML_PAYLOAD_CODEC(BulkRef)

#undef DML_PAYLOAD_CODEC

/// A dvec as it arrives in a message: a Vector envelope gives its values;
/// a BulkVector envelope (chosen by the envelope's kind, never by an error)
/// gives `out->ref`, and nothing is fetched here.
absl::Status FromWireOrReference(std::string_view bytes, dvec* out,
                                 const DecodeLimits& limits = DecodeLimits{});

/// The bytes of a checkpoint or model file: the Envelope with fileDigest
/// set (a 32-bit checksum of the payload's canonical form; wire.capnp).
/// Writing and reading a file make one more copy of its payload (the
/// canonical form is hashed), so peak memory is about twice the file's.
absl::StatusOr<std::string> ToFileBytes(const job_checkpoint& x);
absl::StatusOr<std::string> ToFileBytes(const model_file& x);
/// FromWire for file bytes, after the digest check where the file has one
/// (files written before digests existed are read unchecked). Errors:
/// DataLoss "contents do not match the file's checksum ..." for a changed
/// file; FromWire's otherwise.
absl::Status FromFileBytes(std::string_view bytes, job_checkpoint* out,
                           const DecodeLimits& limits = DecodeLimits{});
absl::Status FromFileBytes(std::string_view bytes, model_file* out,
                           const DecodeLimits& limits = DecodeLimits{});
/// Whether `status` is FromFileBytes's (or a file reader's) "changed since it
/// was written": the file decoded as its kind but failed its checksum.
bool ChangedSinceWritten(const absl::Status& status);

/// Writes `c` to `path` atomically (a temporary file, then rename), so a
/// crash mid-write leaves the previous checkpoint. Errors: I/O, with the path.
absl::Status WriteCheckpointFile(const std::string& path, const job_checkpoint& c);
/// Writes a ModelFile Envelope to `path` (replaced atomically, as
/// checkpoints are). Errors: InvalidArgument for a model the schema refuses
/// (non-finite weight, bad labels or bias); I/O errors with the path.
absl::Status WriteModelFile(const std::string& path, const model_file& m);
/// Reads one. Errors: NotFound / I/O with the path; a file changed since it
/// was written as FromFileBytes reports it (DataLoss, "contents do not match
/// the file's checksum"), a corrupt or foreign one as FromWire does, after
/// the path.
absl::StatusOr<model_file> ReadModelFile(const std::string& path);
/// Reads a checkpoint file. Errors: as ReadModelFile.
absl::StatusOr<job_checkpoint> ReadCheckpointFile(const std::string& path);

/// The decode error a payload arrived with, as InvalidArgument (OK if none).
template <class T>
absl::Status WireErrorOf(const T& x) {
  if (x.wire_error.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(x.wire_error);
}

}  // namespace dml::net
