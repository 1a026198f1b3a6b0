#pragma once
// The plain C++ payloads of libdml's actor messages: what crosses between
// processes, as one Cap'n Proto Envelope of wire.capnp each
// (dml/net/payload_codec.hpp converts). No CAF and no Cap'n Proto type
// appears here. In-process, vectors travel as shared immutable buffers
// (copying a payload copies pointers, never the numbers).
//
// Decoding a payload from a peer never fails the message that carries it:
// a payload that does not decode arrives with `wire_error` set (and no
// data), so the receiving handler answers the sender with that error
// instead of the message vanishing. Every handler checks it.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "dml/data/libsvm.hpp"
#include "dml/net/bulk.hpp"
#include "dml/objective/model.hpp"
#include "dml/objective/model_io.hpp"
#include "dml/solver/solver.hpp"
#include "dml/solver/training.hpp"

namespace dml::net {

/// Largest vector a peer may send (2^28 entries).
inline constexpr std::size_t kMaxVectorEntries = std::size_t{1} << 28;

/// An immutable shared vector of doubles (model ranges, gradients, deltas):
/// `count` values at `values`, kept alive by `owner` (a std::vector, a
/// block of the bulk channel's shared arena, or a peer's block mapped in
/// place). Copying a dvec copies the reference, never the numbers. Nobody
/// writes through a dvec's values while any copy of it exists.
struct dvec {
  std::shared_ptr<const void> owner;  ///< keeps `values` alive; null: no values
  const double* values = nullptr;
  std::size_t count = 0;
  std::string wire_error;  ///< set when a peer's bytes did not decode
  /// Set instead of values when the dvec arrived as a reference to its
  /// sender's bulk channel (a large vector): the decoder never fetches;
  /// the receiving actor does, off the deserializer (bulk_resolve.hpp).
  std::shared_ptr<const BulkRef> ref;
  /// Every value is known finite: set only by this process's decoders,
  /// which checked them as they arrived (never sent); lets a receiving
  /// handler skip its own pass over the values.
  bool finite = false;

  /// No values (has_values() is false).
  dvec() = default;
  /// Takes ownership of `v`.
  explicit dvec(std::vector<double> v)
      : dvec(std::make_shared<const std::vector<double>>(std::move(v))) {}
  /// Shares `v` (null: no values).
  explicit dvec(std::shared_ptr<const std::vector<double>> v)
      : owner(v), values(v ? v->data() : nullptr), count(v ? v->size() : 0), vector_(std::move(v)) {}
  /// `n` values at `p`, kept alive by `keep`; nothing is copied.
  dvec(std::shared_ptr<const void> keep, const double* p, std::size_t n)
      : owner(std::move(keep)), values(p), count(n) {}

  /// False for a default-constructed (or failed) dvec; true even when empty.
  bool has_values() const { return owner != nullptr; }
  /// The values, without copying.
  std::size_t size() const { return count; }
  const double* data() const { return values; }
  absl::Span<const double> view() const { return absl::Span<const double>(values, count); }
  /// A copy of the values.
  std::vector<double> to_vector() const { return std::vector<double>(values, values + count); }
  /// The values as a std::vector (for numerics that take one): the shared
  /// vector itself where one owns them, else a copy.
  std::shared_ptr<const std::vector<double>> as_vector() const {
    if (vector_) return vector_;
    return std::make_shared<const std::vector<double>>(to_vector());
  }
  /// Size of the values in bytes (for traffic counters).
  int64_t bytes() const { return static_cast<int64_t>(size() * sizeof(double)); }

 private:
  std::shared_ptr<const std::vector<double>> vector_;  // set when a vector owns the values
};

/// A sparse update of a shard's range: offsets relative to the range start,
/// strictly increasing, and their values.
struct sparse_dvec {
  std::shared_ptr<const std::vector<uint32_t>> index;  ///< offsets; same length as value
  std::shared_ptr<const std::vector<double>> value;
  std::string wire_error;  ///< set when a peer's bytes did not decode

  /// Number of entries (0 without values).
  std::size_t size() const { return value ? value->size() : 0; }
  /// Size of the indices and values in bytes (for traffic counters).
  int64_t bytes() const {
    return static_cast<int64_t>(size() * (sizeof(double) + sizeof(uint32_t)));
  }
};

/// Keys of a shard's range to pull: offsets from the range start, strictly
/// increasing.
struct key_list {
  std::shared_ptr<const std::vector<uint32_t>> keys;
  std::string wire_error;  ///< set when a peer's bytes did not decode

  /// Number of keys (0 without a list).
  std::size_t size() const { return keys ? keys->size() : 0; }
  /// Size of the keys in bytes (for traffic counters).
  int64_t bytes() const { return static_cast<int64_t>(size() * sizeof(uint32_t)); }
};

/// A worker's share of the global objective (see dml::BlockCertificate).
struct block_sums {
  /// As in dml::BlockCertificate.
  double loss_sum = 0.0;
  double gap_sum = 0.0;
  double reg_sum = 0.0;
  std::string wire_error;  ///< set when a peer's bytes did not decode
};

/// The longest failure message a worker_report carries over the wire
/// (a longer one is refused at both ends: a worker cuts its message to it).
inline constexpr std::size_t kMaxWorkerFailureBytes = 4096;

/// What a worker did: sent when it finishes a run or a round.
struct worker_report {
  int32_t worker = 0;     ///< worker index in [0, K)
  int64_t clock = 0;      ///< steps (SGD) or rounds (cocoa) completed
  int64_t processed = 0;  ///< examples or coordinates processed in total
  int64_t bytes = 0;      ///< payload bytes pushed and pulled in total
  /// Set when a peer's bytes did not decode, or (sent by a worker) its
  /// failure after it replied: a round's Solve, a refused push.
  std::string wire_error;
  int64_t device_bytes = 0;  ///< cocoa with DuHL workers: bytes moved to its device in total
  int64_t device_swaps = 0;  ///< DuHL workers: coordinates copied to its device in total
  /// A line for the job's progress stream that the worker's process would
  /// otherwise print only to its own stderr (the GPU its local solver is on,
  /// or its fallback to the CPU);
  /// the coordinator makes each new one an event. At most
  /// kMaxWorkerFailureBytes.
  std::string note = {};
};

/// A shard's counters.
struct shard_stats {
  int64_t updates = 0;  ///< pushes applied
  int64_t pulls = 0;    ///< pulls answered
  int64_t bytes_in = 0;   ///< payload bytes received
  int64_t bytes_out = 0;  ///< payload bytes sent
  /// ssp: the largest (requesting clock - slowest clock) granted to a pull.
  int64_t max_granted_staleness = 0;
  std::vector<int64_t> clocks;  ///< per worker: pushes received
  std::string wire_error;       ///< set when a peer's bytes did not decode
};

/// Key boundaries of the S shards (S + 1 entries, increasing).
struct int64_list {
  std::vector<int64_t> values;
  std::string wire_error;  ///< set when a peer's bytes did not decode
};

/// One message of the key-value store's relocation protocol (wire.capnp
/// KvMessage; dml/actors/kv.hpp). Ranks and key bounds are checked by the
/// receiving node, which alone knows the group.
struct kv_message {
  uint8_t kind = 1;        ///< kv_kind (default: a pull)
  int32_t requester = 0;   ///< whose operation; answers go there
  int32_t sender = 0;      ///< rank that sent it
  int32_t owner = -1;      ///< answers: who served; hand-over: the new owner
  int32_t hops = 0;        ///< forwards so far
  uint64_t op = 0;         ///< the requester's operation id
  std::vector<int64_t> keys;   ///< keys, or blocks for relocation steps
  std::vector<double> values;  ///< deltas, pulled values or a block's values
  std::string wire_error;  ///< set when a peer's bytes did not decode
};

/// kv_message kinds.
enum class kv_kind : uint8_t {
  kPull = 1,
  kPush = 2,
  kLocalize = 3,
  kHandOver = 4,
  kTransfer = 5,
  kPullAnswer = 6,
  kPushAnswer = 7,
  kBarrier = 8,         ///< a node reached barrier `op` (to rank 0)
  kBarrierRelease = 9,  ///< every node reached barrier `op` (from rank 0)
  kLeave = 10,          ///< the sender stops on purpose (not a loss)
  kLeaveAck = 11,       ///< the sender has received our kLeave (and all before it)
};
inline constexpr uint8_t kMaxKvKind = 11;

/// What a process needs to spawn one worker (the wire-portable part of
/// worker_config; wire.capnp WorkerSpec documents each field).
struct worker_spec {
  Mode mode = Mode::kCocoa;
  int32_t index = 0;    ///< in [0, workers)
  int32_t workers = 1;  ///< K >= 1
  ModelSpec model;
  uint64_t seed = 1;    ///< the job's seed (minibatches, coordinate order)
  /// A path the worker loads itself (required across processes).
  std::string path;
  LibsvmOptions load;        ///< how to parse `path`
  int32_t batch_size = 64;   ///< SGD modes, >= 1
  double step0 = 0.5;        ///< step_t = step0 / (1 + step_decay * t)
  double step_decay = 0.0;
  int32_t tau = 8;           ///< easgd, model-averaging: steps between exchanges
  double local_epochs = 1.0;  ///< cocoa: H as a fraction of the block
  double gamma = 1.0;         ///< cocoa aggregation, (0, 1]
  double sigma_prime = 1.0;   ///< cocoa subproblem scaling, > 0
  /// SGD: per-feature step factors (dml::FeatureStepFactors; d of them, each
  /// > 0); empty: all 1 (or not known yet: the coordinator sends them).
  std::vector<double> feature_steps;
  int32_t local_solver = 0;   ///< cocoa: 0 the CPU SCD, 1 tpa-scd (GPU), 2 duhl
  int32_t device = 0;         ///< cocoa with tpa-scd: the CUDA device, >= 0
  bool gpu_fallback = false;  ///< cocoa with tpa-scd: the CPU solver where no GPU can run it
  /// cocoa with duhl (local_solver 2): dml::DuhlConfig's fields; selection
  /// as dml::DuhlSelection's value.
  int64_t duhl_device_bytes = 0;
  double duhl_device_fraction = 0.1;
  int32_t duhl_selection = 0;
  int32_t duhl_gap_threads = 1;
  double duhl_passes = 5.0;
  bool duhl_gpu = false;  ///< its blocks on a GPU (TPA-SCD); device, gpu_fallback apply
  /// sync, async, ssp: push SAGA's part of each step (dml::SagaGradient),
  /// the shards adding the remembered mean (shard_config::saga_scale).
  bool saga = false;
  std::string wire_error;     ///< set when a peer's bytes did not decode
};

/// What a process needs to spawn one parameter shard of keys [begin, end)
/// (see parameter_shard.hpp for the rules).
struct shard_config {
  Mode mode = Mode::kSync;
  int32_t workers = 1;       ///< K: workers pushing to it
  int64_t begin = 0;         ///< key range [begin, end), begin < end
  int64_t end = 0;
  ModelSpec model;           ///< whose regulariser the steps apply
  double step0 = 0.5;        ///< step_t = step0 / (1 + step_decay * t)
  double step_decay = 0.0;
  double gamma = 1.0;        ///< cocoa: weight of each delta
  double easgd_alpha = 0.1;  ///< easgd: e = alpha (x - center)
  int32_t staleness = 0;     ///< ssp: s >= 0
  /// The range's per-feature step factors (end - begin of them, each > 0);
  /// empty: all 1.
  std::vector<double> feature_steps;
  /// SAGA (worker_spec::saga): the rows one push stands for over all rows,
  /// |B| / n: each step adds the mean of the workers' remembered gradients
  /// (kept here for the range), which moves by a push times this (sync: a
  /// mean of K pushes, K times this). 0: no SAGA.
  double saga_scale = 0.0;
  std::string wire_error;    ///< set when a peer's bytes did not decode
};

/// An immutable, shareable float vector. Copying a dense_block copies a
/// pointer; the floats are never mutated after construction, so any number
/// of actors may read them concurrently. A default-constructed block is
/// empty (no allocation).
struct dense_block {
  std::shared_ptr<const std::vector<float>> data;  ///< null when empty

  /// Empty, no allocation.
  dense_block() = default;
  std::string wire_error;  ///< set when a peer's bytes did not decode

  /// Takes ownership of `values`.
  explicit dense_block(std::vector<float> values)
      : data(std::make_shared<const std::vector<float>>(std::move(values))) {}

  /// Number of floats, and a view of them (empty when there are none).
  std::size_t size() const { return data ? data->size() : 0; }
  absl::Span<const float> view() const {
    return data ? absl::Span<const float>(*data) : absl::Span<const float>();
  }
};


/// A trained model file (wire.capnp ModelFile): the model and the
/// certificate it was trained to.
struct model_file {
  LinearModel model;
  double primal = std::numeric_limits<double>::quiet_NaN();  ///< NaN: unknown
  double gap = std::numeric_limits<double>::quiet_NaN();     ///< +inf: no dual; NaN: unknown
};

/// A job's restart point (wire.capnp Checkpoint): written by the
/// coordinator, read by JobSpec.recovery.resume.
struct job_checkpoint {
  Mode mode = Mode::kCocoa;
  ModelSpec model;
  int32_t round = 0;     ///< the round (cocoa) or evaluation (SGD) it was taken at
  double epochs = 0.0;   ///< as in Progress, at the checkpoint
  double seconds = 0.0;
  int64_t clock = 0;     ///< SGD modes: the clock every worker restarts from
  int64_t bytes = 0;     ///< payload bytes exchanged so far
  int64_t rows = 0, cols = 0;  ///< shape of the data it was trained on
  uint64_t seed = 0;     ///< the job's seed
  int32_t workers = 0;   ///< K of the job that wrote it
  std::vector<double> shared;  ///< w, or v = A w for primal cocoa
  std::vector<std::vector<double>> coords;  ///< per worker (cocoa): alpha or local w; may be empty
  std::vector<int64_t> processed;           ///< per worker: examples or coordinates processed
  std::vector<Progress> history;            ///< the job's Progress so far
};

}  // namespace dml::net
