#pragma once
// DuHL's gap memory (Duenner, Parnell, Jaggi, NeurIPS 2017): a duality-gap
// value z_i for every coordinate (examples of dual models, features of
// primal ones), refreshed by CPU threads against the last published state
// while the device solves. Values may be stale: each carries the version of
// the state it was computed against. Scaled so that with every value fresh
// their sum is the duality gap P - D of that state (dual: the
// per-example gaps of EvaluateDual over n; primal: EvaluatePrimal's
// bounded-support per-feature gaps).
//
// Thread-safety: every method may be called from any thread; the refresh
// threads run from Make until destruction.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "dml/data/sparse.hpp"
#include "dml/objective/model.hpp"

namespace dml {

class GapMemory {
 public:
  /// Gap memory of `data` (kept by reference: it must outlive this) under
  /// `model`, with `threads` refresh threads (0: values change only by
  /// RefreshAll). Values start at +infinity, version 0 (never measured).
  /// Errors: InvalidArgument for threads < 0, and those of
  /// dml::CheckTrainInputs (the model, no examples, labels not finite or
  /// not ones the model accepts).
  static absl::StatusOr<std::unique_ptr<GapMemory>> Make(const Dataset& data,
                                                         const ModelSpec& model, int threads);
  /// The same, for a primal model, with `cols` = data.x as CSC held by the
  /// caller too (shared, not copied: the columns are then in memory once and
  /// no conversion is paid). InvalidArgument where cols is null or its
  /// shape or nonzeros differ from data.x, or the model is a dual one.
  static absl::StatusOr<std::unique_ptr<GapMemory>> Make(const Dataset& data,
                                                         const ModelSpec& model, int threads,
                                                         std::shared_ptr<const CscMatrix> cols);
  virtual ~GapMemory() = default;

  /// Makes (shared, coords) the state to measure: w and alpha for dual
  /// models (shared = A^T alpha / (lambda n), d entries; alpha, n), v = A w
  /// and w for primal ones (n; d). Returns its version (1, 2, ...). The
  /// threads move to it at their next coordinate. Errors: wrong lengths.
  virtual absl::StatusOr<int64_t> Publish(std::vector<double> shared,
                                          std::vector<double> coords) = 0;
  /// Recomputes every value against the last published state, in the
  /// calling thread (then every value is fresh).
  virtual void RefreshAll() = 0;
  /// Recomputes the values of `ids` (in range) against the last published
  /// state, in the calling thread: DuHL's device refreshes the gaps of the
  /// block it just solved, which changed most and which the threads may
  /// not reach for a while.
  virtual void Refresh(const std::vector<int64_t>& ids) = 0;

  /// Number of coordinates.
  virtual int64_t size() const = 0;
  /// The last published version (0: none).
  virtual int64_t version() const = 0;
  /// A copy of the values and of the versions they were computed against.
  virtual std::vector<double> Values() const = 0;
  virtual std::vector<int64_t> Versions() const = 0;
  /// Values computed since the start (how much the threads have done).
  virtual int64_t refreshed() const = 0;

 private:
  static absl::StatusOr<std::unique_ptr<GapMemory>> MakeWith(const Dataset& data,
                                                             const ModelSpec& model, int threads,
                                                             std::shared_ptr<const CscMatrix> cols);
};

}  // namespace dml
