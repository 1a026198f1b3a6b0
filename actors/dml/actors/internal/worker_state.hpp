#pragma once
// A worker's state and the operations its two parts share: worker.cpp (the
// actor: load, wiring, cocoa rounds, certificates) and worker_sgd.cpp (the
// SGD loop: pulls, pushes, exchanges, and the mode's step). Included only
// by those two files (CAF inside).

#include <array>
#include <atomic>
#include <deque>
#include <utility>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include "dml/actors/parameter_shard.hpp"
#include "dml/actors/topology/topology.hpp"
#include "dml/actors/worker.hpp"
#include "dml/objective/newton_certificate.hpp"
#include "dml/solver/cocoa_local.hpp"
#include "dml/solver/duhl.hpp"
#include "dml/solver/sgd.hpp"

namespace dml::actors::internal {

// Worker requests carry no timeout. In CAF 0.17 every request timeout is an
// event in the actor clock that stays there until it expires, answered or
// not: at tens of thousands of pushes and pulls per second that grows the
// clock's queue without bound and starves the coordinators' timers (seen as
// jobs that could not be cancelled). Pulls in sync/ssp legitimately wait for
// the slowest worker anyway; lost peers are detected by the coordinator's
// monitors, which fail the job and stop every actor of it.
constexpr auto kRequestTimeout = caf::infinite;

inline caf::error fail(std::string what) {
  return caf::make_error(caf::sec::runtime_error, std::move(what));
}

struct worker_state {
  worker_config cfg;
  std::shared_ptr<const topology> topo;  // the job's mode
  std::string who;  // "worker k: " prefix of every error
  Dataset local;    // this worker's rows (all modes but primal cocoa)
  int64_t n_global = 0;
  int64_t d = 0;
  std::unique_ptr<LocalSolver> solver;  // cocoa
  // easgd, model averaging: the local model between exchanges, stepped
  // lazily (sgd.hpp: O(nnz of a batch), not O(d), per step); `lazy_ahead`:
  // it holds steps that w has not (sync_local_model brings them over).
  std::unique_ptr<LazySgdModel> lazy;
  std::size_t lazy_batch = 0;
  bool lazy_ahead = false;
  std::vector<parameter_shard> shards;
  std::vector<int64_t> bounds;  // S+1 key boundaries
  std::vector<double> w;        // pulled model, or the local model (easgd, mavg)
  // SVRG: loss' of every local row at the snapshot with tag anchor_tag, and
  // the full loss gradient there (set by the coordinator's svrg message;
  // empty until the first).
  std::vector<double> anchor;
  int64_t anchor_tag = 0;
  // The Newton-refined certificate: the rows' loss' and loss'' at the last
  // iterate passes that asked for them, by pass id (evaluations may
  // overlap: the final one starts while a periodic one refines).
  std::array<std::pair<int64_t, NewtonRows>, 4> newton;
  std::vector<double> svrg_mu;
  // SAGA (cfg.saga): each local row's loss' when last drawn; zeros at each
  // run's start (the shards' mean starts at zero with them).
  std::vector<double> saga_memory;
  std::vector<double> inv_touch;  // hogwild: regulariser scaling per column
  std::shared_ptr<const Dataset> shared_data;  // hogwild: the whole dataset
  HogwildScratch hog_scratch;
  // hogwild on the key-value store: the pulled columns as a local model
  // (HogwildStep's array, dimension d, only the batch's columns current),
  // their values as pulled, and the pushes still in flight; with localize,
  // the columns of the batch at clock kv_next_clock (localized ahead).
  std::vector<std::atomic<double>> kv_w;
  std::vector<int64_t> kv_keys, kv_next_keys;
  int64_t kv_next_clock = -1;
  std::vector<double> kv_pulled, kv_deltas;
  std::deque<KvHandle> kv_pushes;
  int64_t clock = 0;
  int64_t exchanges = 0;  // easgd / model-averaging
  int64_t max_clock = 0;
  int64_t permit = INT64_MAX;  // the clock the run may step to (permit message)
  bool parked = false;         // at the permit, waiting for the next one
  int64_t report_every = 1;
  int64_t processed = 0;
  int64_t bytes = 0;
  int64_t default_steps = 1;  // cocoa: H = local_epochs * block size
  int64_t last_round = -1;      // cocoa: the last round started
  std::vector<double> round_start_coords;  // cocoa: coordinates before last_round's solve
  std::string connect_error;  // why the last connect was refused
  bool running = false;
  bool halted = false;
  bool trained = false;  // a run has started on this worker's local model
  uint64_t loop = 0;  // id of the current run; continuations of older runs are dropped
  caf::typed_response_promise<worker_report> run_promise;
  caf::actor fetcher;  // fetches dvecs that arrive by reference (bulk_resolve.hpp)
  static inline const char* name = "dml.worker";

  /// A line for the progress stream (the GPU the local solver is on, or its
  /// fallback), sent in every report; shared with the local solver's log
  /// callback, which sets it. DuHL makes its solver in the first round's
  /// Solve: its note arrives with the second round's report.
  std::shared_ptr<std::string> note = std::make_shared<std::string>();

  worker_report report() const {
    worker_report r{cfg.index, clock, processed, bytes, {}};
    r.note = *note;
    if (auto* d = dynamic_cast<const DuhlLocalSolver*>(solver.get())) {
      r.device_bytes = d->device_bytes();
      r.device_swaps = d->device_swaps();
    }
    return r;
  }
  double step_size() const {
    return cfg.step0 / (1.0 + cfg.step_decay * static_cast<double>(clock));
  }
};

// w <- the lazily stepped local model, where it is ahead.
inline void sync_local_model(worker_state& st) {
  if (st.lazy && st.lazy_ahead) st.lazy->Store(st.w);
  st.lazy_ahead = false;
}

using self_ptr = worker_actor::stateful_pointer<worker_state>;

// Counts replies of a fan-out; the first error wins, later replies are ignored.
struct fan_in {
  explicit fan_in(std::size_t n) : remaining(n) {}
  std::size_t remaining;
  bool failed = false;
};

// The error handler of a fan-out: passes the first error on, drops the rest.
template <class Fail>
auto first_error(std::shared_ptr<fan_in> counter, Fail on_error) {
  return [counter, on_error](caf::error err) {
    if (counter->failed) return;
    counter->failed = true;
    on_error(std::move(err));
  };
}

/// Every shard's range into st.w (with `keys`, one list per shard, null for
/// the whole range: only those keys); then done(), or on_error once.
void pull_all(self_ptr self, int64_t clock, std::function<void()> done,
              std::function<void(caf::error)> on_error, std::vector<key_list> keys = {});
/// x (length = model dimension) to the shards, split by range, sparse where
/// smaller; `movable`, when given, is x itself and may be moved into a
/// message that covers all of it.
void push_all(self_ptr self, int64_t clock, const std::vector<double>& x,
              std::function<void()> done, std::function<void(caf::error)> on_error,
              std::vector<double>* movable = nullptr);
/// Ends run `loop` (its reply: the report, or err).
void finish_run(self_ptr self, caf::error err, uint64_t loop);
/// The next step of the current run, by the job's topology.
void sgd_step(self_ptr self);
caf::error as_error(const worker_state& st, const absl::Status& s);

}  // namespace dml::actors::internal
