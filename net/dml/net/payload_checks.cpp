// The payloads' invariants (internal/payload_checks.hpp).
#include "dml/net/internal/payload_checks.hpp"

#include <cmath>

#include "dml/util/status.hpp"

namespace dml::net::internal {
namespace {

// A host name or socket name: printable ASCII only (a NUL would also end
// the text early on the way back out).
absl::Status CheckName(const std::string& s, const char* field) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x21 || c > 0x7e) {
      return Invalid(field, absl::StrCat("byte ", static_cast<int>(c), " at position ", i,
                                         " is not printable ASCII"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}


// Strictly increasing 32-bit offsets, the first bad position named.
absl::Status CheckIncreasing(const std::vector<uint32_t>& v, const char* field) {
  for (std::size_t k = 1; k < v.size(); ++k) {
    if (v[k] <= v[k - 1]) {
      return Invalid(field, absl::StrCat("not strictly increasing at position ", k, ": ", v[k],
                                         " after ", v[k - 1]));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckFinite(double x, const char* field) {
  if (!std::isfinite(x)) return Invalid(field, absl::StrCat("not finite (", x, ")"));
  return absl::OkStatus();
}

absl::Status CheckNonNegative(int64_t x, const char* field) {
  if (x < 0) return Invalid(field, absl::StrCat("negative (", x, ")"));
  return absl::OkStatus();
}

absl::Status CheckModelKind(uint16_t kind, const char* field) {
  if (kind > static_cast<uint16_t>(ModelKind::kSquaredHingeSvm)) {
    return Invalid(field, absl::StrCat("unknown model kind ", kind));
  }
  return absl::OkStatus();
}

absl::Status CheckMode(uint16_t mode, const char* field) {
  if (mode > static_cast<uint16_t>(kLastMode)) {
    return Invalid(field, absl::StrCat("unknown mode ", mode));
  }
  return absl::OkStatus();
}

absl::Status CheckModel(const ModelSpec& x, const char* field) {
  DML_RETURN_IF_ERROR(CheckModelKind(static_cast<uint16_t>(x.kind), field));
  if (auto s = Validate(x); !s.ok()) return Invalid(field, s.message());
  return absl::OkStatus();
}

absl::Status CheckLoad(const LibsvmOptions& x) {
  if (x.binarize_threshold) {
    DML_RETURN_IF_ERROR(CheckFinite(*x.binarize_threshold, "LoadOptions.binarizeThreshold"));
  }
  DML_RETURN_IF_ERROR(CheckNonNegative(x.num_features, "LoadOptions.numFeatures"));
  return CheckNonNegative(x.threads, "LoadOptions.threads");
}

// Validation of what we are about to send (the same rules the decoder
// applies on the other end).
absl::Status Check(const dvec& x) { return CheckVectorLength<double>(x.size(), "Vector.values"); }
absl::Status Check(const sparse_dvec& x) {
  const std::size_t ni = x.index ? x.index->size() : 0;
  if (ni != x.size()) {
    return Invalid("SparseUpdate", absl::StrCat(ni, " offsets but ", x.size(), " values"));
  }
  DML_RETURN_IF_ERROR(CheckVectorLength<double>(ni, "SparseUpdate.values"));
  return x.index ? CheckIncreasing(*x.index, "SparseUpdate.offsets") : absl::OkStatus();
}
absl::Status Check(const key_list& x) {
  DML_RETURN_IF_ERROR(CheckVectorLength<uint32_t>(x.size(), "KeyList.keys"));
  return x.keys ? CheckIncreasing(*x.keys, "KeyList.keys") : absl::OkStatus();
}
absl::Status Check(const block_sums& x) {
  DML_RETURN_IF_ERROR(CheckFinite(x.loss_sum, "BlockSums.lossSum"));
  DML_RETURN_IF_ERROR(CheckFinite(x.gap_sum, "BlockSums.gapSum"));
  return CheckFinite(x.reg_sum, "BlockSums.regSum");
}
absl::Status Check(const worker_report& x) {
  DML_RETURN_IF_ERROR(CheckNonNegative(x.worker, "WorkerReport.worker"));
  DML_RETURN_IF_ERROR(CheckNonNegative(x.clock, "WorkerReport.clock"));
  DML_RETURN_IF_ERROR(CheckNonNegative(x.processed, "WorkerReport.processed"));
  DML_RETURN_IF_ERROR(CheckNonNegative(x.bytes, "WorkerReport.bytes"));
  DML_RETURN_IF_ERROR(CheckNonNegative(x.device_bytes, "WorkerReport.deviceBytes"));
  DML_RETURN_IF_ERROR(CheckNonNegative(x.device_swaps, "WorkerReport.deviceSwaps"));
  if (x.wire_error.size() > kMaxWorkerFailureBytes) {
    return absl::InvalidArgumentError(absl::StrCat("WorkerReport.failure: ", x.wire_error.size(),
                                                   " bytes; at most ", kMaxWorkerFailureBytes));
  }
  if (x.note.size() > kMaxWorkerFailureBytes) {
    return absl::InvalidArgumentError(absl::StrCat("WorkerReport.note: ", x.note.size(),
                                                   " bytes; at most ", kMaxWorkerFailureBytes));
  }
  return absl::OkStatus();
}
absl::Status Check(const shard_stats& x) {
  DML_RETURN_IF_ERROR(CheckNonNegative(x.updates, "ShardStats.updates"));
  DML_RETURN_IF_ERROR(CheckNonNegative(x.pulls, "ShardStats.pulls"));
  DML_RETURN_IF_ERROR(CheckNonNegative(x.bytes_in, "ShardStats.bytesIn"));
  DML_RETURN_IF_ERROR(CheckNonNegative(x.bytes_out, "ShardStats.bytesOut"));
  DML_RETURN_IF_ERROR(CheckNonNegative(x.max_granted_staleness, "ShardStats.maxGrantedStaleness"));
  return CheckVectorLength<int64_t>(x.clocks.size(), "ShardStats.clocks");
}
absl::Status Check(const kv_message& x) {
  if (x.kind < 1 || x.kind > kMaxKvKind) {
    return Invalid("KvMessage.kind", absl::StrCat(static_cast<int>(x.kind), " outside [1, ",
                                                  static_cast<int>(kMaxKvKind), "]"));
  }
  DML_RETURN_IF_ERROR(CheckNonNegative(x.requester, "KvMessage.requester"));
  DML_RETURN_IF_ERROR(CheckNonNegative(x.sender, "KvMessage.sender"));
  DML_RETURN_IF_ERROR(CheckNonNegative(x.hops, "KvMessage.hops"));
  if (x.owner < -1) return Invalid("KvMessage.owner", absl::StrCat(x.owner, " < -1"));
  DML_RETURN_IF_ERROR(CheckVectorLength<int64_t>(x.keys.size(), "KvMessage.keys"));
  DML_RETURN_IF_ERROR(CheckVectorLength<double>(x.values.size(), "KvMessage.values"));
  for (std::size_t i = 0; i < x.keys.size(); ++i) {
    if (x.keys[i] < 0) {
      return Invalid("KvMessage.keys", absl::StrCat("entry ", i, " is negative (", x.keys[i], ")"));
    }
  }
  for (std::size_t i = 0; i < x.values.size(); ++i) {
    if (!std::isfinite(x.values[i])) {
      return Invalid("KvMessage.values", absl::StrCat("entry ", i, " is not finite"));
    }
  }
  return absl::OkStatus();
}
absl::Status Check(const int64_list& x) {
  return CheckVectorLength<int64_t>(x.values.size(), "Int64List.values");
}
// Per-feature step factors: positive and finite (entry named).
absl::Status CheckStepFactors(const std::vector<double>& f, absl::string_view field) {
  for (std::size_t j = 0; j < f.size(); ++j) {
    if (!(f[j] > 0) || !std::isfinite(f[j])) {
      return Invalid(field, absl::StrCat("entry ", j, " is ", f[j], ", not > 0 and finite"));
    }
  }
  return absl::OkStatus();
}

absl::Status Check(const worker_spec& x) {
  DML_RETURN_IF_ERROR(CheckMode(static_cast<uint16_t>(x.mode), "WorkerSpec.mode"));
  DML_RETURN_IF_ERROR(CheckModel(x.model, "WorkerSpec.model"));
  if (x.workers < 1) return Invalid("WorkerSpec.workers", absl::StrCat(x.workers, " < 1"));
  if (x.index < 0 || x.index >= x.workers) {
    return Invalid("WorkerSpec.index",
                   absl::StrCat(x.index, " outside [0, ", x.workers, ")"));
  }
  if (x.path.empty()) return Invalid("WorkerSpec.dataPath", "empty");
  if (auto nul = x.path.find('\0'); nul != std::string::npos) {
    return Invalid("WorkerSpec.dataPath", absl::StrCat("contains a NUL byte at position ", nul));
  }
  if (x.batch_size < 1) return Invalid("WorkerSpec.batchSize", absl::StrCat(x.batch_size, " < 1"));
  // step0 0: calibrated once the workers have loaded (coordinator.cpp);
  // a negative decay: lambda step0 (SgdOptions).
  if (!(x.step0 >= 0) || !std::isfinite(x.step0)) {
    return Invalid("WorkerSpec.step0", absl::StrCat(x.step0, " is not >= 0 and finite"));
  }
  if (!std::isfinite(x.step_decay)) {
    return Invalid("WorkerSpec.stepDecay", absl::StrCat(x.step_decay, " is not finite"));
  }
  if (x.tau < 1) return Invalid("WorkerSpec.tau", absl::StrCat(x.tau, " < 1"));
  if (!(x.local_epochs > 0) || !std::isfinite(x.local_epochs)) {
    return Invalid("WorkerSpec.localEpochs", absl::StrCat(x.local_epochs, " is not > 0"));
  }
  if (!(x.gamma > 0 && x.gamma <= 1)) {
    return Invalid("WorkerSpec.gamma", absl::StrCat(x.gamma, " outside (0, 1]"));
  }
  if (!(x.sigma_prime > 0) || !std::isfinite(x.sigma_prime)) {
    return Invalid("WorkerSpec.sigmaPrime", absl::StrCat(x.sigma_prime, " is not > 0"));
  }
  DML_RETURN_IF_ERROR(CheckStepFactors(x.feature_steps, "WorkerSpec.featureSteps"));
  if (x.local_solver < 0 || x.local_solver > 2) {
    return Invalid("WorkerSpec.localSolver", absl::StrCat(x.local_solver, " is not 0, 1 or 2"));
  }
  if (x.device < 0) return Invalid("WorkerSpec.device", absl::StrCat(x.device, " < 0"));
  if (x.duhl_device_bytes < 0) {
    return Invalid("WorkerSpec.duhlDeviceBytes", absl::StrCat(x.duhl_device_bytes, " < 0"));
  }
  if (!(x.duhl_device_fraction > 0 && x.duhl_device_fraction <= 1)) {
    return Invalid("WorkerSpec.duhlDeviceFraction",
                   absl::StrCat(x.duhl_device_fraction, " outside (0, 1]"));
  }
  if (x.duhl_selection < 0 || x.duhl_selection > 4) {
    return Invalid("WorkerSpec.duhlSelection", absl::StrCat(x.duhl_selection, " outside [0, 4]"));
  }
  if (x.duhl_gap_threads < 0 || x.duhl_gap_threads > 1024) {
    return Invalid("WorkerSpec.duhlGapThreads",
                   absl::StrCat(x.duhl_gap_threads, " outside [0, 1024]"));
  }
  if (!(x.duhl_passes > 0 && x.duhl_passes <= 1e6)) {
    return Invalid("WorkerSpec.duhlPasses", absl::StrCat(x.duhl_passes, " outside (0, 1e6]"));
  }
  return CheckLoad(x.load);
}
absl::Status Check(const shard_config& x) {
  DML_RETURN_IF_ERROR(CheckMode(static_cast<uint16_t>(x.mode), "ShardSpec.mode"));
  DML_RETURN_IF_ERROR(CheckModel(x.model, "ShardSpec.model"));
  if (x.workers < 1) return Invalid("ShardSpec.workers", absl::StrCat(x.workers, " < 1"));
  if (x.begin < 0 || x.end <= x.begin) {
    return Invalid("ShardSpec.end", absl::StrCat("range [", x.begin, ", ", x.end, ") is empty"));
  }
  if (x.end - x.begin > static_cast<int64_t>(kMaxVectorEntries)) {
    return Invalid("ShardSpec.end", absl::StrCat("range of ", x.end - x.begin,
                                                 " keys exceeds ", kMaxVectorEntries));
  }
  // step0 0: calibrated once the workers have loaded (coordinator.cpp);
  // a negative decay: lambda step0 (SgdOptions).
  if (!(x.step0 >= 0) || !std::isfinite(x.step0)) {
    return Invalid("ShardSpec.step0", absl::StrCat(x.step0, " is not >= 0 and finite"));
  }
  if (!std::isfinite(x.step_decay)) {
    return Invalid("ShardSpec.stepDecay", absl::StrCat(x.step_decay, " is not finite"));
  }
  if (!(x.gamma > 0 && x.gamma <= 1)) {
    return Invalid("ShardSpec.gamma", absl::StrCat(x.gamma, " outside (0, 1]"));
  }
  if (!(x.easgd_alpha > 0 && x.easgd_alpha < 1)) {
    return Invalid("ShardSpec.easgdAlpha", absl::StrCat(x.easgd_alpha, " outside (0, 1)"));
  }
  if (!x.feature_steps.empty() &&
      static_cast<int64_t>(x.feature_steps.size()) != x.end - x.begin) {
    return Invalid("ShardSpec.featureSteps",
                   absl::StrCat(x.feature_steps.size(), " factors for a range of ",
                                x.end - x.begin, " keys"));
  }
  DML_RETURN_IF_ERROR(CheckStepFactors(x.feature_steps, "ShardSpec.featureSteps"));
  if (!(x.saga_scale >= 0) || !std::isfinite(x.saga_scale)) {
    return Invalid("ShardSpec.sagaScale", absl::StrCat(x.saga_scale, " is not >= 0 and finite"));
  }
  return CheckNonNegative(x.staleness, "ShardSpec.staleness");
}
absl::Status Check(const dense_block& x) {
  return CheckVectorLength<float>(x.size(), "DenseVector.values");
}
absl::Status Check(const Progress& x) {
  return CheckVectorLength<int64_t>(x.staleness.size(), "Progress.staleness");
}

absl::Status Check(const model_file& x) {
  DML_RETURN_IF_ERROR(CheckModel(x.model.spec, "ModelFile.model"));
  DML_RETURN_IF_ERROR(CheckVectorLength<double>(x.model.w.size(), "ModelFile.weights"));
  for (std::size_t j = 0; j < x.model.w.size(); ++j) {
    if (!std::isfinite(x.model.w[j])) {
      return Invalid("ModelFile.weights", absl::StrCat("value at position ", j, " is not finite"));
    }
  }
  const auto& c = x.model.classes;
  if (!(c.empty() || (c.size() == 2 && std::isfinite(c[0]) && std::isfinite(c[1]) && c[0] < c[1]))) {
    return Invalid("ModelFile.labels", absl::StrCat(c.size(), " label value(s); expected none or two increasing"));
  }
  if (!(x.model.bias == -1.0 || (x.model.bias >= 0 && std::isfinite(x.model.bias)))) {
    return Invalid("ModelFile.bias", absl::StrCat(x.model.bias, "; expected -1 (none) or a finite value >= 0"));
  }
  if (std::isinf(x.model.binarize)) {
    return Invalid("ModelFile.binarize", "infinite; expected a finite threshold or NaN (none)");
  }
  if (x.model.bias >= 0 && x.model.w.empty()) {
    return Invalid("ModelFile.bias", "a bias needs its weight (the weights are empty)");
  }
  return absl::OkStatus();
}

absl::Status Check(const job_checkpoint& x) {
  DML_RETURN_IF_ERROR(CheckMode(static_cast<uint16_t>(x.mode), "Checkpoint.mode"));
  DML_RETURN_IF_ERROR(CheckModel(x.model, "Checkpoint.model"));
  DML_RETURN_IF_ERROR(CheckNonNegative(x.round, "Checkpoint.round"));
  DML_RETURN_IF_ERROR(CheckNonNegative(x.clock, "Checkpoint.clock"));
  if (x.workers < 1) return Invalid("Checkpoint.workerCount", absl::StrCat(x.workers, " < 1"));
  if (!x.coords.empty() && static_cast<int32_t>(x.coords.size()) != x.workers) {
    return Invalid("Checkpoint.workers", absl::StrCat(x.coords.size(), " worker states for ",
                                                      x.workers, " workers"));
  }
  if (static_cast<int32_t>(x.processed.size()) != x.workers) {
    return Invalid("Checkpoint.workers", absl::StrCat(x.processed.size(),
                                                      " processed counters for ", x.workers,
                                                      " workers"));
  }
  DML_RETURN_IF_ERROR(CheckVectorLength<double>(x.shared.size(), "Checkpoint.shared"));
  for (std::size_t j = 0; j < x.shared.size(); ++j) {
    if (!std::isfinite(x.shared[j])) {
      return Invalid("Checkpoint.shared", absl::StrCat("value at position ", j, " is not finite"));
    }
  }
  return absl::OkStatus();
}


absl::Status CheckBulkRef(const BulkRef& r) {
  if (r.host.empty() || r.host.size() > 255) {
    return Invalid("BulkVector.host", absl::StrCat("length ", r.host.size(), " not in [1, 255]"));
  }
  DML_RETURN_IF_ERROR(CheckName(r.host, "BulkVector.host"));
  if (r.local.size() > 100) {
    return Invalid("BulkVector.local", absl::StrCat("length ", r.local.size(), " above 100"));
  }
  DML_RETURN_IF_ERROR(CheckName(r.local, "BulkVector.local"));
  if (r.port == 0) return Invalid("BulkVector.port", "zero");
  if ((r.address == 0) != (r.slot == 0)) {
    return Invalid(r.address == 0 ? "BulkVector.slot" : "BulkVector.address",
                   "set while the other is zero");
  }
  if (r.segment == 0 && r.offset != 0) return Invalid("BulkVector.offset", "set while segment is 0");
  if (r.segment != 0 && r.local.empty()) return Invalid("BulkVector.segment", "set with no local socket");
  if (r.offset % sizeof(double) != 0) {
    return Invalid("BulkVector.offset", absl::StrCat(r.offset, " is not a multiple of 8"));
  }
  return CheckVectorLength<double>(r.count, "BulkVector.count");
}


}  // namespace dml::net::internal
