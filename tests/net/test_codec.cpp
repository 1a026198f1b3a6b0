// The one wire codec (dml/net/payload_codec.hpp), from the net layer alone
// (no CAF): the exact bytes of a tiny Vector (this pins the wire format: a
// change here breaks every peer and every checkpoint), the payload kind
// choosing the path (a Vector or a BulkVector reference), and hostile
// input -- truncation at every length, trailing bytes, unaligned input,
// wrong version or kind, oversize input, and a message past Cap'n Proto's
// default traversal limit. test_wire (actors) covers every payload type
// and its invariants; this file covers the framing once.
#define BOOST_TEST_MODULE net_codec
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cmath>
#include <limits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "dml/net/payload_codec.hpp"
#include "absl/strings/match.h"

namespace {

using dml::net::BulkRef;
using dml::net::DecodeLimits;
using dml::net::dvec;
using dml::net::FromWire;
using dml::net::FromWireOrReference;
using dml::net::ToWire;

std::string Bytes(std::initializer_list<uint8_t> b) { return std::string(b.begin(), b.end()); }

// dvec {0.5, -2}, derived by hand from the Cap'n Proto encoding spec (all
// integers little-endian):
const std::string kTinyWire = Bytes({
    // Segment table: (segment count - 1) = 0, segment 0 size = 6 words.
    0x00, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00,
    // w0 root pointer: struct (tag 0), offset 0 -> w1; data 1 word, 1 pointer.
    0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00,
    // w1 Envelope data: schemaVersion = 1 (bits 0-15), union discriminant 3
    //    = vector (bits 16-31; none 0, sparseVector 1, denseVector 2).
    0x01, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00,
    // w2 Envelope pointer 0: struct, offset 0 -> w3; data 0 words, 1 pointer.
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00,
    // w3 Vector.values: list pointer (tag 1), offset 0 -> w4: lower word 1;
    //    upper word: element size 5 (EIGHT_BYTES) | count 2 << 3 = 0x15.
    0x01, 0x00, 0x00, 0x00, 0x15, 0x00, 0x00, 0x00,
    // w4, w5: 0.5 = 0x3fe0000000000000, -2.0 = 0xc000000000000000 (Float64).
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xe0, 0x3f,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0,
});
constexpr std::size_t kVersionByte = 16;       // w1
constexpr std::size_t kDiscriminantByte = 18;  // w1 bits 16-31

dvec Tiny() { return dvec(std::vector<double>{0.5, -2.0}); }

void CheckError(const absl::Status& s, absl::StatusCode code, const std::string& message) {
  BOOST_TEST_CONTEXT("status " << s.ToString()) {
    BOOST_TEST(!s.ok());
    BOOST_TEST(static_cast<int>(s.code()) == static_cast<int>(code));
    BOOST_TEST(std::string(s.message()) == message);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(exact_bytes_of_a_tiny_vector) {
  auto wire = ToWire(Tiny());
  BOOST_REQUIRE_MESSAGE(wire.ok(), wire.status().ToString());
  BOOST_TEST(*wire == kTinyWire);
  dvec back;
  BOOST_REQUIRE(FromWire(kTinyWire, &back).ok());
  BOOST_TEST(back.to_vector() == Tiny().to_vector());
}

// The envelope's kind picks the path: a Vector gives values, a BulkVector
// a reference (nothing fetched), anything else is refused by name.
BOOST_AUTO_TEST_CASE(the_payload_kind_chooses_values_or_a_reference) {
  dvec values;
  BOOST_REQUIRE(FromWireOrReference(kTinyWire, &values).ok());
  BOOST_TEST(values.size() == 2u);
  BOOST_TEST(!values.ref);

  BulkRef sent{"127.0.0.1", 4242, "", 7, 40000, 0, 0, 0, 0};
  auto wire = ToWire(sent);
  BOOST_REQUIRE_MESSAGE(wire.ok(), wire.status().ToString());
  dvec by_reference;
  BOOST_REQUIRE(FromWireOrReference(*wire, &by_reference).ok());
  BOOST_TEST(!by_reference.has_values());
  BOOST_REQUIRE(by_reference.ref);
  const BulkRef& got = *by_reference.ref;
  BOOST_TEST(got.host == "127.0.0.1");
  BOOST_TEST(got.port == 4242);
  BOOST_TEST(got.ticket == 7u);
  BOOST_TEST(got.count == 40000u);
  // A reference is no Vector for a reader that wants values only.
  dvec strict;
  CheckError(FromWire(*wire, &strict), absl::StatusCode::kInvalidArgument,
             "expected payload kind 'vector', got payload kind 'bulkVector'");

  auto report = ToWire(dml::net::worker_report{1, 2, 3, 4, {}});
  BOOST_REQUIRE(report.ok());
  dvec untouched;
  CheckError(FromWireOrReference(*report, &untouched), absl::StatusCode::kInvalidArgument,
             "expected payload kind 'vector', got payload kind 'workerReport'");
}

BOOST_AUTO_TEST_CASE(large_vector_beyond_capnp_default_traversal_limit) {
  // 9M doubles = 72 MB of message: more than Cap'n Proto's default 64 MiB
  // traversal limit, so this passes only because the limit follows the length.
  std::vector<double> v(9'000'000);
  for (std::size_t k = 0; k < v.size(); ++k) v[k] = static_cast<double>(k % 1000) * 0.25;
  auto wire = ToWire(dvec(v));
  BOOST_REQUIRE(wire.ok());
  BOOST_TEST(wire->size() == 8 * (1 + 1 + 1 + 1 + 1 + 9'000'000));
  dvec back;
  BOOST_REQUIRE(FromWire(*wire, &back).ok());
  BOOST_TEST(back.to_vector() == v);
}

BOOST_AUTO_TEST_CASE(unaligned_input_is_accepted) {
  std::string buffer = std::string(1, 'x') + kTinyWire;
  std::string_view shifted(buffer.data() + 1, kTinyWire.size());
  BOOST_REQUIRE(reinterpret_cast<std::uintptr_t>(shifted.data()) % 8 != 0);
  dvec back;
  BOOST_REQUIRE(FromWire(shifted, &back).ok());
  BOOST_TEST(back.to_vector() == Tiny().to_vector());
}

BOOST_AUTO_TEST_CASE(truncation_at_every_length_is_rejected) {
  std::vector<double> many(37);
  for (std::size_t k = 0; k < many.size(); ++k) many[k] = std::sin(static_cast<double>(k));
  for (const std::string& wire : {kTinyWire, *ToWire(dvec(many))}) {
    for (std::size_t len = 0; len < wire.size(); ++len) {
      BOOST_TEST_CONTEXT("length " << len << " of " << wire.size()) {
        dvec out;
        const absl::Status s = FromWire(std::string_view(wire.data(), len), &out);
        BOOST_REQUIRE(!s.ok());
        const std::string msg(s.message());
        BOOST_TEST(static_cast<int>(s.code()) == static_cast<int>(absl::StatusCode::kDataLoss));
        if (len == 0) {
          BOOST_TEST(msg == "empty message");
        } else if (len % 8 != 0) {
          BOOST_TEST(msg == "message length " + std::to_string(len) +
                                " is not a multiple of 8 bytes");
        } else {
          BOOST_TEST(msg.rfind("corrupt Cap'n Proto message: ", 0) == 0, msg);
        }
        BOOST_TEST(!out.has_values());
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(trailing_bytes_are_rejected) {
  dvec out;
  CheckError(FromWire(kTinyWire + std::string(8, '\0'), &out), absl::StatusCode::kDataLoss,
             "8 trailing bytes after the message");
}

BOOST_AUTO_TEST_CASE(wrong_schema_version) {
  std::string wire = kTinyWire;
  wire[kVersionByte] = 2;
  dvec out;
  CheckError(FromWire(wire, &out), absl::StatusCode::kInvalidArgument,
             "schema version 2, expected 1");
  CheckError(FromWireOrReference(wire, &out), absl::StatusCode::kInvalidArgument,
             "schema version 2, expected 1");
}

BOOST_AUTO_TEST_CASE(wrong_payload_kind) {
  std::string wire = kTinyWire;
  wire[kDiscriminantByte] = 0;  // none
  dvec out;
  CheckError(FromWire(wire, &out), absl::StatusCode::kInvalidArgument,
             "expected payload kind 'vector', got no payload");
}

BOOST_AUTO_TEST_CASE(oversize_input_is_refused_before_parsing) {
  DecodeLimits limits;
  limits.max_bytes = 48;
  dvec out;
  CheckError(FromWire(kTinyWire, &out, limits), absl::StatusCode::kResourceExhausted,
             "message of 56 bytes exceeds the limit of 48 bytes");
  limits.max_bytes = 56;
  BOOST_TEST(FromWire(kTinyWire, &out, limits).ok());
}

BOOST_AUTO_TEST_CASE(model_files_round_trip_and_refuse_bad_models) {
  dml::net::model_file m;
  m.model.spec = {dml::ModelKind::kSquaredHingeSvm, 0.25};
  m.model.w = {1.5, 0.0, -1.0 / 3.0};
  m.model.classes = {2.0, 4.0};
  m.model.bias = 1.0;
  m.primal = 0.125;
  m.gap = 1e-9;
  auto wire = ToWire(m);
  BOOST_REQUIRE_MESSAGE(wire.ok(), wire.status().ToString());
  dml::net::model_file back;
  BOOST_REQUIRE(FromWire(*wire, &back).ok());
  BOOST_TEST((back.model.spec.kind == dml::ModelKind::kSquaredHingeSvm));
  BOOST_TEST(back.model.spec.lambda == 0.25);
  BOOST_TEST(back.model.w == m.model.w, boost::test_tools::per_element());
  BOOST_TEST(back.model.classes == m.model.classes, boost::test_tools::per_element());
  BOOST_TEST(back.model.bias == 1.0);
  BOOST_TEST(back.primal == 0.125);
  BOOST_TEST(back.gap == 1e-9);
  // The schema's default bias is -1 (none): a file without one reads as none.
  dml::net::model_file plain;
  plain.model.w = {1.0};
  BOOST_REQUIRE(FromWire(*ToWire(plain), &back).ok());
  BOOST_TEST(back.model.bias == -1.0);
  BOOST_TEST(back.model.classes.empty());
  BOOST_TEST(std::isnan(back.primal));
  BOOST_TEST(std::isnan(back.model.binarize));  // none
  plain.model.binarize = 10.5;  // --binarize 10.5 travels with the model
  BOOST_REQUIRE(FromWire(*ToWire(plain), &back).ok());
  BOOST_TEST(back.model.binarize == 10.5);
  plain.model.binarize = -std::numeric_limits<double>::infinity();
  CheckError(ToWire(plain).status(), absl::StatusCode::kInvalidArgument,
             "ModelFile.binarize: infinite; expected a finite threshold or NaN (none)");

  m.model.w[1] = std::nan("");
  CheckError(ToWire(m).status(), absl::StatusCode::kInvalidArgument,
             "ModelFile.weights: value at position 1 is not finite");
  m.model.w[1] = 0;
  m.model.classes = {4.0, 2.0};
  CheckError(ToWire(m).status(), absl::StatusCode::kInvalidArgument,
             "ModelFile.labels: 2 label value(s); expected none or two increasing");
  m.model.classes.clear();
  m.model.bias = -0.5;
  CheckError(ToWire(m).status(), absl::StatusCode::kInvalidArgument,
             "ModelFile.bias: -0.5; expected -1 (none) or a finite value >= 0");
  // Another payload kind is not a model file.
  CheckError(FromWire(kTinyWire, &back), absl::StatusCode::kInvalidArgument,
             "expected payload kind 'modelFile', got payload kind 'vector'");
}

namespace {

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void Spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Flips one bit of the file at `pos` (bytes from the start).
void FlipBit(const std::string& path, std::size_t pos) {
  std::string b = Slurp(path);
  BOOST_REQUIRE(pos < b.size());
  b[pos] = static_cast<char>(b[pos] ^ 0x10);
  Spit(path, b);
}

std::string TempPath(const char* name) {
  return std::string("/tmp/dml_test_codec_") + std::to_string(::getpid()) + "_" + name;
}

}  // namespace

// Files carry a checksum of their payload's canonical form: a bit flipped
// after writing (in a weight, where the schema has no invariant to catch
// it) is refused with the path and DataLoss, not read as another model.
BOOST_AUTO_TEST_CASE(files_refuse_contents_changed_after_writing) {
  dml::net::model_file m;
  m.model.spec = {dml::ModelKind::kLogisticL2, 0.01};
  for (int j = 0; j < 1000; ++j) m.model.w.push_back(0.001 * j - 0.3);
  m.primal = 0.5;
  m.gap = 1e-7;
  const std::string path = TempPath("model.capnp");
  BOOST_REQUIRE(dml::net::WriteModelFile(path, m).ok());
  auto back = dml::net::ReadModelFile(path);
  BOOST_REQUIRE_MESSAGE(back.ok(), back.status().ToString());
  BOOST_TEST(back->model.w == m.model.w, boost::test_tools::per_element());
  // The weights are most of the file: its middle byte is inside one.
  const std::size_t size = Slurp(path).size();
  BOOST_TEST(size > 8000u);
  FlipBit(path, size / 2);
  auto bad = dml::net::ReadModelFile(path);
  BOOST_REQUIRE(!bad.ok());
  BOOST_TEST(static_cast<int>(bad.status().code()) == static_cast<int>(absl::StatusCode::kDataLoss));
  BOOST_TEST(dml::net::ChangedSinceWritten(bad.status()));
  BOOST_TEST(!dml::net::ChangedSinceWritten(dml::net::ReadModelFile(path + ".none").status()));
  BOOST_TEST_CONTEXT(bad.status().message()) {
    BOOST_TEST(absl::StartsWith(bad.status().message(),
                                path + ": contents do not match the file's checksum (changed after "
                                       "it was written): stored "));
  }
  // Without the digest (a file written before digests existed, or these
  // bytes sent as a message) the same flip goes unnoticed: what the digest
  // is for.
  auto plain = ToWire(m);
  BOOST_REQUIRE(plain.ok());
  Spit(path, *plain);
  BOOST_REQUIRE(dml::net::ReadModelFile(path).ok());
  FlipBit(path, plain->size() / 2);
  auto unnoticed = dml::net::ReadModelFile(path);
  BOOST_REQUIRE(unnoticed.ok());
  BOOST_TEST(unnoticed->model.w != m.model.w);

  // Checkpoints the same way, whichever part changes: the shared vector or
  // a worker's coordinates.
  dml::net::job_checkpoint c;
  c.model = {dml::ModelKind::kHingeSvm, 0.1};
  c.round = 7;
  c.rows = 500;
  c.cols = 300;
  c.workers = 2;
  c.shared.assign(300, 0.25);
  c.coords = {std::vector<double>(250, 0.5), std::vector<double>(250, 0.75)};
  c.processed = {1000, 1000};
  BOOST_REQUIRE(dml::net::WriteCheckpointFile(path, c).ok());
  auto ck = dml::net::ReadCheckpointFile(path);
  BOOST_REQUIRE_MESSAGE(ck.ok(), ck.status().ToString());
  BOOST_TEST(ck->round == 7);
  BOOST_TEST(ck->coords[1] == c.coords[1], boost::test_tools::per_element());
  const std::string good = Slurp(path);
  for (std::size_t pos : {good.size() / 4, good.size() / 2, good.size() - 100}) {
    Spit(path, good);
    FlipBit(path, pos);
    auto r = dml::net::ReadCheckpointFile(path);
    BOOST_TEST_CONTEXT("bit flipped at byte " << pos << " of " << good.size()) {
      BOOST_REQUIRE(!r.ok());
      BOOST_TEST(static_cast<int>(r.status().code()) ==
                 static_cast<int>(absl::StatusCode::kDataLoss));
      BOOST_TEST(absl::StrContains(r.status().message(), "do not match the file's checksum"));
    }
  }
  std::remove(path.c_str());
}
