#pragma once
// The embedding API: a host service creates a dml::Runtime, describes a
// training job in code (data, model, mode = actor topology, K workers, S
// shards, stopping rule), submits it and gets a dml::Job handle for progress,
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

/// Where a job's data comes from: exactly one of `dataset` (in memory,
/// handed over by the host; shared, never copied per worker) or `path`
/// (every worker loads the file itself and keeps its own partition).
struct JobData {
  std::shared_ptr<const Dataset> dataset;
  std::string path;
  LibsvmOptions load;  ///< how each worker parses `path`
};

/// The topology: which mode, and how many actors of each kind.
struct JobTopology {
  Mode kind = Mode::kCocoa;  ///< the training mode
  int workers = 2;  ///< K >= 1
  int shards = 1;   ///< S >= 1; keys are range-partitioned (S <= model dimension)
  uint64_t seed = 1;  ///< seeds every worker's minibatches or coordinate order
};

/// SGD modes: libdml's step schedule (batch per worker and step; t counted
/// in clocks, one minibatch per worker each; `momentum` must stay 0) and the
/// modes' own parameters.
struct JobSgd : SgdOptions {
  int staleness = 2;         ///< ssp: s
  /// easgd and model-averaging: local steps per exchange; 0: 8 for easgd,
  /// AutoTau of the in-memory dataset for model averaging (8 for a job that
  /// names only a path). easgd's elastic pull weakens with a longer period:
  /// on news20, K = 4, tau 24 took 1050 epochs to 1e-3 against 722 with 8.
  int tau = 0;
  double easgd_alpha = 0.0;  ///< easgd: 0 = 0.9 / K (so beta = K alpha = 0.9)
  /// Evaluate the objective every this many epochs (each evaluation is also
  /// the restart point after a node loss).
  double eval_every_epochs = 1.0;
  /// sync, async, ssp: SVRG (Prox-SVRG). Every evaluation's model is the
  /// snapshot: the certificate pass already sums its full loss gradient mu,
  /// which goes to every worker with its rows' derivatives kept from that
  /// pass; a worker then pushes (1/|B|) sum (loss'_i(w) - loss'_i(snapshot))
  /// x_i + mu. The pushes are dense (mu): it pays where d is small against
  /// a minibatch's nonzeros, or the target is tight (bench/results).
  bool svrg = false;
  /// sync, async, ssp: SAGA (asynchronous: ASAGA, Leblond et al. 2018),
  /// with the regulariser's prox. Each worker remembers the loss' of each
  /// of its rows when last drawn and pushes (1/|B|) sum (loss'_i(w) -
  /// remembered_i) x_i (sparse: dml::SagaGradient); each shard keeps the
  /// mean of every row's remembered gradient for its range and adds it to
  /// each step. No snapshots, no dense pushes, but a dense pass over a
  /// shard's range per step. A lost node restarts the job from its last
  /// evaluation with every memory empty (a replacement worker's memories
  /// are gone; the shards' mean would still hold them). Not with svrg.
  bool saga = false;
  /// hogwild: where the shared model lives. kMemory: one array of relaxed
  /// atomics in this process. kKv: the key-value store of
  /// dml/actors/kv.hpp, one node per worker (in this process; on nodes, one
  /// per node, JobCluster::nodes), keys = the model's coordinates: each worker samples its own rows, pulls the
  /// columns its minibatch touches, takes the Hogwild step on them and
  /// pushes the change (increments: concurrent steps add, none is lost).
  enum class Store { kMemory, kKv };
  Store store = Store::kMemory;
  /// kKv: each worker localizes the columns of its next minibatch while it
  /// computes this one (latency hiding), so they are served in place.
  bool localize = false;
  /// kKv: coordinates per ownership block (>= 1).
  int64_t kv_block = 1;
};

/// Model averaging's default exchange period for `data` with
/// `batch` rows per step: at least 8 steps, and enough that an exchange
/// (the whole model, both ways) moves no more values than the steps between
/// two exchanges read nonzeros: ceil(2 d / (batch * mean nonzeros per row)),
/// at most 1024. On a 1M x 100k set with 20 nonzeros a row and batch 64
/// model averaging exchanged 3.2 GB per epoch with 8 and took 2.2x the
/// tuned run's time (bench/results/modes_gen1Mx100k_defaults_k2.txt).
int AutoTau(const Dataset& data, int batch);

/// Checkpoints and node loss.
struct JobRecovery {
  /// cocoa on nodes (or with `path`): keep a checkpoint every this many
  /// rounds (the shared vector and every worker's coordinates), the restart
  /// point after a node loss; 0 = never (a loss then restarts from zero).
  int checkpoint_every = 10;
  /// If set, every checkpoint is also written here (Cap'n Proto Checkpoint
  /// of net/dml/net/wire.capnp, replaced atomically), and `resume` starts
  /// the job from that file instead of from zero.
  std::string path;
  bool resume = false;  ///< start from the checkpoint at `path`
  /// Jobs on nodes: a node that has not answered a liveness ping (sent
  /// every second) for this long is treated as lost, like a killed one.
  /// Catches hung processes and machines, which close no socket.
  double node_silence_seconds = 10.0;
};

/// Where the actors run.
struct JobCluster {
  /// dml-node processes ("host:port"): worker k on node k mod N, shard s on
  /// node (K + s) mod N. Empty: all in this process. Needs data.path (each
  /// node reads it from its own disk). hogwild only with the key-value store
  /// (JobSgd::Store::kKv): a group of one member per node with workers plus
  /// one in this process (rank 0, which reads the model for evaluations),
  /// listening on each node's host on a free port; not under TLS, and a
  /// node's loss fails the job (its keys are gone).
  std::vector<std::string> nodes;
};

/// One job, built in code, in parts. Every default is one of libdml's
/// (SgdOptions, CocoaOptions, StopRule) or stated here.
struct JobSpec {
  JobData data;
  ModelSpec model;
  JobTopology mode;
  JobSgd sgd;          ///< SGD modes only
  CocoaOptions cocoa;  ///< cocoa only
  /// Stopping: gap rules apply to cocoa (SGD modes have no gap: use
  /// max_epochs, target_primal, max_seconds or cancel). One epoch = n
  /// examples (or coordinates) processed across all workers.
  StopRule stop;
  JobRecovery recovery;
  JobCluster cluster;  ///< empty: everything in this process
};

namespace detail {
struct job_state;
}

/// A submitted job. Copyable (shared state); thread-safe.
class Job {
 public:
  /// An empty handle: Wait and WaitFor return FailedPrecondition, Done is
  /// true, Poll is empty, Cancel does nothing.
  Job() = default;
  /// Asks the job to stop; it finishes with StopReason::kCancelled and the
  /// model trained so far. Returns at once; idempotent.
  void Cancel();
  /// Blocks until the job ends: its result, or the error that failed it
  /// (a worker's load or solver error, a lost actor, bad spec).
  /// FailedPrecondition for an empty handle.
  absl::StatusOr<TrainResult> Wait();
  /// As Wait(), for at most `timeout`: DeadlineExceeded when the job is
  /// still running then (it goes on; wait again or cancel).
  absl::StatusOr<TrainResult> WaitFor(std::chrono::duration<double> timeout);
  /// Whether the job has ended (Wait() would return at once).
  bool Done() const;
  /// Metrics entries recorded since the previous poll (pollable stream).
  std::vector<Progress> Poll();

 private:
  friend class Runtime;
  explicit Job(std::shared_ptr<detail::job_state> s) : state_(std::move(s)) {}
  std::shared_ptr<detail::job_state> state_;
};

/// How a Runtime is set up.
struct RuntimeOptions {
  /// Scheduler threads of the runtime's actor system (0 = hardware threads;
  /// at most 1024, more are taken as 1024).
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
  /// TLS to nodes (dml/actors/transport.hpp): PEM certificate and key; with
  /// `tls_ca`, nodes must present a certificate it signed (and they check
  /// ours the same way). All empty: plaintext. With TLS the bulk channel is
  /// off: large vectors travel inside the TLS connections. A bad file makes
  /// every Submit fail with InvalidArgument.
  std::string tls_cert, tls_key, tls_ca;
  /// Largest frame accepted from a peer (0: 256 MiB + 64 KiB); sets the
  /// bound for the whole process (dml/actors/transport.hpp).
  std::size_t max_frame_bytes = 0;
};

/// Counters of a runtime's bulk channel (large vectors of jobs on nodes,
/// carried beside CAF's messages).
struct TransportStats {
  uint64_t bulk_offers = 0;       ///< vectors this process handed out by reference
  uint64_t bulk_fetches = 0;      ///< vectors it fetched from peers
  uint64_t bulk_single_copy = 0;  ///< ... of which by a single copy (same machine)
  uint64_t bulk_bytes = 0;        ///< bytes fetched
};

/// Runs jobs on an actor system of its own (see the file comment for
/// ownership). Thread-safe; not copyable.
class Runtime {
 public:
  /// Starts the actor system; the bulk channel serves only once a job uses
  /// nodes.
  explicit Runtime(RuntimeOptions options = {});
  /// Cancels running jobs and waits until their actors have stopped.
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  /// Validates `spec` and starts the job. `on_progress` (optional) is called
  /// for every metrics entry on a runtime thread: keep it short, and do not
  /// call Wait() from it. Errors: InvalidArgument naming the bad field
  /// ("JobSpec.sgd.step0: ..."); for nodes, Unavailable if one cannot be
  /// reached, or AdmitTo's error, naming the node.
  absl::StatusOr<Job> Submit(JobSpec spec, std::function<void(const Progress&)> on_progress = {});

  /// This runtime's transport counters so far. Thread-safe.
  TransportStats Transport() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dml
