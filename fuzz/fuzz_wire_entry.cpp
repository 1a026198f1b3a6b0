// The wire fuzz entry: hostile bytes against every actor payload decoder
// (dml/actors/wire.hpp), directly and through the CAF inspect overloads.
//
// For each payload type T, the input is decoded as T:
//   - directly with FromWire; when that succeeds, the value must re-encode
//     (ToWire accepts everything FromWire accepts), the re-encoding must
//     decode to an equal value (doubles and floats compared bit for bit) and
//     re-encode to the same bytes;
//   - inside intact CAF framing (CAF's varbyte length + the input): CAF must
//     not fail the message, and the payload must carry exactly FromWire's
//     outcome (the value, or the error text in wire_error); a decoded value
//     must serialise back to CAF's length + its ToWire bytes;
//   - as raw CAF bytes (framing fuzzed too): anything but a crash goes.
// Any violation prints what differed and aborts, which libFuzzer reports as
// a crash. Built by fuzz/CMakeLists.txt (clang, libFuzzer, ASan, UBSan) and
// by tests/actors (g++, no sanitizer) for the replay test.

#include "fuzz_wire.hpp"

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/execution_unit.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "dml/actors/dense_block.hpp"
#include "dml/actors/messages.hpp"
#include "dml/actors/wire.hpp"
#include "dml/net/payload_codec.hpp"

namespace {

using dml::Progress;
using dml::actors::block_sums;
using dml::actors::dense_block;
using dml::actors::dvec;
using dml::actors::int64_list;
using dml::actors::key_list;
using dml::actors::shard_config;
using dml::actors::shard_stats;
using dml::actors::sparse_dvec;
using dml::actors::worker_report;
using dml::actors::worker_spec;

// ------------------------------------------------------------ equality
// Each Diff returns the first field that differs, or nullptr. Floating
// point compares bit for bit (the wire must not canonicalise NaN or -0).

template <class T>
bool SameBits(const T& a, const T& b) {
  static_assert(std::is_trivially_copyable_v<T>);
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T>
bool SameVec(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// A null shared vector and an empty one are the same payload.
template <class T>
const std::vector<T>& Or(const std::shared_ptr<const std::vector<T>>& p) {
  static const std::vector<T> empty;
  return p ? *p : empty;
}

#define DML_DIFF(field, same) \
  if (!(same)) return field

const char* Diff(const dvec& a, const dvec& b) {
  DML_DIFF("dvec.data", SameVec(a.to_vector(), b.to_vector()));
  return nullptr;
}
const char* Diff(const sparse_dvec& a, const sparse_dvec& b) {
  DML_DIFF("sparse_dvec.index", SameVec(Or(a.index), Or(b.index)));
  DML_DIFF("sparse_dvec.value", SameVec(Or(a.value), Or(b.value)));
  return nullptr;
}
const char* Diff(const key_list& a, const key_list& b) {
  DML_DIFF("key_list.keys", SameVec(Or(a.keys), Or(b.keys)));
  return nullptr;
}
const char* Diff(const block_sums& a, const block_sums& b) {
  DML_DIFF("block_sums.loss_sum", SameBits(a.loss_sum, b.loss_sum));
  DML_DIFF("block_sums.gap_sum", SameBits(a.gap_sum, b.gap_sum));
  DML_DIFF("block_sums.reg_sum", SameBits(a.reg_sum, b.reg_sum));
  return nullptr;
}
const char* Diff(const worker_report& a, const worker_report& b) {
  DML_DIFF("worker_report.worker", a.worker == b.worker);
  DML_DIFF("worker_report.clock", a.clock == b.clock);
  DML_DIFF("worker_report.processed", a.processed == b.processed);
  DML_DIFF("worker_report.bytes", a.bytes == b.bytes);
  return nullptr;
}
const char* Diff(const shard_stats& a, const shard_stats& b) {
  DML_DIFF("shard_stats.updates", a.updates == b.updates);
  DML_DIFF("shard_stats.pulls", a.pulls == b.pulls);
  DML_DIFF("shard_stats.bytes_in", a.bytes_in == b.bytes_in);
  DML_DIFF("shard_stats.bytes_out", a.bytes_out == b.bytes_out);
  DML_DIFF("shard_stats.max_granted_staleness",
           a.max_granted_staleness == b.max_granted_staleness);
  DML_DIFF("shard_stats.clocks", SameVec(a.clocks, b.clocks));
  return nullptr;
}
const char* Diff(const int64_list& a, const int64_list& b) {
  DML_DIFF("int64_list.values", SameVec(a.values, b.values));
  return nullptr;
}
const char* Diff(const dml::net::kv_message& a, const dml::net::kv_message& b) {
  DML_DIFF("kv_message.kind", a.kind == b.kind);
  DML_DIFF("kv_message.requester", a.requester == b.requester);
  DML_DIFF("kv_message.sender", a.sender == b.sender);
  DML_DIFF("kv_message.owner", a.owner == b.owner);
  DML_DIFF("kv_message.hops", a.hops == b.hops);
  DML_DIFF("kv_message.op", a.op == b.op);
  DML_DIFF("kv_message.keys", SameVec(a.keys, b.keys));
  DML_DIFF("kv_message.values", SameVec(a.values, b.values));
  return nullptr;
}
const char* Diff(const dml::ModelSpec& a, const dml::ModelSpec& b) {
  DML_DIFF("model.kind", a.kind == b.kind);
  DML_DIFF("model.lambda", SameBits(a.lambda, b.lambda));
  DML_DIFF("model.l1_ratio", SameBits(a.l1_ratio, b.l1_ratio));
  return nullptr;
}
const char* Diff(const worker_spec& a, const worker_spec& b) {
  DML_DIFF("worker_spec.mode", a.mode == b.mode);
  DML_DIFF("worker_spec.index", a.index == b.index);
  DML_DIFF("worker_spec.workers", a.workers == b.workers);
  if (const char* f = Diff(a.model, b.model)) return f;
  DML_DIFF("worker_spec.seed", a.seed == b.seed);
  DML_DIFF("worker_spec.path", a.path == b.path);
  DML_DIFF("worker_spec.load.task", a.load.task == b.load.task);
  DML_DIFF("worker_spec.load.binarize_threshold",
           a.load.binarize_threshold.has_value() == b.load.binarize_threshold.has_value() &&
               (!a.load.binarize_threshold ||
                SameBits(*a.load.binarize_threshold, *b.load.binarize_threshold)));
  DML_DIFF("worker_spec.load.num_features", a.load.num_features == b.load.num_features);
  DML_DIFF("worker_spec.load.threads", a.load.threads == b.load.threads);
  DML_DIFF("worker_spec.batch_size", a.batch_size == b.batch_size);
  DML_DIFF("worker_spec.step0", SameBits(a.step0, b.step0));
  DML_DIFF("worker_spec.step_decay", SameBits(a.step_decay, b.step_decay));
  DML_DIFF("worker_spec.tau", a.tau == b.tau);
  DML_DIFF("worker_spec.local_epochs", SameBits(a.local_epochs, b.local_epochs));
  DML_DIFF("worker_spec.gamma", SameBits(a.gamma, b.gamma));
  DML_DIFF("worker_spec.sigma_prime", SameBits(a.sigma_prime, b.sigma_prime));
  return nullptr;
}
const char* Diff(const shard_config& a, const shard_config& b) {
  DML_DIFF("shard_config.mode", a.mode == b.mode);
  DML_DIFF("shard_config.workers", a.workers == b.workers);
  DML_DIFF("shard_config.begin", a.begin == b.begin);
  DML_DIFF("shard_config.end", a.end == b.end);
  if (const char* f = Diff(a.model, b.model)) return f;
  DML_DIFF("shard_config.step0", SameBits(a.step0, b.step0));
  DML_DIFF("shard_config.step_decay", SameBits(a.step_decay, b.step_decay));
  DML_DIFF("shard_config.gamma", SameBits(a.gamma, b.gamma));
  DML_DIFF("shard_config.easgd_alpha", SameBits(a.easgd_alpha, b.easgd_alpha));
  DML_DIFF("shard_config.staleness", a.staleness == b.staleness);
  return nullptr;
}
const char* Diff(const dense_block& a, const dense_block& b) {
  DML_DIFF("dense_block.data", SameVec(Or(a.data), Or(b.data)));
  return nullptr;
}
const char* Diff(const Progress& a, const Progress& b) {
  DML_DIFF("Progress.round", a.round == b.round);
  DML_DIFF("Progress.seconds", SameBits(a.seconds, b.seconds));
  DML_DIFF("Progress.epochs", SameBits(a.epochs, b.epochs));
  DML_DIFF("Progress.primal", SameBits(a.primal, b.primal));
  DML_DIFF("Progress.dual", SameBits(a.dual, b.dual));
  DML_DIFF("Progress.gap", SameBits(a.gap, b.gap));
  DML_DIFF("Progress.bytes_exchanged", a.bytes_exchanged == b.bytes_exchanged);
  DML_DIFF("Progress.staleness", SameVec(a.staleness, b.staleness));
  DML_DIFF("Progress.event", a.event == b.event);
  return nullptr;
}
const char* Diff(const dml::net::model_file& a, const dml::net::model_file& b) {
  DML_DIFF("ModelFile.model", a.model.spec.kind == b.model.spec.kind &&
                                  SameBits(a.model.spec.lambda, b.model.spec.lambda) &&
                                  SameBits(a.model.spec.l1_ratio, b.model.spec.l1_ratio));
  DML_DIFF("ModelFile.weights", SameVec(a.model.w, b.model.w));
  DML_DIFF("ModelFile.labels", SameVec(a.model.classes, b.model.classes));
  DML_DIFF("ModelFile.bias", SameBits(a.model.bias, b.model.bias));
  DML_DIFF("ModelFile.primal", SameBits(a.primal, b.primal));
  DML_DIFF("ModelFile.gap", SameBits(a.gap, b.gap));
  return nullptr;
}

#undef DML_DIFF

// ------------------------------------------------------------ checks

[[noreturn]] void Fail(const char* type, const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_wire: %s: %s%s%s\n", type, what, detail.empty() ? "" : ": ",
               detail.c_str());
  std::fflush(stderr);
  std::abort();
}

// Progress and model files are envelopes but no CAF message types (no
// inspect overloads, no wire_error): they are decoded directly only.
template <class T>
constexpr bool kIsCafPayload = !std::is_same_v<T, Progress> && !std::is_same_v<T, dml::net::model_file>;

caf::execution_unit* const kNoContext = nullptr;

// CAF's framing of `bytes`: its varbyte sequence length, then the bytes.
std::vector<char> CafFramed(std::string_view bytes) {
  std::vector<char> out;
  caf::binary_serializer sink{kNoContext, out};
  std::size_t n = bytes.size();
  if (sink.begin_sequence(n)) Fail("caf", "begin_sequence failed", "");
  out.insert(out.end(), bytes.begin(), bytes.end());
  return out;
}

// What a CAF message's decoder does with these bytes, done directly. A dvec
// may arrive as a BulkVector reference (by the envelope's kind): then its
// `ref` is set and the CAF payload must carry the same reference.
template <class T>
absl::Status Direct(std::string_view bytes, T* out) {
  return dml::actors::FromWire(bytes, out);
}
absl::Status Direct(std::string_view bytes, dvec* out) {
  return dml::net::FromWireOrReference(bytes, out);
}
template <class T>
const dml::net::BulkRef* RefOf(const T&) {
  return nullptr;
}
const dml::net::BulkRef* RefOf(const dvec& x) { return x.ref.get(); }

bool SameRef(const dml::net::BulkRef* a, const dml::net::BulkRef* b) {
  if ((a == nullptr) != (b == nullptr)) return false;
  if (a == nullptr) return true;
  return a->host == b->host && a->port == b->port && a->local == b->local &&
         a->ticket == b->ticket && a->count == b->count && a->address == b->address &&
         a->slot == b->slot && a->segment == b->segment && a->offset == b->offset;
}

template <class T>
void DecodeAs(const char* type, std::string_view bytes) {
  T first;
  const absl::Status direct = Direct(bytes, &first);
  const dml::net::BulkRef* ref = RefOf(first);

  if constexpr (kIsCafPayload<T>) {
    // Intact framing: the CAF message survives and carries FromWire's outcome.
    const std::vector<char> framed = CafFramed(bytes);
    caf::binary_deserializer source{kNoContext, framed.data(), framed.size()};
    T got;
    if (auto err = source(got)) Fail(type, "CAF failed a message with intact framing", "");
    if (direct.ok()) {
      if (!got.wire_error.empty()) Fail(type, "CAF set wire_error on a good payload", got.wire_error);
      if (const char* f = Diff(first, got)) Fail(type, "CAF decoded a different value", f);
      if (!SameRef(ref, RefOf(got))) Fail(type, "CAF decoded a different bulk reference", "");
    } else {
      const std::string expected =
          direct.message().empty() ? "undecodable payload" : std::string(direct.message());
      if (got.wire_error != expected) {
        Fail(type, "CAF wire_error differs from FromWire", got.wire_error + " vs " + expected);
      }
      if (const char* f = Diff(T{}, got)) Fail(type, "CAF left data in a failed payload", f);
    }
    // Raw bytes as CAF framing: whatever happens, no crash.
    caf::binary_deserializer raw{kNoContext, bytes.data(), bytes.size()};
    T junk;
    (void)raw(junk);
  }

  if (!direct.ok() || ref) return;  // a reference's round trip: DecodeBulkRef
  auto again = dml::actors::ToWire(first);
  if (!again.ok()) Fail(type, "ToWire refused a value FromWire accepted", again.status().ToString());
  T second;
  if (auto s = dml::actors::FromWire(*again, &second); !s.ok()) {
    Fail(type, "the re-encoding does not decode", s.ToString());
  }
  if (const char* f = Diff(first, second)) Fail(type, "the re-encoding decodes differently", f);
  auto third = dml::actors::ToWire(second);
  if (!third.ok() || *third != *again) Fail(type, "re-encoding is not stable", "");

  if constexpr (kIsCafPayload<T>) {
    // CAF writes its length and exactly ToWire's bytes.
    std::vector<char> out;
    caf::binary_serializer sink{kNoContext, out};
    if (auto err = sink(first)) Fail(type, "CAF refused to serialise a decoded value", "");
    if (out != CafFramed(*again)) Fail(type, "CAF bytes differ from ToWire's", "");
  }
}

// A BulkVector reference (no CAF message type of its own: a CAF message's
// dvec decodes to one when the envelope is of that kind): decode,
// re-encode, decode again, field for field.
void DecodeBulkRef(std::string_view bytes) {
  dml::net::BulkRef first;
  if (!dml::actors::FromWire(bytes, &first).ok()) return;
  auto again = dml::actors::ToWire(first);
  if (!again.ok()) Fail("bulk_ref", "ToWire refused a value FromWire accepted", again.status().ToString());
  dml::net::BulkRef second;
  if (auto st = dml::actors::FromWire(*again, &second); !st.ok()) {
    Fail("bulk_ref", "the re-encoding does not decode", st.ToString());
  }
  if (first.host != second.host || first.port != second.port || first.local != second.local ||
      first.ticket != second.ticket || first.count != second.count) {
    Fail("bulk_ref", "the re-encoding decodes differently", "");
  }
  auto third = dml::actors::ToWire(second);
  if (!third.ok() || *third != *again) Fail("bulk_ref", "re-encoding is not stable", "");
}

template <class T>
std::pair<std::string, std::string> Seed(const std::string& name, const T& x) {
  auto bytes = dml::actors::ToWire(x);
  if (!bytes.ok()) Fail(name.c_str(), "seed does not encode", bytes.status().ToString());
  return {name, *std::move(bytes)};
}

// The file reader (checkpoint and model files, with their checksum): it
// never crashes, refuses only with DataLoss or InvalidArgument or
// ResourceExhausted, and accepts nothing the message decoder refuses (a
// file is a message plus a check); a model file it accepts decodes to the
// message decoder's value.
template <class T>
void DecodeFile(const char* type, std::string_view bytes) {
  T file;
  const absl::Status f = dml::net::FromFileBytes(bytes, &file);
  T wire;
  const absl::Status w = dml::net::FromWire(bytes, &wire);
  if (f.ok() && !w.ok()) Fail(type, "a file decoded that FromWire refuses", w.ToString());
  if (!f.ok() && f.code() != absl::StatusCode::kDataLoss &&
      f.code() != absl::StatusCode::kInvalidArgument &&
      f.code() != absl::StatusCode::kResourceExhausted) {
    Fail(type, "unexpected status from FromFileBytes", f.ToString());
  }
  if constexpr (std::is_same_v<T, dml::net::model_file>) {
    if (f.ok()) {
      if (const char* field = Diff(file, wire)) Fail(type, "file and message decode differ", field);
    }
  }
}

template <class T>
std::pair<std::string, std::string> FileSeed(const std::string& name, const T& x) {
  auto bytes = dml::net::ToFileBytes(x);
  if (!bytes.ok()) Fail(name.c_str(), "seed does not encode", bytes.status().ToString());
  return {name, *std::move(bytes)};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  DecodeAs<dvec>("dvec", bytes);
  DecodeAs<sparse_dvec>("sparse_dvec", bytes);
  DecodeAs<key_list>("key_list", bytes);
  DecodeAs<block_sums>("block_sums", bytes);
  DecodeAs<worker_report>("worker_report", bytes);
  DecodeAs<shard_stats>("shard_stats", bytes);
  DecodeAs<int64_list>("int64_list", bytes);
  DecodeAs<worker_spec>("worker_spec", bytes);
  DecodeAs<shard_config>("shard_config", bytes);
  DecodeAs<dense_block>("dense_block", bytes);
  DecodeAs<dml::net::kv_message>("kv_message", bytes);
  DecodeAs<Progress>("Progress", bytes);
  DecodeAs<dml::net::model_file>("model_file", bytes);
  DecodeFile<dml::net::model_file>("model file", bytes);
  DecodeFile<dml::net::job_checkpoint>("checkpoint file", bytes);
  DecodeBulkRef(bytes);
  return 0;
}

namespace dml::fuzz {

std::vector<std::pair<std::string, std::string>> WireSeeds() {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::pair<std::string, std::string>> out;

  out.push_back(Seed("dvec_empty", dvec()));
  out.push_back(Seed("bulk_ref", dml::net::BulkRef{"10.0.0.2", 4243, "dml-bulk.77.abc", 0x1234567890abcdefull, 1u << 20}));
  out.push_back(Seed("dvec_values", dvec({1.5, -2.25, 0.0, -0.0, 1e300, nan, -inf})));

  out.push_back(Seed("sparse_dvec_empty", sparse_dvec()));
  sparse_dvec sparse;
  sparse.index = std::make_shared<const std::vector<uint32_t>>(
      std::vector<uint32_t>{0, 5, 4294967295u});
  sparse.value = std::make_shared<const std::vector<double>>(std::vector<double>{1.0, -1.0, 0.5});
  out.push_back(Seed("sparse_dvec_values", sparse));

  out.push_back(Seed("key_list_empty", key_list()));
  key_list keys;
  keys.keys = std::make_shared<const std::vector<uint32_t>>(std::vector<uint32_t>{0, 1, 7, 1000});
  out.push_back(Seed("key_list_values", keys));

  block_sums sums;
  sums.loss_sum = 1.5;
  sums.gap_sum = 0.25;
  sums.reg_sum = -3.0;
  out.push_back(Seed("block_sums", sums));

  worker_report report;
  report.worker = 1;
  report.clock = 2;
  report.processed = 3;
  report.bytes = 4;
  out.push_back(Seed("worker_report", report));

  shard_stats stats;
  stats.updates = 5;
  stats.pulls = 6;
  stats.bytes_in = 7;
  stats.bytes_out = 8;
  stats.max_granted_staleness = 2;
  stats.clocks = {1, -2, 3};
  out.push_back(Seed("shard_stats", stats));

  dml::net::kv_message kv;
  kv.kind = static_cast<uint8_t>(dml::net::kv_kind::kTransfer);
  kv.requester = 2;
  kv.sender = 1;
  kv.owner = 1;
  kv.hops = 1;
  kv.op = 77;
  kv.keys = {3, 4};
  kv.values = {1.0, -2.0, 0.5, 4.0};
  out.push_back(Seed("kv_message", kv));

  out.push_back(Seed("int64_list_empty", int64_list()));
  int64_list bounds;
  bounds.values = {0, 10, -20, std::numeric_limits<int64_t>::min(),
                   std::numeric_limits<int64_t>::max()};
  out.push_back(Seed("int64_list_values", bounds));

  worker_spec spec;
  spec.mode = dml::Mode::kSsp;
  spec.index = 2;
  spec.workers = 3;
  spec.model.kind = dml::ModelKind::kElasticNet;
  spec.model.lambda = 1e-3;
  spec.model.l1_ratio = 0.25;
  spec.seed = 0xdeadbeefcafef00dull;
  spec.path = "/data/news20.binary.bz2";
  spec.load.task = dml::Task::kClassification;
  spec.load.binarize_threshold = 10.5;
  spec.load.num_features = 1355191;
  spec.load.threads = 4;
  spec.batch_size = 32;
  spec.step0 = 0.75;
  spec.step_decay = 0.05;
  spec.tau = 4;
  spec.local_epochs = 2.5;
  spec.gamma = 0.5;
  spec.sigma_prime = 3.0;
  out.push_back(Seed("worker_spec_full", spec));
  worker_spec plain;
  plain.path = "x";
  out.push_back(Seed("worker_spec_plain", plain));

  shard_config shard;
  shard.mode = dml::Mode::kEasgd;
  shard.workers = 4;
  shard.begin = 100;
  shard.end = 200;
  shard.model.kind = dml::ModelKind::kHingeSvm;
  shard.model.lambda = 0.01;
  shard.step0 = 0.1;
  shard.step_decay = 0.5;
  shard.gamma = 0.75;
  shard.easgd_alpha = 0.2;
  shard.staleness = 3;
  out.push_back(Seed("shard_config", shard));

  out.push_back(Seed("dense_block_empty", dense_block()));
  out.push_back(Seed("dense_block_values", dense_block(std::vector<float>{1.0f, -2.0f, 0.5f})));

  Progress progress;
  progress.round = 7;
  progress.seconds = 1.25;
  progress.epochs = 3.5;
  progress.primal = 0.125;
  progress.dual = -inf;
  progress.gap = inf;
  progress.bytes_exchanged = 123456;
  progress.staleness = {0, 1, -1};
  progress.event = "lost node 127.0.0.1:4242";
  out.push_back(Seed("Progress", progress));
  dml::net::model_file model;
  model.model.spec = {dml::ModelKind::kLogisticL1, 0.01};
  model.model.w = {0.5, 0.0, -2.0};
  model.model.classes = {0.0, 1.0};
  model.model.bias = 1.0;
  model.primal = 0.3;
  model.gap = inf;
  out.push_back(Seed("model_file", model));
  out.push_back(FileSeed("model_file_sealed", model));
  dml::net::job_checkpoint checkpoint;
  checkpoint.model = {dml::ModelKind::kHingeSvm, 0.1};
  checkpoint.round = 3;
  checkpoint.rows = 4;
  checkpoint.cols = 3;
  checkpoint.workers = 2;
  checkpoint.shared = {0.25, -0.5, 1.0};
  checkpoint.coords = {{0.5, 0.0}, {1.0, 0.25}};
  checkpoint.processed = {2, 2};
  checkpoint.history = {progress};
  out.push_back(FileSeed("checkpoint_sealed", checkpoint));
  out.push_back(Seed("job_progress_empty", Progress()));
  return out;
}

}  // namespace dml::fuzz
