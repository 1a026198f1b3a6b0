#pragma once
// The embedding API: a host service creates a dml::runtime, describes a
// training job in code (data, model, mode = actor topology, K workers, S
// shards, stopping rule), submits it and gets a dml::job handle for progress,
// cancellation and the result. No CAF type appears here, so hosts include
// this header without CAF's compile cost.
//
// Ownership: a runtime owns its actor system and threads; nothing is global,
// so several runtimes can live in one process. A job handle shares the job's
// state with the runtime; it stays valid (and its result readable) after the
// runtime is gone. Destroying a runtime cancels its running jobs and waits
// for their actors to stop.
//
// Errors are values (absl::Status); nothing here throws across the API,
// aborts, exits or prints.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "dml/data/libsvm.hpp"
#include "dml/data/sparse.hpp"
#include "dml/objective/model.hpp"
#include "dml/solver/solver.hpp"
#include "dml/solver/training.hpp"

namespace dml {

/// Whether the mode trains by minibatch SGD (reports primal only, no gap).
bool IsSgdMode(Mode mode);

/// One job, built in code. Either `data` (an in-memory dataset handed over
/// by the host; shared, never copied per worker) or `data_path` (every worker
/// loads the file itself and keeps its own partition) must be set.
struct job_spec {
  std::shared_ptr<const Dataset> data;
  std::string data_path;
  LibsvmOptions load_options;

  ModelSpec model;
  Mode mode = Mode::kCocoa;
  int workers = 2;  ///< K >= 1
  int shards = 1;   ///< S >= 1; keys are range-partitioned (S <= model dimension)
  uint64_t seed = 1;
  /// dml-node processes ("host:port") to run the workers and shards on:
  /// worker k on node k mod N, shard s on node (K + s) mod N. Empty: all in
  /// this process. Needs data_path (each node reads it from its own disk);
  /// not for hogwild, whose workers share one in-process model.
  std::vector<std::string> nodes;

  /// SGD modes: minibatch per worker and step, and the step schedule
  /// step_t = step0 / (1 + step_decay * t), t counted in clocks.
  int batch_size = 64;
  double step0 = 0.5;
  double step_decay = 0.05;
  int staleness = 2;           ///< ssp: s
  int tau = 8;                 ///< easgd and model-averaging: local steps per exchange
  double easgd_alpha = 0.0;    ///< easgd: 0 = 0.9 / K (so beta = K alpha = 0.9)

  /// cocoa: local coordinate steps per round as a fraction of the worker's
  /// block (H = local_epochs * block size), gamma and sigma' (0 = gamma K).
  double local_epochs = 1.0;
  double gamma = 1.0;
  double sigma_prime = 0.0;

  /// Stopping: gap rules apply to cocoa (SGD modes have no gap: use
  /// max_epochs, target_primal, max_seconds or cancel). One epoch = n
  /// examples (or coordinates) processed across all workers.
  StopRule stop;
  /// SGD modes: evaluate the objective every this many epochs (each
  /// evaluation is also the restart point after a node loss).
  double eval_every_epochs = 1.0;
  /// cocoa on nodes (or with checkpoint_path): keep a checkpoint every this
  /// many rounds (the shared vector and every worker's coordinates), the
  /// restart point after a node loss; 0 = never (a loss then restarts from
  /// zero).
  int checkpoint_every = 10;
  /// If set, every checkpoint is also written here (Cap'n Proto Checkpoint
  /// of net/dml/net/wire.capnp, replaced atomically), and `resume` starts
  /// the job from that file instead of from zero.
  std::string checkpoint_path;
  bool resume = false;
  /// Jobs on nodes: a node that has not answered a liveness ping (sent
  /// every second) for this long is treated as lost, like a killed one.
  /// Catches hung processes and machines, which close no socket.
  double node_silence_seconds = 10.0;
};

struct job_result {
  ModelSpec model;
  std::vector<double> w;  ///< the model, length d
  double primal = 0.0;
  double dual = 0.0;  ///< -inf where no dual is tracked
  double gap = 0.0;   ///< +inf where no dual is tracked
  int rounds = 0;
  double epochs = 0.0;
  double seconds = 0.0;
  StopReason reason = StopReason::kMaxEpochs;
  int64_t bytes_exchanged = 0;
  std::vector<job_progress> history;
  /// ssp only: the largest clock lead over the slowest worker that any shard
  /// granted to a pull (never more than s).
  int64_t max_granted_staleness = 0;
};

namespace detail {
struct job_state;
}

/// A submitted job. Copyable (shared state); thread-safe.
class job {
 public:
  job() = default;
  /// Asks the job to stop; it finishes with StopReason::kCancelled and the
  /// model trained so far. Returns at once; idempotent.
  void cancel();
  /// Blocks until the job ends: its result, or the error that failed it
  /// (a worker's load or solver error, a lost actor, bad spec).
  absl::StatusOr<job_result> wait();
  /// As wait(), for at most `timeout`: DeadlineExceeded when the job is
  /// still running then (it goes on; wait again or cancel).
  absl::StatusOr<job_result> wait_for(std::chrono::duration<double> timeout);
  /// Whether the job has ended (wait() would return at once).
  bool done() const;
  /// Metrics entries recorded since the previous poll (pollable stream).
  std::vector<job_progress> poll();

 private:
  friend class runtime;
  explicit job(std::shared_ptr<detail::job_state> s) : state_(std::move(s)) {}
  std::shared_ptr<detail::job_state> state_;
};

struct runtime_options {
  /// Scheduler threads of the runtime's actor system (0 = hardware threads).
  int threads = 0;
  /// Jobs on nodes: send large vectors (>= 128 KiB) over the bulk channel
  /// (dml/net/bulk.hpp; single copy between processes of one machine)
  /// instead of inside CAF's messages. Nodes must be able to connect back
  /// to this process on the address it uses to reach them.
  bool bulk = true;
  /// The shared secret of dml-node processes started with --secret-file:
  /// this runtime proves it to each node before using it (HMAC challenge,
  /// dml/net/admission.hpp; the secret itself never crosses the network).
  /// Empty: only nodes without a secret can be used.
  std::string cluster_secret;
};

/// Counters of a runtime's bulk channel (large vectors of jobs on nodes,
/// carried beside CAF's messages).
struct transport_stats {
  uint64_t bulk_offers = 0;       ///< vectors this process handed out by reference
  uint64_t bulk_fetches = 0;      ///< vectors it fetched from peers
  uint64_t bulk_single_copy = 0;  ///< ... of which by a single copy (same machine)
  uint64_t bulk_bytes = 0;        ///< bytes fetched
};

class runtime {
 public:
  explicit runtime(runtime_options options = {});
  /// Cancels running jobs and waits until their actors have stopped.
  ~runtime();
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  /// Validates `spec` and starts the job. `on_progress` (optional) is called
  /// for every metrics entry on a runtime thread: keep it short, and do not
  /// call wait() from it. Errors: InvalidArgument naming the bad field.
  absl::StatusOr<job> submit(job_spec spec,
                             std::function<void(const job_progress&)> on_progress = {});

  /// This runtime's transport counters so far. Thread-safe.
  transport_stats transport() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace dml
