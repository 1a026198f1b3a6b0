#include "dml/actors/internal/kv_core.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"

namespace dml::detail {

using net::kv_kind;
using net::kv_message;

namespace {

constexpr std::size_t kStripes = 64;

int64_t DivCeil(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Bytes a message puts on the wire, for the counters (header estimate:
// CAF's and the envelope's framing).
int64_t WireBytes(const kv_message& m) {
  return 48 + static_cast<int64_t>((m.keys.size() + m.values.size()) * 8);
}

void RaiseMax(std::atomic<int64_t>& a, int64_t v) {
  int64_t cur = a.load(std::memory_order_relaxed);
  while (v > cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

// Lookups issued ahead of their use: a node's slots are too many for the
// caches, and each lookup is then a miss that prefetching overlaps.
constexpr std::size_t kPrefetchAhead = 8;
// Most keys handled under one hold of a stripe's lock.
constexpr std::size_t kKeysPerLock = 256;

kv_message Message(kv_kind kind, int32_t requester, int32_t sender, uint64_t op) {
  kv_message m;
  m.kind = static_cast<uint8_t>(kind);
  m.requester = requester;
  m.sender = sender;
  m.op = op;
  return m;
}

}  // namespace

KvCore::KvCore(const KvOptions& options, int32_t rank, int32_t nodes)
    : options_(options),
      rank_(rank),
      nodes_(nodes),
      blocks_(DivCeil(options.keys, options.block)),
      stripes_(kStripes),
      left_(static_cast<std::size_t>(nodes), false),
      leave_acked_(static_cast<std::size_t>(nodes), false),
      gone_(static_cast<std::size_t>(nodes), false) {
  // Home range: blocks b with first + floor(b * homes / blocks) == rank,
  // homes = nodes - first (ranks below first are home to none).
  const int32_t first = options.first_home_rank;
  const int64_t homes = nodes - first;
  const int64_t r = std::max<int64_t>(0, rank - first);
  home_begin_ = rank < first ? 0 : DivCeil(r * blocks_, homes);
  home_end_ = rank < first ? 0 : DivCeil((r + 1) * blocks_, homes);
  home_owner_.assign(static_cast<std::size_t>(home_end_ - home_begin_), rank);
  for (int64_t b = home_begin_; b < home_end_; ++b) {
    Slot& slot = StripeOf(b).slots[b];
    slot.owned = true;
    slot.values.assign(static_cast<std::size_t>(BlockKeys(b) * options_.value_len), 0.0);
  }
}

int64_t KvCore::BlockKeys(int64_t b) const {
  return std::min(options_.block, options_.keys - b * options_.block);
}

int32_t KvCore::HomeOf(int64_t b) const {
  const int32_t first = options_.first_home_rank;
  return first + static_cast<int32_t>((static_cast<__int128>(b) * (nodes_ - first)) / blocks_);
}

absl::Status KvCore::CheckKeys(absl::Span<const int64_t> keys) const {
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (keys[i] < 0 || keys[i] >= options_.keys) {
      return absl::InvalidArgumentError(absl::StrCat("key ", i, " (", keys[i], ") outside [0, ",
                                                     options_.keys, ")"));
    }
  }
  // Callers usually pass sorted keys: then a repeat is a neighbour, and
  // the check costs no allocation.
  if (std::adjacent_find(keys.begin(), keys.end(), std::greater_equal<int64_t>()) == keys.end()) {
    return absl::OkStatus();
  }
  absl::flat_hash_map<int64_t, std::size_t> seen;
  seen.reserve(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (auto [it, fresh] = seen.emplace(keys[i], i); !fresh) {
      return absl::InvalidArgumentError(
          absl::StrCat("key ", keys[i], " appears twice (at ", it->second, " and ", i, ")"));
    }
  }
  return absl::OkStatus();
}

void KvCore::Send(int32_t to, kv_message m) {
  m.sender = rank_;
  count_.messages.fetch_add(1, std::memory_order_relaxed);
  count_.bytes.fetch_add(WireBytes(m), std::memory_order_relaxed);
  switch (static_cast<kv_kind>(m.kind)) {
    case kv_kind::kLocalize: count_.localize.fetch_add(1, std::memory_order_relaxed); break;
    case kv_kind::kHandOver: count_.hand_over.fetch_add(1, std::memory_order_relaxed); break;
    case kv_kind::kTransfer: count_.transfer.fetch_add(1, std::memory_order_relaxed); break;
    default: break;
  }
  send_(to, std::move(m));
}

void KvCore::Reject(std::string why) {
  count_.rejected.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(reject_mu_);
  last_rejection_ = std::move(why);
}

std::string KvCore::LastRejection() const {
  std::lock_guard<std::mutex> lock(reject_mu_);
  return last_rejection_;
}

void KvCore::Register(const std::shared_ptr<kv_op>& op) {
  std::lock_guard<std::mutex> lock(ops_mu_);
  if (op->id != 0) return;
  op->id = next_op_++;
  ops_.emplace(op->id, op);
}

void KvCore::Complete(kv_op& op, int64_t n, KvCore* core) {
  if (n == 0) return;
  bool finished = false;
  {
    std::lock_guard<std::mutex> lock(op.mu);
    op.remaining -= n;
    if (op.remaining == 0) {
      op.done = true;
      finished = true;
      op.cv.notify_all();
    }
  }
  if (finished && core != nullptr && op.id != 0) {
    std::lock_guard<std::mutex> lock(core->ops_mu_);
    core->ops_.erase(op.id);
  }
}

int32_t KvCore::RouteLocked(Stripe& s, int64_t b, bool forwarded) {
  const int32_t home = HomeOf(b);
  if (home == rank_) return HomeOwner(b);
  if (!forwarded && options_.location_cache) {
    if (auto it = s.cache.find(b); it != s.cache.end() && it->second != rank_) return it->second;
  }
  return home;
}

// ------------------------------------------------------------ operations

void KvCore::Dispatch(kv_op& op, kv_kind kind, int64_t served, int64_t queued,
                      std::map<int32_t, kv_message>& remote) {
  count_.local_keys.fetch_add(served, std::memory_order_relaxed);
  count_.queued_keys.fetch_add(queued, std::memory_order_relaxed);
  Complete(op, served, this);
  for (auto& [to, m] : remote) {
    count_.remote_keys.fetch_add(static_cast<int64_t>(m.keys.size()), std::memory_order_relaxed);
    m.kind = static_cast<uint8_t>(kind);
    m.requester = rank_;
    m.op = op.id;
    Send(to, std::move(m));
  }
}

kv_message& KvCore::QueueFor(Slot& slot, kv_kind kind, int32_t requester, int32_t sender,
                             uint64_t op, int32_t hops) {
  // Keys of one operation that wait for the same block share one entry.
  auto& q = slot.arrival->queue;
  if (q.empty() || q.back().op != op || q.back().requester != requester ||
      q.back().kind != static_cast<uint8_t>(kind)) {
    q.push_back(Message(kind, requester, sender, op));
    q.back().hops = hops;
  }
  return q.back();
}

std::shared_ptr<kv_op> KvCore::Pull(absl::Span<const int64_t> keys, double* out) {
  return Issue(kv_kind::kPull, keys, out, nullptr);
}

std::shared_ptr<kv_op> KvCore::Push(absl::Span<const int64_t> keys,
                                    absl::Span<const double> deltas) {
  return Issue(kv_kind::kPush, keys, nullptr, deltas.data());
}

void KvCore::GroupByStripe(absl::Span<const int64_t> keys, StripeGroups& g) const {
  const std::size_t n = keys.size();
  g.block.resize(n);
  g.order.resize(n);
  g.start.assign(kStripes + 1, 0);
  for (std::size_t i = 0; i < n; ++i) {
    g.block[i] = BlockOf(keys[i]);
    ++g.start[static_cast<std::size_t>(g.block[i]) % kStripes + 1];
  }
  for (std::size_t s = 0; s < kStripes; ++s) g.start[s + 1] += g.start[s];
  g.fill.assign(g.start.begin(), g.start.end() - 1);
  for (std::size_t i = 0; i < n; ++i) {
    g.order[g.fill[static_cast<std::size_t>(g.block[i]) % kStripes]++] = static_cast<uint32_t>(i);
  }
}

template <class Fn>
void KvCore::ForEachByStripe(absl::Span<const int64_t> keys, Fn&& fn) {
  thread_local StripeGroups g;
  GroupByStripe(keys, g);
  for (std::size_t si = 0; si < kStripes; ++si) {
    Stripe& s = stripes_[si];
    for (std::size_t first = g.start[si]; first < g.start[si + 1]; first += kKeysPerLock) {
      const std::size_t last = std::min(g.start[si + 1], first + kKeysPerLock);
      std::lock_guard<std::mutex> lock(s.mu);
      for (std::size_t p = first; p < std::min(last, first + kPrefetchAhead); ++p) {
        s.slots.prefetch(g.block[g.order[p]]);
      }
      for (std::size_t p = first; p < last; ++p) {
        if (p + kPrefetchAhead < last) s.slots.prefetch(g.block[g.order[p + kPrefetchAhead]]);
        const std::size_t i = g.order[p];
        fn(s, i, g.block[i]);
      }
    }
  }
}

std::shared_ptr<kv_op> KvCore::Issue(kv_kind kind, absl::Span<const int64_t> keys, double* out,
                                     const double* deltas) {
  const bool push = kind == kv_kind::kPush;
  auto op = std::make_shared<kv_op>();
  op->kind = kind;
  op->value_len = options_.value_len;
  op->out = out;
  op->remaining = static_cast<int64_t>(keys.size());
  const auto vl = static_cast<std::size_t>(options_.value_len);
  std::map<int32_t, kv_message> remote;
  int64_t served = 0, queued = 0;
  ForEachByStripe(keys, [&](Stripe& s, std::size_t i, int64_t b) {
    const int64_t key = keys[i];
    auto it = s.slots.find(b);
    if (it != s.slots.end() && it->second.owned) {
      double* v = it->second.values.data() + (key - b * options_.block) * options_.value_len;
      if (push) {
        for (std::size_t j = 0; j < vl; ++j) v[j] += deltas[i * vl + j];
      } else {
        std::copy(v, v + vl, out + i * vl);
      }
      ++served;
      return;
    }
    Register(op);
    if (!push) {  // where its answer goes
      std::lock_guard<std::mutex> ol(op->mu);
      op->pos[key] = static_cast<int64_t>(i);
    }
    kv_message* m;
    if (it != s.slots.end() && it->second.arriving) {
      m = &QueueFor(it->second, kind, rank_, rank_, op->id, 0);
      ++queued;
    } else {
      m = &remote[RouteLocked(s, b, false)];
    }
    m->keys.push_back(key);
    if (push) m->values.insert(m->values.end(), deltas + i * vl, deltas + (i + 1) * vl);
  });
  Dispatch(*op, kind, served, queued, remote);
  return op;
}

std::shared_ptr<kv_op> KvCore::Localize(absl::Span<const int64_t> keys) {
  auto op = std::make_shared<kv_op>();
  op->kind = kv_kind::kLocalize;
  // One key per block (its first). Keys may repeat (a union of batches
  // repeats them): a repeated block is counted and waited for once per
  // repeat, and moves once (its later repeats find it owned or arriving).
  // With one-key blocks the keys are those already, unsorted: sorting the
  // union of a window of batches would cost more than the repeats.
  thread_local std::vector<int64_t> firsts;
  if (options_.block > 1) {
    firsts.clear();
    for (int64_t k : keys) firsts.push_back(BlockOf(k) * options_.block);
    std::sort(firsts.begin(), firsts.end());
    firsts.erase(std::unique(firsts.begin(), firsts.end()), firsts.end());
    keys = firsts;
  }
  op->remaining = options_.dynamic ? static_cast<int64_t>(keys.size()) : 0;
  if (!options_.dynamic || keys.empty()) {
    op->done = true;
    return op;
  }
  std::map<int32_t, kv_message> to_home;
  std::vector<int64_t> mine;  // blocks whose home is this node
  int64_t present = 0;
  ForEachByStripe(keys, [&](Stripe& s, std::size_t, int64_t b) {
    auto it = s.slots.find(b);
    if (it != s.slots.end() && it->second.owned) {
      ++present;
      return;
    }
    Slot& slot = it != s.slots.end() ? it->second : s.slots[b];
    Register(op);  // so that a lost node fails it (PeerLost)
    if (slot.arriving) {
      slot.arrival->waiters.push_back(op);
      return;
    }
    slot.arriving = true;
    slot.arrival = std::make_unique<Arrival>();
    slot.arrival->waiters.push_back(op);
    const int32_t home = HomeOf(b);
    if (home == rank_) {
      mine.push_back(b);
    } else {
      to_home[home].keys.push_back(b);
    }
  });
  Complete(*op, present, this);
  for (auto& [to, m] : to_home) {
    m.kind = static_cast<uint8_t>(kv_kind::kLocalize);
    m.requester = rank_;
    Send(to, std::move(m));
  }
  if (!mine.empty()) HandleLocalize(rank_, mine);
  return op;
}

// -------------------------------------------------------------- messages

absl::Status KvCore::CheckMessage(const kv_message& m) const {
  auto bad = [&m](std::string what) {
    return absl::InvalidArgumentError(absl::StrCat("kv message (kind ", static_cast<int>(m.kind),
                                                   ", from rank ", m.sender, "): ", what));
  };
  if (!m.wire_error.empty()) return bad(m.wire_error);
  if (m.sender < 0 || m.sender >= nodes_) return bad(absl::StrCat("sender outside [0, ", nodes_, ")"));
  if (m.requester < 0 || m.requester >= nodes_) {
    return bad(absl::StrCat("requester outside [0, ", nodes_, ")"));
  }
  const auto kind = static_cast<kv_kind>(m.kind);
  const auto vl = static_cast<std::size_t>(options_.value_len);
  switch (kind) {
    case kv_kind::kPull:
    case kv_kind::kPush:
    case kv_kind::kPullAnswer:
    case kv_kind::kPushAnswer: {
      for (std::size_t i = 0; i < m.keys.size(); ++i) {
        if (m.keys[i] >= options_.keys) {
          return bad(absl::StrCat("keys[", i, "] = ", m.keys[i], " >= ", options_.keys));
        }
      }
      const bool carries = kind == kv_kind::kPush || kind == kv_kind::kPullAnswer;
      const std::size_t want = carries ? m.keys.size() * vl : 0;
      if (m.values.size() != want) {
        return bad(absl::StrCat(m.values.size(), " values for ", m.keys.size(), " keys (want ",
                                want, ")"));
      }
      if ((kind == kv_kind::kPullAnswer || kind == kv_kind::kPushAnswer) &&
          (m.owner < 0 || m.owner >= nodes_)) {
        return bad("answer without a valid owner");
      }
      return absl::OkStatus();
    }
    case kv_kind::kLocalize:
    case kv_kind::kHandOver:
    case kv_kind::kTransfer: {
      std::size_t want = 0;
      for (std::size_t i = 0; i < m.keys.size(); ++i) {
        if (m.keys[i] >= blocks_) {
          return bad(absl::StrCat("blocks[", i, "] = ", m.keys[i], " >= ", blocks_));
        }
        if (kind == kv_kind::kLocalize && HomeOf(m.keys[i]) != rank_) {
          return bad(absl::StrCat("block ", m.keys[i], " is not homed at rank ", rank_));
        }
        want += static_cast<std::size_t>(BlockKeys(m.keys[i])) * vl;
      }
      if (kind != kv_kind::kTransfer) want = 0;
      if (m.values.size() != want) {
        return bad(absl::StrCat(m.values.size(), " values for ", m.keys.size(), " blocks (want ",
                                want, ")"));
      }
      if (kind == kv_kind::kHandOver && (m.owner < 0 || m.owner >= nodes_ || m.owner == rank_)) {
        return bad("hand-over to an invalid new owner");
      }
      return absl::OkStatus();
    }
    case kv_kind::kBarrier:
      if (rank_ != 0) return bad("barrier message at a rank other than 0");
      return absl::OkStatus();
    case kv_kind::kBarrierRelease:
    case kv_kind::kLeave:
    case kv_kind::kLeaveAck:
      return absl::OkStatus();
  }
  return bad("unknown kind");
}

void KvCore::Receive(kv_message m) {
  if (auto s = CheckMessage(m); !s.ok()) {
    Reject(std::string(s.message()));
    return;
  }
  switch (static_cast<kv_kind>(m.kind)) {
    case kv_kind::kPull:
    case kv_kind::kPush: HandleOperation(std::move(m)); return;
    case kv_kind::kPullAnswer:
    case kv_kind::kPushAnswer: HandleAnswer(m); return;
    case kv_kind::kLocalize: HandleLocalize(m.sender, m.keys); return;
    case kv_kind::kHandOver: HandleHandOver(m.owner, m.keys); return;
    case kv_kind::kTransfer: HandleTransfer(m); return;
    case kv_kind::kBarrier: {
      std::lock_guard<std::mutex> lock(barrier_mu_);
      if (++barrier_arrivals_[m.op] == nodes_) {
        barrier_arrivals_.erase(m.op);
        for (int32_t r = 1; r < nodes_; ++r) {
          Send(r, Message(kv_kind::kBarrierRelease, rank_, rank_, m.op));
        }
        barrier_released_ = std::max(barrier_released_, m.op);
        barrier_cv_.notify_all();
      }
      return;
    }
    case kv_kind::kBarrierRelease: {
      std::lock_guard<std::mutex> lock(barrier_mu_);
      barrier_released_ = std::max(barrier_released_, m.op);
      barrier_cv_.notify_all();
      return;
    }
    case kv_kind::kLeave: {
      {
        std::lock_guard<std::mutex> lock(lost_mu_);
        left_[static_cast<std::size_t>(m.sender)] = true;
        lost_cv_.notify_all();
      }
      // Messages between two nodes arrive in order, so this answer tells
      // the leaver that everything it sent us before has arrived.
      Send(m.sender, Message(kv_kind::kLeaveAck, rank_, rank_, 0));
      return;
    }
    case kv_kind::kLeaveAck: {
      std::lock_guard<std::mutex> lock(lost_mu_);
      leave_acked_[static_cast<std::size_t>(m.sender)] = true;
      lost_cv_.notify_all();
      return;
    }
  }
}

void KvCore::ServeLocked(Slot& slot, int64_t b, const kv_message& m, std::size_t i,
                         kv_message& answer) {
  const auto vl = static_cast<std::size_t>(options_.value_len);
  double* v = slot.values.data() + (m.keys[i] - b * options_.block) * options_.value_len;
  if (m.kind == static_cast<uint8_t>(kv_kind::kPush)) {
    const double* d = m.values.data() + i * vl;
    for (std::size_t j = 0; j < vl; ++j) v[j] += d[j];
  } else {
    answer.values.insert(answer.values.end(), v, v + vl);
  }
  answer.keys.push_back(m.keys[i]);
}

void KvCore::HandleOperation(kv_message m) {
  const bool push = m.kind == static_cast<uint8_t>(kv_kind::kPush);
  const auto vl = static_cast<std::size_t>(options_.value_len);
  kv_message answer = Message(push ? kv_kind::kPushAnswer : kv_kind::kPullAnswer, m.requester,
                              rank_, m.op);
  answer.owner = rank_;
  answer.hops = m.hops;
  std::map<int32_t, kv_message> forward;
  for (std::size_t i = 0; i < m.keys.size(); ++i) {
    const int64_t b = BlockOf(m.keys[i]);
    Stripe& s = StripeOf(b);
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.slots.find(b);
    if (it != s.slots.end() && it->second.owned) {
      ServeLocked(it->second, b, m, i, answer);
      continue;
    }
    kv_message* out;
    if (it != s.slots.end() && it->second.arriving) {
      out = &QueueFor(it->second, static_cast<kv_kind>(m.kind), m.requester, m.sender, m.op,
                      m.hops);
    } else {
      // Not the owner: to the home node (which knows), never by this
      // node's cache, so a stale entry costs at most one extra forward.
      const int32_t to = RouteLocked(s, b, /*forwarded=*/true);
      out = &forward[to];
    }
    out->keys.push_back(m.keys[i]);
    if (push) out->values.insert(out->values.end(), m.values.begin() + i * vl,
                                 m.values.begin() + (i + 1) * vl);
  }
  if (!answer.keys.empty()) Answer(std::move(answer));
  for (auto& [to, f] : forward) {
    f.kind = m.kind;
    f.requester = m.requester;
    f.op = m.op;
    f.hops = m.hops + 1;
    count_.forwards.fetch_add(1, std::memory_order_relaxed);
    Send(to, std::move(f));
  }
}

void KvCore::Answer(kv_message answer) {
  if (answer.requester == rank_) {
    HandleAnswer(answer);
  } else {
    const int32_t to = answer.requester;
    Send(to, std::move(answer));
  }
}

void KvCore::HandleAnswer(const kv_message& m) {
  if (m.owner != rank_ && options_.location_cache) {
    for (int64_t key : m.keys) {
      const int64_t b = BlockOf(key);
      Stripe& s = StripeOf(b);
      std::lock_guard<std::mutex> lock(s.mu);
      auto it = s.slots.find(b);
      if (it == s.slots.end() || (!it->second.owned && !it->second.arriving)) s.cache[b] = m.owner;
    }
  }
  std::shared_ptr<kv_op> op;
  {
    std::lock_guard<std::mutex> lock(ops_mu_);
    auto it = ops_.find(m.op);
    if (it != ops_.end()) op = it->second.lock();
  }
  if (!op) {
    Reject(absl::StrCat("answer for unknown operation ", m.op, " from rank ", m.sender));
    return;
  }
  RaiseMax(count_.max_hops, m.hops);
  const bool pull = m.kind == static_cast<uint8_t>(kv_kind::kPullAnswer);
  if (pull != (op->kind == kv_kind::kPull)) {
    Reject(absl::StrCat("answer of the wrong kind for operation ", m.op));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(op->mu);
    if (op->done) return;  // failed (a lost node): its buffer may be gone
    op->hops = std::max(op->hops, m.hops);
    if (pull) {
      const auto vl = static_cast<std::size_t>(op->value_len);
      for (std::size_t i = 0; i < m.keys.size(); ++i) {
        auto p = op->pos.find(m.keys[i]);
        if (p == op->pos.end()) continue;  // counted below as rejected
        std::copy(m.values.begin() + i * vl, m.values.begin() + (i + 1) * vl,
                  op->out + static_cast<std::size_t>(p->second) * vl);
        op->pos.erase(p);  // answered once
      }
    }
  }
  Complete(*op, static_cast<int64_t>(m.keys.size()), this);
}

void KvCore::HandleLocalize(int32_t requester, const std::vector<int64_t>& blocks) {
  std::map<int32_t, kv_message> hand_over;
  std::vector<int64_t> mine;
  for (int64_t b : blocks) {
    Stripe& s = StripeOf(b);
    std::lock_guard<std::mutex> lock(s.mu);
    int32_t& owner = HomeOwner(b);
    const int32_t old = owner;
    if (old == requester) continue;  // already recorded (a repeated request)
    owner = requester;
    if (old == rank_) {
      mine.push_back(b);
    } else {
      hand_over[old].keys.push_back(b);
    }
  }
  for (auto& [to, m] : hand_over) {
    m.kind = static_cast<uint8_t>(kv_kind::kHandOver);
    m.requester = requester;
    m.owner = requester;
    Send(to, std::move(m));
  }
  if (!mine.empty()) HandleHandOver(requester, mine);
}

void KvCore::HandleHandOver(int32_t new_owner, const std::vector<int64_t>& blocks) {
  kv_message transfer = Message(kv_kind::kTransfer, new_owner, rank_, 0);
  transfer.owner = rank_;
  for (int64_t b : blocks) {
    Stripe& s = StripeOf(b);
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.slots.find(b);
    if (it != s.slots.end() && it->second.arriving) {
      // Our own relocation of b has not landed: hand over after it.
      kv_message h = Message(kv_kind::kHandOver, new_owner, rank_, 0);
      h.owner = new_owner;
      h.keys.push_back(b);
      it->second.arrival->queue.push_back(std::move(h));
      continue;
    }
    if (it == s.slots.end() || !it->second.owned) {
      Reject(absl::StrCat("hand-over of block ", b, " which rank ", rank_, " does not own"));
      continue;
    }
    transfer.keys.push_back(b);
    transfer.values.insert(transfer.values.end(), it->second.values.begin(),
                           it->second.values.end());
    s.slots.erase(it);
    if (options_.location_cache) s.cache[b] = new_owner;
    count_.blocks_out.fetch_add(1, std::memory_order_relaxed);
  }
  if (!transfer.keys.empty()) Send(new_owner, std::move(transfer));
}

void KvCore::HandleTransfer(const kv_message& m) {
  std::size_t offset = 0;
  for (int64_t b : m.keys) {
    const auto n = static_cast<std::size_t>(BlockKeys(b) * options_.value_len);
    const double* v = m.values.data() + offset;
    offset += n;
    std::vector<std::shared_ptr<kv_op>> waiters;
    {
      Stripe& s = StripeOf(b);
      std::lock_guard<std::mutex> lock(s.mu);
      auto it = s.slots.find(b);
      if (it == s.slots.end() || !it->second.arriving) {
        Reject(absl::StrCat("transfer of block ", b, " that rank ", rank_, " did not ask for"));
        continue;
      }
      Slot& slot = it->second;
      slot.values.assign(v, v + n);
      slot.owned = true;
      slot.arriving = false;
      s.cache.erase(b);
      count_.blocks_in.fetch_add(1, std::memory_order_relaxed);
      std::unique_ptr<Arrival> arrival = std::move(slot.arrival);
      waiters.swap(arrival->waiters);
      // Run what queued up while the values were on their way, in order. A
      // hand-over among them sends the block on; what follows it goes after.
      std::vector<kv_message> queue;
      queue.swap(arrival->queue);
      int32_t gone_to = -1;
      for (auto& q : queue) {
        if (gone_to >= 0) {
          q.hops += 1;
          count_.forwards.fetch_add(1, std::memory_order_relaxed);
          Send(gone_to, std::move(q));
          continue;
        }
        if (q.kind == static_cast<uint8_t>(kv_kind::kHandOver)) {
          kv_message t = Message(kv_kind::kTransfer, q.owner, rank_, 0);
          t.owner = rank_;
          t.keys.push_back(b);
          t.values.assign(slot.values.begin(), slot.values.end());
          gone_to = q.owner;
          s.slots.erase(it);
          if (options_.location_cache) s.cache[b] = gone_to;
          count_.blocks_out.fetch_add(1, std::memory_order_relaxed);
          Send(gone_to, std::move(t));
          continue;
        }
        const bool push = q.kind == static_cast<uint8_t>(kv_kind::kPush);
        kv_message answer = Message(push ? kv_kind::kPushAnswer : kv_kind::kPullAnswer,
                                    q.requester, rank_, q.op);
        answer.owner = rank_;
        answer.hops = q.hops;
        for (std::size_t i = 0; i < q.keys.size(); ++i) ServeLocked(slot, b, q, i, answer);
        Answer(std::move(answer));
      }
    }
    for (auto& w : waiters) Complete(*w, 1, this);
  }
}

void KvCore::Leave(std::chrono::duration<double> timeout) {
  for (int32_t r = 0; r < nodes_; ++r) {
    if (r != rank_) Send(r, Message(kv_kind::kLeave, rank_, rank_, 0));
  }
  // A process that ends right after its last send can take unsent bytes
  // with it (a barrier release, this goodbye), and its peers would see a
  // loss. Wait until each peer has acknowledged (so it has everything we
  // sent), has left itself (it needs nothing more from us), or is gone.
  std::unique_lock<std::mutex> lock(lost_mu_);
  lost_cv_.wait_for(lock, timeout, [&] {
    if (!lost_.ok()) return true;
    for (int32_t r = 0; r < nodes_; ++r) {
      const auto i = static_cast<std::size_t>(r);
      if (r != rank_ && !leave_acked_[i] && !left_[i] && !gone_[i]) return false;
    }
    return true;
  });
}

void KvCore::PeerLost(int32_t rank) {
  {
    std::lock_guard<std::mutex> lock(lost_mu_);
    gone_[static_cast<std::size_t>(rank)] = true;
    lost_cv_.notify_all();
    if (!lost_.ok() || left_[static_cast<std::size_t>(rank)]) return;
    lost_ = absl::UnavailableError(absl::StrCat("kv node ", rank_, ": rank ", rank,
                                                " of the group was lost, and its keys with it"));
  }
  std::vector<std::shared_ptr<kv_op>> pending;
  {
    std::lock_guard<std::mutex> lock(ops_mu_);
    for (auto& [_, weak] : ops_) {
      if (auto op = weak.lock()) pending.push_back(std::move(op));
    }
    ops_.clear();
  }
  const absl::Status why = Lost();
  for (auto& op : pending) {
    std::lock_guard<std::mutex> lock(op->mu);
    if (op->done) continue;
    op->status = why;
    op->done = true;
    op->cv.notify_all();
  }
  std::lock_guard<std::mutex> lock(barrier_mu_);
  barrier_cv_.notify_all();
}

absl::Status KvCore::Lost() const {
  std::lock_guard<std::mutex> lock(lost_mu_);
  return lost_;
}

// --------------------------------------------------------------- barrier

uint64_t KvCore::EnterBarrier() {
  uint64_t gen;
  {
    std::lock_guard<std::mutex> lock(barrier_mu_);
    gen = ++barrier_entered_;
  }
  kv_message m = Message(kv_kind::kBarrier, rank_, rank_, gen);
  if (rank_ == 0) {
    Receive(std::move(m));
  } else {
    Send(0, std::move(m));
  }
  return gen;
}

bool KvCore::WaitBarrier(uint64_t gen, std::chrono::duration<double> timeout) {
  std::unique_lock<std::mutex> lock(barrier_mu_);
  return barrier_cv_.wait_for(lock, timeout,
                              [&] { return barrier_released_ >= gen || !Lost().ok(); }) &&
         barrier_released_ >= gen;
}

// ------------------------------------------------------------- queries

int32_t KvCore::OwnerHint(int64_t key) const {
  const int64_t b = BlockOf(key);
  const Stripe& s = StripeOf(b);
  std::lock_guard<std::mutex> lock(s.mu);
  if (auto it = s.slots.find(b); it != s.slots.end() && it->second.owned) return rank_;
  const int32_t home = HomeOf(b);
  if (home == rank_) return home_owner_[static_cast<std::size_t>(b - home_begin_)];
  if (auto it = s.cache.find(b); it != s.cache.end()) return it->second;
  return home;
}

bool KvCore::Owns(int64_t key) const {
  const int64_t b = BlockOf(key);
  const Stripe& s = StripeOf(b);
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.slots.find(b);
  return it != s.slots.end() && it->second.owned;
}

KvStats KvCore::Stats() const {
  KvStats x;
  x.local_keys = count_.local_keys.load();
  x.remote_keys = count_.remote_keys.load();
  x.queued_keys = count_.queued_keys.load();
  x.messages = count_.messages.load();
  x.bytes = count_.bytes.load();
  x.localize_messages = count_.localize.load();
  x.hand_over_messages = count_.hand_over.load();
  x.transfer_messages = count_.transfer.load();
  x.forwards = count_.forwards.load();
  x.blocks_in = count_.blocks_in.load();
  x.blocks_out = count_.blocks_out.load();
  x.max_hops = count_.max_hops.load();
  x.rejected = count_.rejected.load();
  return x;
}

}  // namespace dml::detail
