#pragma once
// DuHL: training with a device that holds only part of the data (Duenner,
// Parnell, Jaggi, "Efficient use of limited-memory accelerators for linear
// learning on heterogeneous systems", NeurIPS 2017). Each round the device
// solves the CoCoA+ subproblem of a block P of coordinates (examples of dual
// models, features of primal ones) that fits its memory budget, for a few
// passes over P, while CPU threads refresh the gap memory (gap_memory.hpp)
// against the last state; then P is chosen again and only the coordinates
// new to it are copied to the device.
//
// Selection rules: `gap` samples P without replacement with probability
// proportional to the coordinates' gaps (Efraimidis-Spirakis keys): the
// default, because greedy top-m by gap (`gap-greedy`) can keep choosing
// coordinates whose block-local optimum is already reached and stall;
// `random`, `sequential` (cyclic: streaming the data through in batches)
// and `resident` (all of it; the budget must hold the data).
//
// The device here is a LocalSolver built per round from the block
// (DuhlOptions::make_solver: the CPU local solver by default, the twin of a
// device's). The block lives in its own buffer: coordinates that stay are
// copied from the previous block, the new ones from the host arrays, and
// only those count as bytes moved to the device.
//
// Thread-safety: TrainDuhl is reentrant; it runs DuhlOptions::gap_threads
// threads beside the caller's.

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "dml/data/sparse.hpp"
#include "dml/objective/model.hpp"
#include "dml/solver/cocoa_local.hpp"
#include "dml/solver/duhl_config.hpp"
#include "dml/solver/gap_memory.hpp"
#include "dml/solver/solver.hpp"

namespace dml {

/// The options of TrainDuhl and MakeDuhlLocalSolver.
struct DuhlOptions : DuhlConfig {
  /// Builds the block's solver (its coordinates start at 0 and are then
  /// set): empty = MakeLocalSolver, the CPU twin. A solver that implements
  /// LocalSolver::Reload (dml::gpu::MakeTpaScdLocalSolver's) is made once
  /// and then reloaded with each block.
  std::function<absl::StatusOr<std::unique_ptr<LocalSolver>>(LocalBlock, const ModelSpec&,
                                                             uint64_t seed)>
      make_solver;
  /// Builds the gap memory of the block's coordinates (`view`: its rows,
  /// or all n rows over its columns for primal models; shared, as the
  /// memory's threads read it) with gap_threads threads: empty =
  /// GapMemory::Make in this object; the runtime's workers put it in a
  /// gap_memory actor (dml/actors/gap_memory.hpp). `cols`: primal models,
  /// view's columns as CSC, held by DuHL too (pass it on to
  /// GapMemory::Make: no second copy); null for dual ones.
  std::function<absl::StatusOr<std::unique_ptr<GapMemory>>(
      std::shared_ptr<const Dataset> view, const ModelSpec&, int threads,
      std::shared_ptr<const CscMatrix> cols)>
      make_gap_memory;
};

/// One round.
struct DuhlRound {
  int round = 0;
  int64_t coordinates = 0;  ///< in the block
  int64_t swaps = 0;        ///< of them new to the device this round
  /// Moved to the device this round: DuhlCoordinateBytes of the new
  /// coordinates, or, where the block's solver reloads its block
  /// (LocalSolver::Reload, a device's), what it says it copied.
  int64_t bytes = 0;
  double seconds = 0.0;     ///< since training started, at the end of the round
  double gap = -1.0;        ///< the exact gap after the round (-1: not evaluated)
};

struct DuhlResult {
  /// train.history: one Progress per evaluation, device_bytes = bytes
  /// moved to the device so far, and a "device_copies" event: the
  /// coordinates and bytes copied since the evaluation before.
  TrainResult train;
  int64_t data_bytes = 0;   ///< of all coordinates
  int64_t budget_bytes = 0;
  int64_t device_bytes = 0;  ///< moved to the device in the whole run
  std::vector<DuhlRound> rounds;
};

/// DuHL as CoCoA+'s local solver over a block (a worker's partition, or
/// the whole data for TrainDuhl): each Solve runs rounds, each on a block P
/// of this block's coordinates chosen by the rule from the gap memory
/// (measured against the shared vector plus sigma' times this Solve's
/// change), until `steps` coordinate steps are done (at least one round),
/// then commits gamma of the change. The rounds' block subproblems are
/// exactly the local subproblem restricted to P. Certify runs the CPU local
/// solver over the whole block. Not thread-safe (one per worker); its gap
/// threads run until it is destroyed.
class DuhlLocalSolver : public LocalSolver {
 public:
  /// Every round so far.
  virtual const std::vector<DuhlRound>& rounds() const = 0;
  virtual int64_t data_bytes() const = 0;
  virtual int64_t budget_bytes() const = 0;
  /// Bytes moved to the device so far.
  virtual int64_t device_bytes() const = 0;
  /// Coordinates copied to the device so far (the rounds' swaps).
  virtual int64_t device_swaps() const = 0;
  /// The sum of the gap memory's values (stale ones included).
  virtual double gap_estimate() const = 0;
  /// Values the gap memory computed so far.
  virtual int64_t gaps_refreshed() const = 0;
};

/// Errors: InvalidArgument for the model, options or an empty block;
/// ResourceExhausted as TrainDuhl's.
absl::StatusOr<std::unique_ptr<DuhlLocalSolver>> MakeDuhlLocalSolver(LocalBlock block,
                                                                   const ModelSpec& model,
                                                                   uint64_t seed,
                                                                   const DuhlOptions& options);

/// What a coordinate with `nnz` nonzeros takes on the device: 8 bytes per
/// nonzero (index, value) and 20 (offset, label, coordinate).
int64_t DuhlCoordinateBytes(int64_t nnz);

/// Trains by DuHL to options.stop (epochs = coordinate steps / coordinates;
/// the exact certificate every max(1, options.eval_every) rounds, and in
/// any round where the gap memory's sum meets the gap rule). options
/// other than stop, seed, eval_every and on_epoch are ignored.
/// Errors: those of dml::Train's checks; InvalidArgument for the options
/// (naming the field); ResourceExhausted where a coordinate alone is over
/// the budget or `resident` is asked with a budget under the data's bytes;
/// the block solver's errors.
absl::StatusOr<DuhlResult> TrainDuhl(const Dataset& data, const ModelSpec& model,
                                     const SolverOptions& options, const DuhlOptions& duhl);

}  // namespace dml
