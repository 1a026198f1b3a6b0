// The wire codec: round trips, the exact bytes of a tiny message (this pins
// the wire format: a change here breaks every peer and every checkpoint),
// and hostile input -- truncation at every length, random byte flips,
// wrong version or kind, broken invariants, oversize input.
#define BOOST_TEST_MODULE net_codec
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "dml/net/codec.hpp"
#include "dml/net/messages.hpp"

namespace {

using dml::net::DecodeDense;
using dml::net::DecodeLimits;
using dml::net::DecodeSparse;
using dml::net::DenseVec;
using dml::net::EncodeDense;
using dml::net::EncodeSparse;
using dml::net::SparseVec;

std::string Bytes(std::initializer_list<uint8_t> b) { return std::string(b.begin(), b.end()); }

std::string MustEncode(const SparseVec& v) {
  auto bytes = EncodeSparse(v);
  BOOST_REQUIRE_MESSAGE(bytes.ok(), bytes.status().ToString());
  return *std::move(bytes);
}

// dim=5, indices {1,3}, values {0.5,-2}, derived by hand from the Cap'n Proto
// encoding spec (all integers little-endian):
const std::string kTinyWire = Bytes({
    // Segment table: (segment count - 1) = 0, segment 0 size = 8 words.
    0x00, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00,
    // w0 root pointer: struct (tag 0), offset 0 -> w1; data 1 word, 1 pointer.
    0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00,
    // w1 Envelope data: schemaVersion = 1 (bits 0-15), union discriminant = 1
    //    = sparseVector (bits 16-31; none = 0, denseVector = 2).
    0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
    // w2 Envelope pointer 0: struct, offset 0 -> w3; data 1 word, 2 pointers.
    0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x02, 0x00,
    // w3 SparseVector data: dim = 5 (UInt64).
    0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    // w4 indices: list pointer (tag 1), offset 1 -> w6: lower word (1<<2)|1 = 5;
    //    upper word: element size 4 (FOUR_BYTES) | count 2 << 3 = 0x14.
    0x05, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00,
    // w5 values: list pointer, offset 1 -> w7, FOUR_BYTES, 2 elements.
    0x05, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00,
    // w6 indices data: 1, 3 (UInt32).
    0x01, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00,
    // w7 values data: 0.5f = 0x3f000000, -2.0f = 0xc0000000 (Float32).
    0x00, 0x00, 0x00, 0x3f, 0x00, 0x00, 0x00, 0xc0,
});
// Byte offsets into kTinyWire used to forge bad messages (8 + 8 * word).
constexpr std::size_t kVersionByte = 16;      // w1
constexpr std::size_t kDiscriminantByte = 18; // w1 bits 16-31
constexpr std::size_t kDimByte = 32;          // w3
constexpr std::size_t kValuesCountByte = 52;  // w5 upper half
constexpr std::size_t kIndex1Byte = 60;       // w6 second element
constexpr std::size_t kValue1Byte = 68;       // w7 second element

SparseVec Tiny() { return SparseVec{5, {1, 3}, {0.5f, -2.0f}}; }

SparseVec RandomSparse(std::mt19937& rng, uint64_t dim, double density) {
  std::bernoulli_distribution keep(density);
  std::normal_distribution<float> value(0.0f, 3.0f);
  SparseVec v;
  v.dim = dim;
  for (uint64_t j = 0; j < dim; ++j) {
    if (keep(rng)) {
      v.indices.push_back(static_cast<uint32_t>(j));
      v.values.push_back(value(rng));
    }
  }
  return v;
}

void PutU32(std::string& s, std::size_t at, uint32_t x) { std::memcpy(&s[at], &x, 4); }
void PutU64(std::string& s, std::size_t at, uint64_t x) { std::memcpy(&s[at], &x, 8); }
void PutF32(std::string& s, std::size_t at, float x) { std::memcpy(&s[at], &x, 4); }

void CheckError(const absl::Status& s, absl::StatusCode code, const std::string& message) {
  BOOST_TEST_CONTEXT("status " << s.ToString()) {
    BOOST_TEST(!s.ok());
    BOOST_TEST(static_cast<int>(s.code()) == static_cast<int>(code));
    BOOST_TEST(std::string(s.message()) == message);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(exact_bytes_of_a_tiny_vector) {
  const std::string wire = MustEncode(Tiny());
  BOOST_REQUIRE_EQUAL(wire.size(), kTinyWire.size());
  for (std::size_t i = 0; i < wire.size(); ++i) {
    BOOST_TEST(static_cast<int>(static_cast<uint8_t>(wire[i])) ==
                   static_cast<int>(static_cast<uint8_t>(kTinyWire[i])),
               "byte " << i);
  }
  // And the hand-written bytes decode to the vector.
  auto back = DecodeSparse(kTinyWire);
  BOOST_REQUIRE_MESSAGE(back.ok(), back.status().ToString());
  BOOST_TEST((*back == Tiny()));
}

BOOST_AUTO_TEST_CASE(round_trips) {
  std::mt19937 rng(42);
  const std::vector<SparseVec> cases = {
      SparseVec{},                                   // dim 0, no entries
      SparseVec{7, {}, {}},                          // all zeros
      SparseVec{1, {0}, {-0.0f}},                    // odd count, negative zero
      SparseVec{uint64_t{1} << 32, {0, 4294967295u}, {1e-38f, 3.4e38f}},  // extremes
      RandomSparse(rng, 1000, 0.1),
      RandomSparse(rng, 100000, 0.01),
  };
  for (const SparseVec& v : cases) {
    const std::string wire = MustEncode(v);
    BOOST_TEST(wire.size() % 8 == 0);
    auto back = DecodeSparse(wire);
    BOOST_REQUIRE_MESSAGE(back.ok(), back.status().ToString());
    BOOST_TEST((*back == v), "dim " << v.dim << " nnz " << v.indices.size());
    // Bit-exact values (== treats -0 and +0 alike).
    if (!v.values.empty()) {
      BOOST_TEST(std::memcmp(back->values.data(), v.values.data(),
                             v.values.size() * sizeof(float)) == 0);
    }
  }
  const DenseVec dense{{1.0f, -2.5f, 0.0f, 1e30f, -7.0f}};
  auto wire = EncodeDense(dense);
  BOOST_REQUIRE_MESSAGE(wire.ok(), wire.status().ToString());
  auto back = DecodeDense(*wire);
  BOOST_REQUIRE_MESSAGE(back.ok(), back.status().ToString());
  BOOST_TEST((*back == dense));
}

BOOST_AUTO_TEST_CASE(large_vector_beyond_capnp_default_traversal_limit) {
  // 9.5M nonzeros = ~76 MB of message: more than Cap'n Proto's default 64 MiB
  // traversal limit, so this passes only because the limit follows the length.
  SparseVec v;
  v.dim = 10'000'000;
  v.indices.resize(9'500'000);
  v.values.resize(9'500'000);
  for (uint32_t k = 0; k < v.indices.size(); ++k) {
    v.indices[k] = k + k / 19;
    v.values[k] = static_cast<float>(k % 1000) * 0.25f;
  }
  const std::string wire = MustEncode(v);
  BOOST_TEST(wire.size() == 8 * (1 + 1 + 2 + 3 + 2 * 4'750'000));
  auto back = DecodeSparse(wire);
  BOOST_REQUIRE_MESSAGE(back.ok(), back.status().ToString());
  BOOST_TEST((*back == v));
}

BOOST_AUTO_TEST_CASE(unaligned_input_is_accepted) {
  std::string buffer = std::string(1, 'x') + kTinyWire;
  std::string_view shifted(buffer.data() + 1, kTinyWire.size());
  BOOST_REQUIRE(reinterpret_cast<std::uintptr_t>(shifted.data()) % 8 != 0);
  auto back = DecodeSparse(shifted);
  BOOST_REQUIRE_MESSAGE(back.ok(), back.status().ToString());
  BOOST_TEST((*back == Tiny()));
}

BOOST_AUTO_TEST_CASE(truncation_at_every_length_is_rejected) {
  std::mt19937 rng(3);
  for (const std::string& wire : {kTinyWire, MustEncode(RandomSparse(rng, 300, 0.2))}) {
    for (std::size_t len = 0; len < wire.size(); ++len) {
      BOOST_TEST_CONTEXT("length " << len << " of " << wire.size()) {
        auto r = DecodeSparse(std::string_view(wire.data(), len));
        BOOST_REQUIRE(!r.ok());
        const std::string msg(r.status().message());
        BOOST_TEST(static_cast<int>(r.status().code()) ==
                   static_cast<int>(absl::StatusCode::kDataLoss));
        if (len == 0) {
          BOOST_TEST(msg == "empty message");
        } else if (len % 8 != 0) {
          BOOST_TEST(msg == "message length " + std::to_string(len) +
                                " is not a multiple of 8 bytes");
        } else {
          BOOST_TEST(msg.rfind("corrupt Cap'n Proto message: ", 0) == 0, msg);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(trailing_bytes_are_rejected) {
  CheckError(DecodeSparse(kTinyWire + std::string(8, '\0')).status(),
             absl::StatusCode::kDataLoss, "8 trailing bytes after the message");
}

BOOST_AUTO_TEST_CASE(random_byte_flips_never_crash) {
  std::mt19937 rng(2024);
  const std::string base = MustEncode(RandomSparse(rng, 200, 0.1));
  std::uniform_int_distribution<std::size_t> pos(0, base.size() - 1);
  std::uniform_int_distribution<int> flips(1, 4);
  std::uniform_int_distribution<int> byte(0, 255);
  int accepted = 0;
  int rejected = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string wire = base;
    for (int f = flips(rng); f > 0; --f) wire[pos(rng)] = static_cast<char>(byte(rng));
    auto r = DecodeSparse(wire);
    if (r.ok()) {
      ++accepted;
      // Whatever decodes must satisfy every invariant.
      BOOST_REQUIRE(dml::net::ValidateSparse(*r).ok());
    } else {
      ++rejected;
      BOOST_REQUIRE(!r.status().message().empty());
    }
  }
  BOOST_TEST_MESSAGE("byte flips: " << accepted << " decoded, " << rejected << " rejected");
  BOOST_TEST(accepted > 0);
  BOOST_TEST(rejected > 0);
}

BOOST_AUTO_TEST_CASE(wrong_schema_version) {
  std::string wire = kTinyWire;
  wire[kVersionByte] = 2;
  CheckError(DecodeSparse(wire).status(), absl::StatusCode::kInvalidArgument,
             "schema version 2, expected 1");
  wire[kVersionByte] = 0;
  CheckError(DecodeSparse(wire).status(), absl::StatusCode::kInvalidArgument,
             "schema version 0, expected 1");
}

BOOST_AUTO_TEST_CASE(wrong_payload_kind) {
  auto dense = EncodeDense(DenseVec{{1.0f, 2.0f}});
  BOOST_REQUIRE(dense.ok());
  CheckError(DecodeSparse(*dense).status(), absl::StatusCode::kInvalidArgument,
             "expected payload kind 'sparseVector', got payload kind 'denseVector'");
  CheckError(DecodeDense(kTinyWire).status(), absl::StatusCode::kInvalidArgument,
             "expected payload kind 'denseVector', got payload kind 'sparseVector'");
  std::string wire = kTinyWire;
  wire[kDiscriminantByte] = 0;
  CheckError(DecodeSparse(wire).status(), absl::StatusCode::kInvalidArgument,
             "expected payload kind 'sparseVector', got no payload");
  wire[kDiscriminantByte] = 9;  // workerSpec: a valid kind, not the expected one
  CheckError(DecodeSparse(wire).status(), absl::StatusCode::kInvalidArgument,
             "expected payload kind 'sparseVector', got payload kind 'workerSpec'");
  wire[kDiscriminantByte] = 99;  // a kind from some future schema
  CheckError(DecodeSparse(wire).status(), absl::StatusCode::kInvalidArgument,
             "expected payload kind 'sparseVector', got unknown payload kind 99");
}

BOOST_AUTO_TEST_CASE(index_out_of_range) {
  std::string wire = kTinyWire;
  PutU64(wire, kDimByte, 3);
  CheckError(DecodeSparse(wire).status(), absl::StatusCode::kInvalidArgument,
             "index 3 at position 1 is out of range for dim 3");
  PutU64(wire, kDimByte, (uint64_t{1} << 32) + 1);
  CheckError(DecodeSparse(wire).status(), absl::StatusCode::kInvalidArgument,
             "dim 4294967297 exceeds the 32-bit index space");
}

BOOST_AUTO_TEST_CASE(indices_not_increasing) {
  std::string wire = kTinyWire;
  PutU32(wire, kIndex1Byte, 1);
  CheckError(DecodeSparse(wire).status(), absl::StatusCode::kInvalidArgument,
             "indices not strictly increasing at position 1: 1 after 1");
  PutU32(wire, kIndex1Byte, 0);
  CheckError(DecodeSparse(wire).status(), absl::StatusCode::kInvalidArgument,
             "indices not strictly increasing at position 1: 0 after 1");
}

BOOST_AUTO_TEST_CASE(mismatched_lengths) {
  std::string wire = kTinyWire;
  wire[kValuesCountByte] = 0x0c;  // FOUR_BYTES | 1 << 3: values now has 1 entry
  CheckError(DecodeSparse(wire).status(), absl::StatusCode::kInvalidArgument,
             "indices has 2 entries but values has 1");
}

BOOST_AUTO_TEST_CASE(non_finite_values) {
  std::string wire = kTinyWire;
  PutF32(wire, kValue1Byte, std::numeric_limits<float>::quiet_NaN());
  CheckError(DecodeSparse(wire).status(), absl::StatusCode::kInvalidArgument,
             "value at position 1 is not finite (nan)");
  PutF32(wire, kValue1Byte, -std::numeric_limits<float>::infinity());
  CheckError(DecodeSparse(wire).status(), absl::StatusCode::kInvalidArgument,
             "value at position 1 is not finite (-inf)");
}

BOOST_AUTO_TEST_CASE(oversize_input_is_refused_before_parsing) {
  DecodeLimits limits;
  limits.max_bytes = 64;
  CheckError(DecodeSparse(kTinyWire, limits).status(), absl::StatusCode::kResourceExhausted,
             "message of 72 bytes exceeds the limit of 64 bytes");
  limits.max_bytes = 72;
  BOOST_TEST(DecodeSparse(kTinyWire, limits).ok());
}

BOOST_AUTO_TEST_CASE(encoder_refuses_what_a_peer_would_reject) {
  CheckError(EncodeSparse(SparseVec{5, {1, 3}, {0.5f}}).status(),
             absl::StatusCode::kInvalidArgument, "indices has 2 entries but values has 1");
  CheckError(EncodeSparse(SparseVec{5, {1, 5}, {0.5f, 1.0f}}).status(),
             absl::StatusCode::kInvalidArgument,
             "index 5 at position 1 is out of range for dim 5");
  CheckError(EncodeSparse(SparseVec{5, {3, 1}, {0.5f, 1.0f}}).status(),
             absl::StatusCode::kInvalidArgument,
             "indices not strictly increasing at position 1: 1 after 3");
  CheckError(EncodeDense(DenseVec{{1.0f, std::numeric_limits<float>::infinity()}}).status(),
             absl::StatusCode::kInvalidArgument, "value at position 1 is not finite (inf)");
}
