#include "dml/actors/runtime.hpp"

#include <chrono>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <map>

#include "absl/strings/str_cat.h"
#include "dml/actors/coordinator.hpp"
#include "dml/actors/internal/job_state.hpp"
#include "dml/actors/job_plan.hpp"
#include "dml/actors/network.hpp"
#include "dml/actors/node.hpp"
#include "dml/actors/register_types.hpp"
#include "dml/actors/topology/topology.hpp"
#include "dml/actors/transport.hpp"
#include "dml/actors/worker.hpp"
#include "dml/util/status.hpp"

namespace dml {

bool IsSgdMode(Mode mode) { return !actors::MakeTopology(mode)->coordinator_rounds(); }

// ------------------------------------------------------------------ job

void Job::Cancel() {
  if (state_) state_->request_cancel();
}

absl::StatusOr<TrainResult> Job::Wait() {
  if (!state_) return absl::FailedPreconditionError("job handle is empty");
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait(lock, [this] { return state_->finished; });
  return state_->result;
}

absl::StatusOr<TrainResult> Job::WaitFor(std::chrono::duration<double> timeout) {
  if (!state_) return absl::FailedPreconditionError("job handle is empty");
  std::unique_lock<std::mutex> lock(state_->mu);
  const auto wait = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::max(timeout, std::chrono::duration<double>::zero()));
  if (!state_->cv.wait_for(lock, wait, [this] { return state_->finished; })) {
    return absl::DeadlineExceededError(
        absl::StrCat("job still running after ", timeout.count(), " s"));
  }
  return state_->result;
}

bool Job::Done() const {
  if (!state_) return true;
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->finished;
}

std::vector<Progress> Job::Poll() {
  if (!state_) return {};
  std::lock_guard<std::mutex> lock(state_->mu);
  std::vector<Progress> out;
  out.swap(state_->unpolled);
  return out;
}

// -------------------------------------------------------------- runtime

int AutoTau(const Dataset& data, int batch) {
  const double rows = static_cast<double>(std::max<int64_t>(1, data.x.rows()));
  const double mean_nnz = std::max(1.0, static_cast<double>(data.x.nnz()) / rows);
  const double steps = 2.0 * static_cast<double>(data.x.cols()) /
                       (static_cast<double>(std::max(1, batch)) * mean_nnz);
  return static_cast<int>(std::min(1024.0, std::max(8.0, std::ceil(steps))));
}

namespace {

absl::Status Invalid(std::string_view field, std::string what) {
  return absl::InvalidArgumentError(absl::StrCat("JobSpec.", AsAbsl(field), ": ", what));
}

absl::Status ValidateSpec(const JobSpec& s) {
  if ((s.data.dataset != nullptr) == !s.data.path.empty()) {
    return Invalid("data", "give either an in-memory dataset or a path (exactly one)");
  }
  if (auto st = Validate(s.model); !st.ok()) {
    return Invalid("model", std::string(st.message()));
  }
  if (static_cast<int>(s.mode.kind) < 0 || static_cast<int>(s.mode.kind) > static_cast<int>(kLastMode)) {
    return Invalid("mode.kind", absl::StrCat(static_cast<int>(s.mode.kind), " is not a Mode"));
  }
  if (!(s.stop.gap_rel >= 0) || !(s.stop.gap_abs >= 0)) {
    return Invalid("stop", absl::StrCat("gap tolerances must be >= 0, got gap_rel ", s.stop.gap_rel,
                                        ", gap_abs ", s.stop.gap_abs));
  }
  if (std::isnan(s.stop.max_seconds) || (s.stop.target_primal && std::isnan(*s.stop.target_primal))) {
    return Invalid("stop", "max_seconds and target_primal must be numbers (infinity: no time "
                           "budget), not NaN");
  }
  if (s.mode.workers < 1) return Invalid("mode.workers", absl::StrCat("must be >= 1, got ", s.mode.workers));
  if (s.mode.shards < 1) return Invalid("mode.shards", absl::StrCat("must be >= 1, got ", s.mode.shards));
  // A batch is sampled as a list of its rows: INT_MAX of them was 16 GiB.
  if (s.sgd.batch_size < 0 || s.sgd.batch_size > (1 << 24)) {
    return Invalid("sgd.batch_size",
                   absl::StrCat("must be in [0, 16777216] (0: auto), got ", s.sgd.batch_size));
  }
  if (!(s.sgd.step0 >= 0) || !std::isfinite(s.sgd.step0)) {
    return Invalid("sgd.step0", absl::StrCat("must be >= 0 (0: calibrated) and finite, got ",
                                             s.sgd.step0));
  }
  if (!std::isfinite(s.sgd.step_decay)) {
    return Invalid("sgd.step_decay", absl::StrCat("must be finite (< 0: lambda step0), got ",
                                                  s.sgd.step_decay));
  }
  if (s.sgd.momentum != 0) {
    return Invalid("sgd.momentum", absl::StrCat("the SGD modes take no momentum (must be 0), got ",
                                                s.sgd.momentum));
  }
  if (s.sgd.certificate_cg_steps < -1 || s.sgd.certificate_cg_steps > 1000) {
    return Invalid("sgd.certificate_cg_steps",
                   absl::StrCat("must be in [-1, 1000] (-1: the plain certificate), got ",
                                s.sgd.certificate_cg_steps));
  }
  if (s.sgd.staleness < 0) return Invalid("sgd.staleness", absl::StrCat("must be >= 0, got ", s.sgd.staleness));
  // SVRG and SAGA correct gradients on the shards' clocks: sync, async, ssp.
  const bool variance_reducible =
      s.mode.kind == Mode::kSync || s.mode.kind == Mode::kAsync || s.mode.kind == Mode::kSsp;
  for (const auto& [on, field] : {std::pair<bool, const char*>{s.sgd.svrg, "sgd.svrg"},
                                  {s.sgd.saga, "sgd.saga"}}) {
    if (on && !variance_reducible) {
      return Invalid(field, absl::StrCat("modes sync, async and ssp only, not ",
                                         AsAbsl(ModeName(s.mode.kind))));
    }
  }
  if (s.sgd.saga && s.sgd.svrg) {
    return Invalid("sgd.saga", "SAGA and SVRG are alternatives: choose one");
  }
  if (s.sgd.tau < 0) {
    return Invalid("sgd.tau", absl::StrCat("must be >= 1, or 0 for AutoTau, got ", s.sgd.tau));
  }
  if (!(s.sgd.easgd_alpha >= 0 && s.sgd.easgd_alpha < 1)) {
    return Invalid("sgd.easgd_alpha", absl::StrCat("must be in [0, 1), got ", s.sgd.easgd_alpha));
  }
  // Bounded: H times a block's size is a step count (1e18 overflowed to 1 step).
  if (!(s.cocoa.local_epochs > 0 && s.cocoa.local_epochs <= 1e6)) {
    return Invalid("cocoa.local_epochs",
                   absl::StrCat("must be in (0, 1e6], got ", s.cocoa.local_epochs));
  }
  if (!(s.cocoa.gamma > 0 && s.cocoa.gamma <= 1)) {
    return Invalid("cocoa.gamma", absl::StrCat("must be in (0, 1], got ", s.cocoa.gamma));
  }
  if (!(s.cocoa.sigma_prime >= 0) || !std::isfinite(s.cocoa.sigma_prime)) {
    return Invalid("cocoa.sigma_prime", absl::StrCat("must be >= 0 (0 = gamma K), got ", s.cocoa.sigma_prime));
  }
  if (s.cocoa.local_solver != SolverKind::kScd && s.cocoa.local_solver != SolverKind::kTpaScd &&
      s.cocoa.local_solver != SolverKind::kDuhl) {
    return Invalid("cocoa.local_solver", absl::StrCat("must be scd, tpa-scd or duhl, got ",
                                                      AsAbsl(SolverName(s.cocoa.local_solver))));
  }
  if (s.cocoa.device < 0) {
    return Invalid("cocoa.device", absl::StrCat("must be >= 0, got ", s.cocoa.device));
  }
  // DuHL's rounds solve the CoCoA+ subproblem with sigma' >= 1 (its Solve
  // refuses less): said here, by field, not by worker 0 after the load.
  if (s.mode.kind == Mode::kDuhl || s.cocoa.local_solver == SolverKind::kDuhl) {
    const double sigma = actors::ResolveSigmaPrime(s);
    if (!(sigma >= 1.0)) {
      return Invalid(s.cocoa.sigma_prime > 0 ? "cocoa.sigma_prime" : "cocoa.gamma",
                     absl::StrCat("DuHL needs sigma' = ", s.cocoa.sigma_prime > 0 ? "" : "gamma * workers ",
                                  ">= 1; got ", sigma));
    }
  }
  const DuhlConfig& duhl = s.cocoa.duhl;
  if (duhl.device_bytes < 0) {
    return Invalid("cocoa.duhl.device_bytes", absl::StrCat("must be >= 0, got ", duhl.device_bytes));
  }
  if (!(duhl.device_fraction > 0 && duhl.device_fraction <= 1)) {
    return Invalid("cocoa.duhl.device_fraction",
                   absl::StrCat("must be in (0, 1], got ", duhl.device_fraction));
  }
  if (duhl.gap_threads < 0 || duhl.gap_threads > 1024) {
    return Invalid("cocoa.duhl.gap_threads",
                   absl::StrCat("must be in [0, 1024], got ", duhl.gap_threads));
  }
  if (!(duhl.passes > 0 && duhl.passes <= 1e6)) {
    return Invalid("cocoa.duhl.passes", absl::StrCat("must be in (0, 1e6], got ", duhl.passes));
  }
  if (!(s.sgd.eval_every_epochs > 0)) {
    return Invalid("sgd.eval_every_epochs", absl::StrCat("must be positive, got ", s.sgd.eval_every_epochs));
  }
  if (s.stop.max_epochs < 1) {
    return Invalid("stop.max_epochs", absl::StrCat("must be >= 1, got ", s.stop.max_epochs));
  }
  if (!(s.recovery.node_silence_seconds >= 0.1 && s.recovery.node_silence_seconds <= 3600)) {
    return Invalid("recovery.node_silence_seconds",
                   absl::StrCat("must be in [0.1, 3600], got ", s.recovery.node_silence_seconds));
  }
  if (s.recovery.checkpoint_every < 0) {
    return Invalid("recovery.checkpoint_every", absl::StrCat("must be >= 0, got ", s.recovery.checkpoint_every));
  }
  if (s.recovery.resume && s.recovery.path.empty()) {
    return Invalid("recovery.resume", "needs recovery.path (the file to resume from)");
  }
  const bool shared_memory = !actors::MakeTopology(s.mode.kind)->uses_shards();
  if (s.sgd.store == JobSgd::Store::kKv && !shared_memory) {
    return Invalid("sgd.store", absl::StrCat("the key-value store holds hogwild's model; mode ",
                                             AsAbsl(ModeName(s.mode.kind)),
                                             " keeps its model on the parameter shards"));
  }
  if (s.sgd.localize && s.sgd.store != JobSgd::Store::kKv) {
    return Invalid("sgd.localize", "needs sgd.store = kKv (keys move between key-value nodes)");
  }
  if (s.sgd.kv_block < 1) return Invalid("sgd.kv_block", absl::StrCat(s.sgd.kv_block, " < 1"));
  if (shared_memory && (!s.recovery.path.empty() || s.recovery.resume)) {
    return Invalid("recovery.path", "hogwild jobs are not checkpointed");
  }
  if (!s.cluster.nodes.empty()) {
    if (s.data.dataset) {
      return Invalid("data", "an in-memory dataset cannot be sent to nodes; set data.path "
                             "(every node reads it from its own disk)");
    }
    if (shared_memory) {
      // One key-value member per node process and job.
      for (std::size_t i = 0; i < s.cluster.nodes.size(); ++i) {
        for (std::size_t j = 0; j < i; ++j) {
          if (s.cluster.nodes[i] == s.cluster.nodes[j]) {
            return Invalid("cluster.nodes",
                           absl::StrCat("[", i, "] (", s.cluster.nodes[i], ") repeats [", j,
                                        "]: hogwild's key-value group has one member per node "
                                        "process"));
          }
        }
      }
    }
    if (shared_memory && s.sgd.store != JobSgd::Store::kKv) {
      return Invalid("sgd.store", "hogwild on nodes needs the key-value store (kKv): its model "
                                  "then lives in a key-value group across the nodes; the "
                                  "in-memory model exists only inside one process");
    }
  }
  if (s.data.dataset) {
    if (s.data.dataset->x.rows() < s.mode.workers) {
      return Invalid("mode.workers", absl::StrCat(s.mode.workers, " workers for ", s.data.dataset->x.rows(),
                                             " examples"));
    }
    if (static_cast<int64_t>(s.data.dataset->y.size()) != s.data.dataset->x.rows()) {
      return Invalid("data", absl::StrCat(s.data.dataset->x.rows(), " rows but ", s.data.dataset->y.size(),
                                          " labels"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

struct Runtime::Impl {
  explicit Impl(const RuntimeOptions& o)
      : options(o),
        cfg(o.threads),
        tls(actors::ConfigureTls(cfg, {o.tls_cert, o.tls_key, o.tls_ca})),
        sys(cfg) {
    if (o.max_frame_bytes != 0) actors::SetMaxFrameBytes(o.max_frame_bytes);
  }
  // Destroyed after sys: hogwild's key-value groups, stopped on threads of
  // their own as the workers exit, are stopped before the runtime is gone.
  struct kv_shutdowns {
    ~kv_shutdowns() {
      if (!actors::AwaitKvShutdowns(std::chrono::seconds(30))) {
        std::fprintf(stderr, "dml: a hogwild key-value group did not stop within 30 s\n");
      }
    }
  };
  RuntimeOptions options;
  kv_shutdowns kv_stopped;
  actors::process_config cfg;
  absl::Status tls;  // why the TLS files were refused (then every Submit fails)
  caf::actor_system sys;
  std::mutex mu;
  std::vector<std::weak_ptr<detail::job_state>> jobs;
  // Node connections by "host:port", reused across jobs.
  std::map<std::string, actors::node_actor> nodes;
  // By "host:port": how many processes the bulk peer table last sent there
  // named.
  std::map<std::string, std::size_t> table_sent;

  // The first job on nodes starts this process's bulk channel (its large
  // vectors then travel beside CAF), on the address this machine uses to
  // reach that node. Failing to serve is no error: vectors stay inline.
  absl::Status serve_bulk(const std::string& host, uint16_t port) {
    // With TLS, no plaintext side channel: vectors stay inside TLS.
    if (!options.bulk || cfg.bulk().serving() || actors::TlsOn(sys)) return absl::OkStatus();
    auto local = net::LocalAddressFor(host, port);
    if (!local.ok()) {
      return absl::UnavailableError(absl::StrCat("no route to node ", host, ":", port, ": ",
                                                 local.status().message()));
    }
    (void)cfg.bulk().Serve(*local);
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<actors::node_actor>> connect(const std::vector<std::string>& addrs) {
    std::vector<actors::node_actor> out;
    for (std::size_t i = 0; i < addrs.size(); ++i) {
      {
        std::lock_guard<std::mutex> lock(mu);
        auto it = nodes.find(addrs[i]);
        if (it != nodes.end()) {
          out.push_back(it->second);
          continue;
        }
      }
      auto hp = actors::ParseHostPort(addrs[i]);
      if (!hp.ok()) return Invalid(absl::StrCat("cluster.nodes[", i, "]"), std::string(hp.status().message()));
      if (auto s = serve_bulk(hp->first, hp->second); !s.ok()) return s;
      auto node = actors::RemoteActor<actors::node_actor>(sys, hp->first, hp->second);
      if (!node) {
        const std::string why = sys.render(node.error());
        // A TLS node drops a plaintext handshake (and the reverse): say so.
        const char* hint = why.find("disconnect_during_handshake") == std::string::npos ? ""
                           : actors::TlsOn(sys)
                               ? " (is the node using TLS with a certificate our CA signed, and "
                                 "do we hold one its CA signed?)"
                               : " (a node started with --tls-cert refuses plaintext: give "
                                 "RuntimeOptions.tls_cert/tls_key, dml-train --tls-cert/--tls-key)";
        return absl::UnavailableError(absl::StrCat("JobSpec.cluster.nodes[", i, "] (", addrs[i],
                                                   "): cannot connect: ", why, hint));
      }
      {
        caf::scoped_actor self{sys};
        if (auto s = actors::AdmitTo(self, *node, options.cluster_secret, std::chrono::seconds(30));
            !s.ok()) {
          return absl::Status(s.code(), absl::StrCat("JobSpec.cluster.nodes[", i, "] (", addrs[i],
                                                     "): ", s.message()));
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      nodes.emplace(addrs[i], *node);
      out.push_back(*node);
    }
    // Every node learns where the job's other processes serve their bulk
    // references (messages between nodes are relayed through this one):
    // sent again only when a process joined since (a node that went silent
    // is then found by the job's start-up, not here).
    const actors::BulkPeers* peers = actors::BulkPeersOf(sys);
    const std::size_t known = peers != nullptr ? peers->size() : 0;
    caf::scoped_actor self{sys};
    for (std::size_t i = 0; i < out.size(); ++i) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (table_sent[addrs[i]] == known) continue;
      }
      if (auto s = actors::SendPeerTable(self, out[i], std::chrono::seconds(30)); !s.ok()) {
        return absl::Status(s.code(), absl::StrCat("JobSpec.cluster.nodes[", i, "] (", addrs[i],
                                                   "): ", s.message()));
      }
      std::lock_guard<std::mutex> lock(mu);
      table_sent[addrs[i]] = known;
    }
    return out;
  }
};

Runtime::Runtime(RuntimeOptions options) : impl_(std::make_unique<Impl>(options)) {}

Runtime::~Runtime() {
  std::vector<std::shared_ptr<detail::job_state>> live;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    for (auto& w : impl_->jobs) {
      if (auto s = w.lock()) live.push_back(std::move(s));
    }
  }
  for (auto& s : live) s->request_cancel();
  // Coordinators see the flag within a tick and stop their actors; the
  // actor system's destructor then waits for the last of them.
  for (auto& s : live) {
    std::unique_lock<std::mutex> lock(s->mu);
    s->cv.wait(lock, [&] { return s->finished; });
  }
}

absl::StatusOr<Job> Runtime::Submit(JobSpec spec,
                                    std::function<void(const Progress&)> on_progress) {
  if (!impl_->tls.ok()) return absl::InvalidArgumentError(absl::StrCat("RuntimeOptions: ", impl_->tls.message()));
  if (auto st = ValidateSpec(spec); !st.ok()) return st;
  std::vector<actors::node_actor> nodes;
  if (!spec.cluster.nodes.empty()) {
    auto connected = impl_->connect(spec.cluster.nodes);
    if (!connected.ok()) return connected.status();
    nodes = std::move(*connected);
  }
  if (!spec.cluster.nodes.empty() && spec.sgd.store == JobSgd::Store::kKv && actors::TlsOn(impl_->sys)) {
    return absl::InvalidArgumentError(
        "JobSpec.sgd.store: hogwild's key-value group on nodes does not run under TLS (its "
        "connections would carry the model in plaintext); use async or ssp");
  }
  auto state = std::make_shared<detail::job_state>();
  state->on_progress = std::move(on_progress);
  state->cluster_secret = impl_->options.cluster_secret;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    // Forget finished jobs so a long-lived runtime does not accumulate them.
    std::vector<std::weak_ptr<detail::job_state>> keep;
    for (auto& w : impl_->jobs) {
      if (!w.expired()) keep.push_back(std::move(w));
    }
    keep.push_back(state);
    impl_->jobs = std::move(keep);
  }
  auto coord = actors::spawn_coordinator(impl_->sys, std::move(spec), state, std::move(nodes));
  caf::anon_send(coord, actors::start_atom_v);
  return Job(state);
}

TransportStats Runtime::Transport() const {
  const net::BulkStats b = impl_->cfg.bulk().stats();
  TransportStats t;
  t.bulk_offers = b.offers;
  t.bulk_fetches = b.fetches;
  t.bulk_single_copy = b.single_copy;
  t.bulk_bytes = b.bytes;
  return t;
}

}  // namespace dml
