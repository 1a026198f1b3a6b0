#pragma once
// The CAF side of the actors' message payloads (dml/net/payloads.hpp): each
// is written into a CAF message as its one Cap'n Proto Envelope
// (dml/net/payload_codec.hpp), a raw block, never element by element. A
// payload that does not decode arrives with `wire_error` set (see
// payloads.hpp); only CAF's own framing can fail a message.

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

#include "dml/net/payloads.hpp"

namespace dml::actors {

/// The payloads themselves are net's (dml/net/payloads.hpp); the actors use
/// them by these names.
using net::block_sums;
using net::dvec;
using net::int64_list;
using net::key_list;
using net::kv_kind;
using net::kv_message;
using net::kMaxVectorEntries;
using net::shard_config;
using net::shard_stats;
using net::sparse_dvec;
using net::worker_report;
using net::worker_spec;

}  // namespace dml::actors

// The inspect overloads live beside the payloads' namespace, where CAF finds
// them by argument-dependent lookup.
namespace dml::net {

/// Serialisation for CAF: every payload is one Cap'n Proto Envelope
/// (implemented in wire.cpp). Deserialising never returns an error for bad
/// payload bytes (see wire_error above); only CAF's own framing can fail.
/// Other inspectors (to_string) see describe(x).
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

/// A one-line summary for CAF's to_string and logs: the type with its size
/// or a few key fields, never a vector's values.
std::string describe(const dvec& x);
std::string describe(const sparse_dvec& x);
std::string describe(const key_list& x);
std::string describe(const block_sums& x);
std::string describe(const worker_report& x);
std::string describe(const shard_stats& x);
std::string describe(const int64_list& x);
std::string describe(const kv_message& x);
std::string describe(const worker_spec& x);
std::string describe(const shard_config& x);

DML_WIRE_PAYLOAD(dvec)
DML_WIRE_PAYLOAD(sparse_dvec)
DML_WIRE_PAYLOAD(key_list)
DML_WIRE_PAYLOAD(block_sums)
DML_WIRE_PAYLOAD(worker_report)
DML_WIRE_PAYLOAD(shard_stats)
DML_WIRE_PAYLOAD(int64_list)
DML_WIRE_PAYLOAD(kv_message)
DML_WIRE_PAYLOAD(worker_spec)
DML_WIRE_PAYLOAD(shard_config)

}  // namespace dml::net
