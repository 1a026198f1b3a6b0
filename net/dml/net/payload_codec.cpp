// Payload <-> wire.capnp Envelope: the one codec of libdml's messages,
// checkpoints and model files (dml/net/payload_codec.hpp).
//
// Copies: encoding copies each vector once into the Cap'n Proto builder;
// decoding reads the (aligned) bytes in place and copies each list once
// into the payload's vector.
#include "dml/net/payload_codec.hpp"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include <capnp/any.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dml/data/cache.hpp"
#include "dml/net/internal/envelope.hpp"
#include "dml/net/internal/payload_builder.hpp"
#include "dml/net/internal/payload_checks.hpp"
#include "dml/util/status.hpp"

namespace dml::net {
namespace {

using internal::Check;
using internal::CheckBulkRef;
using internal::CheckFinite;
using internal::CheckIncreasing;
using internal::CheckListLength;
using internal::CheckLoad;
using internal::CheckMode;
using internal::CheckModel;
using internal::CheckModelKind;
using internal::CheckNonNegative;
using internal::CheckVectorLength;
using internal::Invalid;
using internal::DecodeEnvelope;
using internal::FillList;
using internal::Flatten;
using internal::kWordBytes;
using internal::ReadList;
using internal::WordsForList;
using Which = wire::Envelope::Which;

// ------------------------------------------------------------- builders
// Each Build writes one payload into a fresh Envelope; the first segment is
// sized for the whole message where the size is known, so big vectors are
// one contiguous segment.

capnp::MallocMessageBuilder MakeBuilder(std::size_t words) {
  return capnp::MallocMessageBuilder(static_cast<unsigned>(std::max<std::size_t>(words, 16)));
}

wire::Envelope::Builder Root(capnp::MessageBuilder& b) {
  auto env = b.initRoot<wire::Envelope>();
  env.setSchemaVersion(kWireSchemaVersion);
  return env;
}

void SetModel(wire::Model::Builder m, const ModelSpec& x) {
  m.setKind(static_cast<wire::ModelKind>(static_cast<uint16_t>(x.kind)));
  m.setLambda(x.lambda);
  m.setL1Ratio(x.l1_ratio);
}

// Enum values a reader knows (checked as integers: a C++ enum may hold
// others through a cast, and we never send those).
absl::StatusOr<ModelSpec> GetModel(wire::Model::Reader m, const char* field) {
  const auto kind = static_cast<uint16_t>(m.getKind());
  DML_RETURN_IF_ERROR(CheckModelKind(kind, field));
  ModelSpec x;
  x.kind = static_cast<ModelKind>(kind);
  x.lambda = m.getLambda();
  x.l1_ratio = m.getL1Ratio();
  if (auto s = Validate(x); !s.ok()) return Invalid(field, s.message());
  return x;
}

absl::StatusOr<Mode> GetMode(wire::Mode m, const char* field) {
  const auto v = static_cast<uint16_t>(m);
  DML_RETURN_IF_ERROR(CheckMode(v, field));
  return static_cast<Mode>(v);
}

void SetLoad(wire::LoadOptions::Builder b, const LibsvmOptions& x) {
  b.setRegression(x.task == Task::kRegression);
  b.setHasBinarize(x.binarize_threshold.has_value());
  b.setBinarizeThreshold(x.binarize_threshold.value_or(0.0));
  b.setNumFeatures(x.num_features);
  b.setThreads(x.threads);
}

absl::StatusOr<LibsvmOptions> GetLoad(wire::LoadOptions::Reader r) {
  LibsvmOptions x;
  x.task = r.getRegression() ? Task::kRegression : Task::kClassification;
  if (r.getHasBinarize()) x.binarize_threshold = r.getBinarizeThreshold();
  x.num_features = r.getNumFeatures();
  x.threads = r.getThreads();
  DML_RETURN_IF_ERROR(CheckLoad(x));
  return x;
}

// Text with its exact length (kj's std::string conversions stop at a NUL).
capnp::Text::Reader AsText(const std::string& s) { return capnp::Text::Reader(s.data(), s.size()); }
std::string FromText(capnp::Text::Reader t) { return std::string(t.begin(), t.size()); }

template <class T>
void PutList(typename capnp::List<T>::Builder list, const std::vector<T>* v) {
  if (v != nullptr) FillList<T>(list, v->data(), v->size());
}

template <class T>
std::shared_ptr<const std::vector<T>> TakeList(typename capnp::List<T>::Reader list) {
  auto out = std::make_shared<std::vector<T>>(list.size());
  ReadList<T>(list, out->data());
  return out;
}

template <class T>
std::vector<T> CopyList(typename capnp::List<T>::Reader list) {
  std::vector<T> out(list.size());
  ReadList<T>(list, out.data());
  return out;
}

void Build(const Progress& x, wire::Progress::Builder b);
void Read(wire::Progress::Reader r, Progress* out);

void Build(const job_checkpoint& x, wire::Envelope::Builder env) {
  auto b = env.initCheckpoint();
  b.setMode(static_cast<wire::Mode>(static_cast<uint16_t>(x.mode)));
  SetModel(b.initModel(), x.model);
  b.setRound(x.round);
  b.setEpochs(x.epochs);
  b.setSeconds(x.seconds);
  b.setClock(x.clock);
  b.setBytesExchanged(x.bytes);
  b.setDataRows(x.rows);
  b.setDataCols(x.cols);
  b.setSeed(x.seed);
  b.setWorkerCount(x.workers);
  PutList<double>(b.initShared(static_cast<unsigned>(x.shared.size())), &x.shared);
  auto ws = b.initWorkers(static_cast<unsigned>(x.processed.size()));
  for (std::size_t k = 0; k < x.processed.size(); ++k) {
    auto w = ws[static_cast<unsigned>(k)];
    w.setIndex(static_cast<int32_t>(k));
    w.setProcessed(x.processed[k]);
    const std::vector<double>* local = k < x.coords.size() ? &x.coords[k] : nullptr;
    PutList<double>(w.initLocal(static_cast<unsigned>(local ? local->size() : 0)), local);
  }
  auto h = b.initHistory(static_cast<unsigned>(x.history.size()));
  for (std::size_t i = 0; i < x.history.size(); ++i) Build(x.history[i], h[static_cast<unsigned>(i)]);
}

void Build(const model_file& x, wire::Envelope::Builder env) {
  auto b = env.initModelFile();
  SetModel(b.initModel(), x.model.spec);
  PutList<double>(b.initWeights(static_cast<unsigned>(x.model.w.size())), &x.model.w);
  b.setPrimal(x.primal);
  b.setGap(x.gap);
  PutList<double>(b.initLabels(static_cast<unsigned>(x.model.classes.size())), &x.model.classes);
  b.setBias(x.model.bias);
  b.setBinarize(x.model.binarize);
}

void Build(const dvec& x, wire::Envelope::Builder env) {
  auto v = env.initVector();
  auto list = v.initValues(static_cast<unsigned>(x.size()));
  if (x.size() > 0) FillList<double>(list, x.data(), x.size());
}
void Build(const sparse_dvec& x, wire::Envelope::Builder env) {
  auto v = env.initSparseUpdate();
  PutList<uint32_t>(v.initOffsets(static_cast<unsigned>(x.size())), x.index.get());
  PutList<double>(v.initValues(static_cast<unsigned>(x.size())), x.value.get());
}
void Build(const key_list& x, wire::Envelope::Builder env) {
  PutList<uint32_t>(env.initKeyList().initKeys(static_cast<unsigned>(x.size())), x.keys.get());
}
void Build(const block_sums& x, wire::Envelope::Builder env) {
  auto b = env.initBlockSums();
  b.setLossSum(x.loss_sum);
  b.setGapSum(x.gap_sum);
  b.setRegSum(x.reg_sum);
}
void Build(const worker_report& x, wire::Envelope::Builder env) {
  auto b = env.initWorkerReport();
  b.setWorker(x.worker);
  b.setClock(x.clock);
  b.setProcessed(x.processed);
  b.setBytes(x.bytes);
  b.setDeviceBytes(x.device_bytes);
  b.setDeviceSwaps(x.device_swaps);
  // A failure travels as its message: the coordinator fails the job with it
  // (before, a node worker's failure reached it as a plain report: a hang).
  if (!x.wire_error.empty()) b.setFailure(x.wire_error);
  if (!x.note.empty()) b.setNote(x.note);
}
void Build(const shard_stats& x, wire::Envelope::Builder env) {
  auto b = env.initShardStats();
  b.setUpdates(x.updates);
  b.setPulls(x.pulls);
  b.setBytesIn(x.bytes_in);
  b.setBytesOut(x.bytes_out);
  b.setMaxGrantedStaleness(x.max_granted_staleness);
  PutList<int64_t>(b.initClocks(static_cast<unsigned>(x.clocks.size())), &x.clocks);
}
void Build(const int64_list& x, wire::Envelope::Builder env) {
  PutList<int64_t>(env.initInt64List().initValues(static_cast<unsigned>(x.values.size())),
                   &x.values);
}
void Build(const kv_message& x, wire::Envelope::Builder env) {
  auto b = env.initKvMessage();
  b.setKind(x.kind);
  b.setRequester(x.requester);
  b.setSender(x.sender);
  b.setOwner(x.owner);
  b.setHops(x.hops);
  b.setOp(x.op);
  PutList<int64_t>(b.initKeys(static_cast<unsigned>(x.keys.size())), &x.keys);
  PutList<double>(b.initValues(static_cast<unsigned>(x.values.size())), &x.values);
}
void Build(const worker_spec& x, wire::Envelope::Builder env) {
  auto b = env.initWorkerSpec();
  b.setMode(static_cast<wire::Mode>(static_cast<uint16_t>(x.mode)));
  b.setIndex(x.index);
  b.setWorkers(x.workers);
  SetModel(b.initModel(), x.model);
  b.setSeed(x.seed);
  b.setDataPath(AsText(x.path));
  SetLoad(b.initLoad(), x.load);
  b.setBatchSize(x.batch_size);
  b.setStep0(x.step0);
  b.setStepDecay(x.step_decay);
  b.setTau(x.tau);
  b.setLocalEpochs(x.local_epochs);
  b.setGamma(x.gamma);
  b.setSigmaPrime(x.sigma_prime);
  b.setLocalSolver(x.local_solver);
  b.setDevice(x.device);
  b.setGpuFallback(x.gpu_fallback);
  b.setDuhlDeviceBytes(x.duhl_device_bytes);
  b.setDuhlDeviceFraction(x.duhl_device_fraction);
  b.setDuhlSelection(x.duhl_selection);
  b.setDuhlGapThreads(x.duhl_gap_threads);
  b.setDuhlPasses(x.duhl_passes);
  b.setDuhlGpu(x.duhl_gpu);
  b.setSaga(x.saga);
  PutList<double>(b.initFeatureSteps(static_cast<unsigned>(x.feature_steps.size())),
                  &x.feature_steps);
}
void Build(const shard_config& x, wire::Envelope::Builder env) {
  auto b = env.initShardSpec();
  b.setMode(static_cast<wire::Mode>(static_cast<uint16_t>(x.mode)));
  b.setWorkers(x.workers);
  b.setBegin(x.begin);
  b.setEnd(x.end);
  SetModel(b.initModel(), x.model);
  b.setStep0(x.step0);
  b.setStepDecay(x.step_decay);
  b.setGamma(x.gamma);
  b.setEasgdAlpha(x.easgd_alpha);
  b.setStaleness(x.staleness);
  b.setSagaScale(x.saga_scale);
  PutList<double>(b.initFeatureSteps(static_cast<unsigned>(x.feature_steps.size())),
                  &x.feature_steps);
}
void Build(const dense_block& x, wire::Envelope::Builder env) {
  PutList<float>(env.initDenseVector().initValues(static_cast<unsigned>(x.size())), x.data.get());
}
void Build(const Progress& x, wire::Envelope::Builder env) { Build(x, env.initProgress()); }
void Build(const Progress& x, wire::Progress::Builder b) {
  b.setRound(x.round);
  b.setSeconds(x.seconds);
  b.setEpochs(x.epochs);
  b.setPrimal(x.primal);
  b.setDual(x.dual);
  b.setGap(x.gap);
  b.setBytesExchanged(x.bytes_exchanged);
  b.setDeviceBytes(x.device_bytes);
  b.setDeviceSwaps(x.device_swaps);
  PutList<int64_t>(b.initStaleness(static_cast<unsigned>(x.staleness.size())), &x.staleness);
  b.setEvent(AsText(x.event));
}

// Rough message size in words, so vectors land in one first segment.
std::size_t WordsOf(const dvec& x) { return 8 + x.size(); }
std::size_t WordsOf(const sparse_dvec& x) { return 8 + x.size() + WordsForList(x.size(), 4); }
std::size_t WordsOf(const key_list& x) { return 8 + WordsForList(x.size(), 4); }
std::size_t WordsOf(const shard_stats& x) { return 16 + x.clocks.size(); }
std::size_t WordsOf(const int64_list& x) { return 8 + x.values.size(); }
std::size_t WordsOf(const kv_message& x) { return 16 + x.keys.size() + x.values.size(); }
std::size_t WordsOf(const dense_block& x) { return 8 + WordsForList(x.size(), 4); }
std::size_t WordsOf(const job_checkpoint& x) {
  std::size_t w = 64 + x.shared.size() + 32 * x.history.size();
  for (const auto& c : x.coords) w += 4 + c.size();
  return w + 4 * x.processed.size();
}
std::size_t WordsOf(const model_file& x) { return 32 + x.model.w.size(); }
std::size_t WordsOf(const Progress& x) { return 24 + x.staleness.size() + x.event.size() / 8; }
std::size_t WordsOf(const worker_spec& x) {
  return 48 + x.path.size() / 8 + x.feature_steps.size();
}
std::size_t WordsOf(const shard_config& x) { return 48 + x.feature_steps.size(); }
template <class T>
std::size_t WordsOf(const T&) {
  return 16;
}

// ------------------------------------------------------------- readers

absl::Status Read(wire::Envelope::Reader env, dvec* out) {
  auto list = env.getVector().getValues();
  DML_RETURN_IF_ERROR(CheckVectorLength<double>(list.size(), "Vector.values"));
  *out = dvec(TakeList<double>(list));
  return absl::OkStatus();
}
absl::Status Read(wire::Envelope::Reader env, sparse_dvec* out) {
  auto r = env.getSparseUpdate();
  auto offsets = r.getOffsets();
  auto values = r.getValues();
  if (offsets.size() != values.size()) {
    return Invalid("SparseUpdate",
                   absl::StrCat(offsets.size(), " offsets but ", values.size(), " values"));
  }
  DML_RETURN_IF_ERROR(CheckVectorLength<double>(values.size(), "SparseUpdate.values"));
  auto index = TakeList<uint32_t>(offsets);
  DML_RETURN_IF_ERROR(CheckIncreasing(*index, "SparseUpdate.offsets"));
  out->index = std::move(index);
  out->value = TakeList<double>(values);
  return absl::OkStatus();
}
absl::Status Read(wire::Envelope::Reader env, key_list* out) {
  auto list = env.getKeyList().getKeys();
  DML_RETURN_IF_ERROR(CheckVectorLength<uint32_t>(list.size(), "KeyList.keys"));
  auto keys = TakeList<uint32_t>(list);
  DML_RETURN_IF_ERROR(CheckIncreasing(*keys, "KeyList.keys"));
  out->keys = std::move(keys);
  return absl::OkStatus();
}
absl::Status Read(wire::Envelope::Reader env, block_sums* out) {
  auto r = env.getBlockSums();
  out->loss_sum = r.getLossSum();
  out->gap_sum = r.getGapSum();
  out->reg_sum = r.getRegSum();
  return Check(*out);
}
absl::Status Read(wire::Envelope::Reader env, worker_report* out) {
  auto r = env.getWorkerReport();
  out->worker = r.getWorker();
  out->clock = r.getClock();
  out->processed = r.getProcessed();
  out->bytes = r.getBytes();
  out->device_bytes = r.getDeviceBytes();
  out->device_swaps = r.getDeviceSwaps();
  if (r.hasFailure()) {
    const auto text = r.getFailure();
    out->wire_error.assign(text.begin(), text.end());
  }
  if (r.hasNote()) {
    const auto text = r.getNote();
    out->note.assign(text.begin(), text.end());
  }
  return Check(*out);
}
absl::Status Read(wire::Envelope::Reader env, shard_stats* out) {
  auto r = env.getShardStats();
  out->updates = r.getUpdates();
  out->pulls = r.getPulls();
  out->bytes_in = r.getBytesIn();
  out->bytes_out = r.getBytesOut();
  out->max_granted_staleness = r.getMaxGrantedStaleness();
  out->clocks = CopyList<int64_t>(r.getClocks());
  return Check(*out);
}
absl::Status Read(wire::Envelope::Reader env, int64_list* out) {
  out->values = CopyList<int64_t>(env.getInt64List().getValues());
  return Check(*out);
}
absl::Status Read(wire::Envelope::Reader env, kv_message* out) {
  auto r = env.getKvMessage();
  out->kind = r.getKind();
  out->requester = r.getRequester();
  out->sender = r.getSender();
  out->owner = r.getOwner();
  out->hops = r.getHops();
  out->op = r.getOp();
  // Each list is read once: the traversal limit is the message's size.
  auto keys = r.getKeys();
  auto values = r.getValues();
  DML_RETURN_IF_ERROR(CheckVectorLength<int64_t>(keys.size(), "KvMessage.keys"));
  DML_RETURN_IF_ERROR(CheckVectorLength<double>(values.size(), "KvMessage.values"));
  out->keys = CopyList<int64_t>(keys);
  out->values = CopyList<double>(values);
  return Check(*out);
}
absl::Status Read(wire::Envelope::Reader env, worker_spec* out) {
  auto r = env.getWorkerSpec();
  DML_ASSIGN_OR_RETURN(out->mode, GetMode(r.getMode(), "WorkerSpec.mode"));
  out->index = r.getIndex();
  out->workers = r.getWorkers();
  DML_ASSIGN_OR_RETURN(out->model, GetModel(r.getModel(), "WorkerSpec.model"));
  out->seed = r.getSeed();
  out->path = FromText(r.getDataPath());
  DML_ASSIGN_OR_RETURN(out->load, GetLoad(r.getLoad()));
  out->batch_size = r.getBatchSize();
  out->step0 = r.getStep0();
  out->step_decay = r.getStepDecay();
  out->tau = r.getTau();
  out->local_epochs = r.getLocalEpochs();
  out->gamma = r.getGamma();
  out->sigma_prime = r.getSigmaPrime();
  out->local_solver = r.getLocalSolver();
  out->device = r.getDevice();
  out->gpu_fallback = r.getGpuFallback();
  out->duhl_device_bytes = r.getDuhlDeviceBytes();
  out->duhl_device_fraction = r.getDuhlDeviceFraction();
  out->duhl_selection = r.getDuhlSelection();
  out->duhl_gap_threads = r.getDuhlGapThreads();
  out->duhl_passes = r.getDuhlPasses();
  out->duhl_gpu = r.getDuhlGpu();
  out->saga = r.getSaga();
  // Read once: the traversal limit is the message's size.
  auto steps = r.getFeatureSteps();
  DML_RETURN_IF_ERROR(CheckVectorLength<double>(steps.size(), "WorkerSpec.featureSteps"));
  out->feature_steps = CopyList<double>(steps);
  return Check(*out);
}
absl::Status Read(wire::Envelope::Reader env, shard_config* out) {
  auto r = env.getShardSpec();
  DML_ASSIGN_OR_RETURN(out->mode, GetMode(r.getMode(), "ShardSpec.mode"));
  out->workers = r.getWorkers();
  out->begin = r.getBegin();
  out->end = r.getEnd();
  DML_ASSIGN_OR_RETURN(out->model, GetModel(r.getModel(), "ShardSpec.model"));
  out->step0 = r.getStep0();
  out->step_decay = r.getStepDecay();
  out->gamma = r.getGamma();
  out->easgd_alpha = r.getEasgdAlpha();
  out->staleness = r.getStaleness();
  out->saga_scale = r.getSagaScale();
  // Read once: the traversal limit is the message's size.
  auto steps = r.getFeatureSteps();
  DML_RETURN_IF_ERROR(CheckVectorLength<double>(steps.size(), "ShardSpec.featureSteps"));
  out->feature_steps = CopyList<double>(steps);
  return Check(*out);
}
absl::Status Read(wire::Envelope::Reader env, dense_block* out) {
  auto list = env.getDenseVector().getValues();
  DML_RETURN_IF_ERROR(CheckVectorLength<float>(list.size(), "DenseVector.values"));
  out->data = TakeList<float>(list);
  return absl::OkStatus();
}
absl::Status Read(wire::Envelope::Reader env, Progress* out) {
  Read(env.getProgress(), out);
  return Check(*out);
}
void Read(wire::Progress::Reader r, Progress* out) {
  out->round = r.getRound();
  out->seconds = r.getSeconds();
  out->epochs = r.getEpochs();
  out->primal = r.getPrimal();
  out->dual = r.getDual();
  out->gap = r.getGap();
  out->bytes_exchanged = r.getBytesExchanged();
  out->device_bytes = r.getDeviceBytes();
  out->device_swaps = r.getDeviceSwaps();
  out->staleness = CopyList<int64_t>(r.getStaleness());
  out->event = FromText(r.getEvent());
}

absl::Status Read(wire::Envelope::Reader env, model_file* out) {
  auto r = env.getModelFile();
  DML_ASSIGN_OR_RETURN(out->model.spec, GetModel(r.getModel(), "ModelFile.model"));
  // Each list is read once: the traversal limit is the message's size.
  auto weights = r.getWeights();
  DML_RETURN_IF_ERROR(CheckVectorLength<double>(weights.size(), "ModelFile.weights"));
  out->model.w = CopyList<double>(weights);
  out->primal = r.getPrimal();
  out->gap = r.getGap();
  out->model.classes = CopyList<double>(r.getLabels());
  out->model.bias = r.getBias();
  out->model.binarize = r.getBinarize();
  return Check(*out);
}

absl::Status Read(wire::Envelope::Reader env, job_checkpoint* out) {
  auto r = env.getCheckpoint();
  DML_ASSIGN_OR_RETURN(out->mode, GetMode(r.getMode(), "Checkpoint.mode"));
  DML_ASSIGN_OR_RETURN(out->model, GetModel(r.getModel(), "Checkpoint.model"));
  out->round = r.getRound();
  out->epochs = r.getEpochs();
  out->seconds = r.getSeconds();
  out->clock = r.getClock();
  out->bytes = r.getBytesExchanged();
  out->rows = r.getDataRows();
  out->cols = r.getDataCols();
  out->seed = r.getSeed();
  out->workers = r.getWorkerCount();
  auto shared = r.getShared();
  DML_RETURN_IF_ERROR(CheckVectorLength<double>(shared.size(), "Checkpoint.shared"));
  out->shared = CopyList<double>(shared);
  // Each object is read once: the traversal limit is the message's size.
  auto ws = r.getWorkers();
  bool any_local = false;
  for (unsigned k = 0; k < ws.size(); ++k) {
    auto w = ws[k];
    if (w.getIndex() != static_cast<int32_t>(k)) {
      return Invalid("Checkpoint.workers", absl::StrCat("entry ", k, " has index ",
                                                        w.getIndex()));
    }
    out->processed.push_back(w.getProcessed());
    out->coords.push_back(CopyList<double>(w.getLocal()));
    any_local |= !out->coords.back().empty();
  }
  if (!any_local) out->coords.clear();  // SGD modes keep no coordinates
  for (auto p : r.getHistory()) {
    Progress jp;
    Read(p, &jp);
    out->history.push_back(std::move(jp));
  }
  return Check(*out);
}

Which KindOf(const dvec*) { return wire::Envelope::VECTOR; }
Which KindOf(const sparse_dvec*) { return wire::Envelope::SPARSE_UPDATE; }
Which KindOf(const key_list*) { return wire::Envelope::KEY_LIST; }
Which KindOf(const block_sums*) { return wire::Envelope::BLOCK_SUMS; }
Which KindOf(const worker_report*) { return wire::Envelope::WORKER_REPORT; }
Which KindOf(const shard_stats*) { return wire::Envelope::SHARD_STATS; }
Which KindOf(const int64_list*) { return wire::Envelope::INT64_LIST; }
Which KindOf(const worker_spec*) { return wire::Envelope::WORKER_SPEC; }
Which KindOf(const shard_config*) { return wire::Envelope::SHARD_SPEC; }
Which KindOf(const dense_block*) { return wire::Envelope::DENSE_VECTOR; }
Which KindOf(const kv_message*) { return wire::Envelope::KV_MESSAGE; }
Which KindOf(const Progress*) { return wire::Envelope::PROGRESS; }
Which KindOf(const job_checkpoint*) { return wire::Envelope::CHECKPOINT; }
Which KindOf(const model_file*) { return wire::Envelope::MODEL_FILE; }

// Builds x's Envelope into `builder` after checking it.
template <class T>
absl::Status BuildChecked(const T& x, capnp::MallocMessageBuilder& builder) {
  DML_RETURN_IF_ERROR(Check(x));
  try {
    Build(x, Root(builder));
  } catch (const kj::Exception& e) {
    return absl::InternalError(
        absl::StrCat("Cap'n Proto error while encoding: ", e.getDescription().cStr()));
  }
  return absl::OkStatus();
}

template <class T>
absl::StatusOr<std::string> ToWireImpl(const T& x) {
  auto builder = MakeBuilder(WordsOf(x));
  DML_RETURN_IF_ERROR(BuildChecked(x, builder));
  return Flatten(builder);
}

template <class T>
absl::Status FromWireImpl(std::string_view bytes, T* out, const DecodeLimits& limits) {
  T value;
  auto decoded = DecodeEnvelope<bool>(bytes, limits, KindOf(out),
                                      [&value](wire::Envelope::Reader env) -> absl::StatusOr<bool> {
                                        DML_RETURN_IF_ERROR(Read(env, &value));
                                        return true;
                                      });
  if (!decoded.ok()) return decoded.status();
  *out = std::move(value);
  return absl::OkStatus();
}

// ---------------------------------------------------------------- files
// A file's Envelope carries a checksum (XXH64, folded to 32 bits) of its
// payload's canonical form (wire.capnp fileDigest). Canonical, because the
// flat bytes could differ for the same content (segment layout); the
// payload struct, because the digest cannot cover itself.

template <class R>
uint32_t CanonicalDigest(R payload) {
  const kj::Array<capnp::word> canon = capnp::AnyStruct::Reader(payload).canonicalize();
  const uint64_t h = Checksum64(canon.begin(), canon.size() * sizeof(capnp::word));
  return static_cast<uint32_t>(h ^ (h >> 32)) | 1u;  // never 0, which means "no digest"
}

// The digest of the file payload of T's kind (the envelope holds that kind).
uint32_t FileDigest(wire::Envelope::Reader env, const job_checkpoint*) {
  return CanonicalDigest(env.getCheckpoint());
}
uint32_t FileDigest(wire::Envelope::Reader env, const model_file*) {
  return CanonicalDigest(env.getModelFile());
}

constexpr char kChangedFile[] = "contents do not match the file's checksum";

template <class T>
absl::StatusOr<std::string> ToFileImpl(const T& x) {
  auto builder = MakeBuilder(WordsOf(x));
  DML_RETURN_IF_ERROR(BuildChecked(x, builder));
  try {
    auto env = builder.template getRoot<wire::Envelope>();
    env.setFileDigest(FileDigest(env.asReader(), &x));
  } catch (const kj::Exception& e) {
    return absl::InternalError(
        absl::StrCat("Cap'n Proto error while sealing a file: ", e.getDescription().cStr()));
  }
  return Flatten(builder);
}

template <class T>
absl::Status FromFileImpl(std::string_view bytes, T* out, const DecodeLimits& limits) {
  // The checksum is checked by a reader of its own, then the bytes decode
  // as a message, each with a message's traversal budget: a file is
  // accepted only where the message decoder accepts the same bytes. A
  // file without one (written before checksums existed) is not checked;
  // another payload kind is left to the decoder to name.
  const absl::StatusOr<bool> checked = internal::OpenEnvelope<bool>(
      bytes, limits, [out](wire::Envelope::Reader env) -> absl::StatusOr<bool> {
        const uint32_t stored = env.getFileDigest();
        if (stored == 0 || env.which() != KindOf(out)) return true;
        const uint32_t computed = FileDigest(env, out);
        if (stored != computed) {
          return absl::DataLossError(
              absl::StrFormat("%s (changed after it was written): stored %08x, computed %08x",
                              kChangedFile, stored, computed));
        }
        return true;
      });
  if (!checked.ok()) return checked.status();
  return FromWireImpl(bytes, out, limits);
}

// BulkVector: a large dvec by reference (see dml/net/bulk.hpp).
absl::Status BuildBulkRef(const BulkRef& r, capnp::MallocMessageBuilder& builder) {
  DML_RETURN_IF_ERROR(CheckBulkRef(r));
  auto b = Root(builder).initBulkVector();
  b.setHost(r.host);
  b.setPort(r.port);
  b.setLocal(r.local);
  b.setTicket(r.ticket);
  b.setCount(r.count);
  b.setAddress(r.address);
  b.setSlot(r.slot);
  b.setSegment(r.segment);
  b.setOffset(r.offset);
  return absl::OkStatus();
}

}  // namespace

namespace internal {

#define DML_BUILD_IMPL(T)                                                        \
  absl::Status BuildPayload(const T& x, capnp::MallocMessageBuilder& builder) { \
    return BuildChecked(x, builder);                                             \
  }                                                                              \
  std::size_t PayloadWords(const T& x) { return WordsOf(x); }
DML_BUILD_IMPL(dvec)
DML_BUILD_IMPL(sparse_dvec)
DML_BUILD_IMPL(key_list)
DML_BUILD_IMPL(block_sums)
DML_BUILD_IMPL(worker_report)
DML_BUILD_IMPL(shard_stats)
DML_BUILD_IMPL(int64_list)
DML_BUILD_IMPL(worker_spec)
DML_BUILD_IMPL(shard_config)
DML_BUILD_IMPL(dense_block)
DML_BUILD_IMPL(kv_message)
#undef DML_BUILD_IMPL

absl::Status BuildBulkReference(const BulkRef& ref, capnp::MallocMessageBuilder& builder) {
  return BuildBulkRef(ref, builder);
}

}  // namespace internal

#define DML_WIRE_IMPL(T)                                                              \
  absl::StatusOr<std::string> ToWire(const T& x) { return ToWireImpl(x); }           \
  absl::Status FromWire(std::string_view bytes, T* out, const DecodeLimits& l) { \
    return FromWireImpl(bytes, out, l);                                               \
  }
DML_WIRE_IMPL(dvec)
DML_WIRE_IMPL(sparse_dvec)
DML_WIRE_IMPL(key_list)
DML_WIRE_IMPL(block_sums)
DML_WIRE_IMPL(worker_report)
DML_WIRE_IMPL(shard_stats)
DML_WIRE_IMPL(int64_list)
DML_WIRE_IMPL(worker_spec)
DML_WIRE_IMPL(shard_config)
DML_WIRE_IMPL(dense_block)
DML_WIRE_IMPL(kv_message)
DML_WIRE_IMPL(Progress)
DML_WIRE_IMPL(job_checkpoint)
DML_WIRE_IMPL(model_file)
#undef DML_WIRE_IMPL

bool ChangedSinceWritten(const absl::Status& status) {
  return status.code() == absl::StatusCode::kDataLoss &&
         absl::StrContains(status.message(), kChangedFile);
}

absl::StatusOr<std::string> ToFileBytes(const job_checkpoint& x) { return ToFileImpl(x); }
absl::StatusOr<std::string> ToFileBytes(const model_file& x) { return ToFileImpl(x); }
absl::Status FromFileBytes(std::string_view bytes, job_checkpoint* out, const DecodeLimits& limits) {
  return FromFileImpl(bytes, out, limits);
}
absl::Status FromFileBytes(std::string_view bytes, model_file* out, const DecodeLimits& limits) {
  return FromFileImpl(bytes, out, limits);
}

absl::StatusOr<std::string> ToWire(const BulkRef& ref) {
  capnp::MallocMessageBuilder builder(16);
  DML_RETURN_IF_ERROR(BuildBulkRef(ref, builder));
  return Flatten(builder);
}

absl::Status FromWire(std::string_view bytes, BulkRef* out, const DecodeLimits& limits) {
  auto r = DecodeEnvelope<BulkRef>(
      bytes, limits, wire::Envelope::BULK_VECTOR,
      [](wire::Envelope::Reader env) -> absl::StatusOr<BulkRef> {
        auto b = env.getBulkVector();
        return BulkRef{FromText(b.getHost()), b.getPort(), FromText(b.getLocal()),
                            b.getTicket(), b.getCount(), b.getAddress(), b.getSlot(),
                            b.getSegment(), b.getOffset()};
      });
  if (!r.ok()) return r.status();
  DML_RETURN_IF_ERROR(CheckBulkRef(*r));
  *out = *std::move(r);
  return absl::OkStatus();
}

absl::Status FromWireOrReference(std::string_view bytes, dvec* out,
                                 const DecodeLimits& limits) {
  // The payload's kind picks the path: a Vector carries the values, a
  // BulkVector only where to fetch them.
  auto kind = internal::EnvelopeKind(bytes, limits);
  if (!kind.ok() || *kind != wire::Envelope::BULK_VECTOR) return FromWire(bytes, out, limits);
  BulkRef ref;
  DML_RETURN_IF_ERROR(FromWire(bytes, &ref, limits));
  *out = dvec{};
  out->ref = std::make_shared<const BulkRef>(std::move(ref));
  return absl::OkStatus();
}

}  // namespace dml::net
