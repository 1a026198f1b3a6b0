#include "dml/actors/node.hpp"

#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/exit_reason.hpp>
#include <caf/node_id.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/sec.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/system_messages.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "dml/actors/kv.hpp"
#include "dml/actors/network.hpp"
#include "dml/actors/parameter_shard.hpp"
#include "dml/actors/topology/topology.hpp"
#include "dml/net/admission.hpp"
#include "dml/actors/transport.hpp"
#include "dml/actors/worker.hpp"

namespace dml::actors {
namespace {

struct node_state {
  std::string label;
  std::string secret;  // empty: everyone is admitted
  std::string kv_host;  // where key-value groups listen; empty: none served
  // Per asking process (CAF node id): its latest nonce, and who is admitted.
  net::AdmissionChallenges challenges;
  std::set<std::string> admitted;
  // Per coordinator (by address): the actors spawned for it, and the flag
  // that interrupts its workers' solves.
  struct job_actors {
    std::vector<caf::actor> actors;
    std::shared_ptr<std::atomic<bool>> interrupt = std::make_shared<std::atomic<bool>>(false);
    // hogwild: the model the job's workers here share (its key-value
    // member once the coordinator asked for it).
    std::shared_ptr<hogwild_model> hog;
    bool kv_connecting = false;  // connect asked (once per member)
  };
  std::map<caf::actor_addr, job_actors> jobs;
  static inline const char* name = "dml.node";

  int32_t hosted() const {
    std::size_t n = 0;
    for (const auto& [_, v] : jobs) n += v.actors.size();
    return static_cast<int32_t>(n);
  }
};

using self_ptr = node_actor::stateful_pointer<node_state>;

caf::error refuse(const node_state& st, std::string what) {
  return caf::make_error(caf::sec::invalid_argument, "node " + st.label + ": " + what);
}

// The process that sent the current message, as admission knows it.
std::string sender_process(self_ptr self) {
  const auto& sender = self->current_sender();
  return sender ? caf::to_string(sender->node()) : std::string();
}

// Why the sender may not spawn here, or none.
caf::error admission_error(self_ptr self) {
  auto& st = self->state;
  if (st.secret.empty() || st.admitted.count(sender_process(self)) != 0) return caf::none;
  return caf::make_error(caf::sec::invalid_argument,
                         "node " + st.label + ": not admitted: this node requires the cluster "
                         "secret (RuntimeOptions.cluster_secret, dml-train --secret-file)");
}

// The record of `coordinator`'s job here, made (and the coordinator
// watched) the first time.
node_state::job_actors& job_of(self_ptr self, const caf::actor& coordinator) {
  auto& st = self->state;
  auto addr = coordinator.address();
  auto it = st.jobs.find(addr);
  if (it == st.jobs.end()) {
    self->monitor(coordinator);
    it = st.jobs.emplace(addr, node_state::job_actors{}).first;
  }
  return it->second;
}

// Whether the current message comes from `coordinator` itself (only a job's
// coordinator sets up, connects or reads its key-value member here).
bool from_coordinator(self_ptr self, const caf::actor& coordinator) {
  const auto& sender = self->current_sender();
  return coordinator && sender && sender->address() == coordinator.address();
}

// Records `child` under its coordinator.
void adopt(self_ptr self, const caf::actor& coordinator, caf::actor child) {
  // Also watch the child, to forget it once it is gone.
  self->monitor(child);
  job_of(self, coordinator).actors.push_back(std::move(child));
}

// What this process advertises to a peer: its bulk channel's endpoint,
// encoded ("" where it serves none).
std::string OwnEndpoint(caf::actor_system& sys) {
  net::BulkChannel* own = BulkChannelOf(sys);
  return own != nullptr ? own->endpoint().Encode() : std::string();
}

}  // namespace

kv_connector spawn_kv_connector(caf::actor_system& sys, std::shared_ptr<hogwild_model> model) {
  // Detached: KvNode::Connect blocks until every lower rank introduced
  // itself, which takes as long as the slowest member.
  auto impl = [](kv_connector::pointer self,
                 std::shared_ptr<hogwild_model> model) -> kv_connector::behavior_type {
    return {
        [self, model](connect_atom, const std::string& table) -> caf::result<bool> {
          self->quit();
          if (!model || model->kv.size() != 1) {
            return caf::make_error(caf::sec::invalid_argument, "kv connect: no listening member");
          }
          std::vector<std::string> peers;
          if (!table.empty()) peers = absl::StrSplit(table, kPeerTableSeparator);
          absl::Status s = model->kv[0]->Connect(peers);
          if (!s.ok()) {
            return caf::make_error(caf::sec::runtime_error, std::string(s.message()),
                                   static_cast<int32_t>(s.code()));
          }
          return true;
        },
    };
  };
  return sys.spawn<caf::detached>(impl, std::move(model));
}

int64_list PackKvStats(const KvStats& k) {
  int64_list out;
  out.values = {k.local_keys, k.remote_keys, k.queued_keys, k.messages, k.bytes, k.blocks_in};
  return out;
}

std::optional<KvStats> UnpackKvStats(const int64_list& v) {
  if (v.values.size() != 6) return std::nullopt;
  KvStats k;
  k.local_keys = v.values[0];
  k.remote_keys = v.values[1];
  k.queued_keys = v.values[2];
  k.messages = v.values[3];
  k.bytes = v.values[4];
  k.blocks_in = v.values[5];
  return k;
}

node_actor spawn_node(caf::actor_system& sys, std::string name, std::string secret,
                      std::string kv_host) {
  // Detached: the node answers the coordinator's liveness pings from its
  // own thread, however long its workers keep the scheduler busy.
  // name and secret are spawn arguments, not captures: CAF 0.17 binds a
  // reference to a null tuple for an argument-less spawn (UBSan reports it).
  auto impl = [](self_ptr self, std::string name, std::string secret,
                 std::string kv_host) -> node_actor::behavior_type {
    self->state.label = std::move(name);
    self->state.secret = std::move(secret);
    self->state.kv_host = std::move(kv_host);
    self->set_down_handler([self](caf::down_msg& dm) {
      auto& st = self->state;
      auto job = st.jobs.find(dm.source);
      if (job != st.jobs.end()) {  // a coordinator: stop its actors here
        job->second.interrupt->store(true);
        for (auto& a : job->second.actors) self->send_exit(a, caf::exit_reason::user_shutdown);
        st.jobs.erase(job);
        return;
      }
      for (auto& [_, job] : st.jobs) {  // a child: forget it
        auto& v = job.actors;
        for (auto i = v.begin(); i != v.end(); ++i) {
          if (i->address() == dm.source) {
            v.erase(i);
            return;
          }
        }
      }
    });
    self->set_exit_handler([self](caf::exit_msg& em) {
      for (auto& [_, job] : self->state.jobs) {
        job.interrupt->store(true);
        for (auto& a : job.actors) self->send_exit(a, em.reason);
      }
      self->quit(em.reason);
    });
    return {
        [self](hello_atom) -> caf::result<std::string, int64_t, int32_t> {
          return {self->state.label, static_cast<int64_t>(::getpid()), self->state.hosted()};
        },
        [self](halt_atom, const caf::actor& coordinator) {
          // Only a job's own coordinator stops it.
          const auto& sender = self->current_sender();
          if (!coordinator || !sender || sender->address() != coordinator.address()) return;
          auto it = self->state.jobs.find(coordinator.address());
          if (it != self->state.jobs.end()) it->second.interrupt->store(true);
        },
        [self](challenge_atom) -> caf::result<std::string> {
          auto& st = self->state;
          if (st.secret.empty()) return std::string();
          return st.challenges.Issue(sender_process(self));
        },
        [self](admit_atom, const std::string& proof,
               const std::string& endpoint) -> caf::result<std::string> {
          auto& st = self->state;
          if (!self->current_sender()) return refuse(st, "admission refused: no sender");
          auto advertised = net::BulkEndpoint::Decode(endpoint);
          if (!advertised.ok()) {
            return refuse(st, "admission refused: " + std::string(advertised.status().message()));
          }
          if (!st.secret.empty()) {
            const std::string peer = sender_process(self);
            if (absl::Status s = st.challenges.Check(peer, proof, st.secret, "cluster"); !s.ok()) {
              return refuse(st, std::string(s.message()));
            }
            st.admitted.insert(peer);
            // Every later message of that process, to any actor here, passes.
            AdmitPeer(self->system(), self->current_sender()->node());
          }
          // Its bulk references are fetched from there, and only there.
          if (BulkPeers* peers = BulkPeersOf(self->system())) {
            peers->Set(self->current_sender()->node(), *std::move(advertised));
          }
          return OwnEndpoint(self->system());
        },
        [self](peers_atom, const std::string& table) -> caf::result<bool> {
          if (auto err = admission_error(self)) return err;
          auto& st = self->state;
          BulkPeers* peers = BulkPeersOf(self->system());
          if (peers == nullptr) return true;
          std::vector<std::string> entries;
          if (!table.empty()) entries = absl::StrSplit(table, kPeerTableSeparator);
          // This process's own entry stays what its channel says.
          std::vector<std::string> others;
          const std::string me = caf::to_string(self->system().node());
          for (std::size_t i = 0; i + 1 < entries.size(); i += 2) {
            if (entries[i] == me) continue;
            others.push_back(std::move(entries[i]));
            others.push_back(std::move(entries[i + 1]));
          }
          if (entries.size() % 2 != 0) others.push_back(entries.back());  // refused below
          if (absl::Status s = peers->SetAll(others); !s.ok()) {
            return refuse(st, std::string(s.message()));
          }
          return true;
        },
        [self](worker_atom, const worker_spec& spec,
               const caf::actor& coordinator) -> caf::result<caf::actor> {
          if (auto err = admission_error(self)) return err;
          auto& st = self->state;
          if (!spec.wire_error.empty()) return refuse(st, "worker spec: " + spec.wire_error);
          auto topo = MakeTopology(spec.mode);
          if (!topo) return refuse(st, "worker spec: no such mode");
          if (!coordinator) return refuse(st, "worker without a coordinator");
          auto& job = job_of(self, coordinator);
          worker_config cfg;
          static_cast<worker_spec&>(cfg) = spec;
          cfg.coordinator = coordinator;
          cfg.interrupt = job.interrupt;
          if (!topo->uses_shards()) {
            // hogwild: the job's workers here share one model, whose
            // key-value member the coordinator asks for once they loaded
            // (a run before that is refused by the worker).
            if (!job.hog) job.hog = std::make_shared<hogwild_model>();
            cfg.hogwild = job.hog;
          }
          auto w = caf::actor_cast<caf::actor>(
              spawn_worker(self->system(), std::move(cfg), /*detached=*/true));
          adopt(self, coordinator, w);
          return w;
        },
        [self](shard_atom, const shard_config& config,
               const caf::actor& coordinator) -> caf::result<caf::actor> {
          if (auto err = admission_error(self)) return err;
          auto& st = self->state;
          if (!config.wire_error.empty()) return refuse(st, "shard spec: " + config.wire_error);
          if (!coordinator) return refuse(st, "shard without a coordinator");
          auto s = caf::actor_cast<caf::actor>(
              spawn_parameter_shard(self->system(), config, coordinator));
          adopt(self, coordinator, s);
          return s;
        },
        [self](kv_atom, const caf::actor& coordinator, int64_t keys, int64_t block, bool dynamic,
               int32_t rank, int32_t nodes, int32_t first_home,
               int32_t local_workers) -> caf::result<int32_t> {
          if (auto err = admission_error(self)) return err;
          auto& st = self->state;
          if (!from_coordinator(self, coordinator)) return refuse(st, "kv: not from its coordinator");
          if (st.kv_host.empty()) {
            return refuse(st, "this node serves no key-value groups (dml-node under TLS: their "
                              "traffic would travel in plaintext); hogwild cannot run here");
          }
          if (local_workers < 1) return refuse(st, "kv: local_workers < 1");
          auto& job = job_of(self, coordinator);
          if (!job.hog) job.hog = std::make_shared<hogwild_model>();
          if (!job.hog->kv.empty()) return refuse(st, "kv: this job's member already exists");
          KvOptions o;
          o.keys = keys;
          o.block = block;
          o.dynamic = dynamic;
          o.first_home_rank = first_home;
          o.secret = st.secret;
          auto member = KvNode::Listen(o, rank, nodes, st.kv_host, 0, 1);
          if (!member.ok()) return refuse(st, "kv: " + std::string(member.status().message()));
          const int32_t port = (*member)->port();
          job.hog->step_sharers = local_workers;
          job.hog->kv.push_back(*std::move(member));
          return port;
        },
        [self](connect_atom, const caf::actor& coordinator,
               const std::string& table) -> caf::result<bool> {
          if (auto err = admission_error(self)) return err;
          auto& st = self->state;
          if (!from_coordinator(self, coordinator)) return refuse(st, "connect: not from its coordinator");
          auto it = st.jobs.find(coordinator.address());
          if (it == st.jobs.end() || !it->second.hog || it->second.hog->kv.size() != 1) {
            return refuse(st, "connect before kv");
          }
          if (it->second.kv_connecting) return refuse(st, "connect: asked already");
          it->second.kv_connecting = true;
          return self->delegate(spawn_kv_connector(self->system(), it->second.hog),
                                connect_atom_v, table);
        },
        [self](stats_atom, const caf::actor& coordinator) -> caf::result<int64_list> {
          if (auto err = admission_error(self)) return err;
          auto& st = self->state;
          if (!from_coordinator(self, coordinator)) return refuse(st, "stats: not from its coordinator");
          int64_list out;
          auto it = st.jobs.find(coordinator.address());
          if (it == st.jobs.end() || !it->second.hog || it->second.hog->kv.size() != 1) return out;
          return PackKvStats(it->second.hog->kv[0]->Stats());
        },
    };
  };
  return sys.spawn<caf::detached>(impl, std::move(name), std::move(secret), std::move(kv_host));
}

absl::Status AdmitTo(caf::scoped_actor& self, const node_actor& node, const std::string& secret,
                     caf::timespan timeout) {
  std::string nonce;
  absl::Status status;
  self->request(node, timeout, challenge_atom_v)
      .receive([&](const std::string& n) { nonce = n; },
               [&](caf::error& e) { status = absl::UnavailableError(self->system().render(e)); });
  if (!status.ok()) return status;
  if (!nonce.empty() && secret.empty()) {
    return absl::PermissionDeniedError(
        "the node requires a cluster secret and none is set (RuntimeOptions.cluster_secret, "
        "dml-train --secret-file)");
  }
  const std::string proof =
      nonce.empty() ? std::string() : net::AdmissionProof(secret, nonce, caf::to_string(self->node()));
  std::string theirs;
  self->request(node, timeout, admit_atom_v, proof, OwnEndpoint(self->system()))
      .receive([&](const std::string& e) { theirs = e; },
               [&](caf::error& e) {
                 // The node's refusal says why; a lost node says it did not answer.
                 status = e.category() == caf::atom("system") &&
                                  e.code() == static_cast<uint8_t>(caf::sec::invalid_argument)
                              ? absl::PermissionDeniedError(self->system().render(e))
                              : absl::UnavailableError(self->system().render(e));
               });
  if (!status.ok()) return status;
  auto advertised = net::BulkEndpoint::Decode(theirs);
  if (!advertised.ok()) {
    return absl::DataLossError(absl::StrCat("the node's admission reply: ",
                                            advertised.status().message()));
  }
  if (BulkPeers* peers = BulkPeersOf(self->system())) peers->Set(node->node(), *std::move(advertised));
  return absl::OkStatus();
}

absl::Status SendPeerTable(caf::scoped_actor& self, const node_actor& node,
                           caf::timespan timeout) {
  BulkPeers* peers = BulkPeersOf(self->system());
  if (peers == nullptr) return absl::OkStatus();
  std::vector<std::string> entries = peers->Table();
  entries.push_back(caf::to_string(self->system().node()));
  entries.push_back(OwnEndpoint(self->system()));
  const std::string table = absl::StrJoin(entries, std::string(1, kPeerTableSeparator));
  absl::Status status;
  self->request(node, timeout, peers_atom_v, table)
      .receive([](bool) {},
               [&](caf::error& e) { status = absl::UnavailableError(self->system().render(e)); });
  return status;
}

}  // namespace dml::actors
