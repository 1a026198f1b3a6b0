// The CAF shim of the wire format: the inspect overloads that put a
// payload's Envelope (dml/net/payload_codec.hpp, the one codec) into a CAF
// message as one raw block, and take it out again.
//
// Copies: encoding copies each vector once into the Cap'n Proto builder,
// whose segments CAF's serializer then copies into its send buffer (no
// intermediate flat array). Decoding copies CAF's bytes once into an
// aligned buffer that Cap'n Proto reads in place, then each list once into
// the payload's vector. A large dvec leaves as a reference to this
// process's bulk channel and arrives as one: nothing is fetched here (the
// receiving actor fetches it, dml/actors/internal/bulk_resolve.hpp).

#include "dml/actors/wire.hpp"

#include <caf/binary_deserializer.hpp>
#include <caf/none.hpp>
#include <caf/sec.hpp>

#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dml/actors/dense_block.hpp"
#include "dml/actors/network.hpp"
#include "dml/actors/transport.hpp"
#include "dml/net/internal/envelope.hpp"
#include "dml/net/internal/payload_builder.hpp"
#include "dml/util/status.hpp"

namespace dml::net {
namespace {

using internal::kWordBytes;

/// Largest Envelope CAF may hand us (2^31 bytes); a larger length in CAF's
/// framing is refused before any allocation.
constexpr std::size_t kMaxEnvelopeBytes = std::size_t{1} << 31;

// A large dvec leaves through the sending system's bulk channel, where it
// serves: only a BulkVector reference enters the CAF message.
bool WantsBulk(const dvec& x, BulkChannel* bulk) {
  return bulk != nullptr && static_cast<std::size_t>(x.bytes()) >= kBulkMinBytes &&
         x.size() <= kMaxVectorEntries && !x.ref;
}
template <class T>
bool WantsBulk(const T&, BulkChannel*) {
  return false;
}
// Returns whether the reference was built.
bool BuildBulk(const dvec& x, BulkChannel* bulk, capnp::MallocMessageBuilder& builder) {
  if (!WantsBulk(x, bulk)) return false;
  auto ref = bulk->Offer(x.owner, x.data(), x.size());
  if (!ref) return false;  // not serving, or too much waits already
  return internal::BuildBulkReference(*ref, builder).ok();
}
template <class T>
bool BuildBulk(const T&, BulkChannel*, capnp::MallocMessageBuilder&) {
  return false;
}

// Writes x's Envelope as CAF's sequence length + one raw block per segment
// table and segment: the bytes equal ToWire(x) (or, for a large dvec, a
// BulkVector reference to it).
template <class T>
caf::error WriteEnvelope(caf::serializer& f, const T& x) {
  if constexpr (std::is_same_v<T, dvec>) {
    // A reference still unresolved is never forwarded (it names a peer's
    // offer, not ours).
    if (x.ref) {
      return caf::make_error(caf::sec::invalid_argument,
                             "a bulk reference cannot be sent on; fetch its values first");
    }
  }
  BulkChannel* bulk = actors::BulkChannelOf(f.context());
  // Sized for the reference when one is likely, else for the whole payload
  // (one contiguous segment); a refused offer only costs extra segments.
  capnp::MallocMessageBuilder builder(static_cast<unsigned>(
      std::max<std::size_t>(WantsBulk(x, bulk) ? 16 : internal::PayloadWords(x), 16)));
  if (BuildBulk(x, bulk, builder)) {
    // the reference is built
  } else if (auto s = internal::BuildPayload(x, builder); !s.ok()) {
    return caf::make_error(caf::sec::invalid_argument, std::string(s.message()));
  }
  auto segments = builder.getSegmentsForOutput();
  // Cap'n Proto's framing: (count - 1), then each size in words, as
  // little-endian uint32, padded to a whole word.
  std::vector<uint32_t> table(segments.size() + 1 + (segments.size() + 1) % 2, 0);
  table[0] = static_cast<uint32_t>(segments.size() - 1);
  std::size_t total = table.size() * sizeof(uint32_t);
  for (std::size_t i = 0; i < segments.size(); ++i) {
    table[i + 1] = static_cast<uint32_t>(segments[i].size());
    total += segments[i].size() * kWordBytes;
  }
  // A frame the receiver would refuse (transport.hpp): say so here, with
  // the remedy, instead of the peer closing the connection.
  if (total + 4096 > actors::MaxFrameBytes()) {
    return caf::make_error(caf::sec::invalid_argument,
                           absl::StrCat("a payload of ", total, " bytes exceeds the frame bound of ",
                                        actors::MaxFrameBytes(), " bytes (dml-node --max-frame-bytes; "
                                        "large vectors travel over the bulk channel when it is on)"));
  }
  if (auto err = f.begin_sequence(total)) return err;
  if (auto err = f.apply_raw(table.size() * sizeof(uint32_t), table.data())) return err;
  for (auto seg : segments) {
    if (auto err = f.apply_raw(seg.size() * kWordBytes, const_cast<capnp::word*>(seg.begin()))) {
      return err;
    }
  }
  return f.end_sequence();
}

// Decodes one payload; a dvec may arrive as a bulk reference (kept as
// such: no I/O inside the deserializer).
template <class T>
absl::Status Decode(std::string_view bytes, T* value) {
  return FromWire(bytes, value);
}
absl::Status Decode(std::string_view bytes, dvec* value) {
  return FromWireOrReference(bytes, value);
}

// Reads the bytes WriteEnvelope wrote. Only CAF framing errors (and a
// length the received buffer cannot hold) fail the message; a payload that
// does not decode sets x.wire_error.
template <class T>
caf::error ReadEnvelope(caf::deserializer& f, T& x) {
  std::size_t n = 0;
  if (auto err = f.begin_sequence(n)) return err;
  if (n > kMaxEnvelopeBytes) {
    return caf::make_error(caf::sec::invalid_argument,
                           absl::StrCat("payload of ", n, " bytes exceeds the limit of ",
                                        kMaxEnvelopeBytes));
  }
  if (auto* bin = dynamic_cast<caf::binary_deserializer*>(&f);
      bin != nullptr && bin->remaining() < n) {
    return caf::make_error(caf::sec::invalid_argument,
                           absl::StrCat("payload claims ", n, " bytes but only ",
                                        bin->remaining(), " remain"));
  }
  // Word-aligned storage, so Cap'n Proto reads it in place.
  std::unique_ptr<capnp::word[]> words(new capnp::word[(n + kWordBytes - 1) / kWordBytes]);
  if (n > 0) {
    if (auto err = f.apply_raw(n, words.get())) return err;
  }
  if (auto err = f.end_sequence()) return err;
  T value;
  const std::string_view bytes(reinterpret_cast<const char*>(words.get()), n);
  if (auto s = Decode(bytes, &value); !s.ok()) {
    x = T{};
    x.wire_error = std::string(s.message());
    if (x.wire_error.empty()) x.wire_error = "undecodable payload";
    return caf::none;
  }
  x = std::move(value);
  return caf::none;
}

}  // namespace

#define DML_CAF_IMPL(T)                                                           \
  caf::error inspect(caf::serializer& f, T& x) { return WriteEnvelope(f, x); }   \
  caf::error inspect(caf::deserializer& f, T& x) { return ReadEnvelope(f, x); }
DML_CAF_IMPL(dvec)
DML_CAF_IMPL(sparse_dvec)
DML_CAF_IMPL(key_list)
DML_CAF_IMPL(block_sums)
DML_CAF_IMPL(worker_report)
DML_CAF_IMPL(shard_stats)
DML_CAF_IMPL(int64_list)
DML_CAF_IMPL(worker_spec)
DML_CAF_IMPL(shard_config)
DML_CAF_IMPL(dense_block)
DML_CAF_IMPL(kv_message)
#undef DML_CAF_IMPL

std::string describe(const dvec& x) {
  return x.ref ? absl::StrCat("dvec[", x.ref->count, ", by reference]")
               : absl::StrCat("dvec[", x.size(), "]");
}
std::string describe(const sparse_dvec& x) { return absl::StrCat("sparse_dvec[", x.size(), "]"); }
std::string describe(const key_list& x) { return absl::StrCat("key_list[", x.size(), "]"); }
std::string describe(const block_sums& x) {
  return absl::StrCat("block_sums(", x.loss_sum, ", ", x.gap_sum, ", ", x.reg_sum, ")");
}
std::string describe(const worker_report& x) {
  return absl::StrCat("worker_report(worker ", x.worker, ", clock ", x.clock, ")");
}
std::string describe(const shard_stats& x) {
  return absl::StrCat("shard_stats(updates ", x.updates, ", pulls ", x.pulls, ")");
}
std::string describe(const dense_block& x) { return absl::StrCat("dense_block[", x.size(), "]"); }
std::string describe(const kv_message& x) {
  return absl::StrCat("kv_message(kind ", static_cast<int>(x.kind), ", op ", x.requester, ":", x.op,
                      ", ", x.keys.size(), " keys)");
}
std::string describe(const int64_list& x) { return absl::StrCat("int64_list[", x.values.size(), "]"); }
std::string describe(const worker_spec& x) {
  return absl::StrCat("worker_spec(", AsAbsl(ModeName(x.mode)), ", ", x.index, "/", x.workers,
                      ", ", x.path, ")");
}
std::string describe(const shard_config& x) {
  return absl::StrCat("shard_config(", AsAbsl(ModeName(x.mode)), ", [", x.begin, ", ", x.end, "))");
}

}  // namespace dml::net
