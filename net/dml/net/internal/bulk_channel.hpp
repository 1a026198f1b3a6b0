#pragma once
// BulkChannel's state (the pimpl of dml/net/bulk.hpp) and its steps, for
// the files that implement the channel: bulk.cpp (life cycle, counters),
// bulk_server.cpp (offers and serving them), bulk_fetch.cpp (fetching by
// copy), bulk_in_place.cpp (reading a peer's arena in place).
// Thread-safety: each field names the mutex that guards it.

#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "dml/net/bulk.hpp"
#include "dml/net/internal/bulk_memory.hpp"

namespace dml::net::internal {

// A peer's arena segment mapped read-only here; unmapped when the last
// view into it goes.
struct PeerSegment {
  const char* base = nullptr;
  std::size_t size = 0;
  ~PeerSegment() {
    if (base != nullptr) ::munmap(const_cast<char*>(base), size);
  }
};

// The connection on which this receiver holds a peer's offers: the peer
// drops them when it closes, so it lives as long as any view it holds (and
// the channel). One request at a time (mu).
struct HoldLink {
  std::mutex mu;
  int fd = -1;
  bool broken = false;
  ~HoldLink() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace dml::net::internal

namespace dml::net {

struct BulkChannel::Impl {
  struct offer {
    std::shared_ptr<const void> owner;
    const void* data = nullptr;
    std::size_t bytes = 0;
    std::chrono::steady_clock::time_point expires;
    int32_t slot = -1;  // SlotTable index while directly readable, else -1
    uint64_t holder = 0;  // the connection that HOLDs it (served to no other), else 0
  };
  struct connection {
    std::thread thread;
    int fd = -1;
    std::shared_ptr<std::atomic<bool>> done;
  };
  // A pooled client connection and, for Unix ones, the peer's pid as the
  // kernel reports it (0: unknown, no single copy).
  struct idle_conn {
    int fd = -1;
    pid_t pid = 0;
  };

  BulkOptions options;

  // Serving side, guarded by mu.
  mutable std::mutex mu;
  bool serving = false;
  bool stopping = false;
  std::string host, local;
  uint16_t port = 0;
  int tcp_fd = -1, unix_fd = -1;
  int wake[2] = {-1, -1};
  std::thread acceptor;
  std::unordered_map<uint64_t, offer> offers;
  std::size_t pending_bytes = 0;
  std::vector<connection> connections;
  uint64_t next_connection = 1;
  // Null without same_host (then no block is offered in place).
  std::shared_ptr<internal::SharedArena> arena;

  // Client side.
  std::mutex pool_mu;
  std::map<std::string, std::vector<idle_conn>> idle;
  std::set<std::string> unreachable_local;  // Unix names that refused: use TCP
  // Tickets this channel read directly, newest last: their senders may not
  // have read the RELEASE yet, so a repeated reference is refused here. A
  // RELEASE takes microseconds to milliseconds to be read, far less than
  // 4096 fetches.
  std::unordered_set<uint64_t> direct_seen;
  std::deque<uint64_t> direct_order;
  static constexpr std::size_t kDirectSeen = 4096;
  std::atomic<bool> single_copy_refused{false};
  // In-place reads: per sender (Unix name), the connection that holds its
  // offers and its segments mapped here. Guarded by pool_mu.
  std::map<std::string, std::shared_ptr<internal::HoldLink>> links;
  std::map<std::pair<std::string, uint64_t>, std::shared_ptr<internal::PeerSegment>> segments;

  std::atomic<uint64_t> n_offers{0}, n_refused{0}, n_fetches{0}, n_single{0}, n_direct{0},
      n_unix{0}, n_in_place{0}, n_bytes{0}, n_refused_peers{0};
  std::shared_ptr<internal::BufferPool> pool = std::make_shared<internal::BufferPool>();

  // --------------------------------------------------------- serving
  // (bulk_server.cpp)

  // Removes an offer from the table, its slot cleared first (direct
  // readers then no longer trust a copy). Called with mu held.
  std::unordered_map<uint64_t, offer>::iterator Forget(
      std::unordered_map<uint64_t, offer>::iterator it);

  // ticket's offer if connection `by` may have it (nobody else holds it),
  // else offers.end(). Called with mu held.
  std::unordered_map<uint64_t, offer>::iterator Servable(uint64_t ticket, uint64_t by);

  // Takes ticket's offer out of the table (it is served once) for
  // connection `by`; an offer another connection holds is not served.
  bool Take(uint64_t ticket, offer* out, uint64_t by);

  // Drops ticket's offer for connection `by` (a RELEASE, or its holder
  // gone) under mu, so its owner is let go before pending() stops counting
  // it: once pending() says it is gone, an arena block is back in its free
  // list. An offer another connection holds stays.
  void Drop(uint64_t ticket, uint64_t by);

  // Marks ticket's offer held by connection `by`: no expiry, no direct
  // reads, served to nobody else. Its byte count, or nullopt when the
  // offer is gone or held already.
  std::optional<std::size_t> Hold(uint64_t ticket, uint64_t by);

  // Drops every offer (the channel stops): direct readers see the cleared
  // words before any buffer can go.
  void DropAll();

  // Joins and closes connections whose peers hung up (a long-lived node
  // sees new ones per coordinator process). Called with mu held.
  void Reap();

  // The acceptor thread: starts a thread per connection until woken.
  void Accept();
  // Whether the peer of an accepted Unix connection may use it: anyone in
  // this network namespace can connect to an abstract socket, and MAP,
  // HOLD and SEGMENT hand out this process's memory. A peer of another
  // user (not in options.allowed_uids), or one the kernel cannot name, is
  // logged to stderr and counted; the caller hangs up.
  bool PeerAllowed(int fd);
  // Answers requests on one accepted connection until it closes.
  void ServeConnection(int fd, bool is_unix, uint64_t id);

  // --------------------------------------------------------- fetching
  // (bulk_fetch.cpp)

  static std::string TcpKey(const BulkRef& r) { return absl::StrCat("tcp:", r.host, ":", r.port); }
  static std::string UnixKey(const BulkRef& r) { return "unix:" + r.local; }

  bool PoolTake(const std::string& key, idle_conn* out);
  void PoolPut(const std::string& key, idle_conn c);

  absl::StatusOr<idle_conn> ConnectTcp(const BulkRef& r);

  // A Unix connection to the sender, or -1 when it is not on this machine
  // (not in this network namespace).
  idle_conn ConnectUnix(const BulkRef& r);

  // Reads an offer straight from the sender's memory (pid as this process
  // sees it) with no request: the values, then the offer's liveness word.
  // nullopt when that word no longer holds the ticket (the offer is gone:
  // what was copied may be garbage and is dropped) or the read failed;
  // the caller then asks the sender by the protocol, which answers why.
  // *repeat: this channel read the ticket before (the caller answers
  // NotFound, as the sender would once it has read the RELEASE).
  std::optional<BulkValues> DirectRead(const BulkRef& r, pid_t pid, bool* repeat);

  // Copies `count` doubles at `address` in process pid into v (from
  // BufferPool::Get), checking each chunk while it is in cache. Returns 0,
  // or the errno of the read that failed (EIO: a short read).
  static int ReadValues(pid_t pid, uint64_t address, std::size_t count, std::vector<double>& v,
                        bool* finite);

  bool SeenDirect(uint64_t ticket);

  // n bytes at `address` in process pid; a refusal by the kernel (no
  // ptrace rights, seccomp) switches this channel to streaming.
  bool ReadRemote(pid_t pid, void* dst, uint64_t address, std::size_t n);

  // One exchange on `c`: op SEND (or MAP, read with process_vm_readv).
  // Returns ok, or an error; *reusable tells whether c may go back to the
  // pool, *retry whether a fresh connection may succeed.
  absl::StatusOr<BulkValues> Exchange(const BulkRef& r, const std::string& peer, idle_conn c,
                                      bool map, bool* reusable, bool* retry, bool* single);

  // --------------------------------------------------------- in place
  // (bulk_in_place.cpp)

  // The connection holding r's sender's offers (opened on first use), or
  // null when its Unix socket does not answer.
  std::shared_ptr<internal::HoldLink> LinkTo(const BulkRef& r);

  // Forgets a broken link and what was mapped through it (views keep
  // their own mappings).
  void DropLink(const BulkRef& r, const std::shared_ptr<internal::HoldLink>& link);

  // r's segment mapped here: cached, else asked for on `link` (its mutex
  // held by the caller). Errors: DataLoss naming what was wrong.
  absl::StatusOr<std::shared_ptr<internal::PeerSegment>> SegmentOf(const BulkRef& r,
                                                                   const std::string& peer,
                                                                   internal::HoldLink& link);

  // Reads r in place from the sender's arena: holds the offer, maps its
  // segment, checks the reference against it. nullopt when that path is not open to us
  // (no answer on the Unix socket, a broken link): the caller then fetches
  // by copy, which says why if that fails too.
  std::optional<absl::StatusOr<BulkValues>> InPlace(const BulkRef& r, const std::string& peer);
};

}  // namespace dml::net
