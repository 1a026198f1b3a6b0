#pragma once
// The key-value parameter store with dynamic parameter allocation (Lapse:
// Renz-Wieland et al., PVLDB 13(11), 2020). A group of N nodes (one per
// process, or several in one process for tests) holds keys [0, keys), each
// key a vector of `value_len` doubles. Ownership moves per block of `block`
// consecutive keys: block b's *home* node (range partition of the blocks)
// records its current owner; the owner alone holds the values.
//
// Operations (pull, push = add, localize) are asynchronous and return a
// handle to wait on. On keys this node owns they run at once on the calling
// thread (shared memory, no message). Others travel as messages to the
// owner, which answers the requester directly:
//  - to the owner in the location cache, else to the home node; a node that
//    does not own a key forwards it to the home node (keeping the original
//    requester), the home node forwards it to the owner. A stale cache entry
//    therefore costs at most one extra forward.
//  - localize(keys): LOCALIZE requester -> home (the home records the new
//    owner at once), HAND_OVER home -> old owner, TRANSFER old owner ->
//    requester: 3 messages, 2 where the home is the requester or the old
//    owner. Operations that reach the new owner before the values land
//    (local or remote, and later hand-overs) wait in a queue and run in
//    arrival order when they land.
//
// Guarantees: operations on one key are applied by its single owner, each
// atomically, in the order they reach it, so synchronous operations (issue,
// then wait) on one key are sequentially consistent (linearizable); no push
// is lost or applied twice across relocations. Not survived: the loss of a
// node (its process ends, its connection breaks): its keys are gone, so
// every operation in flight, every later call and Barrier return
// Unavailable naming the lost rank (a hung node is only noticed by Wait's
// timeout: DeadlineExceeded).
// With `dynamic = false`, localize does nothing: classic static allocation
// (a parameter server with range-partitioned keys).
//
// Thread-safety: a KvNode may be used from any number of threads at once.
// Within one call, keys must be distinct. Errors are values: bad keys or
// sizes give InvalidArgument from the call (nothing is sent); a malformed
// message from a peer is dropped, logged once per kind and counted.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace dml {

/// How a key-value group is laid out. Every node of a group must use the
/// same options.
struct KvOptions {
  int64_t keys = 0;        ///< key space [0, keys), > 0
  int32_t value_len = 1;   ///< doubles per key, >= 1
  int64_t block = 1;       ///< keys per ownership block, >= 1
  bool dynamic = true;     ///< false: localize is a no-op (static allocation)
  bool location_cache = true;  ///< remember owners learned from answers
  /// Ranks below this are home to no keys (they hold only what they
  /// localize): the blocks are range-partitioned over ranks [first_home_rank,
  /// nodes). A coordinator's member that runs no workers is rank 0 with 1
  /// here. Must be below the group's size.
  int32_t first_home_rank = 0;
  /// How long Wait waits for an operation before DeadlineExceeded.
  double op_timeout_seconds = 60.0;
  /// The group's secret (Join, Listen): every pair of nodes proves it to
  /// each other when they connect (HMAC-SHA256 challenges both ways,
  /// dml/net/admission.hpp), and the node then drops every message from a
  /// process that has not (before decoding it, logged and counted:
  /// actors::RequireAdmission, for the node's own actor system, so a
  /// dml-node's gate stays as it is). Empty: no admission (trusted
  /// networks).
  std::string secret;
};

/// Counters of one node (since it started).
struct KvStats {
  int64_t local_keys = 0;    ///< keys of this node's operations served in place
  int64_t remote_keys = 0;   ///< keys of this node's operations sent to other nodes
  int64_t queued_keys = 0;   ///< keys that waited for a relocation to land here
  int64_t messages = 0;      ///< messages sent (all kinds)
  int64_t bytes = 0;         ///< payload bytes sent (keys and values)
  int64_t localize_messages = 0;  ///< LOCALIZE sent
  int64_t hand_over_messages = 0; ///< HAND_OVER sent
  int64_t transfer_messages = 0;  ///< TRANSFER sent
  int64_t forwards = 0;      ///< operation messages this node forwarded
  int64_t blocks_in = 0;     ///< blocks relocated to this node
  int64_t blocks_out = 0;    ///< blocks relocated away from this node
  int64_t max_hops = 0;      ///< most forwards any answer to this node's operations took
  int64_t rejected = 0;      ///< malformed messages from peers, dropped
  /// Adds `o`'s counters (max_hops: the larger), for a group's totals.
  KvStats& operator+=(const KvStats& o) {
    local_keys += o.local_keys;
    remote_keys += o.remote_keys;
    queued_keys += o.queued_keys;
    messages += o.messages;
    bytes += o.bytes;
    localize_messages += o.localize_messages;
    hand_over_messages += o.hand_over_messages;
    transfer_messages += o.transfer_messages;
    forwards += o.forwards;
    blocks_in += o.blocks_in;
    blocks_out += o.blocks_out;
    max_hops = max_hops > o.max_hops ? max_hops : o.max_hops;
    rejected += o.rejected;
    return *this;
  }
};

namespace detail {
struct kv_op;
struct kv_group;
}  // namespace detail

/// An operation in flight. Copyable; empty handles are done.
class KvHandle {
 public:
  KvHandle() = default;
  /// Whether the operation has completed (its results are written).
  bool Done() const;
  /// Largest number of forwards any part of the operation took.
  int32_t Hops() const;

 private:
  friend class KvNode;
  explicit KvHandle(std::shared_ptr<detail::kv_op> op) : op_(std::move(op)) {}
  std::shared_ptr<detail::kv_op> op_;
};

/// One node of a key-value group. Thread-safe; not copyable. Destroying it
/// stops its node (in a group of processes, the others then lose its keys).
class KvNode {
 public:
  ~KvNode();
  KvNode(const KvNode&) = delete;
  KvNode& operator=(const KvNode&) = delete;

  /// A group of `nodes` nodes in this process (tests, one-node runs); they
  /// share one actor system with `threads` scheduler threads (0: one per
  /// core). The nodes' actors run in that system's network thread (they are
  /// brokers), not on the scheduler threads. Errors: InvalidArgument for bad
  /// options.
  static absl::StatusOr<std::vector<std::unique_ptr<KvNode>>> StartLocalGroup(
      int nodes, const KvOptions& options, int threads = 0);

  /// This process's node `rank` of a group of processes at `peers`
  /// ("host:port", one per rank, the same list everywhere): listens on
  /// peers[rank]'s port (on `listen_host`, default: peers[rank]'s host) and
  /// connects to every other node, retrying until `connect_timeout`. Returns
  /// once it can reach all of them. With options.secret, each connection
  /// proves it both ways first. Errors: InvalidArgument (options, rank, an
  /// address), Unavailable (a port in use, a peer not reached in time),
  /// PermissionDenied (a peer that refused our proof, failed to prove the
  /// secret, wants one where we have none, or checks none where we do).
  static absl::StatusOr<std::unique_ptr<KvNode>> Join(
      const KvOptions& options, int rank, const std::vector<std::string>& peers,
      std::chrono::duration<double> connect_timeout = std::chrono::seconds(30),
      std::string listen_host = {}, int threads = 0);

  /// Join in two halves, for a group whose ports are known only once its
  /// nodes listen (a coordinator that places a job's nodes asks each for
  /// its port, then hands every one the list). Listen publishes this node
  /// on host:port (port 0: any free port; port() says which) and returns
  /// it unconnected: operations and Barrier fail FailedPrecondition until
  /// Connect has returned OK. Connect takes the group's `peers` (the same
  /// list everywhere, one per rank; this node's own entry is not dialled)
  /// and finishes as Join does; it may be called once. Errors: those of
  /// Join; FailedPrecondition for a second Connect or a node not made by
  /// Listen; InvalidArgument for a list of the wrong length.
  static absl::StatusOr<std::unique_ptr<KvNode>> Listen(const KvOptions& options, int rank,
                                                        int nodes, const std::string& host,
                                                        uint16_t port = 0, int threads = 0);
  absl::Status Connect(const std::vector<std::string>& peers,
                       std::chrono::duration<double> connect_timeout = std::chrono::seconds(30));
  /// The port this node listens on (Listen, Join); 0 in a local group.
  uint16_t port() const;

  /// Reads keys into out[i * value_len ...] (out must hold keys.size() *
  /// value_len doubles and stay valid until the handle is done). No keys: a
  /// handle that is done (as for Push).
  absl::StatusOr<KvHandle> Pull(absl::Span<const int64_t> keys, double* out);
  /// Adds deltas[i * value_len ...] to key i (copied at once).
  absl::StatusOr<KvHandle> Push(absl::Span<const int64_t> keys, absl::Span<const double> deltas);
  /// Moves ownership of the blocks of `keys` to this node; done when all
  /// have landed here (they may move on afterwards). Unlike Pull and Push,
  /// `keys` may repeat (a union of minibatches' keys): each block moves once.
  absl::StatusOr<KvHandle> Localize(absl::Span<const int64_t> keys);
  /// Waits for `h` (at most the options' op_timeout_seconds): its status
  /// (Unavailable once a node of the group is lost).
  absl::Status Wait(const KvHandle& h);

  /// Blocks until every node of the group has called Barrier the same
  /// number of times (or `timeout`: DeadlineExceeded).
  absl::Status Barrier(std::chrono::duration<double> timeout = std::chrono::seconds(120));

  /// Which node owns `key` now, as this node knows it: itself, its cache, or
  /// the home node (only exact at the home node or the owner); -1 for a key
  /// outside [0, keys).
  int32_t OwnerHint(int64_t key) const;
  /// Whether this node owns `key`'s block now (values resident here); false
  /// for a key outside [0, keys).
  bool Owns(int64_t key) const;

  int32_t rank() const;
  int32_t size() const;
  const KvOptions& options() const;
  KvStats Stats() const;

  struct Impl;  ///< opaque

 private:
  explicit KvNode(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Checks options (keys > 0, value_len >= 1, block >= 1, timeout > 0):
/// InvalidArgument. (StartLocalGroup and Join also refuse, ResourceExhausted,
/// values that would not fit this process's memory, dml::MemoryLimit: the
/// whole store, or the node's home range.)
absl::Status ValidateKvOptions(const KvOptions& o);

}  // namespace dml
