// One process of test_kv_cluster: joins a key-value group as `rank`, runs
// `threads` threads that push +1 to random keys while localizing random
// keys, then writes how many pushes it issued per key to OUT.issued; rank 0
// also pulls every key after all are done and writes the values to
// OUT.values. One number per line. Exit status 0 only if every call and
// wait succeeded.
//
// kv_stress RANK PEERS(comma-separated host:port) THREADS OPS KEYS BLOCK OUT [lose]
//
// With "lose": rank 2 dies right after the first barrier (no goodbye, as a
// crash), and the other ranks pull a key homed there until that fails:
// exit 0 only if it fails within 10 s, as a loss ("rank 2 ... was lost").
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "dml/actors/kv.hpp"

namespace {

int Fail(const std::string& what) {
  std::fprintf(stderr, "kv_stress: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 8 && argc != 9) return Fail("usage: kv_stress RANK PEERS THREADS OPS KEYS BLOCK OUT [lose]");
  const int rank = std::atoi(argv[1]);
  const std::vector<std::string> peers = absl::StrSplit(argv[2], ',');
  const int threads = std::atoi(argv[3]);
  const int ops = std::atoi(argv[4]);
  dml::KvOptions o;
  o.keys = std::atoll(argv[5]);
  o.block = std::atoll(argv[6]);
  const std::string out = argv[7];
  // The group's secret and how long to wait for the others (tests of
  // admission) come from the environment.
  if (const char* secret = std::getenv("DML_KV_SECRET")) o.secret = secret;
  const char* wait = std::getenv("DML_KV_CONNECT_SECONDS");
  const double connect_seconds = wait != nullptr ? std::atof(wait) : 60.0;
  auto joined = dml::KvNode::Join(o, rank, peers, std::chrono::duration<double>(connect_seconds),
                                  {}, 2);
  if (!joined.ok()) {
    // Exit 3: the port picked for this rank was taken meanwhile (the test
    // runs the group again on other ports).
    const bool port = joined.status().message().find("cannot listen") != std::string::npos;
    Fail(joined.status().ToString());
    return port ? 3 : 1;
  }
  dml::KvNode& node = **joined;
  const bool lose = argc == 9 && std::string(argv[8]) == "lose";
  if (auto s = node.Barrier(); !s.ok()) {
    // With "lose", rank 2 dies as soon as its own release arrives; another
    // rank may hear of the loss (a closed connection) before its release
    // (a message from rank 0 on another connection), and then its barrier
    // fails with the loss: that is the noticing the test asks for.
    if (lose && rank != 2 && s.message().find("rank 2 of the group was lost") != std::string::npos) {
      std::fprintf(stderr, "kv_stress %d: %s (in the barrier)\n", rank, s.ToString().c_str());
      return 0;
    }
    return Fail(s.ToString());
  }
  if (lose) {
    if (rank == 2) std::_Exit(0);
    const int64_t homed_at_2 = o.keys * 2 / static_cast<int64_t>(peers.size()) + 1;
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
      double v = 0;
      auto h = node.Pull({homed_at_2}, &v);
      const absl::Status s = h.ok() ? node.Wait(*h) : h.status();
      if (!s.ok()) {
        std::fprintf(stderr, "kv_stress %d: %s\n", rank, s.ToString().c_str());
        return s.message().find("rank 2 of the group was lost") != std::string::npos ? 0 : 1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return Fail("the loss of rank 2 went unnoticed for 10 s");
  }

  std::vector<std::atomic<int64_t>> issued(static_cast<std::size_t>(o.keys));
  std::atomic<int> failures{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::mt19937_64 rng(7919 * rank + t);
      std::uniform_int_distribution<int64_t> key(0, o.keys - 1);
      std::vector<dml::KvHandle> pending;
      auto check = [&](const absl::Status& s) {
        if (!s.ok() && failures++ == 0) std::fprintf(stderr, "kv_stress: %s\n", s.ToString().c_str());
      };
      for (int i = 0; i < ops; ++i) {
        const int what = static_cast<int>(rng() % 10);
        if (what < 2) {
          auto h = node.Localize({key(rng)});
          check(h.status());
          if (h.ok() && what == 0) check(node.Wait(*h));
          continue;
        }
        std::vector<int64_t> ks;
        const int m = 1 + static_cast<int>(rng() % 4);
        while (static_cast<int>(ks.size()) < m) {
          const int64_t k = key(rng);
          bool seen = false;
          for (int64_t x : ks) seen |= x == k;
          if (!seen) ks.push_back(k);
        }
        auto h = node.Push(ks, std::vector<double>(ks.size(), 1.0));
        check(h.status());
        if (!h.ok()) continue;
        for (int64_t k : ks) issued[static_cast<std::size_t>(k)]++;
        if (what < 6) {
          check(node.Wait(*h));
        } else {
          pending.push_back(*h);
        }
      }
      for (auto& h : pending) check(node.Wait(h));
    });
  }
  for (auto& th : pool) th.join();
  if (failures > 0) return Fail("operations failed");
  {
    std::ofstream f(out + ".issued");
    for (auto& n : issued) f << n.load() << "\n";
  }
  if (auto s = node.Barrier(); !s.ok()) return Fail(s.ToString());
  if (rank == 0) {
    std::vector<int64_t> all(static_cast<std::size_t>(o.keys));
    for (int64_t k = 0; k < o.keys; ++k) all[static_cast<std::size_t>(k)] = k;
    std::vector<double> values(all.size());
    auto h = node.Pull(all, values.data());
    if (!h.ok()) return Fail(h.status().ToString());
    if (auto s = node.Wait(*h); !s.ok()) return Fail(s.ToString());
    std::ofstream f(out + ".values");
    for (double v : values) f << static_cast<int64_t>(v) << "\n";
  }
  const auto st = node.Stats();
  std::fprintf(stderr, "kv_stress %d: blocks in %lld, out %lld, messages %lld, forwards %lld, rejected %lld\n",
               rank, static_cast<long long>(st.blocks_in), static_cast<long long>(st.blocks_out),
               static_cast<long long>(st.messages), static_cast<long long>(st.forwards),
               static_cast<long long>(st.rejected));
  // Stay until rank 0 has pulled: the others hold keys it reads.
  if (auto s = node.Barrier(); !s.ok()) return Fail(s.ToString());
  return st.rejected == 0 ? 0 : Fail("peers' messages were rejected");
}
