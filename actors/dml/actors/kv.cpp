// KvNode: the actor glue around detail::KvCore (internal/kv_core.hpp). Each
// node is one actor; peers' messages reach KvCore::Receive through it, and
// KvCore sends by one-way messages to the peers' actors, which the group
// learns at start-up.
#include "dml/actors/kv.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/sec.hpp>
#include <caf/io/broker.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <caf/system_messages.hpp>
#include <caf/skip.hpp>

#include "absl/strings/str_cat.h"
#include "dml/actors/internal/kv_core.hpp"
#include "dml/net/admission.hpp"
#include "dml/actors/network.hpp"
#include "dml/actors/transport.hpp"
#include "dml/actors/type_ids.hpp"
#include "dml/util/memory.hpp"
#include "dml/util/status.hpp"

namespace dml {

namespace detail {

// One actor system, shared by the nodes of a group in this process.
struct kv_group {
  explicit kv_group(int threads) : cfg(threads), sys(cfg) { released.sys = &sys; }
  // Declared first, so destroyed last: the system's admission gate (if
  // any) is forgotten once the system is gone, not before.
  struct release_gate {
    const caf::actor_system* sys = nullptr;
    ~release_gate() {
      if (sys != nullptr) actors::ReleaseAdmission(sys);
    }
  } released;
  actors::process_config cfg;
  caf::actor_system sys;
};

}  // namespace detail

using actors::connect_atom;
using actors::connect_atom_v;
using actors::kv_atom;
using actors::kv_atom_v;
using actors::start_atom;
using actors::start_atom_v;

struct KvNode::Impl {
  std::shared_ptr<detail::kv_group> group;
  std::unique_ptr<detail::KvCore> core;
  caf::actor actor;
  caf::actor gate;  // Join: what peers reach first (KvGate)
  // Peers' actors by rank; complete (and then never changed) before the
  // node starts serving or its user sends anything.
  std::vector<caf::actor> peers;
  std::mutex mu;
  std::condition_variable cv;
  int32_t introduced = 0;  // lower ranks that introduced themselves (Join)
  // Peers known: operations may run and Leave may send. Atomic: Connect
  // sets it while the user may already be calling (and being refused).
  std::atomic<bool> started{false};
  std::atomic<bool> listening{false};  // made by Listen, Connect not yet called
  uint16_t port = 0;       // where the gate listens (Listen)

  ~Impl() {
    // The actors read `core` and this: wait until they have stopped.
    if (!actor) return;
    if (started) core->Leave();
    caf::scoped_actor self{group->sys};
    for (caf::actor* a : {&gate, &actor}) {
      if (!*a) continue;
      self->monitor(*a);
      self->send_exit(*a, caf::exit_reason::user_shutdown);
      self->receive([](const caf::down_msg&) {});
    }
  }
};

namespace {

// A lower rank introduces itself (Join): its actor, over the connection it
// opened to us, and the group it thinks it joins.
caf::error Introduce(KvNode::Impl* impl, int32_t rank, const caf::actor& peer, int64_t nodes,
                     int64_t keys) {
  if (nodes != impl->core->nodes() || keys != impl->core->options().keys) {
    return caf::make_error(caf::sec::invalid_argument,
                           "kv node " + std::to_string(impl->core->rank()) + ": a group of " +
                               std::to_string(impl->core->nodes()) + " nodes and " +
                               std::to_string(impl->core->options().keys) + " keys, not " +
                               std::to_string(nodes) + " and " + std::to_string(keys));
  }
  std::lock_guard<std::mutex> lock(impl->mu);
  if (rank < 0 || rank >= impl->core->rank() || !peer) {
    return caf::make_error(caf::sec::invalid_argument, "kv: bad introduction");
  }
  if (!impl->peers[static_cast<std::size_t>(rank)]) ++impl->introduced;
  impl->peers[static_cast<std::size_t>(rank)] = peer;
  impl->cv.notify_all();
  return caf::none;
}

// The actor a Join publishes (the node's own actor is handed out only to
// processes that passed it): challenge, then connect(rank, actor, nodes,
// keys, proof, nonce) -> (the node's actor, our proof for their nonce).
// Without a secret every proof passes and none is given.
caf::behavior KvGate(caf::event_based_actor* self, KvNode::Impl* impl) {
  auto challenges = std::make_shared<net::AdmissionChallenges>();
  const std::string secret = impl->core->options().secret;
  const std::string who = "kv node " + std::to_string(impl->core->rank());
  return {
      [self, challenges, secret](actors::challenge_atom) -> std::string {
        if (secret.empty() || !self->current_sender()) return std::string();
        return challenges->Issue(caf::to_string(self->current_sender()->node()));
      },
      [self, impl, challenges, secret, who](connect_atom, int32_t rank, const caf::actor& peer,
                                        int64_t nodes, int64_t keys, const std::string& proof,
                                        const std::string& their_nonce) -> caf::result<caf::message> {
        const caf::strong_actor_ptr& sender = self->current_sender();
        if (!sender) return caf::make_error(caf::sec::invalid_argument, who + ": no sender");
        if (!secret.empty()) {
          const std::string process = caf::to_string(sender->node());
          if (absl::Status s = challenges->Check(process, proof, secret, "group"); !s.ok()) {
            return caf::make_error(caf::sec::invalid_argument, who + ": " + std::string(s.message()));
          }
          // Its messages to this process's actors pass from now on.
          actors::AdmitPeer(self->system(), sender->node());
        }
        if (auto err = Introduce(impl, rank, peer, nodes, keys)) return err;
        const std::string mine =
            secret.empty() || their_nonce.empty()
                ? std::string()
                : net::AdmissionProof(secret, their_nonce, caf::to_string(self->node()));
        return caf::make_message(impl->actor, mine);
      },
  };
}

// The node's actor: skips the group's messages until `start` (the peers
// are known), then hands every message to the core. It is a broker, so it
// runs in the network thread that read the message: a message costs no
// hand-over to a scheduler thread (and its wake-up), which on a loaded
// machine was most of a small message's cost. The core's handlers never
// wait, and take stripe locks that user threads hold for at most a few
// hundred keys; a transfer's copy of a block's values runs on this thread.
caf::behavior KvActor(caf::io::broker* self, KvNode::Impl* impl) {
  self->set_default_handler(caf::skip);
  return {
      [self, impl](start_atom) {
        self->set_default_handler(caf::print_and_drop);
        // A peer that goes (its process ends, its connection breaks) takes
        // its keys along: fail what waits on the group.
        for (const auto& p : impl->peers) {
          if (p && p != self) self->monitor(p);
        }
        self->set_down_handler([impl](const caf::down_msg& dm) {
          for (std::size_t r = 0; r < impl->peers.size(); ++r) {
            if (impl->peers[r] && impl->peers[r].address() == dm.source) {
              impl->core->PeerLost(static_cast<int32_t>(r));
            }
          }
        });
        self->become([impl](kv_atom, actors::kv_message& m) { impl->core->Receive(std::move(m)); });
      },
  };
}

std::unique_ptr<KvNode::Impl> MakeImpl(std::shared_ptr<detail::kv_group> group,
                                       const KvOptions& options, int32_t rank, int32_t nodes) {
  auto impl = std::make_unique<KvNode::Impl>();
  impl->group = std::move(group);
  impl->core = std::make_unique<detail::KvCore>(options, rank, nodes);
  impl->peers.resize(static_cast<std::size_t>(nodes));
  KvNode::Impl* raw = impl.get();
  impl->core->SetSend([raw](int32_t to, actors::kv_message m) {
    caf::anon_send(raw->peers[static_cast<std::size_t>(to)], kv_atom_v, std::move(m));
  });
  impl->actor = impl->group->sys.middleman().spawn_broker(KvActor, raw);
  impl->peers[static_cast<std::size_t>(rank)] = impl->actor;
  return impl;
}

}  // namespace

absl::Status ValidateKvOptions(const KvOptions& o) {
  if (o.keys <= 0) return absl::InvalidArgumentError(absl::StrCat("KvOptions.keys: ", o.keys, " <= 0"));
  if (o.value_len < 1) {
    return absl::InvalidArgumentError(absl::StrCat("KvOptions.value_len: ", o.value_len, " < 1"));
  }
  if (o.block < 1) return absl::InvalidArgumentError(absl::StrCat("KvOptions.block: ", o.block, " < 1"));
  if (o.keys > (int64_t{1} << 48) || static_cast<double>(o.keys) * o.value_len > 1e12) {
    return absl::InvalidArgumentError("KvOptions: keys * value_len too large");
  }
  if (!(o.op_timeout_seconds > 0)) {
    return absl::InvalidArgumentError("KvOptions.op_timeout_seconds: must be > 0");
  }
  if (o.first_home_rank < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("KvOptions.first_home_rank: ", o.first_home_rank, " < 0"));
  }
  return absl::OkStatus();
}

bool KvHandle::Done() const {
  if (!op_) return true;
  std::lock_guard<std::mutex> lock(op_->mu);
  return op_->done;
}

int32_t KvHandle::Hops() const {
  if (!op_) return 0;
  std::lock_guard<std::mutex> lock(op_->mu);
  return op_->hops;
}

KvNode::KvNode(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

KvNode::~KvNode() = default;

namespace {
// Options that depend on the group's size.
absl::Status CheckGroup(const KvOptions& o, int nodes) {
  if (nodes < 1) return absl::InvalidArgumentError(absl::StrCat("nodes: ", nodes, " < 1"));
  if (o.first_home_rank >= nodes) {
    return absl::InvalidArgumentError(absl::StrCat("KvOptions.first_home_rank: ",
                                                   o.first_home_rank, " leaves none of the ",
                                                   nodes, " nodes a home range"));
  }
  return absl::OkStatus();
}
}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<KvNode>>> KvNode::StartLocalGroup(
    int nodes, const KvOptions& options, int threads) {
  DML_RETURN_IF_ERROR(ValidateKvOptions(options));
  DML_RETURN_IF_ERROR(CheckGroup(options, nodes));
  // All of the group lives in this process.
  DML_RETURN_IF_ERROR(CheckModelMemory(options.keys, options.value_len, 0,
                                       "a key-value group in one process", VectorOrigin::kKeys));
  auto group = std::make_shared<detail::kv_group>(threads);
  std::vector<std::unique_ptr<Impl>> impls;
  for (int r = 0; r < nodes; ++r) impls.push_back(MakeImpl(group, options, r, nodes));
  std::vector<caf::actor> all;
  for (auto& i : impls) all.push_back(i->actor);
  std::vector<std::unique_ptr<KvNode>> out;
  for (auto& i : impls) {
    i->peers = all;
    caf::anon_send(i->actor, start_atom_v);
    i->started = true;
    out.push_back(std::unique_ptr<KvNode>(new KvNode(std::move(i))));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<KvNode>> KvNode::Join(const KvOptions& options, int rank,
                                                     const std::vector<std::string>& peers,
                                                     std::chrono::duration<double> connect_timeout,
                                                     std::string listen_host, int threads) {
  DML_RETURN_IF_ERROR(ValidateKvOptions(options));
  const int nodes = static_cast<int>(peers.size());
  if (rank < 0 || rank >= nodes) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " outside [0, ", nodes, ")"));
  }
  auto own = actors::ParseHostPort(peers[static_cast<std::size_t>(rank)]);
  if (!own.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("peers[", rank, "]: ", own.status().message()));
  }
  const std::string host = listen_host.empty() ? own->first : listen_host;
  DML_ASSIGN_OR_RETURN(std::unique_ptr<KvNode> node,
                       Listen(options, rank, nodes, host, own->second, threads));
  DML_RETURN_IF_ERROR(node->Connect(peers, connect_timeout));
  return node;
}

absl::StatusOr<std::unique_ptr<KvNode>> KvNode::Listen(const KvOptions& options, int rank,
                                                       int nodes, const std::string& host,
                                                       uint16_t port, int threads) {
  DML_RETURN_IF_ERROR(ValidateKvOptions(options));
  DML_RETURN_IF_ERROR(CheckGroup(options, nodes));
  if (rank < 0 || rank >= nodes) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " outside [0, ", nodes, ")"));
  }
  // This process holds its home range (other nodes' keys come and go).
  const int64_t blocks = (options.keys + options.block - 1) / options.block;
  const int64_t homes = nodes - options.first_home_rank;
  DML_RETURN_IF_ERROR(CheckModelMemory(
      std::min(options.keys, (blocks + homes - 1) / homes * options.block), options.value_len, 0,
      "a key-value node's home range", VectorOrigin::kKeys));
  auto group = std::make_shared<detail::kv_group>(threads);
  auto impl = MakeImpl(group, options, rank, nodes);
  auto& sys = group->sys;
  // Peers first reach the gate; with a secret, nothing else here answers a
  // process before it passed it.
  impl->gate = sys.spawn(KvGate, impl.get());
  if (!options.secret.empty()) actors::RequireAdmission(sys, impl->gate.id());
  auto published = actors::Publish(sys, impl->gate, port, host, true);
  if (!published) {
    return absl::UnavailableError(absl::StrCat("kv node ", rank, ": cannot listen on ", host, ":",
                                               port, ": ", sys.render(published.error())));
  }
  impl->port = *published;
  impl->listening = true;
  return std::unique_ptr<KvNode>(new KvNode(std::move(impl)));
}

uint16_t KvNode::port() const { return impl_->port; }

absl::Status KvNode::Connect(const std::vector<std::string>& peers,
                             std::chrono::duration<double> connect_timeout) {
  const auto not_listening = [this] {
    return absl::FailedPreconditionError(absl::StrCat(
        "kv node ", impl_->core->rank(), ": Connect is for a node made by Listen, once"));
  };
  if (!impl_->listening) return not_listening();
  const int rank = impl_->core->rank();
  const int nodes = impl_->core->nodes();
  if (static_cast<int>(peers.size()) != nodes) {
    return absl::InvalidArgumentError(absl::StrCat("kv node ", rank, ": ", peers.size(),
                                                   " peers for a group of ", nodes));
  }
  std::vector<std::pair<std::string, uint16_t>> addr;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    auto hp = actors::ParseHostPort(peers[i]);
    if (!hp.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("peers[", i, "]: ", hp.status().message()));
    }
    addr.push_back(*hp);
  }
  // A bad list may be mended; a failed connection may not. Exchanged: of
  // two concurrent calls only one connects.
  if (!impl_->listening.exchange(false)) return not_listening();
  Impl* impl = impl_.get();
  const KvOptions& options = impl->core->options();
  auto& sys = impl->group->sys;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(connect_timeout);
  // Every dial and request waits at most what is left of connect_timeout
  // (a silent address must not stretch the whole beyond it).
  auto left = [&deadline](std::chrono::milliseconds cap) {
    const auto rest = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    return std::max(std::chrono::milliseconds(100), std::min(cap, rest));
  };
  // Higher ranks: connect (one direct connection per pair) and introduce
  // ourselves over it; lower ranks do the same to us.
  for (int r = rank + 1; r < nodes; ++r) {
    caf::actor peer;
    std::string last_error;
    while (!peer) {
      auto got = actors::RemoteActor(sys, addr[r].first, addr[r].second,
                                     left(std::chrono::milliseconds(30000)));
      if (got) {
        peer = *got;
        break;
      }
      last_error = sys.render(got.error());
      if (std::chrono::steady_clock::now() > deadline) {
        return absl::UnavailableError(absl::StrCat("kv node ", rank, ": cannot reach rank ", r,
                                                   " at ", peers[r], ": ", last_error));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    // Introduce ourselves and make sure this is a node of our group (the
    // port may have been taken by something else); with a secret, each
    // side proves it to the other. The peer we connected to is admitted
    // for its answers at once; Join fails (and the connection with it)
    // unless it then proves the secret.
    const std::string secret = options.secret;
    if (!secret.empty()) actors::AdmitPeer(sys, peer->node());
    std::string refused, nonce, their_proof;
    caf::actor theirs;
    const std::string my_nonce = secret.empty() ? std::string() : net::NewAdmissionNonce();
    {
      caf::scoped_actor self{sys};
      self->request(peer, left(std::chrono::milliseconds(10000)), actors::challenge_atom_v)
          .receive([&](const std::string& n) { nonce = n; },
                   [&](caf::error& e) { refused = sys.render(e); });
      if (refused.empty() && !nonce.empty() && secret.empty()) {
        return absl::PermissionDeniedError(absl::StrCat(
            "kv node ", rank, ": peers[", r, "] (", peers[r],
            ") requires the group secret and none is set (KvOptions.secret)"));
      }
      if (refused.empty() && nonce.empty() && !secret.empty()) {
        return absl::PermissionDeniedError(
            absl::StrCat("kv node ", rank, ": peers[", r, "] (", peers[r],
                         ") checks no group secret; this node has one (KvOptions.secret)"));
      }
      const std::string proof =
          secret.empty() ? std::string()
                         : net::AdmissionProof(secret, nonce, caf::to_string(self->node()));
      if (refused.empty()) {
        self->request(peer, left(std::chrono::milliseconds(10000)), connect_atom_v,
                      static_cast<int32_t>(rank),
                      impl->actor, static_cast<int64_t>(nodes), options.keys, proof, my_nonce)
            .receive(
                [&](const caf::actor& a, const std::string& p) {
                  theirs = a;
                  their_proof = p;
                },
                [&](caf::error& e) { refused = sys.render(e); });
      }
    }
    if (!refused.empty()) {
      const bool denied = refused.find("admission refused") != std::string::npos;
      const std::string why = absl::StrCat("kv node ", rank, ": peers[", r, "] (", peers[r], ") ",
                                           denied ? "refused us: " : "is not a node of this group: ",
                                           refused);
      return denied ? absl::PermissionDeniedError(why) : absl::UnavailableError(why);
    }
    if (!theirs) {
      return absl::UnavailableError(absl::StrCat("kv node ", rank, ": peers[", r, "] (", peers[r],
                                                 ") answered without its node"));
    }
    if (!secret.empty() && !net::AdmissionProofMatches(their_proof, secret, my_nonce,
                                                       caf::to_string(peer->node()))) {
      return absl::PermissionDeniedError(absl::StrCat("kv node ", rank, ": peers[", r, "] (",
                                                      peers[r], ") failed to prove the group secret"));
    }
    peer = theirs;
    {
      std::lock_guard<std::mutex> lock(impl->mu);
      impl->peers[static_cast<std::size_t>(r)] = peer;
    }
  }
  {
    std::unique_lock<std::mutex> lock(impl->mu);
    if (!impl->cv.wait_until(lock, deadline, [&] { return impl->introduced == rank; })) {
      std::string missing;
      for (int r = 0; r < rank; ++r) {
        if (!impl->peers[static_cast<std::size_t>(r)]) absl::StrAppend(&missing, " ", r);
      }
      return absl::UnavailableError(absl::StrCat("kv node ", rank,
                                                 ": not introduced in time by rank(s)", missing));
    }
  }
  caf::anon_send(impl->actor, start_atom_v);
  impl->started = true;
  return absl::OkStatus();
}

namespace {
absl::Status NotConnected(const KvNode::Impl& impl) {
  if (impl.started) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("kv node ", impl.core->rank(), ": not connected (Listen without Connect)"));
}
}  // namespace

absl::StatusOr<KvHandle> KvNode::Pull(absl::Span<const int64_t> keys, double* out) {
  DML_RETURN_IF_ERROR(NotConnected(*impl_));
  DML_RETURN_IF_ERROR(impl_->core->Lost());
  DML_RETURN_IF_ERROR(impl_->core->CheckKeys(keys));
  if (out == nullptr && !keys.empty()) return absl::InvalidArgumentError("Pull: out is null");
  if (keys.empty()) return KvHandle();  // nothing to wait for (an empty handle is done)
  return KvHandle(impl_->core->Pull(keys, out));
}

absl::StatusOr<KvHandle> KvNode::Push(absl::Span<const int64_t> keys,
                                      absl::Span<const double> deltas) {
  DML_RETURN_IF_ERROR(NotConnected(*impl_));
  DML_RETURN_IF_ERROR(impl_->core->Lost());
  DML_RETURN_IF_ERROR(impl_->core->CheckKeys(keys));
  const auto want = keys.size() * static_cast<std::size_t>(impl_->core->options().value_len);
  if (deltas.size() != want) {
    return absl::InvalidArgumentError(
        absl::StrCat("Push: ", deltas.size(), " deltas for ", keys.size(), " keys (want ", want, ")"));
  }
  for (std::size_t i = 0; i < deltas.size(); ++i) {
    if (!std::isfinite(deltas[i])) {
      return absl::InvalidArgumentError(absl::StrCat("Push: deltas[", i, "] is not finite"));
    }
  }
  if (keys.empty()) return KvHandle();  // nothing to wait for
  return KvHandle(impl_->core->Push(keys, deltas));
}

absl::StatusOr<KvHandle> KvNode::Localize(absl::Span<const int64_t> keys) {
  DML_RETURN_IF_ERROR(NotConnected(*impl_));
  DML_RETURN_IF_ERROR(impl_->core->Lost());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (keys[i] < 0 || keys[i] >= impl_->core->options().keys) {
      return absl::InvalidArgumentError(absl::StrCat("Localize: key ", i, " (", keys[i],
                                                     ") outside [0, ",
                                                     impl_->core->options().keys, ")"));
    }
  }
  return KvHandle(impl_->core->Localize(keys));
}

absl::Status KvNode::Wait(const KvHandle& h) {
  if (!h.op_) return absl::OkStatus();
  auto& op = *h.op_;
  std::unique_lock<std::mutex> lock(op.mu);
  const auto timeout = std::chrono::duration<double>(impl_->core->options().op_timeout_seconds);
  if (!op.cv.wait_for(lock, timeout, [&] { return op.done; })) {
    return absl::DeadlineExceededError(absl::StrCat(
        "kv node ", impl_->core->rank(), ": operation not done after ", timeout.count(), " s (",
        op.remaining, " keys or blocks outstanding)"));
  }
  return op.status;
}

absl::Status KvNode::Barrier(std::chrono::duration<double> timeout) {
  DML_RETURN_IF_ERROR(NotConnected(*impl_));
  const uint64_t gen = impl_->core->EnterBarrier();
  if (!impl_->core->WaitBarrier(gen, timeout)) {
    DML_RETURN_IF_ERROR(impl_->core->Lost());
    return absl::DeadlineExceededError(absl::StrCat("kv node ", impl_->core->rank(), ": barrier ",
                                                    gen, " not released after ", timeout.count(),
                                                    " s"));
  }
  return absl::OkStatus();
}

int32_t KvNode::OwnerHint(int64_t key) const {
  return key >= 0 && key < impl_->core->options().keys ? impl_->core->OwnerHint(key) : -1;
}
bool KvNode::Owns(int64_t key) const {
  return key >= 0 && key < impl_->core->options().keys && impl_->core->Owns(key);
}
int32_t KvNode::rank() const { return impl_->core->rank(); }
int32_t KvNode::size() const { return impl_->core->nodes(); }
const KvOptions& KvNode::options() const { return impl_->core->options(); }
KvStats KvNode::Stats() const { return impl_->core->Stats(); }

}  // namespace dml
