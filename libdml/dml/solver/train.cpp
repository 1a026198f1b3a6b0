// The single explicit solver factory: a new solver is one file plus one case here.
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dml/solver/internal/solvers.hpp"
#include "dml/solver/sgd.hpp"
#include "dml/solver/solver.hpp"
#include "dml/util/status.hpp"

namespace dml {

std::string_view SolverName(SolverKind kind) {
  switch (kind) {
    case SolverKind::kScd: return "scd";
    case SolverKind::kAsyncScd: return "async-scd";
    case SolverKind::kSgd: return "sgd";
    case SolverKind::kNewton: return "newton";
    case SolverKind::kAuto: return "auto";
    case SolverKind::kTpaScd: return "tpa-scd";
    case SolverKind::kDuhl: return "duhl";
  }
  return "unknown";
}

absl::StatusOr<SolverKind> ParseSolverKind(std::string_view name) {
  if (name == "scd") return SolverKind::kScd;
  if (name == "async-scd" || name == "async") return SolverKind::kAsyncScd;
  if (name == "sgd") return SolverKind::kSgd;
  if (name == "newton") return SolverKind::kNewton;
  if (name == "auto") return SolverKind::kAuto;
  if (name == "tpa-scd" || name == "tpa") return SolverKind::kTpaScd;
  if (name == "duhl") return SolverKind::kDuhl;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown solver \"", AsAbsl(name),
                   "\"; expected one of scd, async-scd, sgd, newton, auto, tpa-scd, duhl"));
}

SolverKind AutoSolver(const ModelSpec& model, const Dataset& data, int threads) {
  switch (model.kind) {
    case ModelKind::kLogisticL2: return SolverKind::kNewton;
    case ModelKind::kRidge:
    case ModelKind::kSquaredHingeSvm:
      // LIBLINEAR's guide (Appendix C): with more features than examples
      // (documents) dual CD beats primal Newton by far (news20 squared hinge:
      // 0.04 s against 0.67 s); with features in units spread over orders of
      // magnitude dual CD crawls, Newton does not mind. Sequential: the
      // asynchronous engine's second thread was slower than one on news20
      // in 2 of 3 runs.
      if (data.x.cols() > data.x.rows() &&
          FeatureStepFactors(ColumnSquareSums(data), data.x.rows(), model).empty()) {
        return SolverKind::kScd;
      }
      return SolverKind::kNewton;
    // newGLMNET on two threads where they share its inner CD (long columns:
    // the dense set 0.69x -> 0.44x of LIBLINEAR's time) or its passes are
    // a good part of the work (at least as many examples as features:
    // a9a, w8a, the real-sim-shaped set gained 10-25%); on wide data the
    // inner CD over many short columns is the work and one thread does it
    // (news20: 2 threads 1.08x of one's time).
    case ModelKind::kLogisticL1:
      return threads > 1 && (data.x.rows() >= data.x.cols() ||
                             static_cast<std::size_t>(data.x.nnz()) >=
                                 internal::kGlmnetSplitColumnNnz *
                                     static_cast<std::size_t>(data.x.cols()))
                 ? SolverKind::kAsyncScd
                 : SolverKind::kScd;
    // Hinge on the threads asked for where they keep per-thread replicas of
    // w (short w, long rows: the dense 30000 x 300 set, 2 threads 1.4x one's
    // speed); elsewhere the shared w's atomic adds lost to one thread
    // (real-sim-shaped set: 6.7 against 5.7 ns per nonzero; a9a) and the run
    // stays sequential.
    // Features in units spread over orders of magnitude (tabular data):
    // dual CD, ours and LIBLINEAR's -s 3 alike, ended 1000 epochs with a gap
    // of the order of the objective (tab-4601x57: primal 0.676, 2.6x the
    // optimum), Newton on the smoothed hinge certified 1e-3 in 15 ms (the
    // real-sim-shaped set, columns rescaled: 9.3 s against dual CD's 14 s
    // ending at a gap of 0.53). Not on more features than examples: news20
    // so rescaled took CG 100 s short of 1e-3.
    case ModelKind::kHingeSvm:
      if (data.x.cols() <= data.x.rows() &&
          !FeatureStepFactors(ColumnSquareSums(data), data.x.rows(), model).empty()) {
        return SolverKind::kNewton;
      }
      return threads > 1 && internal::AsyncDualReplicas(data.x) ? SolverKind::kAsyncScd
                                                                 : SolverKind::kScd;
    // The asynchronous primal engine lost to one thread where measured
    // (scd_primal_async.cpp): lasso and elastic net stay sequential.
    default: return SolverKind::kScd;
  }
}

std::string_view StopReasonName(StopReason r) {
  switch (r) {
    case StopReason::kConverged: return "converged";
    case StopReason::kTargetReached: return "target reached";
    case StopReason::kMaxEpochs: return "max epochs";
    case StopReason::kTimeBudget: return "time budget";
    case StopReason::kCancelled: return "cancelled";
  }
  return "unknown";
}

namespace {

absl::Status ValidateOptions(const SolverOptions& o) {
  if (o.threads < 1) {
    return absl::InvalidArgumentError(absl::StrCat("threads must be >= 1, got ", o.threads));
  }
  if (o.stop.max_epochs < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_epochs must be >= 0, got ", o.stop.max_epochs));
  }
  if (!(o.stop.gap_rel >= 0) || !(o.stop.gap_abs >= 0)) {
    return absl::InvalidArgumentError("gap tolerances must be >= 0");
  }
  if (std::isnan(o.stop.max_seconds) || (o.stop.target_primal && std::isnan(*o.stop.target_primal))) {
    return absl::InvalidArgumentError(
        "max_seconds and target_primal must be numbers (infinity: no time budget), not NaN");
  }
  if (!(o.eval_pacing >= 0 && o.eval_pacing < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("eval_pacing must be in [0, 1), got ", o.eval_pacing));
  }
  if (o.eval_every < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("eval_every must be >= 0, got ", o.eval_every));
  }
  if (o.kind == SolverKind::kSgd) {
    if (o.sgd.batch_size < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("sgd batch_size must be >= 0 (0: auto), got ", o.sgd.batch_size));
    }
    if (!(o.sgd.step0 >= 0) || !std::isfinite(o.sgd.step0) || !std::isfinite(o.sgd.step_decay) ||
        !(o.sgd.momentum >= 0 && o.sgd.momentum < 1)) {
      return absl::InvalidArgumentError(
          "sgd needs a finite step0 >= 0 (0: calibrated), a finite step_decay (< 0: lambda step0) "
          "and 0 <= momentum < 1");
    }
    if (o.sgd.certificate_cg_steps < -1 || o.sgd.certificate_cg_steps > 1000) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sgd certificate_cg_steps must be in [-1, 1000] (-1: the plain certificate), got ",
          o.sgd.certificate_cg_steps));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateData(const Dataset& data, const ModelSpec& model) {
  if (static_cast<int64_t>(data.y.size()) != data.x.rows()) {
    return absl::InvalidArgumentError(
        absl::StrCat("data has ", data.x.rows(), " rows but ", data.y.size(), " labels"));
  }
  if (data.x.rows() == 0) return absl::InvalidArgumentError("data has no examples");
  for (std::size_t i = 0; i < data.y.size(); ++i) {
    const float y = data.y[i];
    if (!std::isfinite(y)) {
      return absl::InvalidArgumentError(absl::StrCat("label of example ", i, " is not finite"));
    }
    if (TaskOf(model.kind) == Task::kClassification && y != 1.0f && y != -1.0f) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model ", AsAbsl(ModelName(model.kind)), " needs labels in {-1,+1}; example ", i,
          " has label ", y, " (load the data as classification)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TrainResult> Dispatch(const Dataset& data, const ModelSpec& model,
                                     const SolverOptions& options) {
  const bool dual = FormulationOf(model.kind) == Formulation::kDual;
  switch (options.kind) {
    case SolverKind::kScd:
      return dual ? internal::TrainScdDual(data, model, options)
                  : internal::TrainScdPrimal(data, model, options);
    case SolverKind::kAsyncScd:
      return dual ? internal::TrainAsyncScdDual(data, model, options)
                  : internal::TrainAsyncScdPrimal(data, model, options);
    case SolverKind::kSgd:
      return internal::TrainSgd(data, model, options);
    case SolverKind::kNewton:
      return internal::TrainNewton(data, model, options);
    case SolverKind::kAuto:
      return absl::InternalError("solver auto reached Dispatch (Train resolves it first)");
    case SolverKind::kTpaScd:
      return absl::InvalidArgumentError(
          "solver tpa-scd runs through dml::gpu::Train (dml/gpu/tpa_scd.hpp, library dml::gpu); "
          "dml::Train has no GPU solver");
    case SolverKind::kDuhl:
      return absl::InvalidArgumentError(
          "solver duhl runs through dml::TrainDuhl (dml/solver/duhl.hpp) or as cocoa's local "
          "solver; dml::Train does not run it");
  }
  return absl::InvalidArgumentError("unknown solver kind");
}

// What the result's note says about an auto choice.
std::string AutoNote(const ModelSpec& model, SolverKind chosen, int threads) {
  std::string why = absl::StrCat("solver auto ran ", AsAbsl(SolverName(chosen)));
  if (chosen == SolverKind::kScd && threads > 1) {
    // Where a second thread did not pay (measured: bench/solver_bench.py).
    // Dual models: the epochs on one thread; the certificates may take the
    // other (the solver's note says so).
    absl::StrAppend(
        &why, FormulationOf(model.kind) == Formulation::kDual ? "'s epochs" : "",
        " on 1 thread of ", threads,
        model.kind == ModelKind::kHingeSvm
            ? absl::StrCat(" (hinge: per-thread copies of w need at most ",
                           internal::kAsyncDualReplicaMaxCols, " features and rows of at least ",
                           internal::kAsyncDualReplicaMinRowNnz,
                           " nonzeros on average; elsewhere the asynchronous engine's threads "
                           "lost to one)")
        : model.kind == ModelKind::kLogisticL1
            ? " (newGLMNET on more features than examples: its inner CD over short columns "
              "is the work, and it runs on one thread)"
            : " (its asynchronous engine lost to one thread where measured)");
  }
  return why;
}

// Vectors of d doubles each solver holds at once (counted from their
// members and working vectors, rounded up), and whether it builds a
// column-major copy of the data (offsets of d + 1, plus the nonzeros).
struct SolverFootprint {
  int vectors;
  bool csc;
};
SolverFootprint FootprintOf(SolverKind kind, const ModelSpec& model) {
  const bool dual = FormulationOf(model.kind) == Formulation::kDual;
  switch (kind) {
    case SolverKind::kNewton:
      return model.kind == ModelKind::kLogisticL1 ? SolverFootprint{8, true}   // newGLMNET
                                                  : SolverFootprint{10, false};
    case SolverKind::kScd:
      if (model.kind == ModelKind::kLogisticL1) return {8, true};  // scd runs newGLMNET there
      // Dual: w, and the w of certificates beside the epochs (threads > 1).
      return dual ? SolverFootprint{3, false} : SolverFootprint{3, true};
    case SolverKind::kAsyncScd:
      return dual ? SolverFootprint{3, false} : SolverFootprint{3, true};
    case SolverKind::kSgd:
      return {4, false};
    default:
      return {2, false};
  }
}

absl::Status CheckSolverMemory(const Dataset& data, const ModelSpec& model, SolverKind kind) {
  const SolverFootprint f = FootprintOf(kind, model);
  const int64_t d = data.x.cols();
  const int64_t csc = f.csc ? (d + 1) * 8 + data.x.nnz() * 8 : 0;
  return CheckModelMemory(d, f.vectors, csc, absl::StrCat("solver ", AsAbsl(SolverName(kind))));
}

}  // namespace

absl::Status CheckCertificateFinite(const TrainResult& r, const ModelSpec& model) {
  if (std::isfinite(r.primal) && std::isfinite(r.gap)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "training ended with a certificate that is not finite (primal ", r.primal, ", gap ", r.gap,
      "): the problem left double's range; lambda ", model.lambda,
      " may be too small for these data"));
}

absl::Status CheckTrainInputs(const Dataset& data, const ModelSpec& model,
                              const SolverOptions& options) {
  DML_RETURN_IF_ERROR(Validate(model));
  DML_RETURN_IF_ERROR(ValidateOptions(options));
  DML_RETURN_IF_ERROR(ValidateData(data, model));
  // Three: what any solver holds, and what choosing one reads (solver auto
  // sums each column's squares for ridge and squared hinge).
  return CheckModelMemory(data.x.cols(), 3, 0, "training");
}

// Hinge by dual coordinate descent that used its epochs up short of the gap
// rule, on no more features than examples: its w goes to the smoothed-hinge
// Newton, on a smoothing about its gap (where dual CD's primal, w(alpha),
// swings between epochs while its dual has converged, a9a and w8a at the
// default --tol 1e-6), for the time left and as many iterations as it had
// epochs. The result is the one with the smaller gap; the note says so.
namespace {
absl::Status HandOverHinge(const Dataset& data, const ModelSpec& model,
                           const SolverOptions& options, SolverKind ran, TrainResult& result) {
  const bool dual_cd = ran == SolverKind::kScd || ran == SolverKind::kAsyncScd;
  if (model.kind != ModelKind::kHingeSvm || !dual_cd ||
      result.reason != StopReason::kMaxEpochs || data.x.cols() > data.x.rows() ||
      result.gap <= GapTarget(options.stop, result.primal) ||
      options.stop.target_primal.has_value()) {
    return absl::OkStatus();
  }
  SolverOptions rest = options;
  rest.kind = SolverKind::kNewton;
  rest.stop.max_seconds = options.stop.max_seconds - result.seconds;
  if (!(rest.stop.max_seconds > 0.0)) return absl::OkStatus();
  // Newton's progress continues dual CD's: its rounds, passes and seconds
  // after those.
  const int rounds_before = result.rounds;
  const double epochs_before = result.epochs, seconds_before = result.seconds;
  const auto continued = [=](Progress p) {
    p.round += rounds_before;
    p.epochs += epochs_before;
    p.seconds += seconds_before;
    return p;
  };
  if (options.on_epoch) {
    rest.on_epoch = [&options, continued](const Progress& p) { options.on_epoch(continued(p)); };
  }
  // The smoothing's share of the gap is at most mu / 4 a row in its zone.
  absl::StatusOr<TrainResult> newton =
      internal::TrainSmoothedHinge(data, model, rest, result.w, 4.0 * result.gap);
  if (!newton.ok()) return newton.status();
  if (!(newton->gap < result.gap)) return absl::OkStatus();
  const std::string why = absl::StrCat(
      "dual coordinate descent ended its ", result.epochs, " epochs at a gap of ", result.gap,
      " in ", result.seconds, " s; the smoothed-hinge Newton from its w then certified ",
      newton->gap, " in ", newton->rounds, " iterations (", newton->note, ")");
  std::vector<Progress> history = std::move(result.history);
  for (const Progress& p : newton->history) history.push_back(continued(p));
  const double seconds = result.seconds + newton->seconds;
  const double epochs = result.epochs + newton->epochs;  // passes, for Newton
  const int rounds = result.rounds + newton->rounds;
  const std::string note = result.note;
  result = *std::move(newton);
  result.history = std::move(history);
  result.seconds = seconds;
  result.epochs = epochs;
  result.rounds = rounds;
  result.note = note.empty() ? why : absl::StrCat(note, "; ", why);
  return absl::OkStatus();
}

// Columns no example uses: a sparse index range, hashed features, a declared
// width. Every model here has weight 0 on them at every optimum (only the
// regulariser acts there, and A^T u is 0), yet the solvers' O(d) vectors and
// per-pass loops pay for each: a 30-byte file naming feature 2^26 ran Newton
// 28 s in 4 GB. Train solves on the used columns where the unused ones are
// at least kMinUnusedColumns and an eighth of the nonzeros (their solver
// vectors then cost more than this copy of the data), and puts the zeros
// back; primal, dual and gap are the same for both problems.
constexpr int64_t kMinUnusedColumns = 4096;

struct UsedColumns {
  Dataset data;               // the used columns, renumbered in order
  std::vector<uint32_t> kept;  // their indices in the original data
};

std::optional<UsedColumns> DropUnusedColumns(const Dataset& data) {
  const CsrMatrix& x = data.x;
  constexpr uint32_t kUnused = ~uint32_t{0};
  std::vector<uint32_t> renumber(static_cast<std::size_t>(x.cols()), kUnused);
  for (uint32_t j : x.indices()) renumber[j] = 0;
  UsedColumns u;
  for (std::size_t j = 0; j < renumber.size(); ++j) {
    if (renumber[j] == kUnused) continue;
    renumber[j] = static_cast<uint32_t>(u.kept.size());
    u.kept.push_back(static_cast<uint32_t>(j));
  }
  const int64_t unused = x.cols() - static_cast<int64_t>(u.kept.size());
  if (unused < kMinUnusedColumns || unused < x.nnz() / 8) return std::nullopt;
  std::vector<uint32_t> indices(x.indices().size());
  for (std::size_t k = 0; k < indices.size(); ++k) indices[k] = renumber[x.indices()[k]];
  // The renumbering keeps the order, so the rows stay sorted.
  u.data.x = CsrMatrix::FromArraysUnchecked(x.rows(), static_cast<int64_t>(u.kept.size()),
                                            x.offsets(), std::move(indices), x.values());
  u.data.y = data.y;
  u.data.task = data.task;
  u.data.classes = data.classes;
  return u;
}

// Train on inputs CheckTrainInputs passed (the used columns only, where
// DropUnusedColumns left some out).
absl::StatusOr<TrainResult> TrainChecked(const Dataset& data, const ModelSpec& model,
                                         const SolverOptions& options) {
  // auto is resolved once (for ridge and squared hinge it reads the data).
  SolverOptions resolved = options;
  if (options.kind == SolverKind::kAuto) {
    resolved.kind = AutoSolver(model, data, options.threads);
  }
  DML_RETURN_IF_ERROR(CheckSolverMemory(data, model, resolved.kind));
  absl::StatusOr<TrainResult> result = Dispatch(data, model, resolved);
  if (!result.ok()) return result;
  DML_RETURN_IF_ERROR(CheckCertificateFinite(*result, model));
  if (options.kind == SolverKind::kAuto) {
    DML_RETURN_IF_ERROR(HandOverHinge(data, model, options, resolved.kind, *result));
  }
  result->model = model;
  if (options.kind == SolverKind::kAuto) {
    const std::string why = AutoNote(model, resolved.kind, options.threads);
    result->note = result->note.empty() ? why : absl::StrCat(why, "; ", result->note);
  }
  // Dual coordinate descent that ran out of epochs or time on features
  // whose units differ by orders of magnitude: say why, and what helps.
  const SolverKind ran = resolved.kind;
  const bool dual_cd = (ran == SolverKind::kScd || ran == SolverKind::kAsyncScd) &&
                       FormulationOf(model.kind) == Formulation::kDual;
  if (dual_cd && (result->reason == StopReason::kMaxEpochs ||
                  result->reason == StopReason::kTimeBudget) &&
      !FeatureStepFactors(ColumnSquareSums(data), data.x.rows(), model).empty()) {
    // Every dual model has solver newton (hinge: smoothed), but the
    // smoothed hinge's CG crawls on more features than examples too.
    const bool wide_hinge =
        model.kind == ModelKind::kHingeSvm && data.x.cols() > data.x.rows();
    const std::string why = absl::StrCat(
        "the features' units differ by orders of magnitude (their mean squares spread over more "
        "than ", kFeatureStepSpread, "x), where dual coordinate descent converges slowly: ",
        wide_hinge ? "scale the features (solver newton's smoothed hinge is slow on more features "
                     "than examples)"
                   : "solver newton is unaffected by the units");
    result->note = result->note.empty() ? why : absl::StrCat(result->note, "; ", why);
  }
  return result;
}

}  // namespace

absl::StatusOr<TrainResult> Train(const Dataset& data, const ModelSpec& model,
                                  const SolverOptions& options) {
  DML_RETURN_IF_ERROR(CheckTrainInputs(data, model, options));
  std::optional<UsedColumns> used = DropUnusedColumns(data);
  if (!used) return TrainChecked(data, model, options);
  absl::StatusOr<TrainResult> result = TrainChecked(used->data, model, options);
  if (!result.ok()) return result;
  std::vector<double> w(static_cast<std::size_t>(data.x.cols()), 0.0);
  for (std::size_t k = 0; k < used->kept.size(); ++k) w[used->kept[k]] = result->w[k];
  result->w = std::move(w);
  const std::string why =
      absl::StrCat(data.x.cols() - static_cast<int64_t>(used->kept.size()), " of the ",
                   data.x.cols(), " features occur in no example: trained on the other ",
                   used->kept.size(), ", their weights are 0");
  result->note = result->note.empty() ? why : absl::StrCat(result->note, "; ", why);
  return result;
}

}  // namespace dml
