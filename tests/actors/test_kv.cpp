// The key-value store with dynamic allocation (dml/actors/kv.hpp): exact
// sums under concurrent pushes and relocations, the message count of each
// relocation path, the cost of a stale location cache, an exact
// linearizability check of synchronous histories, and refused input.
#define BOOST_TEST_MODULE kv
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "dml/actors/internal/kv_core.hpp"
#include "dml/actors/kv.hpp"

namespace {

using dml::KvHandle;
using dml::KvNode;
using dml::KvOptions;
using dml::KvStats;

std::vector<std::unique_ptr<KvNode>> Group(int n, KvOptions o) {
  auto g = KvNode::StartLocalGroup(n, o, 2);
  BOOST_REQUIRE_MESSAGE(g.ok(), g.status().ToString());
  return std::move(*g);
}

KvStats Sum(const std::vector<std::unique_ptr<KvNode>>& g) {
  KvStats t;
  for (const auto& n : g) t += n->Stats();
  return t;
}

void Ok(const absl::Status& s) { BOOST_REQUIRE_MESSAGE(s.ok(), s.ToString()); }

// Boost.Test's assertions are not thread-safe: worker threads record their
// first failure here, and the test thread asserts there was none.
struct ThreadFailures {
  std::mutex mu;
  int count = 0;
  std::string first;
  void Check(bool ok, const std::string& what) {
    if (ok) return;
    std::lock_guard<std::mutex> lock(mu);
    if (count++ == 0) first = what;
  }
  void Check(const absl::Status& s) { Check(s.ok(), s.ToString()); }
  template <class T>
  void Check(const absl::StatusOr<T>& s) { Check(s.status()); }
  void ExpectNone() { BOOST_TEST(count == 0, count << " failures in threads, first: " << first); }
};

double PullOne(KvNode& n, int64_t key, int32_t* hops = nullptr) {
  double v = -1;
  auto h = n.Pull({key}, &v);
  BOOST_REQUIRE(h.ok());
  Ok(n.Wait(*h));
  if (hops) *hops = h->Hops();
  return v;
}

void LocalizeOne(KvNode& n, int64_t key) {
  auto h = n.Localize({key});
  BOOST_REQUIRE(h.ok());
  Ok(n.Wait(*h));
}

// Every node runs threads that push +1 to random keys (synchronously and
// asynchronously) while other threads localize random keys; afterwards
// every key holds exactly the number of pushes issued to it.
void ExactCounts(int nodes, int threads, KvOptions o, int ops) {
  auto g = Group(nodes, o);
  std::vector<std::atomic<int64_t>> issued(static_cast<std::size_t>(o.keys));
  std::vector<std::thread> pool;
  ThreadFailures fail;
  for (int r = 0; r < nodes; ++r) {
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, r, t] {
        std::mt19937_64 rng(1000 * r + t);
        std::uniform_int_distribution<int64_t> key(0, o.keys - 1);
        KvNode& n = *g[r];
        std::vector<KvHandle> pending;
        for (int i = 0; i < ops; ++i) {
          const int what = static_cast<int>(rng() % 10);
          if (what < 2) {  // relocate a few keys here
            std::vector<int64_t> ks = {key(rng), key(rng)};
            if (ks[0] == ks[1]) ks.pop_back();
            auto h = n.Localize(ks);
            fail.Check(h);
            if (h.ok() && what == 0) fail.Check(n.Wait(*h));
            continue;
          }
          std::vector<int64_t> ks;
          const int m = 1 + static_cast<int>(rng() % 6);
          while (static_cast<int>(ks.size()) < m) {
            int64_t k = key(rng);
            if (std::find(ks.begin(), ks.end(), k) == ks.end()) ks.push_back(k);
          }
          std::vector<double> ones(ks.size() * o.value_len, 1.0);
          auto h = n.Push(ks, ones);
          fail.Check(h);
          if (!h.ok()) continue;
          for (int64_t k : ks) issued[static_cast<std::size_t>(k)]++;
          if (what < 6) {
            fail.Check(n.Wait(*h));
          } else {
            pending.push_back(*h);
          }
        }
        for (auto& h : pending) fail.Check(n.Wait(h));
        fail.Check(n.Barrier());  // every node's threads are done
      });
    }
  }
  for (auto& th : pool) th.join();
  fail.ExpectNone();
  std::vector<int64_t> all(static_cast<std::size_t>(o.keys));
  for (int64_t k = 0; k < o.keys; ++k) all[static_cast<std::size_t>(k)] = k;
  std::vector<double> got(all.size() * o.value_len, -1.0);
  auto h = g[nodes - 1]->Pull(all, got.data());
  BOOST_REQUIRE(h.ok());
  Ok(g[nodes - 1]->Wait(*h));
  int64_t wrong = 0;
  for (int64_t k = 0; k < o.keys; ++k) {
    for (int j = 0; j < o.value_len; ++j) {
      if (got[static_cast<std::size_t>(k * o.value_len + j)] !=
          static_cast<double>(issued[static_cast<std::size_t>(k)].load())) {
        if (wrong++ < 5) {
          BOOST_TEST_MESSAGE("key " << k << " holds " << got[k * o.value_len + j] << ", "
                                    << issued[k].load() << " pushes were issued");
        }
      }
    }
  }
  BOOST_TEST(wrong == 0);
  auto s = Sum(g);
  BOOST_TEST(s.rejected == 0);
  BOOST_TEST(s.blocks_in > 0);  // relocations did happen
  BOOST_TEST(s.blocks_in == s.blocks_out);
  BOOST_TEST_MESSAGE("relocated blocks " << s.blocks_in << ", messages " << s.messages
                                         << ", forwards " << s.forwards);
}

}  // namespace

BOOST_AUTO_TEST_CASE(pushes_are_never_lost_or_doubled_under_relocation) {
  KvOptions o;
  o.keys = 200;
  o.block = 1;
  ExactCounts(4, 3, o, 1500);
}

BOOST_AUTO_TEST_CASE(blocks_of_keys_with_vector_values_relocate_whole) {
  KvOptions o;
  o.keys = 300;
  o.block = 7;  // the last block is short (300 = 42 * 7 + 6)
  o.value_len = 3;
  o.location_cache = false;
  ExactCounts(3, 3, o, 1000);
}

BOOST_AUTO_TEST_CASE(a_relocation_takes_three_messages_or_two_in_the_shortcuts) {
  KvOptions o;
  o.keys = 40;  // 4 nodes: key k is homed at rank k / 10
  auto g = Group(4, o);
  auto delta = [&](const KvStats& before) {
    KvStats now = Sum(g), d;
    d.messages = now.messages - before.messages;
    d.localize_messages = now.localize_messages - before.localize_messages;
    d.hand_over_messages = now.hand_over_messages - before.hand_over_messages;
    d.transfer_messages = now.transfer_messages - before.transfer_messages;
    return d;
  };
  // Home (2) owns key 25; rank 1 asks: LOCALIZE, TRANSFER.
  auto before = Sum(g);
  LocalizeOne(*g[1], 25);
  auto d = delta(before);
  BOOST_TEST(d.messages == 2);
  BOOST_TEST(d.localize_messages == 1);
  BOOST_TEST(d.hand_over_messages == 0);
  BOOST_TEST(d.transfer_messages == 1);
  BOOST_TEST(g[1]->Owns(25));
  BOOST_TEST(!g[2]->Owns(25));
  BOOST_TEST(g[2]->OwnerHint(25) == 1);  // the home node's record
  // Rank 3 asks, rank 1 owns: LOCALIZE, HAND_OVER, TRANSFER.
  before = Sum(g);
  LocalizeOne(*g[3], 25);
  d = delta(before);
  BOOST_TEST(d.messages == 3);
  BOOST_TEST(d.localize_messages == 1);
  BOOST_TEST(d.hand_over_messages == 1);
  BOOST_TEST(d.transfer_messages == 1);
  // The home node asks, rank 3 owns: HAND_OVER, TRANSFER.
  before = Sum(g);
  LocalizeOne(*g[2], 25);
  d = delta(before);
  BOOST_TEST(d.messages == 2);
  BOOST_TEST(d.localize_messages == 0);
  BOOST_TEST(d.hand_over_messages == 1);
  // Asking for a key one owns costs nothing.
  before = Sum(g);
  LocalizeOne(*g[2], 25);
  BOOST_TEST(delta(before).messages == 0);
  // A block of several keys moves with one message per step.
  before = Sum(g);
  auto h = g[0]->Localize({11, 12, 13, 14});
  BOOST_REQUIRE(h.ok());
  Ok(g[0]->Wait(*h));
  d = delta(before);
  BOOST_TEST(d.messages == 2);
  for (int64_t k : {11, 12, 13, 14}) BOOST_TEST(g[0]->Owns(k));
  BOOST_TEST(Sum(g).rejected == 0);
}

// Localize takes repeated keys (the union of several minibatches' keys):
// each block moves once, with the messages of one relocation per home, and
// the handle is done once everything landed. Calls far longer than a
// stripe's lock hold (256 keys) mix owned, arriving and remote keys; every
// pull sees every push.
BOOST_AUTO_TEST_CASE(localize_takes_repeated_keys_and_long_calls_mix_every_kind_of_key) {
  for (int64_t block : {int64_t{1}, int64_t{4}}) {
    BOOST_TEST_CONTEXT("block " << block) {
      KvOptions o;
      o.keys = 40000;  // 2 nodes: rank 0 homes [0, 20000)
      o.block = block;
      auto g = Group(2, o);
      const KvStats before = Sum(g);
      std::vector<int64_t> twice;
      for (int64_t k = 30000; k < 30010; ++k) twice.push_back(k);
      for (int64_t k = 30009; k >= 30000; --k) twice.push_back(k);
      auto h = g[0]->Localize(twice);
      BOOST_REQUIRE(h.ok());
      Ok(g[0]->Wait(*h));
      for (int64_t k = 30000; k < 30010; ++k) BOOST_TEST(g[0]->Owns(k));
      const KvStats after = Sum(g);
      BOOST_TEST(after.localize_messages - before.localize_messages == 1);
      BOOST_TEST(after.transfer_messages - before.transfer_messages == 1);

      // 30000 keys in one call: 10000 owned here, 10000 on their way here
      // (localized without waiting), 10000 at rank 1.
      std::vector<int64_t> mine, coming, remote;
      for (int64_t k = 0; k < 10000; ++k) mine.push_back(k);
      for (int64_t k = 20000; k < 30000; ++k) coming.push_back(k);
      for (int64_t k = 30010; k < 40000; ++k) remote.push_back(k);
      auto moving = g[0]->Localize(coming);
      BOOST_REQUIRE(moving.ok());
      std::vector<int64_t> all = mine;
      all.insert(all.end(), coming.begin(), coming.end());
      all.insert(all.end(), remote.begin(), remote.end());
      std::vector<double> ones(all.size(), 1.0);
      for (std::size_t i = 0; i < all.size(); ++i) ones[i] = static_cast<double>(all[i] % 7 + 1);
      auto push = g[0]->Push(all, ones);
      BOOST_REQUIRE(push.ok());
      Ok(g[0]->Wait(*push));
      Ok(g[0]->Wait(*moving));
      std::vector<double> got(all.size(), -1.0);
      auto pull = g[1]->Pull(all, got.data());
      BOOST_REQUIRE(pull.ok());
      Ok(g[1]->Wait(*pull));
      int wrong = 0;
      for (std::size_t i = 0; i < all.size(); ++i) wrong += got[i] != ones[i];
      BOOST_TEST(wrong == 0);
      BOOST_TEST(Sum(g).rejected == 0);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_stale_cache_entry_costs_at_most_one_extra_forward) {
  KvOptions o;
  o.keys = 40;
  auto g = Group(4, o);
  auto pushed = g[2]->Push({25}, std::vector<double>{5.0});
  BOOST_REQUIRE(pushed.ok());
  Ok(g[2]->Wait(*pushed));
  LocalizeOne(*g[1], 25);  // owner 1, home 2
  int32_t hops = -1;
  // Rank 0 knows nothing: home, then the owner.
  BOOST_TEST(PullOne(*g[0], 25, &hops) == 5.0);
  BOOST_TEST(hops == 1);
  // Now cached: straight to the owner.
  BOOST_TEST(PullOne(*g[0], 25, &hops) == 5.0);
  BOOST_TEST(hops == 0);
  LocalizeOne(*g[3], 25);  // rank 0's entry is stale now
  BOOST_TEST(PullOne(*g[0], 25, &hops) == 5.0);
  BOOST_TEST(hops == 2);  // stale owner -> home -> owner: one more than without a cache
  BOOST_TEST(PullOne(*g[0], 25, &hops) == 5.0);
  BOOST_TEST(hops == 0);  // learned from the answer
  // Without caches: always through the home node.
  o.location_cache = false;
  auto h = Group(4, o);
  LocalizeOne(*h[1], 25);
  BOOST_TEST(PullOne(*h[0], 25, &hops) == 0.0);
  BOOST_TEST(hops == 1);
  BOOST_TEST(PullOne(*h[0], 25, &hops) == 0.0);
  BOOST_TEST(hops == 1);
}

BOOST_AUTO_TEST_CASE(static_allocation_never_moves_a_key) {
  KvOptions o;
  o.keys = 40;
  o.dynamic = false;
  auto g = Group(4, o);
  LocalizeOne(*g[1], 25);
  BOOST_TEST(!g[1]->Owns(25));
  BOOST_TEST(g[2]->Owns(25));
  auto h = g[1]->Push({25, 15}, std::vector<double>{1.0, 2.0});
  BOOST_REQUIRE(h.ok());
  Ok(g[1]->Wait(*h));
  BOOST_TEST(PullOne(*g[3], 25) == 1.0);
  BOOST_TEST(PullOne(*g[3], 15) == 2.0);
  auto s = g[1]->Stats();
  BOOST_TEST(s.local_keys == 1);   // key 15 is homed at rank 1
  BOOST_TEST(s.remote_keys == 1);  // key 25 at rank 2
  BOOST_TEST(Sum(g).blocks_in == 0);
}

// ------------------------------------------------------- linearizability

namespace {

// One synchronous operation on one key: a push of a distinct power of two
// (so a pulled value says exactly which pushes it contains), or a pull.
struct Event {
  bool push = false;
  int bit = -1;            // push: its power of two
  uint64_t read = 0;       // pull: the set it saw, as bits
  int64_t invoked = 0, responded = 0;  // steady-clock ns
};

// Exact linearizability check for a grow-only set under add and read,
// which a key under pushes of distinct powers of two is. Any valid
// linearization orders reads by inclusion; the canonical one puts equal
// reads in invocation order and each push right before the first read that
// contains it (pushes no read contains at the end, in invocation order).
// If any linearization exists, this one respects real time too, so the
// history is linearizable iff the reads form a chain and this order puts
// every a before every b that a finished before b began.
bool Linearizable(std::vector<Event> h, std::string* why) {
  std::vector<const Event*> reads, pushes;
  for (const auto& e : h) (e.push ? pushes : reads).push_back(&e);
  uint64_t pushed = 0;
  for (auto* p : pushes) pushed |= uint64_t{1} << p->bit;
  std::sort(reads.begin(), reads.end(), [](const Event* a, const Event* b) {
    const int ca = __builtin_popcountll(a->read), cb = __builtin_popcountll(b->read);
    return ca != cb ? ca < cb : a->invoked < b->invoked;
  });
  for (std::size_t i = 0; i < reads.size(); ++i) {
    if ((reads[i]->read & ~pushed) != 0) {
      *why = "a pull saw a value no push wrote";
      return false;
    }
    if (i > 0 && (reads[i - 1]->read & ~reads[i]->read) != 0) {
      *why = "two pulls saw values that are not ordered (a push was lost in one)";
      return false;
    }
  }
  // Position of every event in the canonical order: read i at 2 * i + 1,
  // a push just before its first containing read (ties by invocation).
  std::vector<std::pair<std::pair<int64_t, int64_t>, const Event*>> order;
  for (std::size_t i = 0; i < reads.size(); ++i) {
    order.push_back({{2 * static_cast<int64_t>(i) + 1, 0}, reads[i]});
  }
  for (auto* p : pushes) {
    int64_t slot = 2 * static_cast<int64_t>(reads.size());
    for (std::size_t i = 0; i < reads.size(); ++i) {
      if (reads[i]->read >> p->bit & 1) {
        slot = 2 * static_cast<int64_t>(i);
        break;
      }
    }
    order.push_back({{slot, p->invoked}, p});
  }
  std::sort(order.begin(), order.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t i = 0; i < order.size(); ++i) {
    for (std::size_t j = i + 1; j < order.size(); ++j) {
      if (order[j].second->responded < order[i].second->invoked) {
        *why = "an operation that finished before another began is ordered after it";
        return false;
      }
    }
  }
  return true;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_checker_refuses_histories_that_are_not_linearizable) {
  std::string why;
  // A push finished, then a pull began and did not see it.
  std::vector<Event> h = {{true, 0, 0, 0, 10}, {false, -1, 0, 20, 30}};
  BOOST_TEST(!Linearizable(h, &why));
  // Pulls that disagree on what they saw.
  h = {{true, 0, 0, 0, 100}, {true, 1, 0, 0, 100}, {false, -1, 1, 10, 90}, {false, -1, 2, 10, 90}};
  BOOST_TEST(!Linearizable(h, &why));
  // A later pull sees less than an earlier one.
  h = {{true, 0, 0, 0, 100}, {false, -1, 1, 10, 20}, {false, -1, 0, 30, 40}};
  BOOST_TEST(!Linearizable(h, &why));
  // Pushes in real-time order, seen out of order.
  h = {{true, 0, 0, 0, 10}, {true, 1, 0, 20, 30}, {false, -1, 2, 5, 40}};
  BOOST_TEST(!Linearizable(h, &why));
  // Concurrent ones may be seen either way.
  h = {{true, 0, 0, 0, 30}, {true, 1, 0, 0, 30}, {false, -1, 2, 5, 40}, {false, -1, 3, 35, 50}};
  BOOST_TEST(Linearizable(h, &why));
}

BOOST_AUTO_TEST_CASE(synchronous_histories_during_relocations_are_linearizable) {
  KvOptions o;
  o.keys = 6;
  auto g = Group(3, o);
  constexpr int kBits = 52;  // a double holds sums of distinct powers up to 2^52 exactly
  std::vector<std::atomic<int>> next_bit(o.keys);
  std::vector<std::vector<Event>> history(o.keys);
  std::mutex hmu;
  std::atomic<bool> stop{false};
  auto now = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  std::vector<std::thread> pool;
  ThreadFailures fail;
  for (int r = 0; r < 3; ++r) {
    pool.emplace_back([&, r] {  // keeps moving keys here
      std::mt19937_64 rng(77 + r);
      while (!stop) {
        auto h = g[r]->Localize({static_cast<int64_t>(rng() % o.keys)});
        fail.Check(h);
        if (h.ok()) fail.Check(g[r]->Wait(*h));
      }
    });
    for (int t = 0; t < 2; ++t) {
      pool.emplace_back([&, r, t] {
        std::mt19937_64 rng(10 * r + t);
        for (int i = 0; i < 300; ++i) {
          const int64_t key = static_cast<int64_t>(rng() % o.keys);
          Event e;
          int bit = -1;
          if (rng() % 2 == 0) bit = next_bit[key]++;
          if (bit >= 0 && bit < kBits) {
            e.push = true;
            e.bit = bit;
            const double add = std::ldexp(1.0, bit);
            e.invoked = now();
            auto h = g[r]->Push({key}, std::vector<double>{add});
            fail.Check(h);
            if (h.ok()) fail.Check(g[r]->Wait(*h));
            e.responded = now();
          } else {
            double v = -1;
            e.invoked = now();
            auto h = g[r]->Pull({key}, &v);
            fail.Check(h);
            if (h.ok()) fail.Check(g[r]->Wait(*h));
            e.responded = now();
            e.read = static_cast<uint64_t>(v);
            fail.Check(v >= 0 && static_cast<double>(e.read) == v, "pulled a non-integer");
          }
          std::lock_guard<std::mutex> lock(hmu);
          history[key].push_back(e);
        }
      });
    }
  }
  for (std::size_t i = 0; i < pool.size(); ++i) {
    if (i % 3 != 0) pool[i].join();
  }
  stop = true;
  for (std::size_t i = 0; i < pool.size(); i += 3) pool[i].join();
  fail.ExpectNone();
  std::size_t events = 0;
  for (int64_t k = 0; k < o.keys; ++k) {
    std::string why;
    BOOST_TEST(Linearizable(history[k], &why), "key " << k << ": " << why);
    events += history[k].size();
  }
  BOOST_TEST(events == 3u * 2u * 300u);
  auto s = Sum(g);
  BOOST_TEST(s.blocks_in > 20);  // keys moved while the history was recorded
  BOOST_TEST_MESSAGE("relocations during the history: " << s.blocks_in);
}

// ---------------------------------------------------------------- refused

BOOST_AUTO_TEST_CASE(bad_calls_are_refused_with_the_position) {
  KvOptions o;
  o.keys = 10;
  o.value_len = 2;
  auto g = Group(2, o);
  double out[4];
  auto a = g[0]->Pull({3, 10}, out);
  BOOST_TEST(a.status().message() == "key 1 (10) outside [0, 10)");
  auto b = g[0]->Pull({3, 3}, out);
  BOOST_TEST(b.status().message() == "key 3 appears twice (at 0 and 1)");
  // Sorted keys are checked without a table; unsorted ones still are.
  double out3[6];
  auto b2 = g[0]->Pull({7, 2, 7}, out3);
  BOOST_TEST(b2.status().message() == "key 7 appears twice (at 0 and 2)");
  BOOST_TEST(g[0]->Pull({2, 5, 7}, out3).ok());
  auto c = g[0]->Push({3}, std::vector<double>{1.0});
  BOOST_TEST(c.status().message() == "Push: 1 deltas for 1 keys (want 2)");
  auto d = g[0]->Push({3}, std::vector<double>{1.0, NAN});
  BOOST_TEST(d.status().message() == "Push: deltas[1] is not finite");
  auto e = g[0]->Localize({-1});
  BOOST_TEST(e.status().message() == "Localize: key 0 (-1) outside [0, 10)");
  KvOptions bad;
  BOOST_TEST(KvNode::StartLocalGroup(2, bad).status().message() == "KvOptions.keys: 0 <= 0");
  // No keys: done at once (a Pull of none never completed); keys outside
  // the space have no owner.
  auto none = g[0]->Pull({}, out);
  BOOST_REQUIRE(none.ok());
  BOOST_TEST(none->Done());
  BOOST_TEST(g[0]->Wait(*none).ok());
  auto none_pushed = g[1]->Push({}, std::vector<double>{});
  BOOST_REQUIRE(none_pushed.ok());
  BOOST_TEST(g[1]->Wait(*none_pushed).ok());
  BOOST_TEST(g[0]->OwnerHint(-1) == -1);
  BOOST_TEST(g[0]->OwnerHint(10) == -1);
  BOOST_TEST(!g[0]->Owns(-1));
  BOOST_TEST(!g[0]->Owns(INT64_MAX));
  // Values that cannot fit this machine are refused, not allocated (abort).
  KvOptions huge;
  huge.keys = 100;
  huge.value_len = INT32_MAX;
  auto refused = KvNode::StartLocalGroup(2, huge, 1);
  BOOST_TEST((refused.status().code() == absl::StatusCode::kResourceExhausted));
  BOOST_TEST(std::string(refused.status().message())
                 .find("a key-value group in one process: 100 keys of 2147483647 doubles need about ") == 0u,
             refused.status().message());
}

BOOST_AUTO_TEST_CASE(malformed_peer_messages_are_dropped_and_counted) {
  KvOptions o;
  o.keys = 20;
  o.value_len = 2;
  dml::detail::KvCore core(o, 1, 2);  // rank 1 of 2: homes keys 10..19
  std::vector<dml::net::kv_message> sent;
  core.SetSend([&](int32_t, dml::net::kv_message m) { sent.push_back(std::move(m)); });
  auto msg = [](dml::net::kv_kind k) {
    dml::net::kv_message m;
    m.kind = static_cast<uint8_t>(k);
    return m;
  };
  auto m = msg(dml::net::kv_kind::kPush);
  m.keys = {12};
  m.values = {1.0};  // one value for a key of two
  core.Receive(m);
  BOOST_TEST(core.Stats().rejected == 1);
  BOOST_TEST(core.LastRejection() ==
             "kv message (kind 2, from rank 0): 1 values for 1 keys (want 2)");
  m = msg(dml::net::kv_kind::kPull);
  m.keys = {25};
  core.Receive(m);
  BOOST_TEST(core.LastRejection() == "kv message (kind 1, from rank 0): keys[0] = 25 >= 20");
  m = msg(dml::net::kv_kind::kPull);
  m.sender = 5;
  core.Receive(m);
  BOOST_TEST(core.LastRejection() == "kv message (kind 1, from rank 5): sender outside [0, 2)");
  m = msg(dml::net::kv_kind::kLocalize);
  m.keys = {3};  // homed at rank 0
  core.Receive(m);
  BOOST_TEST(core.LastRejection() ==
             "kv message (kind 3, from rank 0): block 3 is not homed at rank 1");
  m = msg(dml::net::kv_kind::kTransfer);
  m.keys = {12};
  m.values = {1.0, 2.0};
  core.Receive(m);  // well-formed, but nobody asked
  BOOST_TEST(core.LastRejection() == "transfer of block 12 that rank 1 did not ask for");
  m = msg(dml::net::kv_kind::kPullAnswer);
  m.owner = 0;
  m.op = 99;
  core.Receive(m);
  BOOST_TEST(core.LastRejection() == "answer for unknown operation 99 from rank 0");
  BOOST_TEST(core.Stats().rejected == 6);
  BOOST_TEST(sent.empty());
  // A valid pull is still served after all that.
  m = msg(dml::net::kv_kind::kPull);
  m.keys = {12};
  m.op = 7;
  core.Receive(m);
  BOOST_REQUIRE(sent.size() == 1u);
  BOOST_TEST(sent[0].kind == static_cast<uint8_t>(dml::net::kv_kind::kPullAnswer));
  BOOST_TEST(sent[0].values.size() == 2u);
}

BOOST_AUTO_TEST_CASE(a_node_that_leaves_on_purpose_is_no_loss) {
  KvOptions o;
  o.keys = 30;
  auto g = Group(3, o);
  g[2].reset();  // says goodbye first
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto h = g[0]->Push({5}, std::vector<double>{1.0});  // homed at rank 0
  BOOST_REQUIRE(h.ok());
  Ok(g[0]->Wait(*h));
  BOOST_TEST(PullOne(*g[1], 5) == 1.0);
}

// A process may end right after its last send (a barrier release, its
// goodbye) and take unsent bytes along: Leave waits for each peer's
// acknowledgement, which arrives after everything sent before it.
BOOST_AUTO_TEST_CASE(leave_waits_until_the_peer_has_everything_sent_before) {
  KvOptions o;
  o.keys = 10;
  dml::detail::KvCore a(o, 0, 2), b(o, 1, 2);
  std::mutex mu;
  std::vector<dml::net::kv_message> to_b;  // in flight, not yet delivered
  a.SetSend([&](int32_t to, dml::net::kv_message m) {
    BOOST_TEST(to == 1);
    std::lock_guard<std::mutex> lock(mu);
    to_b.push_back(std::move(m));
  });
  b.SetSend([&](int32_t to, dml::net::kv_message m) {
    BOOST_TEST(to == 0);
    a.Receive(std::move(m));
  });
  // Rank 0 releases a barrier that rank 1 waits on, then leaves.
  const uint64_t gen = b.EnterBarrier();  // its arrival reaches a at once
  BOOST_TEST(a.EnterBarrier() == 1u);
  auto leaving = std::async(std::launch::async, [&] { a.Leave(std::chrono::seconds(30)); });
  BOOST_TEST((leaving.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout));
  std::vector<dml::net::kv_message> batch;
  {
    std::lock_guard<std::mutex> lock(mu);
    batch.swap(to_b);
  }
  BOOST_REQUIRE(batch.size() == 2u);  // the release, then the goodbye
  BOOST_TEST(batch[0].kind == static_cast<uint8_t>(dml::net::kv_kind::kBarrierRelease));
  BOOST_TEST(batch[1].kind == static_cast<uint8_t>(dml::net::kv_kind::kLeave));
  for (auto& m : batch) b.Receive(std::move(m));
  BOOST_TEST((leaving.wait_for(std::chrono::seconds(10)) == std::future_status::ready));
  BOOST_TEST(b.WaitBarrier(gen, std::chrono::seconds(0)));
  b.PeerLost(0);  // its process ends: no loss, it said goodbye
  Ok(b.Lost());
  BOOST_TEST(b.Stats().rejected == 0);
  // Nobody answers: Leave gives up after its timeout.
  dml::detail::KvCore c(o, 0, 2);
  c.SetSend([](int32_t, dml::net::kv_message) {});
  const auto t0 = std::chrono::steady_clock::now();
  c.Leave(std::chrono::milliseconds(200));
  BOOST_TEST((std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(190)));
}

// Listen, then Connect: the two halves of Join for a group whose ports are
// learnt only once each node listens (hogwild on dml-node processes).
BOOST_AUTO_TEST_CASE(listen_on_any_port_then_connect_makes_a_working_group) {
  KvOptions o;
  o.keys = 40;
  o.block = 2;
  std::vector<std::unique_ptr<KvNode>> g;
  std::vector<std::string> peers;
  for (int r = 0; r < 3; ++r) {
    auto n = KvNode::Listen(o, r, 3, "127.0.0.1");
    BOOST_REQUIRE_MESSAGE(n.ok(), n.status().ToString());
    BOOST_TEST((*n)->port() > 0);
    peers.push_back("127.0.0.1:" + std::to_string((*n)->port()));
    g.push_back(*std::move(n));
  }
  // Not connected yet: refused, not queued.
  auto early = g[1]->Push({3}, std::vector<double>{1.0});
  BOOST_TEST(early.status().code() == absl::StatusCode::kFailedPrecondition);
  BOOST_TEST(std::string(early.status().message()).find("not connected") != std::string::npos);
  // A list of the wrong length is refused and leaves the node connectable.
  auto short_list = g[0]->Connect({peers[0], peers[1]});
  BOOST_TEST(short_list.code() == absl::StatusCode::kInvalidArgument);
  std::vector<std::future<absl::Status>> connects;
  for (int r = 0; r < 3; ++r) {
    connects.push_back(std::async(std::launch::async, [&, r] { return g[r]->Connect(peers); }));
  }
  for (auto& c : connects) Ok(c.get());
  BOOST_TEST(g[2]->Connect(peers).code() == absl::StatusCode::kFailedPrecondition);
  // Keys homed on every rank, pushed from every rank, one localized.
  auto moved = g[2]->Localize({0, 1});
  BOOST_REQUIRE(moved.ok());
  Ok(g[2]->Wait(*moved));
  BOOST_TEST(g[2]->Owns(0));
  for (int r = 0; r < 3; ++r) {
    auto h = g[r]->Push({0, 15, 39}, std::vector<double>{1.0, 2.0, 3.0});
    BOOST_REQUIRE(h.ok());
    Ok(g[r]->Wait(*h));
  }
  BOOST_TEST(PullOne(*g[0], 0) == 3.0);
  BOOST_TEST(PullOne(*g[1], 15) == 6.0);
  BOOST_TEST(PullOne(*g[2], 39) == 9.0);
  std::vector<std::future<absl::Status>> barriers;
  for (int r = 0; r < 3; ++r) {
    barriers.push_back(std::async(std::launch::async, [&, r] { return g[r]->Barrier(); }));
  }
  for (auto& b : barriers) Ok(b.get());
}

// A member that is home to nothing (a coordinator's, which runs no
// workers): every key lives on the other ranks, and it still reaches them.
BOOST_AUTO_TEST_CASE(ranks_below_first_home_rank_are_home_to_no_keys) {
  KvOptions o;
  o.keys = 30;
  o.block = 3;
  o.first_home_rank = 1;
  auto g = Group(3, o);
  for (int64_t k = 0; k < o.keys; ++k) {
    BOOST_TEST(!g[0]->Owns(k));
    BOOST_TEST((g[1]->Owns(k) != g[2]->Owns(k)));  // each key on exactly one of them
  }
  BOOST_TEST(g[1]->Owns(0));
  BOOST_TEST(g[2]->Owns(29));
  auto h = g[0]->Push({0, 29}, std::vector<double>{2.0, 3.0});
  BOOST_REQUIRE(h.ok());
  Ok(g[0]->Wait(*h));
  BOOST_TEST(PullOne(*g[1], 0) == 2.0);
  BOOST_TEST(PullOne(*g[0], 29) == 3.0);
  // It may still take keys by localize.
  auto l = g[0]->Localize({4});
  BOOST_REQUIRE(l.ok());
  Ok(g[0]->Wait(*l));
  BOOST_TEST(g[0]->Owns(4));
  o.first_home_rank = 3;
  auto none = KvNode::StartLocalGroup(3, o, 1);
  BOOST_TEST(none.status().code() == absl::StatusCode::kInvalidArgument);
  BOOST_TEST(std::string(none.status().message()) ==
             "KvOptions.first_home_rank: 3 leaves none of the 3 nodes a home range");
}

// Of two Connect calls racing on one member, one connects and the other is
// refused at once (not two threads dialling on one member).
BOOST_AUTO_TEST_CASE(concurrent_connects_on_one_member_connect_once) {
  KvOptions o;
  o.keys = 8;
  std::vector<std::unique_ptr<KvNode>> g;
  std::vector<std::string> peers;
  for (int r = 0; r < 2; ++r) {
    auto n = KvNode::Listen(o, r, 2, "127.0.0.1");
    BOOST_REQUIRE_MESSAGE(n.ok(), n.status().ToString());
    peers.push_back("127.0.0.1:" + std::to_string((*n)->port()));
    g.push_back(*std::move(n));
  }
  auto a = std::async(std::launch::async, [&] { return g[0]->Connect(peers); });
  auto b = std::async(std::launch::async, [&] { return g[0]->Connect(peers); });
  auto c = std::async(std::launch::async, [&] { return g[1]->Connect(peers); });
  const absl::Status sa = a.get(), sb = b.get();
  Ok(c.get());
  BOOST_TEST((sa.ok() != sb.ok()), sa.ToString() << " / " << sb.ToString());
  const absl::Status& refused = sa.ok() ? sb : sa;
  BOOST_TEST(refused.code() == absl::StatusCode::kFailedPrecondition);
  BOOST_TEST(PullOne(*g[1], 0) == 0.0);
}
