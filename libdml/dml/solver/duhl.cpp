#include "dml/solver/duhl.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dml/objective/evaluate.hpp"
#include "dml/solver/gap_memory.hpp"
#include "dml/util/status.hpp"

namespace dml {
namespace {

// Picks the block: coordinates in order of `key` (largest first), each
// taken while it fits what is left of the budget. Equal keys (the -inf of
// negligible gaps) go to coordinates already on the device first: filling
// the budget with them moves nothing.
std::vector<int64_t> FillByKey(const std::vector<double>& key, const std::vector<int64_t>& bytes,
                               int64_t budget, const std::vector<char>& resident) {
  std::vector<int64_t> order(key.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    if (key[a] != key[b]) return key[a] > key[b];
    if (resident[a] != resident[b]) return resident[a] > resident[b];
    return a < b;
  });
  std::vector<int64_t> out;
  int64_t left = budget;
  for (int64_t i : order) {
    if (bytes[i] <= left) {
      out.push_back(i);
      left -= bytes[i];
    }
  }
  return out;
}

// Gaps this far below the largest are zero to the selection: the sampling
// weight of rounding.
constexpr double kNegligibleGap = 1e-9;

std::vector<int64_t> Select(DuhlSelection rule, const std::vector<double>& z,
                            const std::vector<int64_t>& bytes, int64_t budget,
                            const std::vector<char>& resident, std::mt19937_64& rng,
                            int64_t* cursor) {
  const int64_t n = static_cast<int64_t>(bytes.size());
  std::vector<int64_t> out;
  double z_max = 0.0;
  for (double x : z) {
    if (std::isfinite(x)) z_max = std::max(z_max, x);
  }
  const double floor = kNegligibleGap * z_max;
  switch (rule) {
    case DuhlSelection::kResident:
      out.resize(static_cast<std::size_t>(n));
      for (int64_t i = 0; i < n; ++i) out[i] = i;
      return out;
    case DuhlSelection::kSequential: {
      // The next coordinates in order, wrapping around, while they fit.
      int64_t left = budget, k = 0;
      for (; k < n; ++k) {
        const int64_t i = (*cursor + k) % n;
        if (bytes[i] > left) break;
        out.push_back(i);
        left -= bytes[i];
      }
      *cursor = (*cursor + k) % n;
      return out;
    }
    case DuhlSelection::kRandom: {
      std::uniform_real_distribution<double> u(0.0, 1.0);
      std::vector<double> key(static_cast<std::size_t>(n));
      for (double& k : key) k = u(rng);
      return FillByKey(key, bytes, budget, resident);
    }
    case DuhlSelection::kGapGreedy: {
      std::vector<double> key(z);
      for (double& k : key) {
        if (k <= floor) k = -std::numeric_limits<double>::infinity();
      }
      return FillByKey(key, bytes, budget, resident);
    }
    case DuhlSelection::kGap: {
      // Efraimidis-Spirakis: key_i = log(u_i) / z_i; the largest keys are a
      // sample without replacement with probabilities proportional to z.
      // A gap never measured (+inf) comes first, a negligible one last.
      std::uniform_real_distribution<double> u(std::numeric_limits<double>::min(), 1.0);
      std::vector<double> key(static_cast<std::size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        const double r = u(rng);
        key[i] = z[i] > floor ? std::log(r) / z[i] : -std::numeric_limits<double>::infinity();
      }
      return FillByKey(key, bytes, budget, resident);
    }
  }
  return out;
}

// The block of `ids` (ascending) in its own buffer: the outer slots that
// were in `old` (old_ids, ascending) are copied from it, the others from
// `host`; *moved counts the bytes of those.
template <class M>
M BuildBlock(const M& host, const M& old, const std::vector<int64_t>& old_ids,
             const std::vector<int64_t>& ids, const std::vector<int64_t>& bytes, int64_t* moved,
             int64_t* swaps) {
  std::vector<int64_t> offsets(1, 0);
  std::vector<uint32_t> indices;
  std::vector<float> values;
  std::size_t o = 0;
  for (int64_t id : ids) {
    while (o < old_ids.size() && old_ids[o] < id) ++o;
    const bool kept = o < old_ids.size() && old_ids[o] == id;
    const SparseView v = kept ? old.outer(static_cast<int64_t>(o)) : host.outer(id);
    if (!kept) {
      *moved += bytes[id];
      ++*swaps;
    }
    indices.insert(indices.end(), v.index, v.index + v.size);
    values.insert(values.end(), v.value, v.value + v.size);
    offsets.push_back(static_cast<int64_t>(indices.size()));
  }
  const int64_t outer = static_cast<int64_t>(ids.size());
  const bool rows = M::kLayout == Layout::kRowMajor;
  return M::FromArraysUnchecked(rows ? outer : host.rows(), rows ? host.cols() : outer,
                                std::move(offsets), std::move(indices), std::move(values));
}

absl::Status CheckOptions(const DuhlOptions& o) {
  if (o.device_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("duhl: device_bytes is ", o.device_bytes, "; at least 0"));
  }
  if (o.device_bytes == 0 && !(o.device_fraction > 0.0 && o.device_fraction <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("duhl: device_fraction is ", o.device_fraction, "; in (0, 1]"));
  }
  if (o.gap_threads < 0 || o.gap_threads > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("duhl: gap_threads is ", o.gap_threads, "; in [0, 1024]"));
  }
  if (!(o.passes > 0.0 && o.passes <= 1e6)) {
    return absl::InvalidArgumentError(absl::StrCat("duhl: passes is ", o.passes, "; in (0, 1e6]"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view DuhlSelectionName(DuhlSelection s) {
  switch (s) {
    case DuhlSelection::kGap: return "gap";
    case DuhlSelection::kGapGreedy: return "gap-greedy";
    case DuhlSelection::kRandom: return "random";
    case DuhlSelection::kSequential: return "sequential";
    case DuhlSelection::kResident: return "resident";
  }
  return "?";
}

absl::StatusOr<DuhlSelection> ParseDuhlSelection(std::string_view name) {
  for (DuhlSelection s : {DuhlSelection::kGap, DuhlSelection::kGapGreedy, DuhlSelection::kRandom,
                          DuhlSelection::kSequential, DuhlSelection::kResident}) {
    if (name == DuhlSelectionName(s)) return s;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown selection '", AsAbsl(name),
                   "'; expected gap, gap-greedy, random, sequential or resident"));
}

int64_t DuhlCoordinateBytes(int64_t nnz) { return 8 * nnz + 20; }

absl::StatusOr<DuhlResult> TrainDuhl(const Dataset& data, const ModelSpec& model,
                                     const SolverOptions& options, const DuhlOptions& duhl) {
  DML_RETURN_IF_ERROR(CheckTrainInputs(data, model, options));
  DML_RETURN_IF_ERROR(CheckOptions(duhl));
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const bool dual = FormulationOf(model.kind) == Formulation::kDual;
  const int64_t n = data.x.rows(), d = data.x.cols();
  CscMatrix cols;
  if (!dual) cols = data.x.Convert();
  const int64_t count = dual ? n : d;

  DuhlResult out;
  std::vector<int64_t> bytes(static_cast<std::size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    bytes[i] = DuhlCoordinateBytes(dual ? data.x.outer_nnz(i) : cols.outer_nnz(i));
    out.data_bytes += bytes[i];
  }
  out.budget_bytes = duhl.device_bytes > 0
                         ? duhl.device_bytes
                         : static_cast<int64_t>(std::ceil(duhl.device_fraction *
                                                          static_cast<double>(out.data_bytes)));
  const char* what = dual ? "example" : "feature";
  for (int64_t i = 0; i < count; ++i) {
    if (bytes[i] > out.budget_bytes) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "duhl: %s %d takes %d bytes on the device, more than the budget of %d", what, i,
          bytes[i], out.budget_bytes));
    }
  }
  if (duhl.selection == DuhlSelection::kResident && out.budget_bytes < out.data_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "duhl: resident selection needs the whole data on the device (%d bytes); the budget is %d",
        out.data_bytes, out.budget_bytes));
  }

  absl::StatusOr<std::unique_ptr<GapMemory>> memory =
      GapMemory::Make(data, model, duhl.gap_threads);
  if (!memory.ok()) return memory.status();
  GapMemory& gm = **memory;
  decltype(duhl.make_solver) make = duhl.make_solver;
  if (!make) {
    make = [](LocalBlock b, const ModelSpec& m, uint64_t seed) {
      return MakeLocalSolver(std::move(b), m, seed);
    };
  }

  std::vector<double> coords(static_cast<std::size_t>(count), 0.0);
  std::vector<double> shared(static_cast<std::size_t>(dual ? d : n), 0.0);
  if (auto v = gm.Publish(shared, coords); !v.ok()) return v.status();
  gm.RefreshAll();  // the first selection sees every gap

  std::mt19937_64 rng(options.seed);
  int64_t cursor = 0;
  std::vector<int64_t> block_ids;
  std::vector<char> resident(static_cast<std::size_t>(count), 0);
  CsrMatrix block_rows;
  CscMatrix block_cols;
  TrainResult& r = out.train;
  r.model = model;
  double steps_done = 0.0;
  const int every = std::max(1, options.eval_every);
  StopReason why = StopReason::kMaxEpochs;
  std::optional<Certificate> last;
  for (int round = 1;; ++round) {
    if (options.stop.cancel != nullptr && options.stop.cancel->load()) {
      why = StopReason::kCancelled;
      break;
    }
    if (steps_done / static_cast<double>(count) >= options.stop.max_epochs) {
      why = StopReason::kMaxEpochs;
      break;
    }
    if (seconds() >= options.stop.max_seconds) {
      why = StopReason::kTimeBudget;
      break;
    }
    if (duhl.gap_threads == 0) gm.RefreshAll();
    std::vector<int64_t> ids =
        Select(duhl.selection, gm.Values(), bytes, out.budget_bytes, resident, rng, &cursor);
    std::sort(ids.begin(), ids.end());
    DuhlRound info;
    info.round = round;
    info.coordinates = static_cast<int64_t>(ids.size());
    LocalBlock block;
    block.n_global = n;
    if (dual) {
      block_rows = BuildBlock(data.x, block_rows, block_ids, ids, bytes, &info.bytes, &info.swaps);
      block.rows = block_rows;
      block.y.reserve(ids.size());
      for (int64_t i : ids) block.y.push_back(data.y[i]);
    } else {
      block_cols = BuildBlock(cols, block_cols, block_ids, ids, bytes, &info.bytes, &info.swaps);
      block.cols = block_cols;
      block.y = data.y;
      block.loss_row_begin = 0;
      block.loss_row_end = n;
    }
    for (int64_t i : block_ids) resident[i] = 0;
    for (int64_t i : ids) resident[i] = 1;
    block_ids = ids;
    out.device_bytes += info.bytes;

    absl::StatusOr<std::unique_ptr<LocalSolver>> solver =
        make(std::move(block), model, options.seed * 1000003 + static_cast<uint64_t>(round));
    if (!solver.ok()) return solver.status();
    std::vector<double> mine(ids.size());
    for (std::size_t k = 0; k < ids.size(); ++k) mine[k] = coords[ids[k]];
    DML_RETURN_IF_ERROR((*solver)->set_coordinates(std::move(mine)));
    const int64_t steps = std::max<int64_t>(
        1, std::llround(duhl.passes * static_cast<double>(ids.size())));
    absl::StatusOr<LocalUpdate> up = (*solver)->Solve(shared, 1.0, 1.0, steps);
    if (!up.ok()) return up.status();
    for (std::size_t j = 0; j < shared.size(); ++j) shared[j] += up->delta_shared[j];
    const std::vector<double>& after = (*solver)->coordinates();
    for (std::size_t k = 0; k < ids.size(); ++k) coords[ids[k]] = after[k];
    steps_done += static_cast<double>(up->steps);
    if (auto v = gm.Publish(shared, coords); !v.ok()) return v.status();

    // The exact certificate every `every` rounds, and sooner where the gap
    // memory (stale values, summed) says the target may be met.
    bool evaluate = round % every == 0 || !last;
    if (!evaluate) {
      const std::vector<double> z = gm.Values();
      double estimate = 0.0;
      for (double x : z) estimate += x;
      evaluate = estimate <= GapTarget(options.stop, last->primal);
    }
    if (evaluate) {
      absl::StatusOr<Certificate> c =
          dual ? EvaluateDual(data, model, coords) : EvaluatePrimal(data, model, coords);
      if (!c.ok()) return c.status();
      last = *c;
      info.gap = c->gap;
      Progress p;
      p.round = round;
      p.epochs = steps_done / static_cast<double>(count);
      p.seconds = seconds();
      p.primal = c->primal;
      p.dual = c->dual;
      p.gap = c->gap;
      p.nnz_touched = up->nnz_touched;
      p.bytes_exchanged = out.device_bytes;
      if (options.on_epoch) options.on_epoch(p);
      r.history.push_back(std::move(p));
    }
    info.seconds = seconds();
    out.rounds.push_back(info);
    if (evaluate) {
      if (options.stop.target_primal && last->primal <= *options.stop.target_primal) {
        why = StopReason::kTargetReached;
        break;
      }
      if (last->gap <= GapTarget(options.stop, last->primal)) {
        why = StopReason::kConverged;
        break;
      }
    }
  }
  absl::StatusOr<Certificate> c =
      dual ? EvaluateDual(data, model, coords) : EvaluatePrimal(data, model, coords);
  if (!c.ok()) return c.status();
  r.primal = c->primal;
  r.dual = c->dual;
  r.gap = c->gap;
  r.epochs = steps_done / static_cast<double>(count);
  r.rounds = static_cast<int>(out.rounds.size());
  r.reason = why;
  r.bytes_exchanged = out.device_bytes;
  if (dual) {
    r.w = PrimalFromDual(data.x, coords, model.lambda);
    r.alpha = std::move(coords);
  } else {
    r.w = std::move(coords);
  }
  r.seconds = seconds();
  r.note = absl::StrFormat(
      "duhl: %s selection, device budget %d bytes of %d (%.3g%%), %d bytes moved to the device "
      "(%.3g times the data) in %d rounds; gap memory refreshed %d values on %d threads",
      DuhlSelectionName(duhl.selection), out.budget_bytes, out.data_bytes,
      100.0 * static_cast<double>(out.budget_bytes) / static_cast<double>(out.data_bytes),
      out.device_bytes,
      static_cast<double>(out.device_bytes) / static_cast<double>(out.data_bytes),
      r.rounds, gm.refreshed(), duhl.gap_threads);
  return out;
}

}  // namespace dml
