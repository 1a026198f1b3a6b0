#pragma once
// Plain message payloads of the training actors. In-process, vectors travel
// as shared immutable buffers (copying a message copies pointers, never the
// numbers); across processes each vector is its length plus one raw block
// (dml/actors/internal/raw_vector.hpp). Every struct here is meant to map
// one-to-one to the Cap'n Proto wire schema of net/.

#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include <caf/deserializer.hpp>
#include <caf/error.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/serializer.hpp>

#include "absl/types/span.h"

namespace dml::actors {

/// Largest vector a peer may send (2^28 entries).
inline constexpr std::size_t kMaxVectorEntries = std::size_t{1} << 28;

/// An immutable shared vector of doubles (model ranges, gradients, deltas).
struct dvec {
  std::shared_ptr<const std::vector<double>> data;

  dvec() = default;
  explicit dvec(std::vector<double> v)
      : data(std::make_shared<const std::vector<double>>(std::move(v))) {}
  std::size_t size() const { return data ? data->size() : 0; }
  absl::Span<const double> view() const {
    return data ? absl::Span<const double>(*data) : absl::Span<const double>();
  }
  int64_t bytes() const { return static_cast<int64_t>(size() * sizeof(double)); }
};

/// A sparse update of a shard's range: offsets relative to the range start,
/// strictly increasing, and their values.
struct sparse_dvec {
  std::shared_ptr<const std::vector<uint32_t>> index;
  std::shared_ptr<const std::vector<double>> value;

  std::size_t size() const { return value ? value->size() : 0; }
  int64_t bytes() const {
    return static_cast<int64_t>(size() * (sizeof(double) + sizeof(uint32_t)));
  }
};

/// Keys of a shard's range to pull: offsets from the range start, strictly
/// increasing.
struct key_list {
  std::shared_ptr<const std::vector<uint32_t>> keys;

  std::size_t size() const { return keys ? keys->size() : 0; }
  int64_t bytes() const { return static_cast<int64_t>(size() * sizeof(uint32_t)); }
};

/// A worker's share of the global objective (see dml::BlockCertificate).
struct block_sums {
  double loss_sum = 0.0;
  double gap_sum = 0.0;
  double reg_sum = 0.0;
};

/// What a worker did: sent when it finishes a run or a round.
struct worker_report {
  int32_t worker = 0;
  int64_t clock = 0;      ///< steps (SGD) or rounds (cocoa) completed
  int64_t processed = 0;  ///< examples or coordinates processed in total
  int64_t bytes = 0;      ///< payload bytes pushed and pulled in total
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
};

caf::error inspect(caf::serializer& f, dvec& x);
caf::error inspect(caf::deserializer& f, dvec& x);
caf::error inspect(caf::serializer& f, sparse_dvec& x);
caf::error inspect(caf::serializer& f, key_list& x);
caf::error inspect(caf::deserializer& f, key_list& x);
/// Errors: index and value lengths differ, or exceed kMaxVectorEntries.
caf::error inspect(caf::deserializer& f, sparse_dvec& x);

/// Other inspectors (to_string) show the lengths only.
template <class Inspector>
std::enable_if_t<!std::is_base_of_v<caf::serializer, Inspector> &&
                     !std::is_base_of_v<caf::deserializer, Inspector>,
                 typename Inspector::result_type>
inspect(Inspector& f, dvec& x) {
  std::size_t n = x.size();
  return f(caf::meta::type_name("dvec"), n);
}
template <class Inspector>
std::enable_if_t<!std::is_base_of_v<caf::serializer, Inspector> &&
                     !std::is_base_of_v<caf::deserializer, Inspector>,
                 typename Inspector::result_type>
inspect(Inspector& f, sparse_dvec& x) {
  std::size_t n = x.size();
  return f(caf::meta::type_name("sparse_dvec"), n);
}

template <class Inspector>
std::enable_if_t<!std::is_base_of_v<caf::serializer, Inspector> &&
                     !std::is_base_of_v<caf::deserializer, Inspector>,
                 typename Inspector::result_type>
inspect(Inspector& f, key_list& x) {
  std::size_t n = x.size();
  return f(caf::meta::type_name("key_list"), n);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, block_sums& x) {
  return f(caf::meta::type_name("block_sums"), x.loss_sum, x.gap_sum, x.reg_sum);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_report& x) {
  return f(caf::meta::type_name("worker_report"), x.worker, x.clock, x.processed, x.bytes);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shard_stats& x) {
  return f(caf::meta::type_name("shard_stats"), x.updates, x.pulls, x.bytes_in, x.bytes_out,
           x.max_granted_staleness, x.clocks);
}

}  // namespace dml::actors
