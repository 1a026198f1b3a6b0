// The actor payload wire format (dml/actors/wire.hpp) for every payload
// type: round trips through ToWire/FromWire and through CAF's serializers
// (CAF writes its varbyte length + exactly ToWire's bytes), the exact bytes
// of one small message (this pins the format), and hostile input --
// truncation at every length, every single-byte flip, wrong version or
// payload kind, broken invariants named by field -- plus the rule that
// ToWire refuses whatever a peer would refuse.
#define BOOST_TEST_MODULE actors_wire
#include <boost/test/unit_test.hpp>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "dml/actors/dense_block.hpp"
#include "dml/actors/messages.hpp"
#include "dml/actors/register_types.hpp"
#include "dml/actors/wire.hpp"
#include "dml/net/wire.capnp.h"

namespace {

using dml::Progress;
using dml::actors::block_sums;
using dml::actors::dense_block;
using dml::actors::dvec;
using dml::actors::FromWire;
using dml::actors::int64_list;
using dml::actors::kv_message;
using dml::actors::key_list;
using dml::actors::shard_config;
using dml::actors::shard_stats;
using dml::actors::sparse_dvec;
using dml::actors::ToWire;
using dml::actors::worker_report;
using dml::actors::worker_spec;
namespace wire = dml::net::wire;
using Envelope = wire::Envelope;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Byte offsets in a single-segment Envelope: segment table (8), root
// pointer (8), then the Envelope's data word: schemaVersion (bytes 16-17)
// and the union discriminant (bytes 18-19).
constexpr std::size_t kVersionByte = 16;
constexpr std::size_t kDiscriminantByte = 18;

void CheckError(const absl::Status& s, absl::StatusCode code, const std::string& message) {
  BOOST_TEST_CONTEXT("status " << s.ToString()) {
    BOOST_TEST(!s.ok());
    BOOST_TEST(static_cast<int>(s.code()) == static_cast<int>(code));
    BOOST_TEST(std::string(s.message()) == message);
  }
}
void CheckInvalid(const absl::Status& s, const std::string& message) {
  CheckError(s, absl::StatusCode::kInvalidArgument, message);
}

template <class T>
std::string MustEncode(const T& x) {
  auto bytes = ToWire(x);
  BOOST_REQUIRE_MESSAGE(bytes.ok(), bytes.status().ToString());
  return *std::move(bytes);
}

template <class T>
uint64_t Bits(T x) {
  static_assert(sizeof(T) <= sizeof(uint64_t));
  uint64_t b = 0;
  std::memcpy(&b, &x, sizeof(T));
  return b;
}

// Floating point must survive bit for bit (NaN payloads, -0).
#define DML_EXPECT_BITS(got, want) \
  BOOST_TEST(Bits(got) == Bits(want), #got << ": " << (got) << " vs " << (want))

template <class T>
std::vector<T> Or(const std::shared_ptr<const std::vector<T>>& p) {
  return p ? *p : std::vector<T>{};
}

template <class T>
void ExpectSameVec(const std::vector<T>& got, const std::vector<T>& want, const char* field) {
  BOOST_TEST_CONTEXT(field) {
    BOOST_REQUIRE_EQUAL(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      BOOST_TEST(Bits(got[i]) == Bits(want[i]), "entry " << i << ": " << got[i] << " vs " << want[i]);
    }
  }
}

void ExpectSameModel(const dml::ModelSpec& got, const dml::ModelSpec& want) {
  BOOST_TEST(static_cast<int>(got.kind) == static_cast<int>(want.kind));
  DML_EXPECT_BITS(got.lambda, want.lambda);
  DML_EXPECT_BITS(got.l1_ratio, want.l1_ratio);
}

// ------------------------------------------------------------ per type
// Wire<T>: the payload kind's name and discriminant, a non-trivial sample
// and a field-by-field comparison.
template <class T>
struct Wire;

template <>
struct Wire<dvec> {
  static constexpr const char* kKind = "vector";
  static constexpr Envelope::Which kWhich = Envelope::VECTOR;
  static dvec Sample() { return dvec({1.5, -2.25, 0.0, -0.0, 1e300, -4.9e-324, 3.0}); }
  static void Expect(const dvec& got, const dvec& want) {
    ExpectSameVec(got.to_vector(), want.to_vector(), "data");
  }
};

template <>
struct Wire<sparse_dvec> {
  static constexpr const char* kKind = "sparseUpdate";
  static constexpr Envelope::Which kWhich = Envelope::SPARSE_UPDATE;
  static sparse_dvec Make(std::vector<uint32_t> index, std::vector<double> value) {
    sparse_dvec x;
    x.index = std::make_shared<const std::vector<uint32_t>>(std::move(index));
    x.value = std::make_shared<const std::vector<double>>(std::move(value));
    return x;
  }
  static sparse_dvec Sample() {
    return Make({0, 5, 6, 4294967295u}, {1.0, -1.0, 0.5, -1e-300});
  }
  static void Expect(const sparse_dvec& got, const sparse_dvec& want) {
    ExpectSameVec(Or(got.index), Or(want.index), "index");
    ExpectSameVec(Or(got.value), Or(want.value), "value");
  }
};

template <>
struct Wire<key_list> {
  static constexpr const char* kKind = "keyList";
  static constexpr Envelope::Which kWhich = Envelope::KEY_LIST;
  static key_list Make(std::vector<uint32_t> keys) {
    key_list x;
    x.keys = std::make_shared<const std::vector<uint32_t>>(std::move(keys));
    return x;
  }
  static key_list Sample() { return Make({0, 1, 7, 1000, 4294967295u}); }
  static void Expect(const key_list& got, const key_list& want) {
    ExpectSameVec(Or(got.keys), Or(want.keys), "keys");
  }
};

template <>
struct Wire<block_sums> {
  static constexpr const char* kKind = "blockSums";
  static constexpr Envelope::Which kWhich = Envelope::BLOCK_SUMS;
  static block_sums Sample() {
    block_sums x;
    x.loss_sum = 1.5;
    x.gap_sum = -0.25;
    x.reg_sum = -3e-7;
    return x;
  }
  static void Expect(const block_sums& got, const block_sums& want) {
    DML_EXPECT_BITS(got.loss_sum, want.loss_sum);
    DML_EXPECT_BITS(got.gap_sum, want.gap_sum);
    DML_EXPECT_BITS(got.reg_sum, want.reg_sum);
  }
};

template <>
struct Wire<worker_report> {
  static constexpr const char* kKind = "workerReport";
  static constexpr Envelope::Which kWhich = Envelope::WORKER_REPORT;
  static worker_report Make(int32_t worker, int64_t clock, int64_t processed, int64_t bytes) {
    worker_report x;
    x.worker = worker;
    x.clock = clock;
    x.processed = processed;
    x.bytes = bytes;
    return x;
  }
  static worker_report Sample() {
    worker_report x = Make(std::numeric_limits<int32_t>::max(), 12345, int64_t{1} << 40,
                           std::numeric_limits<int64_t>::max());
    x.device_bytes = int64_t{1} << 50;
    x.device_swaps = int64_t{1} << 33;
    return x;
  }
  static void Expect(const worker_report& got, const worker_report& want) {
    BOOST_TEST(got.worker == want.worker);
    BOOST_TEST(got.clock == want.clock);
    BOOST_TEST(got.processed == want.processed);
    BOOST_TEST(got.bytes == want.bytes);
    BOOST_TEST(got.device_bytes == want.device_bytes);
    BOOST_TEST(got.device_swaps == want.device_swaps);
  }
};

template <>
struct Wire<shard_stats> {
  static constexpr const char* kKind = "shardStats";
  static constexpr Envelope::Which kWhich = Envelope::SHARD_STATS;
  static shard_stats Sample() {
    shard_stats x;
    x.updates = 5;
    x.pulls = 6;
    x.bytes_in = 7000000000;
    x.bytes_out = 8;
    x.max_granted_staleness = 2;
    x.clocks = {1, 0, 3, 42};
    return x;
  }
  static void Expect(const shard_stats& got, const shard_stats& want) {
    BOOST_TEST(got.updates == want.updates);
    BOOST_TEST(got.pulls == want.pulls);
    BOOST_TEST(got.bytes_in == want.bytes_in);
    BOOST_TEST(got.bytes_out == want.bytes_out);
    BOOST_TEST(got.max_granted_staleness == want.max_granted_staleness);
    ExpectSameVec(got.clocks, want.clocks, "clocks");
  }
};

template <>
struct Wire<int64_list> {
  static constexpr const char* kKind = "int64List";
  static constexpr Envelope::Which kWhich = Envelope::INT64_LIST;
  static int64_list Sample() {
    int64_list x;
    x.values = {0, 10, -20, std::numeric_limits<int64_t>::min(),
                std::numeric_limits<int64_t>::max()};
    return x;
  }
  static void Expect(const int64_list& got, const int64_list& want) {
    ExpectSameVec(got.values, want.values, "values");
  }
};

template <>
struct Wire<kv_message> {
  static constexpr const char* kKind = "kvMessage";
  static constexpr Envelope::Which kWhich = Envelope::KV_MESSAGE;
  static kv_message Sample() {
    kv_message x;
    x.kind = static_cast<uint8_t>(dml::net::kv_kind::kTransfer);
    x.requester = 3;
    x.sender = 1;
    x.owner = 1;
    x.hops = 2;
    x.op = std::numeric_limits<uint64_t>::max();
    x.keys = {0, 7, std::numeric_limits<int64_t>::max()};
    x.values = {-1.5, 0.0, 1e300};
    return x;
  }
  static void Expect(const kv_message& got, const kv_message& want) {
    BOOST_TEST(got.kind == want.kind);
    BOOST_TEST(got.requester == want.requester);
    BOOST_TEST(got.sender == want.sender);
    BOOST_TEST(got.owner == want.owner);
    BOOST_TEST(got.hops == want.hops);
    BOOST_TEST(got.op == want.op);
    ExpectSameVec(got.keys, want.keys, "keys");
    ExpectSameVec(got.values, want.values, "values");
  }
};

template <>
struct Wire<worker_spec> {
  static constexpr const char* kKind = "workerSpec";
  static constexpr Envelope::Which kWhich = Envelope::WORKER_SPEC;
  static worker_spec Sample() {
    worker_spec x;
    x.mode = dml::Mode::kSsp;
    x.index = 2;
    x.workers = 3;
    x.model.kind = dml::ModelKind::kElasticNet;
    x.model.lambda = 1e-3;
    x.model.l1_ratio = 0.25;
    x.seed = 0xdeadbeefcafef00dull;
    x.path = "/data/news20 (copy).binary.bz2";
    x.load.task = dml::Task::kRegression;
    x.load.binarize_threshold = -10.5;
    x.load.num_features = 1355191;
    x.load.threads = 4;
    x.batch_size = 32;
    x.step0 = 0.75;
    x.step_decay = 0.05;
    x.tau = 4;
    x.local_epochs = 2.5;
    x.gamma = 0.5;
    x.sigma_prime = 3.0;
    x.feature_steps = {0.5, 2.0, 1.0, 0x1p-40};
    x.local_solver = 1;
    x.device = 3;
    x.gpu_fallback = true;
    x.duhl_device_bytes = 123456789012;
    x.duhl_device_fraction = 0.375;
    x.duhl_selection = 3;
    x.duhl_gap_threads = 7;
    x.duhl_passes = 2.5;
    x.duhl_gpu = true;
    x.saga = true;
    return x;
  }
  static void Expect(const worker_spec& got, const worker_spec& want) {
    BOOST_TEST(static_cast<int>(got.mode) == static_cast<int>(want.mode));
    BOOST_TEST(got.index == want.index);
    BOOST_TEST(got.workers == want.workers);
    ExpectSameModel(got.model, want.model);
    BOOST_TEST(got.seed == want.seed);
    BOOST_TEST(got.path == want.path);
    BOOST_TEST(static_cast<int>(got.load.task) == static_cast<int>(want.load.task));
    BOOST_REQUIRE_EQUAL(got.load.binarize_threshold.has_value(),
                        want.load.binarize_threshold.has_value());
    if (want.load.binarize_threshold) {
      DML_EXPECT_BITS(*got.load.binarize_threshold, *want.load.binarize_threshold);
    }
    BOOST_TEST(got.load.num_features == want.load.num_features);
    BOOST_TEST(got.load.threads == want.load.threads);
    BOOST_TEST(got.batch_size == want.batch_size);
    DML_EXPECT_BITS(got.step0, want.step0);
    DML_EXPECT_BITS(got.step_decay, want.step_decay);
    BOOST_TEST(got.tau == want.tau);
    DML_EXPECT_BITS(got.local_epochs, want.local_epochs);
    DML_EXPECT_BITS(got.gamma, want.gamma);
    DML_EXPECT_BITS(got.sigma_prime, want.sigma_prime);
    BOOST_TEST(got.feature_steps == want.feature_steps);
    BOOST_TEST(got.local_solver == want.local_solver);
    BOOST_TEST(got.device == want.device);
    BOOST_TEST(got.gpu_fallback == want.gpu_fallback);
    BOOST_TEST(got.duhl_device_bytes == want.duhl_device_bytes);
    DML_EXPECT_BITS(got.duhl_device_fraction, want.duhl_device_fraction);
    BOOST_TEST(got.duhl_selection == want.duhl_selection);
    BOOST_TEST(got.duhl_gap_threads == want.duhl_gap_threads);
    DML_EXPECT_BITS(got.duhl_passes, want.duhl_passes);
    BOOST_TEST(got.duhl_gpu == want.duhl_gpu);
    BOOST_TEST(got.saga == want.saga);
  }
};

template <>
struct Wire<shard_config> {
  static constexpr const char* kKind = "shardSpec";
  static constexpr Envelope::Which kWhich = Envelope::SHARD_SPEC;
  static shard_config Sample() {
    shard_config x;
    x.mode = dml::Mode::kEasgd;
    x.workers = 4;
    x.begin = 100;
    x.end = 200000;
    x.model.kind = dml::ModelKind::kHingeSvm;
    x.model.lambda = 0.01;
    x.model.l1_ratio = 0.75;
    x.step0 = 0.1;
    x.step_decay = 0.5;
    x.gamma = 0.75;
    x.easgd_alpha = 0.2;
    x.staleness = 3;
    x.saga_scale = 64.0 / 32561.0;
    return x;
  }
  static void Expect(const shard_config& got, const shard_config& want) {
    BOOST_TEST(static_cast<int>(got.mode) == static_cast<int>(want.mode));
    BOOST_TEST(got.workers == want.workers);
    BOOST_TEST(got.begin == want.begin);
    BOOST_TEST(got.end == want.end);
    ExpectSameModel(got.model, want.model);
    DML_EXPECT_BITS(got.step0, want.step0);
    DML_EXPECT_BITS(got.step_decay, want.step_decay);
    DML_EXPECT_BITS(got.gamma, want.gamma);
    DML_EXPECT_BITS(got.easgd_alpha, want.easgd_alpha);
    BOOST_TEST(got.staleness == want.staleness);
    BOOST_TEST(got.feature_steps == want.feature_steps);
    DML_EXPECT_BITS(got.saga_scale, want.saga_scale);
  }
};

template <>
struct Wire<dense_block> {
  static constexpr const char* kKind = "denseVector";
  static constexpr Envelope::Which kWhich = Envelope::DENSE_VECTOR;
  static dense_block Sample() {
    return dense_block(std::vector<float>{1.0f, -2.0f, 0.5f, -0.0f, 3.4e38f});
  }
  static void Expect(const dense_block& got, const dense_block& want) {
    ExpectSameVec(Or(got.data), Or(want.data), "data");
  }
};

template <>
struct Wire<Progress> {
  static constexpr const char* kKind = "progress";
  static constexpr Envelope::Which kWhich = Envelope::PROGRESS;
  static Progress Sample() {
    Progress x;
    x.round = 7;
    x.seconds = 1.25;
    x.epochs = 3.5;
    x.primal = 0.125;
    x.dual = -kInf;  // SGD modes track no dual
    x.gap = kInf;
    x.bytes_exchanged = 123456789012;
    x.device_bytes = 98765432109;
    x.device_swaps = 1234567;
    x.staleness = {0, 1, -1, 2};
    x.event = "lost node 127.0.0.1:4242";
    return x;
  }
  static void Expect(const Progress& got, const Progress& want) {
    BOOST_TEST(got.round == want.round);
    DML_EXPECT_BITS(got.seconds, want.seconds);
    DML_EXPECT_BITS(got.epochs, want.epochs);
    DML_EXPECT_BITS(got.primal, want.primal);
    DML_EXPECT_BITS(got.dual, want.dual);
    DML_EXPECT_BITS(got.gap, want.gap);
    BOOST_TEST(got.bytes_exchanged == want.bytes_exchanged);
    BOOST_TEST(got.device_bytes == want.device_bytes);
    BOOST_TEST(got.device_swaps == want.device_swaps);
    ExpectSameVec(got.staleness, want.staleness, "staleness");
    BOOST_TEST(got.event == want.event);
  }
};

using AllPayloads = std::tuple<dvec, sparse_dvec, key_list, block_sums, worker_report,
                               shard_stats, int64_list, worker_spec, shard_config, dense_block,
                               kv_message, Progress>;
// Progress is an Envelope payload but no CAF message type.
using CafPayloads = std::tuple<dvec, sparse_dvec, key_list, block_sums, worker_report,
                               shard_stats, int64_list, worker_spec, shard_config, dense_block,
                               kv_message>;

// Encodings of every type's sample, with its kind's name, for wrong-kind
// checks.
template <class... Ts>
std::vector<std::pair<std::string, std::string>> AllSamples(std::tuple<Ts...>*) {
  return {{Wire<Ts>::kKind, MustEncode(Wire<Ts>::Sample())}...};
}
std::vector<std::pair<std::string, std::string>> AllSamples() {
  return AllSamples(static_cast<AllPayloads*>(nullptr));
}

// ------------------------------------------------------------ raw messages

// A copy of a valid encoding with `mutate` applied through the generated
// Cap'n Proto builder: how a peer (or an attacker) writes what our encoder
// refuses.
std::string Mutated(const std::string& valid, const std::function<void(Envelope::Builder)>& mutate) {
  std::vector<capnp::word> words(valid.size() / sizeof(capnp::word));
  std::memcpy(words.data(), valid.data(), valid.size());
  capnp::FlatArrayMessageReader reader(kj::arrayPtr(words.data(), words.size()));
  capnp::MallocMessageBuilder builder;
  builder.setRoot(reader.getRoot<Envelope>());
  mutate(builder.getRoot<Envelope>());
  kj::Array<capnp::word> flat = capnp::messageToFlatArray(builder);
  auto bytes = flat.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

// Both directions refuse: ToWire(bad value) and FromWire(bad bytes), with
// the same InvalidArgument message.
template <class T>
void ExpectRefused(const std::function<void(T&)>& mutate_value,
                   const std::function<void(Envelope::Builder)>& mutate_wire,
                   const std::string& message) {
  BOOST_TEST_CONTEXT("expecting \"" << message << "\"") {
    T bad = Wire<T>::Sample();
    mutate_value(bad);
    CheckInvalid(ToWire(bad).status(), message);
    const std::string bytes = Mutated(MustEncode(Wire<T>::Sample()), mutate_wire);
    T out;
    CheckInvalid(FromWire(bytes, &out), message);
  }
}

// Only the decoder can see it (not representable in the C++ value).
template <class T>
void ExpectUndecodable(const std::function<void(Envelope::Builder)>& mutate_wire,
                       const std::string& message) {
  BOOST_TEST_CONTEXT("expecting \"" << message << "\"") {
    const std::string bytes = Mutated(MustEncode(Wire<T>::Sample()), mutate_wire);
    T out;
    CheckInvalid(FromWire(bytes, &out), message);
  }
}

// ------------------------------------------------------------ CAF

struct wire_config : caf::actor_system_config {
  wire_config() {
    dml::actors::RegisterTypes(*this);
    set("scheduler.max-threads", 2);
  }
};

struct caf_fixture {
  wire_config cfg;
  caf::actor_system sys{cfg};

  template <class T>
  std::vector<char> Serialize(T x) {
    std::vector<char> buf;
    caf::binary_serializer sink{sys, buf};
    auto err = sink(x);
    BOOST_REQUIRE_MESSAGE(!err, "serialize failed: " << sys.render(err));
    return buf;
  }
};

// CAF's varbyte sequence length at the start of `buf`: (value, its bytes).
std::pair<std::size_t, std::size_t> ReadVarbyte(const std::vector<char>& buf) {
  std::size_t value = 0;
  for (std::size_t i = 0; i < buf.size() && i < 10; ++i) {
    const auto b = static_cast<uint8_t>(buf[i]);
    value |= static_cast<std::size_t>(b & 0x7f) << (7 * i);
    if ((b & 0x80) == 0) return {value, i + 1};
  }
  BOOST_FAIL("no varbyte length");
  return {0, 0};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(actors_wire)

// worker_report{worker=1, clock=2, processed=3, bytes=4}, derived by hand
// from the Cap'n Proto encoding spec (all integers little-endian). A change
// of these bytes other than a field appended with a new ordinal (which old
// readers skip: deviceBytes @4 and deviceSwaps @5, the 5th and 6th data
// words; failure @6 and note @7, the pointers) breaks every peer: bump
// wire.capnp's schemaVersion instead.
BOOST_AUTO_TEST_CASE(exact_bytes_of_a_worker_report) {
  const std::string kPinned =
      "000000000b000000"   // segment table: (count - 1) = 0, segment 0 = 11 words
      "0000000001000100"   // w0 root pointer: struct, offset 0; 1 data word, 1 pointer
      "0100070000000000"   // w1 Envelope: schemaVersion 1, discriminant 7 = workerReport
      "0000000006000200"   // w2 Envelope pointer: struct, offset 0; 6 data words, 2 pointers
      "0100000000000000"   // w3 worker = 1 (Int32, upper half padding)
      "0200000000000000"   // w4 clock = 2
      "0300000000000000"   // w5 processed = 3
      "0400000000000000"   // w6 bytes = 4
      "0000000000000000"   // w7 deviceBytes = 0
      "0000000000000000"   // w8 deviceSwaps = 0
      "0000000000000000"   // w9 failure: null (none)
      "0000000000000000";  // w10 note: null (none)
  const std::string wire = MustEncode(Wire<worker_report>::Make(1, 2, 3, 4));
  std::string hex;
  for (unsigned char c : wire) {
    static const char kDigits[] = "0123456789abcdef";
    hex += kDigits[c >> 4];
    hex += kDigits[c & 15];
  }
  BOOST_TEST(hex == kPinned);
  worker_report back;
  BOOST_REQUIRE(FromWire(wire, &back).ok());
  Wire<worker_report>::Expect(back, Wire<worker_report>::Make(1, 2, 3, 4));
}

// A worker's failure crosses the wire as its message (before, it was
// dropped: the coordinator of a node job waited for ever); one longer than
// the limit is refused (a worker cuts its message to it).
BOOST_AUTO_TEST_CASE(a_worker_report_carries_its_failure) {
  worker_report failed = Wire<worker_report>::Make(1, 2, 3, 4);
  failed.wire_error = "worker 1: tpa-scd: no usable CUDA device";
  worker_report back;
  BOOST_REQUIRE(FromWire(MustEncode(failed), &back).ok());
  BOOST_TEST(back.wire_error == failed.wire_error);
  Wire<worker_report>::Expect(back, failed);
  failed.wire_error = std::string(dml::net::kMaxWorkerFailureBytes, 'x');
  BOOST_REQUIRE(FromWire(MustEncode(failed), &back).ok());
  BOOST_TEST(back.wire_error == failed.wire_error);
  failed.wire_error += 'x';
  BOOST_TEST(dml::net::ToWire(failed).status().message() ==
             "WorkerReport.failure: 4097 bytes; at most 4096");
  // A note (a GPU's fallback) travels the same way, for the progress stream.
  worker_report noted = Wire<worker_report>::Make(1, 2, 3, 4);
  noted.note = "worker 1: tpa-scd: cocoa's CPU local solver instead: no usable CUDA device";
  BOOST_REQUIRE(FromWire(MustEncode(noted), &back).ok());
  BOOST_TEST(back.note == noted.note);
  BOOST_TEST(back.wire_error.empty());
  noted.note.assign(dml::net::kMaxWorkerFailureBytes + 1, 'n');
  BOOST_TEST(dml::net::ToWire(noted).status().message() ==
             "WorkerReport.note: 4097 bytes; at most 4096");
}

BOOST_AUTO_TEST_CASE_TEMPLATE(round_trip, T, AllPayloads) {
  const T sample = Wire<T>::Sample();
  const std::string bytes = MustEncode(sample);
  BOOST_TEST(bytes.size() % 8 == 0);
  T back;
  const absl::Status s = FromWire(bytes, &back);
  BOOST_REQUIRE_MESSAGE(s.ok(), s.ToString());
  Wire<T>::Expect(back, sample);
  // Deterministic: the same value encodes to the same bytes.
  BOOST_TEST(MustEncode(back) == bytes);
  // Unaligned input is copied, not misread.
  std::string shifted = "x" + bytes;
  T from_unaligned;
  BOOST_REQUIRE(FromWire(std::string_view(shifted).substr(1), &from_unaligned).ok());
  Wire<T>::Expect(from_unaligned, sample);
  // And the default value round-trips too.
  T empty_back;
  const T empty{};
  if constexpr (std::is_same_v<T, worker_spec> || std::is_same_v<T, shard_config>) {
    // Defaults are not sendable (no path / empty range): covered below.
  } else {
    BOOST_REQUIRE(FromWire(MustEncode(empty), &empty_back).ok());
    Wire<T>::Expect(empty_back, empty);
  }
}

BOOST_FIXTURE_TEST_CASE_TEMPLATE(caf_round_trip, T, CafPayloads, caf_fixture) {
  const T sample = Wire<T>::Sample();
  const std::string bytes = MustEncode(sample);
  const std::vector<char> buf = this->Serialize(sample);
  const auto [length, prefix] = ReadVarbyte(buf);
  BOOST_TEST(length == bytes.size());
  BOOST_REQUIRE_EQUAL(buf.size(), prefix + bytes.size());
  BOOST_TEST(std::string(buf.begin() + prefix, buf.end()) == bytes);

  T back;
  caf::binary_deserializer source{this->sys, buf};
  auto err = source(back);
  BOOST_REQUIRE_MESSAGE(!err, this->sys.render(err));
  BOOST_TEST(source.remaining() == 0u);
  BOOST_TEST(back.wire_error.empty(), back.wire_error);
  Wire<T>::Expect(back, sample);

  // Cut CAF messages: a framing error or a wire_error, never a crash or a
  // value.
  for (std::size_t n = 0; n < buf.size(); ++n) {
    std::vector<char> cut(buf.begin(), buf.begin() + n);
    caf::binary_deserializer cut_source{this->sys, cut};
    T partial;
    if (!cut_source(partial)) {
      BOOST_TEST(!partial.wire_error.empty(), "cut at " << n);
    }
  }
}

BOOST_FIXTURE_TEST_CASE_TEMPLATE(caf_wrong_kind_sets_wire_error, T, CafPayloads, caf_fixture) {
  std::vector<char> buf = this->Serialize(Wire<T>::Sample());
  const std::size_t prefix = ReadVarbyte(buf).second;
  // Intact CAF framing around an Envelope of another kind: the CAF message
  // survives, the payload is empty and carries the decode error.
  const uint16_t other = Wire<T>::kWhich == Envelope::BLOCK_SUMS ? Envelope::KEY_LIST
                                                                  : Envelope::BLOCK_SUMS;
  const std::string other_name = other == Envelope::KEY_LIST ? "keyList" : "blockSums";
  std::memcpy(&buf[prefix + kDiscriminantByte], &other, 2);
  T mislabelled;
  caf::binary_deserializer source{this->sys, buf};
  auto err = source(mislabelled);
  BOOST_REQUIRE_MESSAGE(!err, this->sys.render(err));
  BOOST_TEST(mislabelled.wire_error == std::string("expected payload kind '") + Wire<T>::kKind +
                                           "', got payload kind '" + other_name + "'");
  Wire<T>::Expect(mislabelled, T{});
  BOOST_TEST(!dml::actors::WireErrorOf(mislabelled).ok());

  // A wrong schema version likewise.
  buf = this->Serialize(Wire<T>::Sample());
  buf[prefix + kVersionByte] = 2;
  T old;
  caf::binary_deserializer old_source{this->sys, buf};
  BOOST_REQUIRE(!old_source(old));
  BOOST_TEST(old.wire_error == "schema version 2, expected 1");
}

BOOST_AUTO_TEST_CASE_TEMPLATE(every_truncation_is_refused, T, AllPayloads) {
  const std::string bytes = MustEncode(Wire<T>::Sample());
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    T out;
    const absl::Status s = FromWire(std::string_view(bytes).substr(0, n), &out);
    BOOST_TEST(static_cast<int>(s.code()) == static_cast<int>(absl::StatusCode::kDataLoss),
               "length " << n << ": " << s.ToString());
  }
  T out;
  CheckError(FromWire(std::string_view(), &out), absl::StatusCode::kDataLoss, "empty message");
  CheckError(FromWire(bytes + std::string(8, '\0'), &out), absl::StatusCode::kDataLoss,
             "8 trailing bytes after the message");
  dml::net::DecodeLimits small;
  small.max_bytes = bytes.size() - 1;
  CheckError(FromWire(bytes, &out, small), absl::StatusCode::kResourceExhausted,
             "message of " + std::to_string(bytes.size()) + " bytes exceeds the limit of " +
                 std::to_string(bytes.size() - 1) + " bytes");
}

BOOST_AUTO_TEST_CASE_TEMPLATE(every_byte_flip_decodes_or_is_refused, T, AllPayloads) {
  const std::string bytes = MustEncode(Wire<T>::Sample());
  int accepted = 0;
  int refused = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    for (unsigned mask : {0xffu, 0x01u, 0x80u, 0x10u}) {
      std::string flipped = bytes;
      flipped[i] = static_cast<char>(flipped[i] ^ mask);
      T out;
      const absl::Status s = FromWire(flipped, &out);
      if (!s.ok()) {
        ++refused;
        BOOST_TEST(!s.message().empty(), "byte " << i);
        continue;
      }
      ++accepted;
      // Whatever decodes is a valid value: it re-encodes and round-trips.
      auto again = ToWire(out);
      BOOST_REQUIRE_MESSAGE(again.ok(), "byte " << i << " mask " << int(mask) << ": "
                                                << again.status().ToString());
      T back;
      BOOST_REQUIRE(FromWire(*again, &back).ok());
      Wire<T>::Expect(back, out);
    }
  }
  BOOST_TEST_MESSAGE(Wire<T>::kKind << ": " << accepted << " flips decoded, " << refused
                                    << " refused");
  BOOST_TEST(refused > 0);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(wrong_version_or_kind, T, AllPayloads) {
  const std::string bytes = MustEncode(Wire<T>::Sample());
  BOOST_REQUIRE_EQUAL(bytes.substr(0, 4), std::string(4, '\0'));  // one segment
  T out;
  std::string v2 = bytes;
  v2[kVersionByte] = 2;
  CheckInvalid(FromWire(v2, &out), "schema version 2, expected 1");
  std::string v0 = bytes;
  v0[kVersionByte] = 0;
  CheckInvalid(FromWire(v0, &out), "schema version 0, expected 1");
  std::string v257 = bytes;
  v257[kVersionByte + 1] = 1;
  CheckInvalid(FromWire(v257, &out), "schema version 257, expected 1");

  const std::string expected = std::string("expected payload kind '") + Wire<T>::kKind + "', got ";
  // Every other payload type's real encoding.
  int others = 0;
  for (const auto& [kind, other] : AllSamples()) {
    if (kind == Wire<T>::kKind) continue;
    ++others;
    CheckInvalid(FromWire(other, &out), expected + "payload kind '" + kind + "'");
  }
  BOOST_TEST(others == 11);
  // Kinds only other parts of libdml (or nobody) send.
  std::string none = bytes;
  none[kDiscriminantByte] = 0;
  CheckInvalid(FromWire(none, &out), expected + "no payload");
  std::string sparse_vector = bytes;
  sparse_vector[kDiscriminantByte] = 1;
  CheckInvalid(FromWire(sparse_vector, &out), expected + "payload kind 'sparseVector'");
  // A bulk reference is only honoured inside a CAF message: FromWire (files,
  // the fuzz target) never fetches.
  std::string bulk = bytes;
  bulk[kDiscriminantByte] = 17;
  CheckInvalid(FromWire(bulk, &out), expected + "payload kind 'bulkVector'");
  std::string future = bytes;
  future[kDiscriminantByte] = 19;
  CheckInvalid(FromWire(future, &out), expected + "unknown payload kind 19");
  std::string far_future = bytes;
  far_future[kDiscriminantByte] = 0x34;
  far_future[kDiscriminantByte + 1] = 0x12;
  CheckInvalid(FromWire(far_future, &out), expected + "unknown payload kind 4660");
}

// ------------------------------------------------------------ invariants

// A BulkVector reference: round trip, every truncation refused, and its
// invariants on both sides (we never send, and never follow, a bad one).
BOOST_AUTO_TEST_CASE(bulk_references) {
  const dml::net::BulkRef ref{"10.0.0.2", 4243, "dml-bulk.77.abc", 0x1234567890abcdefull, 1u << 20,
                              0x7f0012345000ull, 0x55aa00001230ull, 3, 0x200000};
  const std::string bytes = MustEncode(ref);
  dml::net::BulkRef back;
  BOOST_REQUIRE(FromWire(bytes, &back).ok());
  BOOST_TEST(back.host == ref.host);
  BOOST_TEST(back.port == ref.port);
  BOOST_TEST(back.local == ref.local);
  BOOST_TEST(back.ticket == ref.ticket);
  BOOST_TEST(back.count == ref.count);
  BOOST_TEST(back.address == ref.address);
  BOOST_TEST(back.slot == ref.slot);
  BOOST_TEST(back.segment == 3u);
  BOOST_TEST(back.offset == 0x200000u);
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    dml::net::BulkRef cut;
    BOOST_TEST(!FromWire(bytes.substr(0, n), &cut).ok(), "prefix of " << n << " bytes");
  }
  // A plain Vector is no reference, and a reference is no Vector.
  dvec v;
  CheckInvalid(FromWire(bytes, &v), "expected payload kind 'vector', got payload kind 'bulkVector'");
  dml::net::BulkRef not_ref;
  CheckInvalid(FromWire(MustEncode(dvec({1.0})), &not_ref),
               "expected payload kind 'bulkVector', got payload kind 'vector'");
  auto bad = ref;
  bad.port = 0;
  CheckInvalid(ToWire(bad).status(), "BulkVector.port: zero");
  bad = ref;
  bad.slot = 0;
  CheckInvalid(ToWire(bad).status(), "BulkVector.address: set while the other is zero");
  bad = ref;
  bad.address = 0;
  CheckInvalid(ToWire(bad).status(), "BulkVector.slot: set while the other is zero");
  bad = ref;
  bad.offset = 0x200004;
  CheckInvalid(ToWire(bad).status(), "BulkVector.offset: 2097156 is not a multiple of 8");
  bad = ref;
  bad.segment = 0;
  CheckInvalid(ToWire(bad).status(), "BulkVector.offset: set while segment is 0");
  bad = ref;
  bad.local.clear();
  CheckInvalid(ToWire(bad).status(), "BulkVector.segment: set with no local socket");
  bad = ref;
  bad.host.clear();
  CheckInvalid(ToWire(bad).status(), "BulkVector.host: length 0 not in [1, 255]");
  bad = ref;
  bad.local.assign(101, 'x');
  CheckInvalid(ToWire(bad).status(), "BulkVector.local: length 101 above 100");
  bad = ref;
  bad.host = std::string("10.0.0.2\0evil", 13);
  CheckInvalid(ToWire(bad).status(), "BulkVector.host: byte 0 at position 8 is not printable ASCII");
  bad = ref;
  bad.count = (uint64_t{1} << 28) + 1;
  CheckInvalid(ToWire(bad).status(),
               "BulkVector.count: 268435457 entries exceed the limit of 268435456");
  // The same checks when a peer sends them.
  CheckInvalid(FromWire(Mutated(bytes, [](Envelope::Builder e) { e.getBulkVector().setPort(0); }),
                        &back),
               "BulkVector.port: zero");
  CheckInvalid(FromWire(Mutated(bytes, [](Envelope::Builder e) { e.getBulkVector().setHost(""); }),
                        &back),
               "BulkVector.host: length 0 not in [1, 255]");
  CheckInvalid(FromWire(Mutated(bytes, [](Envelope::Builder e) { e.getBulkVector().setSlot(0); }),
                        &back),
               "BulkVector.address: set while the other is zero");
}

BOOST_AUTO_TEST_CASE(sparse_update_invariants) {
  using W = Wire<sparse_dvec>;
  ExpectRefused<sparse_dvec>(
      [](sparse_dvec& x) { x = W::Make({5, 3}, {1.0, 2.0}); },
      [](Envelope::Builder e) {
        auto offsets = e.getSparseUpdate().initOffsets(2);
        offsets.set(0, 5);
        offsets.set(1, 3);
        e.getSparseUpdate().initValues(2);
      },
      "SparseUpdate.offsets: not strictly increasing at position 1: 3 after 5");
  ExpectRefused<sparse_dvec>(
      [](sparse_dvec& x) { x = W::Make({0, 5, 6, 6}, {1, 2, 3, 4}); },
      [](Envelope::Builder e) { e.getSparseUpdate().getOffsets().set(3, 6); },
      "SparseUpdate.offsets: not strictly increasing at position 3: 6 after 6");
  ExpectRefused<sparse_dvec>(
      [](sparse_dvec& x) { x = W::Make({0, 5, 6, 7}, {1.0}); },
      [](Envelope::Builder e) { e.getSparseUpdate().initValues(1); },
      "SparseUpdate: 4 offsets but 1 values");
  ExpectRefused<sparse_dvec>(
      [](sparse_dvec& x) { x.index = nullptr; },
      [](Envelope::Builder e) { e.getSparseUpdate().disownOffsets(); },
      "SparseUpdate: 0 offsets but 4 values");
  // Fine: empty, or a single entry at any offset.
  BOOST_TEST(ToWire(W::Make({}, {})).ok());
  BOOST_TEST(ToWire(W::Make({4294967295u}, {-1.0})).ok());
}

BOOST_AUTO_TEST_CASE(key_list_invariants) {
  ExpectRefused<key_list>(
      [](key_list& x) { x = Wire<key_list>::Make({0, 1, 1}); },
      [](Envelope::Builder e) { e.getKeyList().getKeys().set(2, 1); },
      "KeyList.keys: not strictly increasing at position 2: 1 after 1");
  ExpectRefused<key_list>(
      [](key_list& x) { x = Wire<key_list>::Make({0, 0}); },
      [](Envelope::Builder e) { e.getKeyList().getKeys().set(1, 0); },
      "KeyList.keys: not strictly increasing at position 1: 0 after 0");
}

BOOST_AUTO_TEST_CASE(block_sums_must_be_finite) {
  ExpectRefused<block_sums>([](block_sums& x) { x.loss_sum = kNaN; },
                            [](Envelope::Builder e) { e.getBlockSums().setLossSum(kNaN); },
                            "BlockSums.lossSum: not finite (nan)");
  ExpectRefused<block_sums>([](block_sums& x) { x.gap_sum = kInf; },
                            [](Envelope::Builder e) { e.getBlockSums().setGapSum(kInf); },
                            "BlockSums.gapSum: not finite (inf)");
  ExpectRefused<block_sums>([](block_sums& x) { x.reg_sum = -kInf; },
                            [](Envelope::Builder e) { e.getBlockSums().setRegSum(-kInf); },
                            "BlockSums.regSum: not finite (-inf)");
}

BOOST_AUTO_TEST_CASE(worker_report_counters_are_non_negative) {
  ExpectRefused<worker_report>([](worker_report& x) { x.worker = -1; },
                               [](Envelope::Builder e) { e.getWorkerReport().setWorker(-1); },
                               "WorkerReport.worker: negative (-1)");
  ExpectRefused<worker_report>([](worker_report& x) { x.clock = -2; },
                               [](Envelope::Builder e) { e.getWorkerReport().setClock(-2); },
                               "WorkerReport.clock: negative (-2)");
  ExpectRefused<worker_report>(
      [](worker_report& x) { x.processed = std::numeric_limits<int64_t>::min(); },
      [](Envelope::Builder e) {
        e.getWorkerReport().setProcessed(std::numeric_limits<int64_t>::min());
      },
      "WorkerReport.processed: negative (-9223372036854775808)");
  ExpectRefused<worker_report>([](worker_report& x) { x.bytes = -4; },
                               [](Envelope::Builder e) { e.getWorkerReport().setBytes(-4); },
                               "WorkerReport.bytes: negative (-4)");
  ExpectRefused<worker_report>([](worker_report& x) { x.device_bytes = -5; },
                               [](Envelope::Builder e) { e.getWorkerReport().setDeviceBytes(-5); },
                               "WorkerReport.deviceBytes: negative (-5)");
  ExpectRefused<worker_report>([](worker_report& x) { x.device_swaps = -6; },
                               [](Envelope::Builder e) { e.getWorkerReport().setDeviceSwaps(-6); },
                               "WorkerReport.deviceSwaps: negative (-6)");
}

BOOST_AUTO_TEST_CASE(shard_stats_counters_are_non_negative) {
  ExpectRefused<shard_stats>([](shard_stats& x) { x.updates = -1; },
                             [](Envelope::Builder e) { e.getShardStats().setUpdates(-1); },
                             "ShardStats.updates: negative (-1)");
  ExpectRefused<shard_stats>([](shard_stats& x) { x.pulls = -1; },
                             [](Envelope::Builder e) { e.getShardStats().setPulls(-1); },
                             "ShardStats.pulls: negative (-1)");
  ExpectRefused<shard_stats>([](shard_stats& x) { x.bytes_in = -1; },
                             [](Envelope::Builder e) { e.getShardStats().setBytesIn(-1); },
                             "ShardStats.bytesIn: negative (-1)");
  ExpectRefused<shard_stats>([](shard_stats& x) { x.bytes_out = -1; },
                             [](Envelope::Builder e) { e.getShardStats().setBytesOut(-1); },
                             "ShardStats.bytesOut: negative (-1)");
  ExpectRefused<shard_stats>(
      [](shard_stats& x) { x.max_granted_staleness = -3; },
      [](Envelope::Builder e) { e.getShardStats().setMaxGrantedStaleness(-3); },
      "ShardStats.maxGrantedStaleness: negative (-3)");
}

BOOST_AUTO_TEST_CASE(worker_spec_feature_steps_are_positive) {
  using B = Envelope::Builder;
  ExpectRefused<worker_spec>([](worker_spec& x) { x.feature_steps = {1.0, -2.0}; },
                             [](B e) {
                               auto l = e.getWorkerSpec().initFeatureSteps(2);
                               l.set(0, 1.0);
                               l.set(1, -2.0);
                             },
                             "WorkerSpec.featureSteps: entry 1 is -2, not > 0 and finite");
}

BOOST_AUTO_TEST_CASE(worker_spec_invariants) {
  using B = Envelope::Builder;
  ExpectRefused<worker_spec>([](worker_spec& x) { x.index = 3; },
                             [](B e) { e.getWorkerSpec().setIndex(3); },
                             "WorkerSpec.index: 3 outside [0, 3)");
  ExpectRefused<worker_spec>([](worker_spec& x) { x.index = -1; },
                             [](B e) { e.getWorkerSpec().setIndex(-1); },
                             "WorkerSpec.index: -1 outside [0, 3)");
  ExpectRefused<worker_spec>([](worker_spec& x) { x.workers = 0; },
                             [](B e) { e.getWorkerSpec().setWorkers(0); },
                             "WorkerSpec.workers: 0 < 1");
  ExpectRefused<worker_spec>([](worker_spec& x) { x.path.clear(); },
                             [](B e) { e.getWorkerSpec().setDataPath(""); },
                             "WorkerSpec.dataPath: empty");
  ExpectRefused<worker_spec>(
      [](worker_spec& x) { x.path = std::string("/data/a\0b", 9); },
      [](B e) { e.getWorkerSpec().setDataPath(capnp::Text::Reader("/data/a\0b", 9)); },
      "WorkerSpec.dataPath: contains a NUL byte at position 7");
  ExpectRefused<worker_spec>([](worker_spec& x) { x.mode = static_cast<dml::Mode>(8); },
                             [](B e) { e.getWorkerSpec().setMode(static_cast<wire::Mode>(8)); },
                             "WorkerSpec.mode: unknown mode 8");
  ExpectUndecodable<worker_spec>(
      [](B e) { e.getWorkerSpec().setMode(static_cast<wire::Mode>(65535)); },
      "WorkerSpec.mode: unknown mode 65535");
  ExpectRefused<worker_spec>(
      [](worker_spec& x) { x.model.kind = static_cast<dml::ModelKind>(7); },
      [](B e) { e.getWorkerSpec().getModel().setKind(static_cast<wire::ModelKind>(7)); },
      "WorkerSpec.model: unknown model kind 7");
  ExpectUndecodable<worker_spec>(
      [](B e) { e.getWorkerSpec().getModel().setKind(static_cast<wire::ModelKind>(300)); },
      "WorkerSpec.model: unknown model kind 300");
  ExpectRefused<worker_spec>([](worker_spec& x) { x.model.lambda = 0; },
                             [](B e) { e.getWorkerSpec().getModel().setLambda(0); },
                             "WorkerSpec.model: lambda must be positive and finite, got 0");
  ExpectRefused<worker_spec>([](worker_spec& x) { x.model.lambda = kNaN; },
                             [](B e) { e.getWorkerSpec().getModel().setLambda(kNaN); },
                             "WorkerSpec.model: lambda must be positive and finite, got nan");
  ExpectRefused<worker_spec>([](worker_spec& x) { x.model.l1_ratio = 1.5; },
                             [](B e) { e.getWorkerSpec().getModel().setL1Ratio(1.5); },
                             "WorkerSpec.model: l1_ratio must be in (0, 1], got 1.5");
  ExpectRefused<worker_spec>([](worker_spec& x) { x.batch_size = 0; },
                             [](B e) { e.getWorkerSpec().setBatchSize(0); },
                             "WorkerSpec.batchSize: 0 < 1");
  ExpectRefused<worker_spec>([](worker_spec& x) { x.step0 = -0.5; },
                             [](B e) { e.getWorkerSpec().setStep0(-0.5); },
                             "WorkerSpec.step0: -0.5 is not >= 0 and finite");
  ExpectRefused<worker_spec>([](worker_spec& x) { x.step0 = kInf; },
                             [](B e) { e.getWorkerSpec().setStep0(kInf); },
                             "WorkerSpec.step0: inf is not >= 0 and finite");
  ExpectRefused<worker_spec>([](worker_spec& x) { x.step_decay = kInf; },
                             [](B e) { e.getWorkerSpec().setStepDecay(kInf); },
                             "WorkerSpec.stepDecay: inf is not finite");
  ExpectRefused<worker_spec>([](worker_spec& x) { x.tau = 0; },
                             [](B e) { e.getWorkerSpec().setTau(0); },
                             "WorkerSpec.tau: 0 < 1");
  ExpectRefused<worker_spec>([](worker_spec& x) { x.local_epochs = kNaN; },
                             [](B e) { e.getWorkerSpec().setLocalEpochs(kNaN); },
                             "WorkerSpec.localEpochs: nan is not > 0");
  ExpectRefused<worker_spec>([](worker_spec& x) { x.gamma = 1.5; },
                             [](B e) { e.getWorkerSpec().setGamma(1.5); },
                             "WorkerSpec.gamma: 1.5 outside (0, 1]");
  ExpectRefused<worker_spec>([](worker_spec& x) { x.sigma_prime = 0; },
                             [](B e) { e.getWorkerSpec().setSigmaPrime(0); },
                             "WorkerSpec.sigmaPrime: 0 is not > 0");
  ExpectRefused<worker_spec>([](worker_spec& x) { x.local_solver = 3; },
                             [](B e) { e.getWorkerSpec().setLocalSolver(3); },
                             "WorkerSpec.localSolver: 3 is not 0, 1 or 2");
  ExpectRefused<worker_spec>([](worker_spec& x) { x.duhl_device_bytes = -1; },
                             [](B e) { e.getWorkerSpec().setDuhlDeviceBytes(-1); },
                             "WorkerSpec.duhlDeviceBytes: -1 < 0");
  ExpectRefused<worker_spec>([](worker_spec& x) { x.duhl_device_fraction = kNaN; },
                             [](B e) { e.getWorkerSpec().setDuhlDeviceFraction(kNaN); },
                             "WorkerSpec.duhlDeviceFraction: nan outside (0, 1]");
  ExpectRefused<worker_spec>([](worker_spec& x) { x.duhl_selection = 5; },
                             [](B e) { e.getWorkerSpec().setDuhlSelection(5); },
                             "WorkerSpec.duhlSelection: 5 outside [0, 4]");
  ExpectRefused<worker_spec>([](worker_spec& x) { x.duhl_gap_threads = 5000; },
                             [](B e) { e.getWorkerSpec().setDuhlGapThreads(5000); },
                             "WorkerSpec.duhlGapThreads: 5000 outside [0, 1024]");
  ExpectRefused<worker_spec>([](worker_spec& x) { x.duhl_passes = 0; },
                             [](B e) { e.getWorkerSpec().setDuhlPasses(0); },
                             "WorkerSpec.duhlPasses: 0 outside (0, 1e6]");
  ExpectRefused<worker_spec>([](worker_spec& x) { x.device = -1; },
                             [](B e) { e.getWorkerSpec().setDevice(-1); },
                             "WorkerSpec.device: -1 < 0");
  // Load options: what the node passes to ReadLibsvm.
  ExpectRefused<worker_spec>([](worker_spec& x) { x.load.num_features = -1; },
                             [](B e) { e.getWorkerSpec().getLoad().setNumFeatures(-1); },
                             "LoadOptions.numFeatures: negative (-1)");
  ExpectRefused<worker_spec>([](worker_spec& x) { x.load.threads = -2; },
                             [](B e) { e.getWorkerSpec().getLoad().setThreads(-2); },
                             "LoadOptions.threads: negative (-2)");
  ExpectRefused<worker_spec>(
      [](worker_spec& x) { x.load.binarize_threshold = kNaN; },
      [](B e) { e.getWorkerSpec().getLoad().setBinarizeThreshold(kNaN); },
      "LoadOptions.binarizeThreshold: not finite (nan)");
  // Without hasBinarize the threshold field is ignored, whatever it holds.
  worker_spec plain = Wire<worker_spec>::Sample();
  plain.load.binarize_threshold.reset();
  const std::string bytes = Mutated(MustEncode(plain), [](B e) {
    e.getWorkerSpec().getLoad().setBinarizeThreshold(kNaN);
  });
  worker_spec back;
  BOOST_REQUIRE(FromWire(bytes, &back).ok());
  Wire<worker_spec>::Expect(back, plain);
  // The kind set with no struct behind it: every field at its default,
  // which is no valid spec.
  ExpectUndecodable<worker_spec>([](B e) { e.initWorkerSpec(); },
                                 "WorkerSpec.model: lambda must be positive and finite, got 0");
  // A worker_spec's defaults plus a path are sendable.
  worker_spec defaults;
  defaults.path = "x";
  worker_spec defaults_back;
  BOOST_REQUIRE(FromWire(MustEncode(defaults), &defaults_back).ok());
  Wire<worker_spec>::Expect(defaults_back, defaults);
}

// A shard's step factors cross exactly; one per key of its range, each
// positive and finite.
BOOST_AUTO_TEST_CASE(shard_spec_feature_steps) {
  using B = Envelope::Builder;
  shard_config x = Wire<shard_config>::Sample();
  x.end = x.begin + 5;
  x.feature_steps = {0.25, 4.0, 0x1p-40, 1.0, 0x1p40};
  shard_config back;
  BOOST_REQUIRE(FromWire(MustEncode(x), &back).ok());
  Wire<shard_config>::Expect(back, x);
  ExpectRefused<shard_config>(
      [](shard_config& x) { x.feature_steps = {1.0}; },
      [](B e) { e.getShardSpec().initFeatureSteps(1).set(0, 1.0); },
      "ShardSpec.featureSteps: 1 factors for a range of 199900 keys");
  ExpectRefused<shard_config>(
      [](shard_config& x) {
        x.end = x.begin + 3;
        x.feature_steps = {1.0, 1.0, 0.0};
      },
      [](B e) {
        e.getShardSpec().setEnd(103);
        auto l = e.getShardSpec().initFeatureSteps(3);
        l.set(0, 1.0);
        l.set(1, 1.0);
      },
      "ShardSpec.featureSteps: entry 2 is 0, not > 0 and finite");
}

// SAGA's scale crosses exactly; negative or not finite is refused.
BOOST_AUTO_TEST_CASE(shard_spec_saga_scale) {
  using B = Envelope::Builder;
  ExpectRefused<shard_config>(
      [](shard_config& x) { x.saga_scale = -0.5; },
      [](B e) { e.getShardSpec().setSagaScale(-0.5); },
      "ShardSpec.sagaScale: -0.5 is not >= 0 and finite");
  ExpectRefused<shard_config>(
      [](shard_config& x) { x.saga_scale = std::numeric_limits<double>::quiet_NaN(); },
      [](B e) { e.getShardSpec().setSagaScale(std::numeric_limits<double>::quiet_NaN()); },
      "ShardSpec.sagaScale: nan is not >= 0 and finite");
}

BOOST_AUTO_TEST_CASE(shard_spec_invariants) {
  using B = Envelope::Builder;
  ExpectRefused<shard_config>(
      [](shard_config& x) { x.begin = x.end = 5; },
      [](B e) {
        e.getShardSpec().setBegin(5);
        e.getShardSpec().setEnd(5);
      },
      "ShardSpec.end: range [5, 5) is empty");
  ExpectRefused<shard_config>([](shard_config& x) { x.end = 99; },
                              [](B e) { e.getShardSpec().setEnd(99); },
                              "ShardSpec.end: range [100, 99) is empty");
  ExpectRefused<shard_config>([](shard_config& x) { x.begin = -1; },
                              [](B e) { e.getShardSpec().setBegin(-1); },
                              "ShardSpec.end: range [-1, 200000) is empty");
  ExpectRefused<shard_config>(
      [](shard_config& x) {
        x.begin = 0;
        x.end = (int64_t{1} << 28) + 1;
      },
      [](B e) {
        e.getShardSpec().setBegin(0);
        e.getShardSpec().setEnd((int64_t{1} << 28) + 1);
      },
      "ShardSpec.end: range of 268435457 keys exceeds 268435456");
  ExpectRefused<shard_config>([](shard_config& x) { x.workers = 0; },
                              [](B e) { e.getShardSpec().setWorkers(0); },
                              "ShardSpec.workers: 0 < 1");
  ExpectRefused<shard_config>([](shard_config& x) { x.mode = static_cast<dml::Mode>(8); },
                              [](B e) { e.getShardSpec().setMode(static_cast<wire::Mode>(8)); },
                              "ShardSpec.mode: unknown mode 8");
  ExpectUndecodable<shard_config>(
      [](B e) { e.getShardSpec().setMode(static_cast<wire::Mode>(9)); },
      "ShardSpec.mode: unknown mode 9");
  ExpectRefused<shard_config>(
      [](shard_config& x) { x.model.kind = static_cast<dml::ModelKind>(7); },
      [](B e) { e.getShardSpec().getModel().setKind(static_cast<wire::ModelKind>(7)); },
      "ShardSpec.model: unknown model kind 7");
  ExpectRefused<shard_config>([](shard_config& x) { x.model.lambda = -kInf; },
                              [](B e) { e.getShardSpec().getModel().setLambda(-kInf); },
                              "ShardSpec.model: lambda must be positive and finite, got -inf");
  ExpectRefused<shard_config>([](shard_config& x) { x.step0 = -1; },
                              [](B e) { e.getShardSpec().setStep0(-1); },
                              "ShardSpec.step0: -1 is not >= 0 and finite");
  ExpectRefused<shard_config>([](shard_config& x) { x.step_decay = kNaN; },
                              [](B e) { e.getShardSpec().setStepDecay(kNaN); },
                              "ShardSpec.stepDecay: nan is not finite");
  ExpectRefused<shard_config>([](shard_config& x) { x.gamma = 0; },
                              [](B e) { e.getShardSpec().setGamma(0); },
                              "ShardSpec.gamma: 0 outside (0, 1]");
  ExpectRefused<shard_config>([](shard_config& x) { x.easgd_alpha = 1; },
                              [](B e) { e.getShardSpec().setEasgdAlpha(1); },
                              "ShardSpec.easgdAlpha: 1 outside (0, 1)");
  ExpectRefused<shard_config>([](shard_config& x) { x.staleness = -1; },
                              [](B e) { e.getShardSpec().setStaleness(-1); },
                              "ShardSpec.staleness: negative (-1)");
}

BOOST_AUTO_TEST_CASE(progress_event_text_is_carried_exactly) {
  Progress p = Wire<Progress>::Sample();
  p.event = std::string("node\0lost", 9);
  p.primal = kNaN;  // diverged: reported as is
  Progress back;
  BOOST_REQUIRE(FromWire(MustEncode(p), &back).ok());
  Wire<Progress>::Expect(back, p);
}

BOOST_AUTO_TEST_CASE(structure_errors_are_data_loss) {
  // The Envelope's payload pointer aimed at a list where a struct belongs.
  const std::string bytes = MustEncode(Wire<worker_report>::Make(1, 2, 3, 4));
  std::string forged = bytes;
  forged[24] = 0x01;  // w2: pointer kind 1 (list) instead of 0 (struct)
  worker_report out;
  const absl::Status s = FromWire(forged, &out);
  BOOST_TEST(static_cast<int>(s.code()) == static_cast<int>(absl::StatusCode::kDataLoss),
             s.ToString());
  BOOST_TEST(std::string(s.message()).rfind("corrupt Cap'n Proto message: ", 0) == 0,
             s.ToString());
  // A segment table that claims more than arrived.
  std::string longer = bytes;
  longer[4] = 12;  // the message has 11 words
  const absl::Status t = FromWire(longer, &out);
  BOOST_TEST(static_cast<int>(t.code()) == static_cast<int>(absl::StatusCode::kDataLoss),
             t.ToString());
  // A length that is no whole number of words.
  CheckError(FromWire(bytes.substr(0, 69), &out), absl::StatusCode::kDataLoss,
             "message length 69 is not a multiple of 8 bytes");
}

BOOST_AUTO_TEST_SUITE_END()
