#pragma once
// The bulk channel: large dense vectors of actor messages between processes
// travel beside CAF's middleman instead of through it. CAF 0.17 copies a
// message's bytes several times on each side (~1.3 GB/s on loopback at
// best); here the receiver takes the sender's buffer in one pass.
//
// How: the sender Offers the vector's shared buffer to its process's
// BulkChannel and puts a wire.capnp BulkVector (a BulkRef) into the CAF
// message instead of the values. The receiver's decoder Fetches it once:
//   - from a process on the same machine (its abstract Unix socket
//     answers, in this network namespace, to processes of its own user
//     or of BulkOptions::allowed_uids: SO_PEERCRED, others are hung up
//     on): single copy, process_vm_readv
//     straight from the sender's buffer, as MPI's shared-memory transport
//     does (CMA). The reference carries the buffer's address and that of a
//     slot holding {ticket, byte count} while the offer is held, so the
//     receiver reads with no request: the slot (held, at the announced
//     size?), the values, the slot's ticket again (still there: the buffer
//     was alive throughout), then a RELEASE it does not wait on; if a check
//     fails it asks by the protocol below, which says why. A reference is
//     good for one fetch: the reader remembers the last 4096 tickets it read
//     directly, as the sender may not have read their RELEASE yet (once it
//     has, the cleared slot refuses a repeat). Where the kernel refuses
//     such reads (no ptrace rights, seccomp), the bytes stream over the
//     Unix socket;
//   - from a block of the sender's shared arena (Allocate), on the same
//     machine: no copy at all. The receiver holds the offer (HOLD, one
//     round trip on a connection it keeps to that sender), maps the
//     arena's segment once (SEGMENT: a memfd sealed against shrinking and
//     against future writes, so that no descriptor of it writes the
//     sender's arena (a read-only descriptor on kernels before 5.1),
//     passed with SCM_RIGHTS, mapped read-only), checks the values finite
//     where they lie and hands out a view of them; RELEASE goes when the
//     last copy of the view goes (or the connection closes). This trusts a
//     same-host peer, which the same user runs and which could write our
//     memory anyway where the kernel lets us read its (CMA), not to write
//     a block it offered: blocks are immutable by contract (a dvec's);
//   - otherwise over TCP from the sender's host:port.
// Values are checked finite chunk by chunk as they land (in cache), so the
// receiving handler need not read them again for that.
// An offer nobody fetches is dropped after kBulkTtl; offers beyond
// kBulkMaxPendingBytes are refused (the vector then stays inline).
//
// Byte protocol v2 (little-endian; a connection carries many exchanges):
//   request  16 bytes: u32 magic "DMLB" (0x424c4d44), u16 version (2),
//            u16 op, u64 ticket
//     op 1 SEND: answer the header, then (status ok) the bytes
//     op 2 MAP (Unix socket only): answer the header with the buffer's
//          address in the sender; the offer is held until op 3
//     op 3 RELEASE: drop the mapped, held (or directly read) offer; no answer
//     op 4 HOLD (Unix only): keep the offer, answer the header; the offer
//          is then served to nobody else, never expires, and is dropped on
//          RELEASE from this connection or when this connection closes
//     op 5 SEGMENT (Unix only): `ticket` is an arena segment id; answer
//          the header (byte count: the segment's size) with the segment's
//          memfd attached (SCM_RIGHTS; it cannot write, see above)
//   response 32 bytes: u32 magic, u32 status (0 ok, 1 unknown or expired
//            ticket, 2 op not allowed here), u64 ticket, u64 byte count,
//            u64 address (MAP only, else 0)
//
// Thread-safety: every member of BulkChannel may be called from any thread.
// Errors are absl::Status values that name the peer and the ticket.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dml::net {

/// Vectors below this many bytes stay inline in the CAF message: a fetch
/// costs a round trip, which only pays off once copies dominate.
inline constexpr std::size_t kBulkMinBytes = std::size_t{128} << 10;
/// How long an offer waits for its fetch.
inline constexpr std::chrono::seconds kBulkTtl{60};
/// A fetch (or a held MAP) that stalls this long fails: no hang on a hung peer.
inline constexpr std::chrono::seconds kBulkIoTimeout{20};
/// Offers beyond this many bytes waiting are refused (memory bound when
/// receivers die before fetching).
inline constexpr std::size_t kBulkMaxPendingBytes = std::size_t{2} << 30;
/// The shared arena grows in segments of this size (a larger block gets a
/// segment of its own) up to kBulkArenaMaxBytes; Allocate then fails.
inline constexpr std::size_t kBulkArenaSegmentBytes = std::size_t{64} << 20;
/// Most bytes the shared arena holds in all.
inline constexpr std::size_t kBulkArenaMaxBytes = std::size_t{2} << 30;

/// A writable block of a channel's shared arena. The block returns to the
/// arena when the last copy of `owner` goes; until then nobody else gets
/// it. Write it before offering it, never after (receivers on this machine
/// read it in place).
struct SharedBlock {
  std::shared_ptr<void> owner;  ///< holds the block; pass it to Offer
  double* data = nullptr;       ///< `count` doubles, uninitialized
  std::size_t count = 0;
};

/// Where an offered vector waits (what a wire.capnp BulkVector carries).
struct BulkRef {
  std::string host;   ///< the sender's TCP endpoint (address or name)
  uint16_t port = 0;  ///< its TCP port
  std::string local;  ///< the sender's abstract Unix socket name; "" = none
  uint64_t ticket = 0;  ///< random, single use
  uint64_t count = 0;  ///< doubles
  /// Same-host direct read (0, 0: none): where the values and the offer's
  /// slot {ticket, bytes} are in the sender's memory.
  uint64_t address = 0;
  uint64_t slot = 0;
  /// Same-host in-place read (0: none): the values are `offset` bytes into
  /// segment `segment` (1-based) of the sender's shared arena.
  uint32_t segment = 0;
  uint64_t offset = 0;
};

/// Where a process serves its offers: what it advertises to its peers when
/// it is admitted, and the only place they fetch its references from (a
/// BulkRef names its endpoint, but a peer could name another).
struct BulkEndpoint {
  std::string host;   ///< TCP address; "" = the process serves no offers
  uint16_t port = 0;
  std::string local;  ///< abstract Unix socket name; "" = none
  bool operator==(const BulkEndpoint& o) const {
    return host == o.host && port == o.port && local == o.local;
  }
  bool operator!=(const BulkEndpoint& o) const { return !(*this == o); }
  /// "host:port" (and " local" where there is one); "none" when not serving.
  std::string ToString() const;
  /// For a message: "host\nport\nlocal" ("" when not serving).
  std::string Encode() const;
  /// Inverse of Encode. Errors: InvalidArgument naming the part that is
  /// malformed (three lines, a port in [1, 65535], no NUL, each part at
  /// most 255 bytes).
  static absl::StatusOr<BulkEndpoint> Decode(std::string_view text);
};
/// The endpoint `ref` names.
inline BulkEndpoint EndpointOf(const BulkRef& ref) { return {ref.host, ref.port, ref.local}; }

/// A fetched vector: `count` doubles at `values`, alive while `owner` is.
/// Either a buffer of this process (it returns to the channel's pool when
/// the last reference goes, and the next fetch of that length reuses it),
/// or, for an offer from the sender's shared arena, the sender's own block
/// mapped read-only in place: then `owner` holds the offer (the sender
/// keeps the block unchanged and unreused until the owner goes).
struct BulkValues {
  std::shared_ptr<const void> owner;  ///< keeps `values` alive (see above)
  const double* values = nullptr;
  std::size_t count = 0;
  /// The same as owner when a buffer of this process holds the values.
  std::shared_ptr<const std::vector<double>> vector;
  /// Every value was checked finite while it arrived (never set for an
  /// in-place read, whose consumer checks as it reads).
  bool finite = false;
  /// Read in place from the sender's shared arena (no copy).
  bool in_place = false;
};

/// How a BulkChannel fetches.
struct BulkOptions {
  /// Fetch from processes on this machine through their Unix socket (single
  /// copy where the kernel allows it). Off: always TCP (benchmarks of the
  /// cross-machine path).
  bool same_host = true;
  /// Users besides this process's effective uid whose processes the Unix
  /// socket serves (MAP, HOLD and SEGMENT hand out our memory); any other
  /// peer is hung up on, logged and counted (refused_peers).
  std::vector<uint32_t> allowed_uids = {};
};

/// Counters of one channel (tests, metrics).
struct BulkStats {
  uint64_t offers = 0;          ///< offers taken
  uint64_t refused_offers = 0;  ///< offers refused (over kBulkMaxPendingBytes)
  uint64_t fetches = 0;         ///< successful fetches, all paths
  uint64_t single_copy = 0;     ///< ... of which process_vm_readv
  uint64_t direct = 0;          ///< ... of those with no request (address in the ref)
  uint64_t unix_stream = 0;     ///< ... of which streamed over the Unix socket
  uint64_t in_place = 0;        ///< ... of which read in place from a peer's arena
  uint64_t bytes = 0;           ///< bytes fetched
  uint64_t refused_peers = 0;   ///< Unix connections refused (another user)
};

/// A process's endpoint for bulk vectors: serves its offers and fetches
/// peers'. Owns its listeners, threads, pooled connections and shared arena.
/// Thread-safe.
class BulkChannel {
 public:
  /// Not serving yet (see Serve); with same_host, creates the shared arena.
  explicit BulkChannel(BulkOptions options = {});
  /// Stops serving: closes the listeners and every connection, joins the
  /// threads; unfetched offers are dropped (their fetches fail NotFound or
  /// Unavailable).
  ~BulkChannel();
  BulkChannel(const BulkChannel&) = delete;
  BulkChannel& operator=(const BulkChannel&) = delete;

  /// Starts serving offers: TCP on host:port (0 = a free port) and, with
  /// same_host, an abstract Unix socket (best effort: without it, same-host
  /// peers fetch over TCP). Errors: Unavailable if the address cannot be
  /// resolved or bound; FailedPrecondition if the channel serves already.
  absl::Status Serve(const std::string& host, uint16_t port = 0);
  /// Whether Serve succeeded; then the host it was given and the TCP port
  /// actually bound (0 before).
  bool serving() const;
  std::string host() const;
  uint16_t port() const;
  /// What Offer's references name (empty when not serving).
  BulkEndpoint endpoint() const;

  /// Keeps `owner` alive until the `count` doubles at `data` (inside it)
  /// are fetched once, or kBulkTtl passes, and returns their reference.
  /// nullopt when the channel does not serve or too many bytes wait.
  std::optional<BulkRef> Offer(std::shared_ptr<const void> owner, const double* data,
                               std::size_t count);
  /// Offers not fetched yet.
  std::size_t pending() const;

  /// `count` doubles (uninitialized) in this channel's shared arena: an
  /// Offer of them lets same-host receivers read them in place. Freed
  /// blocks are kept for reuse (same byte size) and the arena's memory is
  /// returned to the system only when the channel and every block are
  /// gone. nullopt when there is no arena (same_host off, memfd refused)
  /// or kBulkArenaMaxBytes are in use: the caller then uses the heap.
  std::optional<SharedBlock> Allocate(std::size_t count);

  /// Fetches `ref` (same-host path first where possible). Connections are
  /// pooled per peer. Errors: Unavailable (connect, I/O, timeout),
  /// NotFound (the peer does not hold the ticket), DataLoss (a reply that
  /// breaks the protocol or announces another size).
  absl::StatusOr<BulkValues> Fetch(const BulkRef& ref);

  /// A snapshot of the counters.
  BulkStats stats() const;
  /// Connections to the Unix socket refused because their peer runs as a
  /// user not allowed (BulkOptions::allowed_uids) or could not be named.
  uint64_t refused_peers() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The local address this machine uses to reach host:port (no packet is
/// sent): what a process tells peers to fetch its offers from. Errors:
/// Unavailable if the host does not resolve or has no route.
absl::StatusOr<std::string> LocalAddressFor(const std::string& host, uint16_t port);

}  // namespace dml::net
