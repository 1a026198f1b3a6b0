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
  // Sorted as (key, id) pairs: the comparisons read neighbours, not
  // key[] at random (a third of a round's time on 600k coordinates).
  struct Keyed {
    double key;
    int64_t id;
  };
  auto before = [&](const Keyed& a, const Keyed& b) {
    if (a.key != b.key) return a.key > b.key;
    if (resident[a.id] != resident[b.id]) return resident[a.id] > resident[b.id];
    return a.id < b.id;
  };
  // Coordinates keyed -inf (negligible gaps: most of a sparse model's)
  // are all equal to the order: residents first, then by index, which is
  // the order of a scan. Only the others (`order`) need sorting; the -inf
  // ones (`tail`) follow them as scanned.
  std::vector<Keyed> order;
  std::vector<int64_t> tail, other_tail;
  order.reserve(key.size());
  for (std::size_t i = 0; i < key.size(); ++i) {
    const auto id = static_cast<int64_t>(i);
    if (key[i] != -std::numeric_limits<double>::infinity()) {
      order.push_back({key[i], id});
    } else {
      (resident[i] ? tail : other_tail).push_back(id);
    }
  }
  tail.insert(tail.end(), other_tail.begin(), other_tail.end());
  // Only the first coordinates in key order can fit. First about three
  // quarters of what the budget holds at the mean size, partitioned out
  // (nth_element): where that chunk fits whole, each of its coordinates
  // would be taken in key order too, so it is taken unsorted. Then the rest
  // of the first head is partitioned out, sorted and filled in order, the
  // next head (twice as long) only where the budget is not yet full.
  // O(n + m log m) a round with m the head less the chunk, not the whole
  // head (sorting it was a fifth of a round on 600k coordinates).
  int64_t smallest = std::numeric_limits<int64_t>::max(), total = 0;
  for (int64_t b : bytes) {
    smallest = std::min(smallest, b);
    total += b;
  }
  const std::size_t sorted = order.size(), n = key.size();
  const int64_t mean = std::max<int64_t>(1, total / std::max<int64_t>(1, static_cast<int64_t>(n)));
  // The budget counts as full within 1/256 of it (else the last bytes
  // could cost a scan of every coordinate for the one small enough).
  const int64_t slack = std::max(smallest, budget / 256);
  std::vector<int64_t> out;
  int64_t left = budget;
  std::size_t begin = 0;
  const std::size_t first_n =
      std::min(sorted, static_cast<std::size_t>(std::max<int64_t>(0, budget / mean)) * 3 / 4);
  if (first_n > 0) {
    const auto first = order.begin(), last = order.begin() + static_cast<std::ptrdiff_t>(first_n);
    if (last != order.end()) std::nth_element(first, last, order.end(), before);
    int64_t chunk = 0;
    for (auto it = first; it != last; ++it) chunk += bytes[it->id];
    if (chunk <= left) {
      for (auto it = first; it != last; ++it) out.push_back(it->id);
      left -= chunk;
      begin = first_n;
    }
  }
  // The heads end where they did before the unsorted chunk was taken
  // (h, 3h, 7h, ... for h about twice what the budget holds), so the fill
  // is the same: the first head is scanned whatever is left (small
  // coordinates may still fit), later ones only while the budget is not
  // within slack of full.
  std::size_t head = static_cast<std::size_t>(std::min<int64_t>(
      static_cast<int64_t>(n), 2 * (budget / mean) + 16));
  std::size_t end = head;
  for (bool first_head = true; begin < n && (first_head || left >= slack); first_head = false) {
    end = std::min(n, end);
    if (begin < sorted) {
      const auto first = order.begin() + static_cast<std::ptrdiff_t>(begin);
      const auto last = order.begin() + static_cast<std::ptrdiff_t>(std::min(end, sorted));
      if (last != order.end()) std::nth_element(first, last, order.end(), before);
      std::sort(first, last, before);
    }
    for (std::size_t k = begin; k < end && left >= smallest; ++k) {
      const int64_t i = k < sorted ? order[k].id : tail[k - sorted];
      if (bytes[i] <= left) {
        out.push_back(i);
        left -= bytes[i];
      }
    }
    begin = end;
    head *= 2;
    end = begin + head;
  }
  return out;
}

// Sorts distinct ids in [0, n): by a scan of marks where there are many
// (O(n), not O(m log m)).
void SortIds(std::vector<int64_t>& ids, int64_t n) {
  if (static_cast<int64_t>(ids.size()) * 16 < n) {
    std::sort(ids.begin(), ids.end());
    return;
  }
  std::vector<char> in(static_cast<std::size_t>(n), 0);
  for (int64_t i : ids) in[static_cast<std::size_t>(i)] = 1;
  ids.clear();
  for (int64_t i = 0; i < n; ++i) {
    if (in[static_cast<std::size_t>(i)]) ids.push_back(i);
  }
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
      // Negligible gaps draw nothing: they are never sampled.
      for (int64_t i = 0; i < n; ++i) {
        key[i] = z[i] > floor ? std::log(u(rng)) / z[i] : -std::numeric_limits<double>::infinity();
      }
      return FillByKey(key, bytes, budget, resident);
    }
  }
  return out;
}

// The block of `ids` (ascending) in its own buffer, from `host`; the outer
// slots that were in the last block (old_ids, ascending) stayed on the
// device (kept_at: their place there, else -1), the others are moved:
// *moved counts their bytes. (A device keeps the kept slots where they
// are; the twin's block, its own buffer, is the device's contents, and
// copying them from the host gives the same bytes without keeping the last
// block as well.)
template <class M>
M BuildBlock(const M& host, const std::vector<int64_t>& old_ids, const std::vector<int64_t>& ids,
             const std::vector<int64_t>& bytes, int64_t* moved, int64_t* swaps,
             std::vector<int64_t>* kept_at) {
  kept_at->clear();
  std::size_t nnz = 0;
  for (int64_t id : ids) nnz += host.outer_nnz(id);
  std::vector<int64_t> offsets;
  std::vector<uint32_t> indices;
  std::vector<float> values;
  offsets.reserve(ids.size() + 1);
  indices.reserve(nnz);
  values.reserve(nnz);
  offsets.push_back(0);
  std::size_t o = 0;
  for (int64_t id : ids) {
    while (o < old_ids.size() && old_ids[o] < id) ++o;
    const bool kept = o < old_ids.size() && old_ids[o] == id;
    kept_at->push_back(kept ? static_cast<int64_t>(o) : -1);
    if (!kept) {
      *moved += bytes[id];
      ++*swaps;
    }
    const SparseView v = host.outer(id);
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
  const int selection = static_cast<int>(o.selection);
  if (selection < static_cast<int>(DuhlSelection::kGap) ||
      selection > static_cast<int>(DuhlSelection::kResident)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "duhl: selection is ", selection, "; one of gap, gap-greedy, random, sequential, resident"));
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

namespace {

// The DuHL local solver: see duhl.hpp.
class Duhl final : public DuhlLocalSolver {
 public:
  static absl::StatusOr<std::unique_ptr<DuhlLocalSolver>> Make(LocalBlock block,
                                                              const ModelSpec& model,
                                                              uint64_t seed,
                                                              const DuhlOptions& options) {
    DML_RETURN_IF_ERROR(Validate(model));
    DML_RETURN_IF_ERROR(CheckOptions(options));
    auto d = std::unique_ptr<Duhl>(new Duhl(std::move(block), model, seed, options));
    DML_RETURN_IF_ERROR(d->Init());
    return std::unique_ptr<DuhlLocalSolver>(std::move(d));
  }

  absl::StatusOr<LocalUpdate> Solve(const std::vector<double>& shared, double sigma_prime,
                                    double gamma, int64_t steps,
                                    const std::atomic<bool>* interrupt) override {
    if (static_cast<int64_t>(shared.size()) != shared_size_) {
      return absl::InvalidArgumentError(absl::StrCat("shared vector has ", shared.size(),
                                                     " entries; the block needs ", shared_size_));
    }
    if (!(sigma_prime >= 1.0) || !std::isfinite(sigma_prime)) {
      return absl::InvalidArgumentError(absl::StrCat("sigma_prime is ", sigma_prime, "; at least 1"));
    }
    if (!(gamma > 0.0 && gamma <= 1.0)) {
      return absl::InvalidArgumentError(absl::StrCat("gamma is ", gamma, "; in (0, 1]"));
    }
    if (steps < 1) return absl::InvalidArgumentError(absl::StrCat("steps is ", steps, "; at least 1"));
    LocalUpdate up;
    up.delta_shared.assign(shared.size(), 0.0);
    std::vector<double> local(coords_);  // coordinates with this Solve's change
    std::vector<double> view(shared);    // shared + sigma' * the change of the shared vector
    while (up.steps < steps) {
      if (interrupt != nullptr && interrupt->load(std::memory_order_relaxed)) break;
      absl::StatusOr<int64_t> round = Round(view, local, sigma_prime, &up);
      if (!round.ok()) return round.status();
      for (std::size_t j = 0; j < view.size(); ++j) {
        view[j] = shared[j] + sigma_prime * up.delta_shared[j];
      }
      if (auto v = memory_->Publish(view, local); !v.ok()) return v.status();
      memory_->Refresh(block_ids_);  // what the round changed, fresh now
    }
    // Commit gamma of the change (a convex combination: in the domain).
    for (std::size_t i = 0; i < coords_.size(); ++i) {
      coords_[i] = gamma == 1.0 ? local[i] : coords_[i] + gamma * (local[i] - coords_[i]);
    }
    return up;
  }

  absl::StatusOr<BlockCertificate> Certify(const std::vector<double>& shared) const override {
    DML_RETURN_IF_ERROR(EnsureCertifier());
    DML_RETURN_IF_ERROR(certifier_->set_coordinates(coords_));
    return certifier_->Certify(shared);
  }

  const std::vector<double>& coordinates() const override { return coords_; }

  absl::Status set_coordinates(std::vector<double> c) override {
    if (static_cast<int64_t>(c.size()) != count_) {
      return absl::InvalidArgumentError(absl::StrCat("block has ", count_, " coordinates but ",
                                                     c.size(), " were given"));
    }
    // The CPU local solver's checks of the domain.
    DML_RETURN_IF_ERROR(EnsureCertifier());
    DML_RETURN_IF_ERROR(certifier_->set_coordinates(c));
    coords_ = std::move(c);
    if (auto v = memory_->Publish(last_view_, coords_); !v.ok()) return v.status();
    return absl::OkStatus();
  }

  const std::vector<DuhlRound>& rounds() const override { return rounds_; }
  int64_t data_bytes() const override { return data_bytes_; }
  int64_t budget_bytes() const override { return budget_bytes_; }
  int64_t device_bytes() const override { return device_bytes_; }
  int64_t device_swaps() const override { return device_swaps_; }
  double gap_estimate() const override {
    double sum = 0.0;
    for (double z : memory_->Values()) sum += z;
    return sum;
  }
  int64_t gaps_refreshed() const override { return memory_->refreshed(); }

 private:
  Duhl(LocalBlock block, const ModelSpec& model, uint64_t seed, const DuhlOptions& options)
      : block_(std::move(block)), model_(model), seed_(seed), options_(options), rng_(seed) {}

  // A CPU local solver over the whole block (Certify, and the domain
  // checks of set_coordinates), made on first use.
  absl::Status EnsureCertifier() const {
    if (certifier_) return absl::OkStatus();
    LocalBlock whole;
    whole.n_global = block_.n_global;
    whole.loss_row_begin = block_.loss_row_begin;
    whole.loss_row_end = block_.loss_row_end;
    whole.y = view_data_->y;
    if (dual()) {
      whole.rows = view_data_->x;
    } else {
      whole.cols = *cols_;
    }
    absl::StatusOr<std::unique_ptr<LocalSolver>> c = MakeLocalSolver(std::move(whole), model_, seed_);
    if (!c.ok()) return c.status();
    certifier_ = *std::move(c);
    return absl::OkStatus();
  }

  bool dual() const { return FormulationOf(model_.kind) == Formulation::kDual; }

  absl::Status Init() {
    const bool d = dual();
    // A primal block's columns, once: the blocks are cut from them and the
    // gap memory reads them (shared, not converted again).
    if (!d) cols_ = std::make_shared<const CscMatrix>(std::move(block_.cols));
    count_ = d ? block_.rows.rows() : cols_->cols();
    shared_size_ = d ? block_.rows.cols() : cols_->rows();
    if (count_ == 0) return absl::InvalidArgumentError("duhl: an empty block");
    bytes_.resize(static_cast<std::size_t>(count_));
    for (int64_t i = 0; i < count_; ++i) {
      bytes_[i] = DuhlCoordinateBytes(d ? block_.rows.outer_nnz(i) : cols_->outer_nnz(i));
      data_bytes_ += bytes_[i];
    }
    budget_bytes_ = options_.device_bytes > 0
                        ? options_.device_bytes
                        : static_cast<int64_t>(std::ceil(options_.device_fraction *
                                                         static_cast<double>(data_bytes_)));
    for (int64_t i = 0; i < count_; ++i) {
      if (bytes_[i] > budget_bytes_) {
        return absl::ResourceExhaustedError(absl::StrFormat(
            "duhl: %s %d takes %d bytes on the device, more than the budget of %d (raise "
            "DuhlOptions.device_bytes or device_fraction: dml-train --device-memory)",
            d ? "example" : "feature", i, bytes_[i], budget_bytes_));
      }
    }
    if (options_.selection == DuhlSelection::kResident && budget_bytes_ < data_bytes_) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "duhl: resident selection needs the whole data on the device (%d bytes); the budget "
          "is %d",
          data_bytes_, budget_bytes_));
    }
    // The gap memory reads the block as a dataset: its rows (dual), or all
    // n rows over its columns (primal).
    // (Dual: the rows move there, kept once; primal: the CSC stays for the
    // blocks, the gap memory reads a CSR of it.)
    auto view = std::make_shared<Dataset>();
    view->x = d ? std::move(block_.rows) : cols_->Convert();
    view->y = std::move(block_.y);
    view_data_ = std::move(view);
    absl::StatusOr<std::unique_ptr<GapMemory>> m =
        options_.make_gap_memory
            ? options_.make_gap_memory(view_data_, model_, options_.gap_threads, cols_)
            : d ? GapMemory::Make(*view_data_, model_, options_.gap_threads)
                : GapMemory::Make(*view_data_, model_, options_.gap_threads, cols_);
    if (!m.ok()) return m.status();
    memory_ = *std::move(m);
    coords_.assign(static_cast<std::size_t>(count_), 0.0);
    last_view_.assign(static_cast<std::size_t>(shared_size_), 0.0);
    DML_RETURN_IF_ERROR(memory_->Publish(last_view_, coords_).status());
    memory_->RefreshAll();  // the first selection sees every gap
    resident_.assign(static_cast<std::size_t>(count_), 0);
    make_ = options_.make_solver;
    if (!make_) {
      make_ = [](LocalBlock b, const ModelSpec& m, uint64_t seed) {
        return MakeLocalSolver(std::move(b), m, seed);
      };
    }
    return absl::OkStatus();
  }

  // One round against `view` (the shared vector with this Solve's change):
  // select, load, solve passes * |P| steps; `local` and `up` take the change.
  absl::StatusOr<int64_t> Round(const std::vector<double>& view, std::vector<double>& local,
                                double sigma_prime, LocalUpdate* up) {
    last_view_ = view;
    if (options_.gap_threads == 0) memory_->RefreshAll();
    std::vector<int64_t> ids = Select(options_.selection, memory_->Values(), bytes_, budget_bytes_,
                                      resident_, rng_, &cursor_);
    SortIds(ids, count_);
    DuhlRound info;
    info.round = static_cast<int>(rounds_.size()) + 1;
    info.coordinates = static_cast<int64_t>(ids.size());
    LocalBlock b;
    b.n_global = block_.n_global;
    std::vector<int64_t> kept;
    if (dual()) {
      b.rows = BuildBlock(view_data_->x, block_ids_, ids, bytes_, &info.bytes, &info.swaps, &kept);
      b.y.reserve(ids.size());
      for (int64_t i : ids) b.y.push_back(view_data_->y[i]);
    } else {
      b.cols = BuildBlock(*cols_, block_ids_, ids, bytes_, &info.bytes, &info.swaps, &kept);
      b.y = view_data_->y;
      b.loss_row_begin = block_.loss_row_begin;
      b.loss_row_end = block_.loss_row_end;
    }
    for (int64_t i : block_ids_) resident_[i] = 0;
    for (int64_t i : ids) resident_[i] = 1;
    block_ids_ = ids;
    // A solver that holds its block (a device's) reloads only what is new
    // and says what it copied; others are made anew for each block.
    bool reloaded = false;
    if (held_ && reloads_) {
      absl::StatusOr<int64_t> moved = held_->Reload(b, kept);
      if (moved.ok()) {
        info.bytes = *moved;
        reloaded = true;
      } else if (moved.status().code() != absl::StatusCode::kUnimplemented) {
        return moved.status();
      } else {
        reloads_ = false;  // this kind of solver never will
      }
    }
    if (!reloaded) {
      absl::StatusOr<std::unique_ptr<LocalSolver>> made =
          make_(std::move(b), model_, seed_ * 1000003 + static_cast<uint64_t>(info.round));
      if (!made.ok()) return made.status();
      held_ = *std::move(made);
    }
    device_bytes_ += info.bytes;
    device_swaps_ += info.swaps;
    LocalSolver* solver = held_.get();
    std::vector<double> mine(ids.size());
    for (std::size_t k = 0; k < ids.size(); ++k) mine[k] = local[ids[k]];
    DML_RETURN_IF_ERROR(solver->set_coordinates(std::move(mine)));
    const int64_t steps = std::max<int64_t>(
        1, std::llround(options_.passes * static_cast<double>(ids.size())));
    absl::StatusOr<LocalUpdate> r = solver->Solve(view, sigma_prime, 1.0, steps);
    if (!r.ok()) return r.status();
    for (std::size_t j = 0; j < up->delta_shared.size(); ++j) {
      up->delta_shared[j] += r->delta_shared[j];
    }
    const std::vector<double>& after = solver->coordinates();
    for (std::size_t k = 0; k < ids.size(); ++k) local[ids[k]] = after[k];
    up->steps += r->steps;
    up->nnz_touched += r->nnz_touched;
    rounds_.push_back(info);
    return r->steps;
  }

  LocalBlock block_;  // its rows and labels move to view_data_ at Init, its columns to cols_
  std::shared_ptr<const CscMatrix> cols_;  // primal: the block's columns
  ModelSpec model_;
  uint64_t seed_;
  DuhlOptions options_;
  std::mt19937_64 rng_;
  int64_t count_ = 0, shared_size_ = 0, data_bytes_ = 0, budget_bytes_ = 0, device_bytes_ = 0;
  int64_t device_swaps_ = 0;
  int64_t cursor_ = 0;
  std::vector<int64_t> bytes_;
  std::shared_ptr<const Dataset> view_data_;  // before memory_: its threads read it
  std::unique_ptr<GapMemory> memory_;
  std::vector<double> coords_, last_view_;
  std::vector<char> resident_;
  std::vector<int64_t> block_ids_;
  std::vector<DuhlRound> rounds_;
  decltype(DuhlOptions::make_solver) make_;
  std::unique_ptr<LocalSolver> held_;  // the last block's solver
  bool reloads_ = true;                // until held_ says it cannot
  mutable std::unique_ptr<LocalSolver> certifier_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DuhlLocalSolver>> MakeDuhlLocalSolver(LocalBlock block,
                                                                   const ModelSpec& model,
                                                                   uint64_t seed,
                                                                   const DuhlOptions& options) {
  return Duhl::Make(std::move(block), model, seed, options);
}

absl::StatusOr<DuhlResult> TrainDuhl(const Dataset& data, const ModelSpec& model,
                                     const SolverOptions& options, const DuhlOptions& duhl) {
  DML_RETURN_IF_ERROR(CheckTrainInputs(data, model, options));
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const bool dual = FormulationOf(model.kind) == Formulation::kDual;
  const int64_t n = data.x.rows(), d = data.x.cols();
  LocalBlock whole;
  whole.n_global = n;
  whole.y = data.y;
  if (dual) {
    whole.rows = data.x;
  } else {
    whole.cols = data.x.Convert();
    whole.loss_row_begin = 0;
    whole.loss_row_end = n;
  }
  const int64_t count = dual ? n : d;
  absl::StatusOr<std::unique_ptr<DuhlLocalSolver>> made =
      MakeDuhlLocalSolver(std::move(whole), model, options.seed, duhl);
  if (!made.ok()) return made.status();
  DuhlLocalSolver& solver = **made;

  DuhlResult out;
  out.data_bytes = solver.data_bytes();
  out.budget_bytes = solver.budget_bytes();
  TrainResult& r = out.train;
  r.model = model;
  std::vector<double> shared(static_cast<std::size_t>(dual ? d : n), 0.0);
  double steps_done = 0.0;
  const int every = std::max(1, options.eval_every);
  StopReason why = StopReason::kMaxEpochs;
  std::optional<Certificate> last;
  bool last_is_current = false;  // no round since `last` was taken
  int64_t swaps_since = 0, bytes_since = 0, rounds_since = 0;  // since the last evaluation
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
    // One round: a Solve of one step runs exactly one.
    absl::StatusOr<LocalUpdate> up = solver.Solve(shared, 1.0, 1.0, 1);
    if (!up.ok()) return up.status();
    last_is_current = false;
    for (std::size_t j = 0; j < shared.size(); ++j) shared[j] += up->delta_shared[j];
    steps_done += static_cast<double>(up->steps);
    DuhlRound info = solver.rounds().back();
    swaps_since += info.swaps;
    bytes_since += info.bytes;
    ++rounds_since;
    // The exact certificate every `every` rounds, and sooner where the gap
    // memory (stale values, summed) says the target may be met.
    const bool evaluate = round % every == 0 || !last ||
                          solver.gap_estimate() <= GapTarget(options.stop, last->primal);
    if (evaluate) {
      absl::StatusOr<Certificate> c = dual ? EvaluateDual(data, model, solver.coordinates())
                                           : EvaluatePrimal(data, model, solver.coordinates());
      if (!c.ok()) return c.status();
      last = *c;
      last_is_current = true;
      info.gap = c->gap;
      Progress p;
      p.round = round;
      p.epochs = steps_done / static_cast<double>(count);
      p.seconds = seconds();
      p.primal = c->primal;
      p.dual = c->dual;
      p.gap = c->gap;
      p.nnz_touched = up->nnz_touched;
      p.device_bytes = solver.device_bytes();
      p.device_swaps = solver.device_swaps();
      p.events.push_back(
          {"device_copies",
           absl::StrFormat("%d coordinates (%d bytes) copied to the device in %d rounds",
                           swaps_since, bytes_since, rounds_since)});
      p.event = p.events.back().what;
      swaps_since = bytes_since = rounds_since = 0;
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
  std::vector<double> coords = solver.coordinates();
  absl::StatusOr<Certificate> c = last_is_current ? absl::StatusOr<Certificate>(*last)
                                  : dual          ? EvaluateDual(data, model, coords)
                                                  : EvaluatePrimal(data, model, coords);
  if (!c.ok()) return c.status();
  out.device_bytes = solver.device_bytes();
  r.primal = c->primal;
  r.dual = c->dual;
  r.gap = c->gap;
  r.epochs = steps_done / static_cast<double>(count);
  r.rounds = static_cast<int>(out.rounds.size());
  r.reason = why;
  r.device_bytes = out.device_bytes;
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
      r.rounds, solver.gaps_refreshed(), duhl.gap_threads);
  return out;
}

}  // namespace dml
