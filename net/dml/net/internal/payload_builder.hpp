#pragma once
// The payload codec one level down, for a writer that hands Cap'n Proto's
// segments to its own framing without flattening them (the actors' CAF
// shim): build a checked payload into a builder sized by PayloadWords.
// Includes Cap'n Proto headers: include it only from .cpp files.

#include <capnp/message.h>

#include <cstddef>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dml/net/bulk.hpp"
#include "dml/net/codec.hpp"
#include "dml/net/payloads.hpp"

namespace dml::net::internal {

#define DML_PAYLOAD_BUILDER(T)                                                  \
  absl::Status BuildPayload(const T& x, capnp::MallocMessageBuilder& builder); \
  std::size_t PayloadWords(const T& x);
DML_PAYLOAD_BUILDER(dvec)
DML_PAYLOAD_BUILDER(sparse_dvec)
DML_PAYLOAD_BUILDER(key_list)
DML_PAYLOAD_BUILDER(block_sums)
DML_PAYLOAD_BUILDER(worker_report)
DML_PAYLOAD_BUILDER(shard_stats)
DML_PAYLOAD_BUILDER(int64_list)
DML_PAYLOAD_BUILDER(worker_spec)
DML_PAYLOAD_BUILDER(shard_config)
DML_PAYLOAD_BUILDER(dense_block)
DML_PAYLOAD_BUILDER(kv_message)
#undef DML_PAYLOAD_BUILDER

/// A BulkVector envelope for `ref`, checked.
absl::Status BuildBulkReference(const BulkRef& ref, capnp::MallocMessageBuilder& builder);

}  // namespace dml::net::internal
