#pragma once
// Cap'n Proto encoding of every actor payload (net/dml/net/wire.capnp): the
// one wire format of libdml messages between processes. CAF's inspect
// overloads of the payloads (messages.hpp) write exactly these bytes into a
// CAF message as one raw block; tests and the fuzz target call the same
// functions directly.
//
// Decoding treats input as hostile (never throws, aborts or over-reads) and
// returns the errors of dml/net/codec.hpp: DataLoss for framing and
// structure, ResourceExhausted above the limits, InvalidArgument for a wrong
// version or payload kind or a broken invariant, naming the field (and the
// position for lists). Thread-safe.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dml/actors/dense_block.hpp"
#include "dml/actors/messages.hpp"
#include "dml/net/bulk.hpp"
#include "dml/net/codec.hpp"

namespace dml::actors {

/// Flat Envelope bytes of a payload. Errors: InvalidArgument when the value
/// breaks an invariant a peer would refuse (so we never send it).
#define DML_WIRE_CODEC(T)                                                   \
  absl::StatusOr<std::string> ToWire(const T& x);                          \
  absl::Status FromWire(std::string_view bytes, T* out,                     \
                        const net::DecodeLimits& limits = net::DecodeLimits{});

/// A job's restart point (wire.capnp Checkpoint): written by the
/// coordinator, read by job_spec.resume.
struct job_checkpoint {
  Mode mode = Mode::kCocoa;
  ModelSpec model;
  int32_t round = 0;
  double epochs = 0.0;
  double seconds = 0.0;
  int64_t clock = 0;
  int64_t bytes = 0;
  int64_t rows = 0, cols = 0;
  uint64_t seed = 0;
  int32_t workers = 0;
  std::vector<double> shared;
  std::vector<std::vector<double>> coords;  // per worker (cocoa); may be empty
  std::vector<int64_t> processed;           // per worker
  std::vector<job_progress> history;
};

DML_WIRE_CODEC(job_checkpoint)
DML_WIRE_CODEC(dvec)
DML_WIRE_CODEC(sparse_dvec)
DML_WIRE_CODEC(key_list)
DML_WIRE_CODEC(block_sums)
DML_WIRE_CODEC(worker_report)
DML_WIRE_CODEC(shard_stats)
DML_WIRE_CODEC(int64_list)
DML_WIRE_CODEC(worker_spec)
DML_WIRE_CODEC(shard_config)
DML_WIRE_CODEC(dense_block)
DML_WIRE_CODEC(job_progress)

#undef DML_WIRE_CODEC

/// A BulkVector envelope: a large dvec by reference to its sender's bulk
/// channel (dml/net/bulk.hpp), valid only inside CAF messages. The dvec
/// decoder of a CAF message falls back to this and fetches the values.
absl::StatusOr<std::string> ToWire(const net::BulkRef& ref);
absl::Status FromWire(std::string_view bytes, net::BulkRef* out,
                      const net::DecodeLimits& limits = net::DecodeLimits{});

/// Writes `c` to `path` atomically (a temporary file, then rename), so a
/// crash mid-write leaves the previous checkpoint. Errors: I/O, with the path.
absl::Status WriteCheckpointFile(const std::string& path, const job_checkpoint& c);
/// Reads a checkpoint file. Errors: NotFound / I/O with the path; the
/// decoder's errors prefixed with the path.
absl::StatusOr<job_checkpoint> ReadCheckpointFile(const std::string& path);

/// The decode error a payload arrived with, as an absl::Status (OK if none).
template <class T>
absl::Status WireErrorOf(const T& x) {
  if (x.wire_error.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(x.wire_error);
}

}  // namespace dml::actors
