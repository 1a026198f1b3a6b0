#pragma once
// The state machine of one key-value node (dml/actors/kv.hpp), without CAF:
// the node's blocks, its home table and location cache, and the operations
// in flight. The actor glue (kv.cpp) feeds it peers' messages through
// Receive and gives it a function that sends; tests can drive it the same
// way. Thread-safe: user threads call Pull/Push/Localize while the node's
// actor calls Receive.
//
// Locking: per-stripe mutexes guard every block's slot, home record and
// cache entry; an operation's mutex guards its counters. Order: stripe,
// then operation, then the table of operations; never the reverse.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dml/actors/kv.hpp"
#include "dml/net/payloads.hpp"

namespace dml::detail {

/// One user operation (KvHandle's state).
struct kv_op {
  net::kv_kind kind = net::kv_kind::kPull;
  uint64_t id = 0;           ///< set once registered for answers (0: never)
  int32_t value_len = 1;
  double* out = nullptr;     ///< pull: where answers go
  std::mutex mu;
  std::condition_variable cv;
  int64_t remaining = 0;     ///< keys (pull, push) or blocks (localize) not yet done
  bool done = false;
  int32_t hops = 0;
  absl::Status status;  ///< set when the operation failed (a lost node)
  absl::flat_hash_map<int64_t, int64_t> pos;  ///< pull: key -> index, for keys served elsewhere
};

class KvCore {
 public:
  using SendFn = std::function<void(int32_t to, net::kv_message m)>;

  KvCore(const KvOptions& options, int32_t rank, int32_t nodes);
  /// Must be set before the first operation or message.
  void SetSend(SendFn send) { send_ = std::move(send); }

  /// The operations of KvNode (keys already checked by Check).
  std::shared_ptr<kv_op> Pull(absl::Span<const int64_t> keys, double* out);
  std::shared_ptr<kv_op> Push(absl::Span<const int64_t> keys, absl::Span<const double> deltas);
  std::shared_ptr<kv_op> Localize(absl::Span<const int64_t> keys);
  /// InvalidArgument for keys out of range or repeated within one call.
  absl::Status CheckKeys(absl::Span<const int64_t> keys) const;

  /// A peer's message (or, for barriers, one of ours).
  void Receive(net::kv_message m);

  /// Node `rank` is gone (its process ended or its connection broke): its
  /// keys are lost with it, so every operation in flight fails, and so does
  /// every later one (Lost()).
  void PeerLost(int32_t rank);
  /// Tells every peer this node stops on purpose (its going is then no loss
  /// to them: a group that ends after a last barrier ends cleanly), and
  /// waits (at most `timeout`) until each has acknowledged, left or gone,
  /// so that nothing sent before is lost with this process.
  void Leave(std::chrono::duration<double> timeout = std::chrono::seconds(5));
  /// Why operations fail now: OK while the group is whole.
  absl::Status Lost() const;

  /// Barrier: sends "reached" to rank 0 and returns the generation to wait for.
  uint64_t EnterBarrier();
  bool WaitBarrier(uint64_t generation, std::chrono::duration<double> timeout);

  int32_t OwnerHint(int64_t key) const;
  bool Owns(int64_t key) const;
  KvStats Stats() const;
  std::string LastRejection() const;
  int32_t rank() const { return rank_; }
  int32_t nodes() const { return nodes_; }
  const KvOptions& options() const { return options_; }

  /// Marks `op` done after `n` more of its keys or blocks.
  static void Complete(kv_op& op, int64_t n, KvCore* core);

 private:
  // What waits for a block's values to land here.
  struct Arrival {
    std::vector<net::kv_message> queue;           ///< operations and hand-overs, in order
    std::vector<std::shared_ptr<kv_op>> waiters;  ///< localizes
  };
  // One block this node owns or awaits (40 bytes, values included up to
  // 2 doubles: a node homes up to millions of them, and with one-key
  // blocks a second allocation would cost every access a cache miss).
  struct Slot {
    bool owned = false;
    bool arriving = false;  ///< then `arrival` is set
    absl::InlinedVector<double, 2> values;
    std::unique_ptr<Arrival> arrival;
  };
  struct Stripe {
    mutable std::mutex mu;
    absl::flat_hash_map<int64_t, Slot> slots;
    absl::flat_hash_map<int64_t, int32_t> cache;
  };

  int64_t BlockOf(int64_t key) const { return key / options_.block; }
  int64_t BlockKeys(int64_t b) const;
  int32_t HomeOf(int64_t b) const;
  Stripe& StripeOf(int64_t b) { return stripes_[static_cast<std::size_t>(b) % stripes_.size()]; }
  const Stripe& StripeOf(int64_t b) const {
    return stripes_[static_cast<std::size_t>(b) % stripes_.size()];
  }
  // Keys of one call grouped by stripe (a counting sort): key order[j]
  // for j in [start[s], start[s + 1]) lies in stripe s; block[i] is key
  // i's block. Reused across calls (thread-local) to save allocations.
  struct StripeGroups {
    std::vector<int64_t> block;
    std::vector<uint32_t> order;
    std::vector<std::size_t> start, fill;
  };
  void GroupByStripe(absl::Span<const int64_t> keys, StripeGroups& g) const;
  // Calls fn(stripe, i, block of key i) for every key of a call, grouped by
  // stripe, with the stripe locked: each lock is held for a run of at most
  // a few hundred keys (the network thread serves peers under the same
  // locks), and slots are prefetched a few lookups ahead of their use.
  template <class Fn>
  void ForEachByStripe(absl::Span<const int64_t> keys, Fn&& fn);
  int32_t& HomeOwner(int64_t b) { return home_owner_[static_cast<std::size_t>(b - home_begin_)]; }
  // Where to send an operation on block b that this node neither owns nor
  // awaits (stripe locked). `forwarded`: never trust the cache (bounds the
  // cost of a stale entry to one extra forward).
  int32_t RouteLocked(Stripe& s, int64_t b, bool forwarded);
  void Register(const std::shared_ptr<kv_op>& op);
  // A pull or push (deltas null: a pull into `out`): in place where this
  // node owns the key, queued where its block is on the way here, else sent.
  std::shared_ptr<kv_op> Issue(net::kv_kind kind, absl::Span<const int64_t> keys, double* out,
                               const double* deltas);
  // The entry of `slot`'s arrival queue that collects keys of operation
  // (requester, op), a new one unless the last entry is that operation's.
  net::kv_message& QueueFor(Slot& slot, net::kv_kind kind, int32_t requester, int32_t sender,
                            uint64_t op, int32_t hops);
  // The end of a pull or push: counts what was served in place or queued
  // here, completes those keys, and sends the rest to their owners.
  void Dispatch(kv_op& op, net::kv_kind kind, int64_t served, int64_t queued,
                std::map<int32_t, net::kv_message>& remote);
  void Send(int32_t to, net::kv_message m);
  void Reject(std::string why);
  absl::Status CheckMessage(const net::kv_message& m) const;

  // Serves (or queues, or forwards) the keys of a pull or push message.
  void HandleOperation(net::kv_message m);
  void HandleAnswer(const net::kv_message& m);
  void HandleLocalize(int32_t requester, const std::vector<int64_t>& blocks);
  void HandleHandOver(int32_t new_owner, const std::vector<int64_t>& blocks);
  void HandleTransfer(const net::kv_message& m);
  // Serves the keys of block b in `m` against `slot` (owned, stripe locked):
  // appends to `answer` (pull values or push acknowledgements).
  void ServeLocked(Slot& slot, int64_t b, const net::kv_message& m, std::size_t key_index,
                   net::kv_message& answer);
  // Delivers an answer to its requester (this node: in place).
  void Answer(net::kv_message answer);

  const KvOptions options_;
  const int32_t rank_;
  const int32_t nodes_;
  const int64_t blocks_;
  int64_t home_begin_ = 0, home_end_ = 0;
  std::vector<Stripe> stripes_;
  std::vector<int32_t> home_owner_;  // guarded by the block's stripe
  SendFn send_;

  std::mutex ops_mu_;
  uint64_t next_op_ = 1;
  absl::flat_hash_map<uint64_t, std::weak_ptr<kv_op>> ops_;

  std::mutex barrier_mu_;
  std::condition_variable barrier_cv_;
  uint64_t barrier_entered_ = 0;    // this node's barriers entered
  uint64_t barrier_released_ = 0;   // generations released
  absl::flat_hash_map<uint64_t, int32_t> barrier_arrivals_;  // rank 0 only

  mutable std::mutex lost_mu_;
  absl::Status lost_;
  std::condition_variable lost_cv_;
  // Guarded by lost_mu_, per rank: said it leaves; acknowledged our
  // leaving; its actor went away.
  std::vector<bool> left_, leave_acked_, gone_;

  mutable std::mutex reject_mu_;
  std::string last_rejection_;

  struct Counters {
    std::atomic<int64_t> local_keys{0}, remote_keys{0}, queued_keys{0}, messages{0}, bytes{0},
        localize{0}, hand_over{0}, transfer{0}, forwards{0}, blocks_in{0}, blocks_out{0},
        max_hops{0}, rejected{0};
  } count_;
};

}  // namespace dml::detail
