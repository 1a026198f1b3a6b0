#pragma once
// The plain C++ payloads of libdml's actor messages: what crosses between
// processes, as one Cap'n Proto Envelope of wire.capnp each
// (dml/net/payload_codec.hpp converts). No CAF and no Cap'n Proto type
// appears here. In-process, vectors travel as shared immutable buffers
// (copying a payload copies pointers, never the numbers).
//
// Decoding a payload from a peer never fails the message that carries it:
// a payload that does not decode arrives with `wire_error` set (and no
// data), so the receiving handler answers the sender with that error
// instead of the message vanishing. Every handler checks it.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "dml/data/libsvm.hpp"
#include "dml/net/bulk.hpp"
#include "dml/objective/model.hpp"
#include "dml/solver/solver.hpp"
#include "dml/solver/training.hpp"

namespace dml::net {

/// Largest vector a peer may send (2^28 entries).
inline constexpr std::size_t kMaxVectorEntries = std::size_t{1} << 28;

/// An immutable shared vector of doubles (model ranges, gradients, deltas):
/// `count` values at `values`, kept alive by `owner` (a std::vector, a
/// block of the bulk channel's shared arena, or a peer's block mapped in
/// place). Copying a dvec copies the reference, never the numbers. Nobody
/// writes through a dvec's values while any copy of it exists.
struct dvec {
  std::shared_ptr<const void> owner;
  const double* values = nullptr;
  std::size_t count = 0;
  std::string wire_error;  ///< set when a peer's bytes did not decode
  /// Set instead of values when the dvec arrived as a reference to its
  /// sender's bulk channel (a large vector): the decoder never fetches;
  /// the receiving actor does, off the deserializer (bulk_resolve.hpp).
  std::shared_ptr<const BulkRef> ref;
  /// Every value is known finite: set only by this process's decoders,
  /// which checked them as they arrived (never sent); lets a receiving
  /// handler skip its own pass over the values.
  bool finite = false;

  dvec() = default;
  explicit dvec(std::vector<double> v)
      : dvec(std::make_shared<const std::vector<double>>(std::move(v))) {}
  /// Shares `v` (null: no values).
  explicit dvec(std::shared_ptr<const std::vector<double>> v)
      : owner(v), values(v ? v->data() : nullptr), count(v ? v->size() : 0), vector_(std::move(v)) {}
  dvec(std::shared_ptr<const void> keep, const double* p, std::size_t n)
      : owner(std::move(keep)), values(p), count(n) {}

  /// False for a default-constructed (or failed) dvec; true even when empty.
  bool has_values() const { return owner != nullptr; }
  std::size_t size() const { return count; }
  const double* data() const { return values; }
  absl::Span<const double> view() const { return absl::Span<const double>(values, count); }
  std::vector<double> to_vector() const { return std::vector<double>(values, values + count); }
  /// The values as a std::vector (for numerics that take one): the shared
  /// vector itself where one owns them, else a copy.
  std::shared_ptr<const std::vector<double>> as_vector() const {
    if (vector_) return vector_;
    return std::make_shared<const std::vector<double>>(to_vector());
  }
  int64_t bytes() const { return static_cast<int64_t>(size() * sizeof(double)); }

 private:
  std::shared_ptr<const std::vector<double>> vector_;  // set when a vector owns the values
};

/// A sparse update of a shard's range: offsets relative to the range start,
/// strictly increasing, and their values.
struct sparse_dvec {
  std::shared_ptr<const std::vector<uint32_t>> index;
  std::shared_ptr<const std::vector<double>> value;
  std::string wire_error;

  std::size_t size() const { return value ? value->size() : 0; }
  int64_t bytes() const {
    return static_cast<int64_t>(size() * (sizeof(double) + sizeof(uint32_t)));
  }
};

/// Keys of a shard's range to pull: offsets from the range start, strictly
/// increasing.
struct key_list {
  std::shared_ptr<const std::vector<uint32_t>> keys;
  std::string wire_error;

  std::size_t size() const { return keys ? keys->size() : 0; }
  int64_t bytes() const { return static_cast<int64_t>(size() * sizeof(uint32_t)); }
};

/// A worker's share of the global objective (see dml::BlockCertificate).
struct block_sums {
  double loss_sum = 0.0;
  double gap_sum = 0.0;
  double reg_sum = 0.0;
  std::string wire_error;
};

/// What a worker did: sent when it finishes a run or a round.
struct worker_report {
  int32_t worker = 0;
  int64_t clock = 0;      ///< steps (SGD) or rounds (cocoa) completed
  int64_t processed = 0;  ///< examples or coordinates processed in total
  int64_t bytes = 0;      ///< payload bytes pushed and pulled in total
  std::string wire_error;
};

/// A shard's counters.
struct shard_stats {
  int64_t updates = 0;  ///< pushes applied
  int64_t pulls = 0;
  int64_t bytes_in = 0;
  int64_t bytes_out = 0;
  /// ssp: the largest (requesting clock - slowest clock) granted to a pull.
  int64_t max_granted_staleness = 0;
  std::vector<int64_t> clocks;  ///< per worker: pushes received
  std::string wire_error;
};

/// Key boundaries of the S shards (S + 1 entries, increasing).
struct int64_list {
  std::vector<int64_t> values;
  std::string wire_error;
};

/// What a process needs to spawn one worker (the wire-portable part of
/// worker_config; wire.capnp WorkerSpec documents each field).
struct worker_spec {
  Mode mode = Mode::kCocoa;
  int32_t index = 0;
  int32_t workers = 1;
  ModelSpec model;
  uint64_t seed = 1;
  /// A path the worker loads itself (required across processes).
  std::string path;
  LibsvmOptions load;
  int32_t batch_size = 64;
  double step0 = 0.5;
  double step_decay = 0.0;
  int32_t tau = 8;
  double local_epochs = 1.0;
  double gamma = 1.0;
  double sigma_prime = 1.0;
  std::string wire_error;
};

/// What a process needs to spawn one parameter shard of keys [begin, end)
/// (see parameter_shard.hpp for the rules).
struct shard_config {
  Mode mode = Mode::kSync;
  int32_t workers = 1;
  int64_t begin = 0;
  int64_t end = 0;
  ModelSpec model;
  double step0 = 0.5;
  double step_decay = 0.0;
  double gamma = 1.0;
  double easgd_alpha = 0.1;
  int32_t staleness = 0;
  std::string wire_error;
};

/// An immutable, shareable float vector. Copying a dense_block copies a
/// pointer; the floats are never mutated after construction, so any number
/// of actors may read them concurrently. A default-constructed block is
/// empty (no allocation).
struct dense_block {
  std::shared_ptr<const std::vector<float>> data;

  dense_block() = default;
  /// Takes ownership of `values`.
  std::string wire_error;  ///< set when a peer's bytes did not decode

  explicit dense_block(std::vector<float> values)
      : data(std::make_shared<const std::vector<float>>(std::move(values))) {}

  std::size_t size() const { return data ? data->size() : 0; }
  absl::Span<const float> view() const {
    return data ? absl::Span<const float>(*data) : absl::Span<const float>();
  }
};


/// A job's restart point (wire.capnp Checkpoint): written by the
/// coordinator, read by JobSpec.recovery.resume.
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
  std::vector<Progress> history;
};

}  // namespace dml::net
