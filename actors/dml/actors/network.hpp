#pragma once
// Network settings shared by every libdml process (runtime and dml-node),
// and address parsing. Both ends must agree on these, so they live here once.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <caf/actor_system_config.hpp>
#include <caf/fwd.hpp>

#include "absl/status/statusor.h"
#include "dml/net/bulk.hpp"
#include "dml/net/payloads.hpp"

namespace dml::actors {

/// net's payload under the actors' name.
using net::dvec;

/// Middleman settings of a libdml process: no automatic connections (they
/// hung 4-process bulk exchanges: traffic to a third node is relayed by the
/// node that introduced it) and no heartbeats (they dropped healthy links
/// under bulk transfers; a killed peer is still noticed at once through its
/// closed socket, a hung one is not).
/// Call in the actor_system_config constructor, after load<middleman>().
void ConfigureNetwork(caf::actor_system_config& cfg);

/// Everything a libdml process's actor system needs: the message types,
/// the network layer (ConfigureNetwork) and the scheduler settings the
/// training actors rely on; `threads` 0 = one per core. Call in the
/// actor_system_config constructor.
void ConfigureProcess(caf::actor_system_config& cfg, int threads);
/// The most scheduler threads ConfigureProcess gives a process (more are
/// taken as this many).
inline constexpr int kMaxSchedulerThreads = 1024;

/// The actor_system_config of every libdml process (runtime, dml-node,
/// tests, benchmarks): ConfigureProcess(threads), plus the process's bulk
/// channel (dml/net/bulk.hpp), which the wire encoders find through the
/// actor system (BulkChannelOf). The channel always fetches what peers
/// offer; it offers this process's own large vectors only once it serves
/// (bulk()->Serve(host)). Owned here, so it outlives the actor system built
/// from this config.
/// The bulk endpoints other processes advertised to this one when admitted
/// (AdmitTo, and the job's coordinator for the nodes of its job), by CAF
/// node id: the only places their bulk references are fetched from.
/// Thread-safe.
class BulkPeers {
 public:
  void Set(const caf::node_id& process, net::BulkEndpoint e);
  /// Entries from a peer table (Table's layout: process id, encoded
  /// endpoint, ...); a process that advertised its own endpoint here (Set)
  /// keeps it. Errors: InvalidArgument for an odd length or a malformed
  /// endpoint (nothing is recorded then).
  absl::Status SetAll(const std::vector<std::string>& table);
  /// Every entry, as SetAll takes them.
  std::vector<std::string> Table() const;
  /// Processes with an entry.
  std::size_t size() const;
  /// What `process` advertised; nullopt: nothing.
  std::optional<net::BulkEndpoint> Get(const caf::node_id& process) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, net::BulkEndpoint> by_process_;
};

class process_config : public caf::actor_system_config {
 public:
  /// ConfigureProcess(threads) and a new, not yet serving, bulk channel.
  explicit process_config(int threads, net::BulkOptions bulk = {});
  ~process_config() override;
  /// The process's bulk channel (thread-safe; owned by this config).
  net::BulkChannel& bulk() const { return *bulk_; }
  /// What its peers advertised (thread-safe; owned by this config).
  BulkPeers& bulk_peers() const { return *peers_; }

 private:
  std::unique_ptr<net::BulkChannel> bulk_;
  std::unique_ptr<BulkPeers> peers_;
};

/// The peers of `sys` (null: not built from a process_config).
BulkPeers* BulkPeersOf(caf::actor_system& sys);

/// OK when `ref` names the endpoint its sender's process (`from`)
/// advertised: this process's own for a reference from itself, else what
/// BulkPeers holds for it. Errors: PermissionDenied saying which endpoint
/// was named and which advertised (or that none was), or that the message
/// has no sender; nothing is fetched then.
absl::Status CheckBulkSource(caf::actor_system& sys, const caf::strong_actor_ptr& from,
                             const net::BulkRef& ref);

/// The bulk channel of the actor system that runs `ctx` (a serializer's
/// context), or null where there is none (no context, or a system not
/// built from a process_config).
net::BulkChannel* BulkChannelOf(caf::execution_unit* ctx);
/// The bulk channel of `sys`, or null (not built from a process_config).
net::BulkChannel* BulkChannelOf(caf::actor_system& sys);

/// `x` with its values: x itself, or, for a dvec that arrived as a
/// reference to its sender's bulk channel, the values fetched now on the
/// calling thread (a failed fetch: a dvec whose wire_error says why). For
/// blocking callers (scoped actors, benchmarks); actors use
/// internal/bulk_resolve.hpp instead, which never blocks a scheduler thread.
/// A reference is fetched only from the endpoint its sender `from`
/// advertised (CheckBulkSource; else the wire_error says why).
dvec ResolveBlocking(caf::actor_system& sys, dvec x, const caf::strong_actor_ptr& from);

/// For libdml's own executables (dml-node, dml-train, benchmarks), never
/// called by the embedded runtime (the host owns its allocator): keeps
/// freed message buffers (up to glibc's 32 MiB mmap limit) in the heap
/// instead of returning them to the kernel, so the next message's vector
/// does not page-fault its way in again.
void TuneAllocatorForMessages();

/// "host:port" -> (host, port). Errors: InvalidArgument saying what is wrong
/// (no colon, empty host, port not a number in [1, 65535]).
absl::StatusOr<std::pair<std::string, uint16_t>> ParseHostPort(std::string_view addr);

}  // namespace dml::actors
