// One node process of the dynamic-allocation benchmark (bench/lapse_bench.sh
// starts N of them): the same training code over the key-value store
// (dml/actors/kv.hpp) with static allocation (keys stay at their range
// partition: a classic parameter server) or dynamic allocation (localize).
//
// Workloads:
//  mf  Matrix factorisation by DSGD with parameter blocking. Node i owns the
//      rows of its partition and their factors (never in the store); the
//      column factors are N blocks of keys in the store. In sub-epoch s node
//      i trains on the ratings of column block (i + s) mod N, so no two
//      nodes touch one block at once; dynamic allocation localizes that
//      block first, then every access is local.
//  lr  Sparse logistic regression on hashed features. Data clustering: node
//      i's examples draw most features from a cluster of its own (features
//      i, i + N, i + 2N, ... of the first half: spread over every home
//      range, as hashing spreads them) and the rest from a long tail of
//      rare features shared by all (the second half). Features that every
//      node uses often (heavy hitters) are not modelled: localizing those
//      would move them back and forth. Dynamic allocation
//      localizes keys ahead of the minibatches that use them while
//      computing this one (latency hiding), so pulls and pushes are mostly
//      local: every W batches (--localize-window, default 8) one call
//      moves the keys of W batches that start max(--lookahead, W) (8)
//      batches on.
//      A call moves its keys in one round of messages (one LOCALIZE per
//      home node, one HAND_OVER per old owner, one TRANSFER back from
//      each), so W = 8 sends about half the messages of W = 1 here; the
//      rare tail keys, each in few batches, are most of what moves.
// Both run minibatches: pull the batch's keys, run its SGD steps on a local
// copy, push the deltas; static and dynamic differ only in where the keys
// live. Rank 0 prints one line per epoch and a summary line:
//   epoch E seconds S loss L remote_fraction F bytes_per_epoch B messages_per_epoch M
//   result workload W alloc A nodes N epoch_seconds S ...
//
// lapse_bench --rank R --peers host:port,... --workload mf|lr --alloc static|dynamic
//   [--epochs 3] [--rows N] [--cols C | --features F] [--rank-k K] [--nnz-per-row M]
//   [--cluster-share P] [--lookahead D] [--localize-window W]
//   [--batch B] [--lr ETA] [--reg L] [--seed S]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "dml/actors/kv.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
  int rank = 0;
  std::vector<std::string> peers;
  std::string workload = "mf";
  std::string alloc = "dynamic";
  int epochs = 3;
  // 0: the workload's default (mf: 20000 rows, 100 ratings per row, step
  // 0.1; lr: 40000 rows, 20 features per row, step 4).
  int64_t rows = 0;
  int64_t cols = 4000;           // mf
  int64_t features = 1 << 20;    // lr: a hashed feature space
  int k = 16;                    // mf rank
  int nnz = 0;                   // per row
  int batch = 32;
  double lr = 0;
  double reg = 0.01;
  double cluster_share = 0.9;  // lr: features drawn from the node's own cluster
  int lookahead = 8;           // batches localized ahead (lr) and pushes in flight
  int window = 8;              // lr: batches whose keys one Localize call moves
  uint64_t seed = 1;
};

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "lapse_bench: %s\n", what.c_str());
  std::exit(1);
}

void Check(const absl::Status& s) {
  if (!s.ok()) Die(s.ToString());
}
template <class T>
T Check(absl::StatusOr<T> s) {
  if (!s.ok()) Die(s.status().ToString());
  return *std::move(s);
}

Flags Parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die("missing value after " + a);
      return argv[++i];
    };
    if (a == "--rank") f.rank = std::atoi(value().c_str());
    else if (a == "--peers") f.peers = absl::StrSplit(value(), ',');
    else if (a == "--workload") f.workload = value();
    else if (a == "--alloc") f.alloc = value();
    else if (a == "--epochs") f.epochs = std::atoi(value().c_str());
    else if (a == "--rows") f.rows = std::atoll(value().c_str());
    else if (a == "--cols") f.cols = std::atoll(value().c_str());
    else if (a == "--features") f.features = std::atoll(value().c_str());
    else if (a == "--rank-k") f.k = std::atoi(value().c_str());
    else if (a == "--nnz-per-row") f.nnz = std::atoi(value().c_str());
    else if (a == "--batch") f.batch = std::atoi(value().c_str());
    else if (a == "--lr") f.lr = std::atof(value().c_str());
    else if (a == "--reg") f.reg = std::atof(value().c_str());
    else if (a == "--cluster-share") f.cluster_share = std::atof(value().c_str());
    else if (a == "--lookahead") f.lookahead = std::atoi(value().c_str());
    else if (a == "--localize-window") f.window = std::atoi(value().c_str());
    else if (a == "--seed") f.seed = std::strtoull(value().c_str(), nullptr, 10);
    else Die("unknown flag " + a);
  }
  if (f.peers.empty()) Die("--peers is required");
  const bool mf = f.workload == "mf";
  if (f.rows == 0) f.rows = mf ? 20000 : 40000;
  if (f.nnz == 0) f.nnz = mf ? 100 : 20;
  if (f.lr == 0) f.lr = mf ? 0.1 : 4.0;
  if (f.workload != "mf" && f.workload != "lr") Die("--workload must be mf or lr");
  if (f.alloc != "static" && f.alloc != "dynamic") Die("--alloc must be static or dynamic");
  if (f.epochs < 1 || f.rows < 1 || f.k < 1 || f.nnz < 1 || f.batch < 1 || f.lookahead < 1 ||
      f.window < 1) {
    Die("bad sizes");
  }
  return f;
}

// Rows [begin, end) of node r of n.
std::pair<int64_t, int64_t> Part(int64_t total, int r, int n) {
  return {total * r / n, total * (r + 1) / n};
}

// Sums `values` over all nodes through the store's metric keys [base,
// base + values.size()) and returns the totals (every node gets them).
std::vector<double> AllSum(dml::KvNode& kv, int64_t base, const std::vector<double>& values,
                           int value_len) {
  std::vector<int64_t> keys(values.size());
  std::iota(keys.begin(), keys.end(), base);
  // One value per key: pad to value_len.
  std::vector<double> padded(values.size() * value_len, 0.0);
  for (std::size_t i = 0; i < values.size(); ++i) padded[i * value_len] = values[i];
  std::vector<double> before(padded.size());
  Check(kv.Wait(Check(kv.Pull(keys, before.data()))));
  Check(kv.Barrier());
  Check(kv.Wait(Check(kv.Push(keys, padded))));
  Check(kv.Barrier());
  std::vector<double> after(padded.size());
  Check(kv.Wait(Check(kv.Pull(keys, after.data()))));
  Check(kv.Barrier());
  std::vector<double> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    out[i] = after[i * value_len] - before[i * value_len];
  }
  return out;
}

struct EpochStats {
  double loss_sum = 0;
  int64_t examples = 0;
};

// ------------------------------------------------------------------- mf

struct Rating {
  int32_t row;  // local row index
  int32_t col;
  double value;
};

struct MfData {
  int64_t row_begin = 0;
  std::vector<std::vector<Rating>> by_block;  // ratings per column block
  std::vector<double> w;                      // local row factors
};

MfData MakeMf(const Flags& f, int nodes) {
  MfData d;
  auto [rb, re] = Part(f.rows, f.rank, nodes);
  d.row_begin = rb;
  d.by_block.resize(static_cast<std::size_t>(nodes));
  const double scale = 1.0 / std::sqrt(static_cast<double>(f.k));
  // Ground truth factors: deterministic per row / column, so every node
  // agrees on the columns without talking.
  auto factor = [&](uint64_t id, std::vector<double>& out) {
    std::mt19937_64 g(f.seed * 1000003 + id);
    std::normal_distribution<double> n(0.0, scale);
    out.resize(static_cast<std::size_t>(f.k));
    for (auto& x : out) x = n(g);
  };
  std::vector<double> u, v;
  const int64_t block_cols = f.cols / nodes;
  d.w.resize(static_cast<std::size_t>((re - rb) * f.k));
  std::mt19937_64 init(f.seed + 17 * f.rank);
  std::uniform_real_distribution<double> small(0.0, 0.1);
  for (auto& x : d.w) x = small(init);
  for (int64_t r = rb; r < re; ++r) {
    factor(static_cast<uint64_t>(r), u);
    std::mt19937_64 g(f.seed * 7 + static_cast<uint64_t>(r));
    std::uniform_int_distribution<int64_t> col(0, f.cols - 1);
    std::normal_distribution<double> noise(0.0, 0.1);
    for (int j = 0; j < f.nnz; ++j) {
      const int64_t c = col(g);
      factor(static_cast<uint64_t>(f.rows + c), v);
      double dot = 0;
      for (int t = 0; t < f.k; ++t) dot += u[t] * v[t];
      const auto block = static_cast<std::size_t>(std::min<int64_t>(c / block_cols, nodes - 1));
      d.by_block[block].push_back({static_cast<int32_t>(r - rb), static_cast<int32_t>(c),
                                   dot + noise(g)});
    }
  }
  for (auto& b : d.by_block) std::shuffle(b.begin(), b.end(), init);
  return d;
}

// One sub-epoch's ratings in minibatches.
void MfBlock(const Flags& f, dml::KvNode& kv, MfData& d, const std::vector<Rating>& ratings,
             EpochStats& st) {
  const int k = f.k;
  std::vector<int64_t> keys;
  std::vector<double> h, delta;
  std::deque<dml::KvHandle> pushes;
  for (std::size_t start = 0; start < ratings.size(); start += f.batch) {
    const std::size_t end = std::min(ratings.size(), start + f.batch);
    keys.clear();
    for (std::size_t i = start; i < end; ++i) keys.push_back(ratings[i].col);
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    h.assign(keys.size() * k, 0.0);
    Check(kv.Wait(Check(kv.Pull(keys, h.data()))));
    delta.assign(h.size(), 0.0);
    for (std::size_t i = start; i < end; ++i) {
      const Rating& r = ratings[i];
      const auto j = static_cast<std::size_t>(
          std::lower_bound(keys.begin(), keys.end(), r.col) - keys.begin());
      double* hc = h.data() + j * k;
      double* dc = delta.data() + j * k;
      double* wu = d.w.data() + static_cast<std::size_t>(r.row) * k;
      double dot = 0;
      for (int t = 0; t < k; ++t) dot += wu[t] * hc[t];
      const double e = dot - r.value;
      st.loss_sum += e * e;
      ++st.examples;
      for (int t = 0; t < k; ++t) {
        const double gw = e * hc[t] + f.reg * wu[t];
        const double gh = e * wu[t] + f.reg * hc[t];
        wu[t] -= f.lr * gw;
        hc[t] -= f.lr * gh;
        dc[t] -= f.lr * gh;
      }
    }
    // Pushes are asynchronous, at most `lookahead` in flight (the next
    // pull of a column still sees them: one owner applies both in order).
    pushes.push_back(Check(kv.Push(keys, delta)));
    if (static_cast<int>(pushes.size()) > f.lookahead) {
      Check(kv.Wait(pushes.front()));
      pushes.pop_front();
    }
  }
  for (auto& p : pushes) Check(kv.Wait(p));
}

// ------------------------------------------------------------------- lr

struct LrData {
  std::vector<std::vector<int64_t>> x;  // feature ids per example (sorted, distinct)
  std::vector<double> y;                // +-1
  // Per minibatch (of --batch examples), built once as an application
  // would: its distinct keys, sorted, and each example's features as
  // positions in them (flat, nnz per example).
  std::vector<std::vector<int64_t>> batch_keys;
  std::vector<std::vector<uint32_t>> batch_pos;
};

LrData MakeLr(const Flags& f, int nodes) {
  LrData d;
  auto [rb, re] = Part(f.rows, f.rank, nodes);
  // The first half of the feature space holds the nodes' clusters: node
  // i's is every nodes-th feature from i, spread over all home ranges (as
  // hashing spreads them), so static allocation finds 1/nodes of it here.
  // The second half is a long tail of rare features every node draws from.
  const int64_t clustered = f.features / 2;
  const int64_t cluster_size = (clustered - f.rank + nodes - 1) / nodes;
  // A hidden model decides the labels (same on every node).
  auto truth = [&](int64_t feature) {
    std::mt19937_64 g(f.seed * 31 + static_cast<uint64_t>(feature));
    return std::normal_distribution<double>(0.0, 1.0)(g);
  };
  for (int64_t r = rb; r < re; ++r) {
    std::mt19937_64 g(f.seed * 13 + static_cast<uint64_t>(r));
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::uniform_int_distribution<int64_t> own(0, cluster_size - 1), tail(clustered, f.features - 1);
    std::vector<int64_t> feats;
    while (static_cast<int>(feats.size()) < f.nnz) {
      const int64_t ft = u(g) < f.cluster_share ? own(g) * nodes + f.rank : tail(g);
      if (std::find(feats.begin(), feats.end(), ft) == feats.end()) feats.push_back(ft);
    }
    std::sort(feats.begin(), feats.end());
    double margin = 0;
    for (int64_t ft : feats) margin += truth(ft);
    d.y.push_back(margin >= 0 ? 1.0 : -1.0);
    d.x.push_back(std::move(feats));
  }
  const std::size_t n = d.x.size();
  for (std::size_t b0 = 0; b0 < n; b0 += static_cast<std::size_t>(f.batch)) {
    const std::size_t b1 = std::min(n, b0 + static_cast<std::size_t>(f.batch));
    std::vector<int64_t> keys;
    for (std::size_t i = b0; i < b1; ++i) keys.insert(keys.end(), d.x[i].begin(), d.x[i].end());
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    std::vector<uint32_t> pos;
    for (std::size_t i = b0; i < b1; ++i) {
      for (int64_t ft : d.x[i]) {
        pos.push_back(static_cast<uint32_t>(std::lower_bound(keys.begin(), keys.end(), ft) -
                                            keys.begin()));
      }
    }
    d.batch_keys.push_back(std::move(keys));
    d.batch_pos.push_back(std::move(pos));
  }
  return d;
}

void LrEpoch(const Flags& f, dml::KvNode& kv, const LrData& d, bool dynamic, EpochStats& st) {
  const std::size_t n = d.x.size();
  const std::size_t batches = d.batch_keys.size();
  // Latency hiding: batch b + lookahead's keys are localized while batch b
  // runs. Nothing waits for them: a pull of a key still on its way waits in
  // the new owner's queue, one that another node took meanwhile is
  // forwarded there.
  // With a window W > 1, one call moves the keys of W batches (their
  // union): the relocation messages of W batches in one round.
  const std::size_t window = static_cast<std::size_t>(f.window);
  std::vector<int64_t> ahead;
  auto localize = [&](std::size_t from) {  // batches [from, from + W)
    ahead.clear();
    for (std::size_t b = from; b < std::min(batches, from + window); ++b) {
      ahead.insert(ahead.end(), d.batch_keys[b].begin(), d.batch_keys[b].end());
    }
    if (!ahead.empty()) Check(kv.Localize(ahead));
  };
  const std::size_t lead = std::max<std::size_t>(static_cast<std::size_t>(f.lookahead), window);
  if (dynamic) {
    for (std::size_t b = 0; b < std::min(lead, batches); b += window) localize(b);
  }
  std::vector<double> w, grad;
  std::deque<dml::KvHandle> pushes;
  const double scale = 1.0 / static_cast<double>(f.batch);
  for (std::size_t b = 0; b < batches; ++b) {
    if (dynamic && (b + lead) % window == 0 && b + lead < batches) localize(b + lead);
    const std::vector<int64_t>& keys = d.batch_keys[b];
    const uint32_t* pos = d.batch_pos[b].data();
    w.assign(keys.size(), 0.0);
    Check(kv.Wait(Check(kv.Pull(keys, w.data()))));
    grad.assign(keys.size(), 0.0);
    for (std::size_t i = b * f.batch; i < std::min(n, (b + 1) * f.batch); ++i) {
      const std::size_t nnz = d.x[i].size();
      double margin = 0;
      for (std::size_t j = 0; j < nnz; ++j) margin += w[pos[j]];
      const double ym = d.y[i] * margin;
      st.loss_sum += ym > 30 ? std::exp(-ym) : std::log1p(std::exp(-ym));
      ++st.examples;
      const double g = -d.y[i] / (1.0 + std::exp(ym));
      for (std::size_t j = 0; j < nnz; ++j) grad[pos[j]] += g * scale;
      pos += nnz;
    }
    for (std::size_t j = 0; j < keys.size(); ++j) grad[j] = -f.lr * (grad[j] + f.reg * w[j]);
    // Pushes are asynchronous, at most `lookahead` in flight.
    pushes.push_back(Check(kv.Push(keys, grad)));
    if (static_cast<int>(pushes.size()) > f.lookahead) {
      Check(kv.Wait(pushes.front()));
      pushes.pop_front();
    }
  }
  for (auto& h : pushes) Check(kv.Wait(h));
}

}  // namespace

int main(int argc, char** argv) {
  const Flags f = Parse(argc, argv);
  const int nodes = static_cast<int>(f.peers.size());
  const bool dynamic = f.alloc == "dynamic";
  constexpr int kMetrics = 5;  // loss sum, examples, remote keys, bytes, messages
  dml::KvOptions o;
  o.dynamic = dynamic;
  int64_t metric_base;
  if (f.workload == "mf") {
    if (f.cols % nodes != 0) Die("--cols must be a multiple of the number of nodes");
    o.value_len = f.k;
    o.block = f.cols / nodes;  // one ownership block per column block
    metric_base = f.cols;
    o.keys = f.cols + kMetrics;
  } else {
    o.value_len = 1;
    o.block = 1;
    metric_base = f.features;
    o.keys = f.features + kMetrics;
  }
  auto kv = Check(dml::KvNode::Join(o, f.rank, f.peers, std::chrono::seconds(60), {}, 1));
  MfData mf;
  LrData lr;
  if (f.workload == "mf") mf = MakeMf(f, nodes);
  else lr = MakeLr(f, nodes);
  Check(kv->Barrier());

  std::vector<double> epoch_seconds;
  double last_remote_fraction = 0, last_bytes = 0, last_loss = 0, last_messages = 0;
  for (int e = 1; e <= f.epochs; ++e) {
    const auto s0 = kv->Stats();
    const auto t0 = Clock::now();
    EpochStats st;
    if (f.workload == "mf") {
      for (int s = 0; s < nodes; ++s) {
        const int block = (f.rank + s) % nodes;
        if (dynamic) Check(kv->Wait(Check(kv->Localize({int64_t{block} * o.block}))));
        MfBlock(f, *kv, mf, mf.by_block[static_cast<std::size_t>(block)], st);
        Check(kv->Barrier());  // DSGD: the next stratum starts together
      }
    } else {
      LrEpoch(f, *kv, lr, dynamic, st);
      Check(kv->Barrier());
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    const auto s1 = kv->Stats();
    const double accessed = static_cast<double>((s1.local_keys - s0.local_keys) +
                                                (s1.remote_keys - s0.remote_keys) +
                                                (s1.queued_keys - s0.queued_keys));
    auto sums = AllSum(*kv, metric_base + kMetrics * 0,
                       {st.loss_sum, static_cast<double>(st.examples),
                        static_cast<double>(s1.remote_keys - s0.remote_keys) / std::max(1.0, accessed) /
                            nodes,
                        static_cast<double>(s1.bytes - s0.bytes),
                        static_cast<double>(s1.messages - s0.messages)},
                       o.value_len);
    epoch_seconds.push_back(seconds);
    last_loss = f.workload == "mf" ? std::sqrt(sums[0] / std::max(1.0, sums[1]))
                                   : sums[0] / std::max(1.0, sums[1]);
    last_remote_fraction = sums[2];
    last_bytes = sums[3];
    last_messages = sums[4];
    if (f.rank == 0) {
      std::printf("epoch %d seconds %.4f %s %.6f remote_fraction %.4f bytes_per_epoch %.0f "
                  "messages_per_epoch %.0f\n",
                  e, seconds, f.workload == "mf" ? "train_rmse" : "train_logloss", last_loss,
                  last_remote_fraction, last_bytes, last_messages);
      std::fflush(stdout);
    }
  }
  if (f.rank == 0) {
    std::vector<double> sorted = epoch_seconds;
    std::sort(sorted.begin(), sorted.end());
    std::printf("result workload %s alloc %s nodes %d epoch_seconds_median %.4f loss %.6f "
                "remote_fraction %.4f bytes_per_epoch %.0f messages_per_epoch %.0f\n",
                f.workload.c_str(), f.alloc.c_str(), nodes, sorted[sorted.size() / 2], last_loss,
                last_remote_fraction, last_bytes, last_messages);
  }
  Check(kv->Barrier());
  return 0;
}
