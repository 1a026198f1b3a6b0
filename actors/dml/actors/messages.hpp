#pragma once
// Plain message payloads of the training actors. In-process, vectors travel
// as shared immutable buffers (copying a message copies pointers, never the
// numbers). Across processes every payload here is one Cap'n Proto Envelope
// of net/dml/net/wire.capnp (dml/actors/wire.hpp), written into CAF's
// message as one raw block: vectors are contiguous bytes, never element by
// element.
//
// Decoding a payload from a peer never fails the CAF message: a payload
// that does not decode arrives with `wire_error` set (and no data), so the
// receiving handler answers the sender with that error instead of the
// message vanishing (a request would then wait forever). Every handler
// checks it (see wire_error_of in dml/actors/wire.hpp).

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <caf/deserializer.hpp>
#include <caf/error.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/serializer.hpp>

#include "absl/types/span.h"
#include "dml/actors/runtime.hpp"
#include "dml/data/libsvm.hpp"
#include "dml/objective/model.hpp"

namespace dml::actors {

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

// Serialisation for CAF: every payload is one Cap'n Proto Envelope
// (implemented in wire.cpp). Deserialising never returns an error for bad
// payload bytes (see wire_error above); only CAF's own framing can fail.
#define DML_WIRE_PAYLOAD(T)                        \
  caf::error inspect(caf::serializer& f, T& x);   \
  caf::error inspect(caf::deserializer& f, T& x); \
  template <class Inspector>                      \
  std::enable_if_t<!std::is_base_of_v<caf::serializer, Inspector> &&       \
                       !std::is_base_of_v<caf::deserializer, Inspector>,   \
                   typename Inspector::result_type>                        \
  inspect(Inspector& f, T& x) {                   \
    std::string shown = describe(x);              \
    return f(caf::meta::type_name(#T), shown);    \
  }

std::string describe(const dvec& x);
std::string describe(const sparse_dvec& x);
std::string describe(const key_list& x);
std::string describe(const block_sums& x);
std::string describe(const worker_report& x);
std::string describe(const shard_stats& x);
std::string describe(const int64_list& x);
std::string describe(const worker_spec& x);
std::string describe(const shard_config& x);

DML_WIRE_PAYLOAD(dvec)
DML_WIRE_PAYLOAD(sparse_dvec)
DML_WIRE_PAYLOAD(key_list)
DML_WIRE_PAYLOAD(block_sums)
DML_WIRE_PAYLOAD(worker_report)
DML_WIRE_PAYLOAD(shard_stats)
DML_WIRE_PAYLOAD(int64_list)
DML_WIRE_PAYLOAD(worker_spec)
DML_WIRE_PAYLOAD(shard_config)

}  // namespace dml::actors
