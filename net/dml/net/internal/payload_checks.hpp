#pragma once
// The invariants of every payload, checked by the encoder (we never send
// what a peer would refuse) and by the decoder (hostile input), with the
// field named: InvalidArgument. Plain C++; for the codec's .cpp files.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "dml/net/internal/envelope.hpp"
#include "dml/net/payloads.hpp"

namespace dml::net::internal {

absl::Status Invalid(absl::string_view field, absl::string_view what);

template <class T>
inline absl::Status CheckVectorLength(std::size_t n, const char* field) {
  if (n > kMaxVectorEntries) {
    return Invalid(field, absl::StrCat(n, " entries exceed the limit of ", kMaxVectorEntries));
  }
  return CheckListLength(n, field);
}

absl::Status CheckIncreasing(const std::vector<uint32_t>& v, const char* field);
absl::Status CheckFinite(double x, const char* field);
absl::Status CheckNonNegative(int64_t x, const char* field);
absl::Status CheckModelKind(uint16_t kind, const char* field);
absl::Status CheckMode(uint16_t mode, const char* field);
absl::Status CheckModel(const ModelSpec& x, const char* field);
absl::Status CheckLoad(const LibsvmOptions& x);
absl::Status CheckBulkRef(const BulkRef& r);

absl::Status Check(const dvec& x);
absl::Status Check(const sparse_dvec& x);
absl::Status Check(const key_list& x);
absl::Status Check(const block_sums& x);
absl::Status Check(const worker_report& x);
absl::Status Check(const shard_stats& x);
absl::Status Check(const int64_list& x);
absl::Status Check(const worker_spec& x);
absl::Status Check(const shard_config& x);
absl::Status Check(const dense_block& x);
absl::Status Check(const kv_message& x);
absl::Status Check(const Progress& x);
absl::Status Check(const job_checkpoint& x);
absl::Status Check(const model_file& x);

}  // namespace dml::net::internal
