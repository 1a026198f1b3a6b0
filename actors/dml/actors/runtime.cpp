#include "dml/actors/runtime.hpp"

#include <chrono>
#include <cmath>
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
#include "dml/actors/network.hpp"
#include "dml/actors/node.hpp"
#include "dml/actors/register_types.hpp"
#include "dml/actors/topology/topology.hpp"
#include "dml/util/status.hpp"

namespace dml {

bool IsSgdMode(Mode mode) { return !actors::MakeTopology(mode)->coordinator_rounds(); }

// ------------------------------------------------------------------ job

void job::cancel() {
  if (state_) state_->request_cancel();
}

absl::StatusOr<job_result> job::wait() {
  if (!state_) return absl::FailedPreconditionError("job handle is empty");
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait(lock, [this] { return state_->finished; });
  return state_->result;
}

absl::StatusOr<job_result> job::wait_for(std::chrono::duration<double> timeout) {
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

bool job::done() const {
  if (!state_) return true;
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->finished;
}

std::vector<job_progress> job::poll() {
  if (!state_) return {};
  std::lock_guard<std::mutex> lock(state_->mu);
  std::vector<job_progress> out;
  out.swap(state_->unpolled);
  return out;
}

// -------------------------------------------------------------- runtime

namespace {

absl::Status Invalid(std::string_view field, std::string what) {
  return absl::InvalidArgumentError(absl::StrCat("job_spec.", AsAbsl(field), ": ", what));
}

absl::Status ValidateSpec(const job_spec& s) {
  if ((s.data != nullptr) == !s.data_path.empty()) {
    return Invalid("data", "give either an in-memory dataset or data_path (exactly one)");
  }
  if (auto st = Validate(s.model); !st.ok()) {
    return Invalid("model", std::string(st.message()));
  }
  if (s.workers < 1) return Invalid("workers", absl::StrCat("must be >= 1, got ", s.workers));
  if (s.shards < 1) return Invalid("shards", absl::StrCat("must be >= 1, got ", s.shards));
  if (s.batch_size < 1) return Invalid("batch_size", absl::StrCat("must be >= 1, got ", s.batch_size));
  if (!(s.step0 > 0) || !std::isfinite(s.step0)) {
    return Invalid("step0", absl::StrCat("must be positive and finite, got ", s.step0));
  }
  if (!(s.step_decay >= 0) || !std::isfinite(s.step_decay)) {
    return Invalid("step_decay", absl::StrCat("must be >= 0 and finite, got ", s.step_decay));
  }
  if (s.staleness < 0) return Invalid("staleness", absl::StrCat("must be >= 0, got ", s.staleness));
  if (s.tau < 1) return Invalid("tau", absl::StrCat("must be >= 1, got ", s.tau));
  if (!(s.easgd_alpha >= 0 && s.easgd_alpha < 1)) {
    return Invalid("easgd_alpha", absl::StrCat("must be in [0, 1), got ", s.easgd_alpha));
  }
  if (!(s.local_epochs > 0) || !std::isfinite(s.local_epochs)) {
    return Invalid("local_epochs", absl::StrCat("must be positive, got ", s.local_epochs));
  }
  if (!(s.gamma > 0 && s.gamma <= 1)) {
    return Invalid("gamma", absl::StrCat("must be in (0, 1], got ", s.gamma));
  }
  if (!(s.sigma_prime >= 0) || !std::isfinite(s.sigma_prime)) {
    return Invalid("sigma_prime", absl::StrCat("must be >= 0 (0 = gamma K), got ", s.sigma_prime));
  }
  if (!(s.eval_every_epochs > 0)) {
    return Invalid("eval_every_epochs", absl::StrCat("must be positive, got ", s.eval_every_epochs));
  }
  if (s.stop.max_epochs < 1) {
    return Invalid("stop.max_epochs", absl::StrCat("must be >= 1, got ", s.stop.max_epochs));
  }
  if (!(s.node_silence_seconds >= 0.1 && s.node_silence_seconds <= 3600)) {
    return Invalid("node_silence_seconds",
                   absl::StrCat("must be in [0.1, 3600], got ", s.node_silence_seconds));
  }
  if (s.checkpoint_every < 0) {
    return Invalid("checkpoint_every", absl::StrCat("must be >= 0, got ", s.checkpoint_every));
  }
  if (s.resume && s.checkpoint_path.empty()) {
    return Invalid("resume", "needs checkpoint_path (the file to resume from)");
  }
  const bool shared_memory = !actors::MakeTopology(s.mode)->uses_shards();
  if (shared_memory && (!s.checkpoint_path.empty() || s.resume)) {
    return Invalid("checkpoint_path", "hogwild jobs are not checkpointed");
  }
  if (!s.nodes.empty()) {
    if (s.data) {
      return Invalid("data", "an in-memory dataset cannot be sent to nodes; set data_path "
                             "(every node reads it from its own disk)");
    }
    if (shared_memory) {
      return Invalid("mode", "hogwild workers share one in-process model and cannot run on "
                             "nodes; use async or ssp across processes");
    }
  }
  if (s.data) {
    if (s.data->x.rows() < s.workers) {
      return Invalid("workers", absl::StrCat(s.workers, " workers for ", s.data->x.rows(),
                                             " examples"));
    }
    if (static_cast<int64_t>(s.data->y.size()) != s.data->x.rows()) {
      return Invalid("data", absl::StrCat(s.data->x.rows(), " rows but ", s.data->y.size(),
                                          " labels"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

struct runtime::impl {
  explicit impl(const runtime_options& o) : options(o), cfg(o.threads), sys(cfg) {}
  runtime_options options;
  actors::process_config cfg;
  caf::actor_system sys;
  std::mutex mu;
  std::vector<std::weak_ptr<detail::job_state>> jobs;
  // Node connections by "host:port", reused across jobs.
  std::map<std::string, actors::node_actor> nodes;

  // The first job on nodes starts this process's bulk channel (its large
  // vectors then travel beside CAF), on the address this machine uses to
  // reach that node. Failing to serve is no error: vectors stay inline.
  absl::Status serve_bulk(const std::string& host, uint16_t port) {
    if (!options.bulk || cfg.bulk().serving()) return absl::OkStatus();
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
      if (!hp.ok()) return Invalid(absl::StrCat("nodes[", i, "]"), std::string(hp.status().message()));
      if (auto s = serve_bulk(hp->first, hp->second); !s.ok()) return s;
      auto node = sys.middleman().remote_actor<actors::node_actor>(hp->first, hp->second);
      if (!node) {
        return absl::UnavailableError(absl::StrCat("job_spec.nodes[", i, "] (", addrs[i],
                                                   "): cannot connect: ",
                                                   sys.render(node.error())));
      }
      {
        caf::scoped_actor self{sys};
        if (auto s = actors::AdmitTo(self, *node, options.cluster_secret, std::chrono::seconds(30));
            !s.ok()) {
          return absl::Status(s.code(), absl::StrCat("job_spec.nodes[", i, "] (", addrs[i],
                                                     "): ", s.message()));
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      nodes.emplace(addrs[i], *node);
      out.push_back(*node);
    }
    return out;
  }
};

runtime::runtime(runtime_options options) : impl_(std::make_unique<impl>(options)) {}

runtime::~runtime() {
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

absl::StatusOr<job> runtime::submit(job_spec spec,
                                    std::function<void(const job_progress&)> on_progress) {
  if (auto st = ValidateSpec(spec); !st.ok()) return st;
  std::vector<actors::node_actor> nodes;
  if (!spec.nodes.empty()) {
    auto connected = impl_->connect(spec.nodes);
    if (!connected.ok()) return connected.status();
    nodes = std::move(*connected);
  }
  auto state = std::make_shared<detail::job_state>();
  state->on_progress = std::move(on_progress);
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
  return job(state);
}

transport_stats runtime::transport() const {
  const net::BulkStats b = impl_->cfg.bulk().stats();
  transport_stats t;
  t.bulk_offers = b.offers;
  t.bulk_fetches = b.fetches;
  t.bulk_single_copy = b.single_copy;
  t.bulk_bytes = b.bytes;
  return t;
}

}  // namespace dml
