// net_bench: our push/pull path between processes against raw TCP, and
// cocoa on node processes against in-process.
//
//   net_bench --what=throughput [--sizes=4096,1048576,8388608] [--repeat=3] [--path=caf,tcp,local,tls]
//             [--tls-dir=DIR]  (tls: CAF over TLS, DIR from tests/common/make_tls.sh; prints tls/caf)
//       One parameter shard in a dml-node process (loopback); this process
//       pushes a vector of each size (request: the payload, reply: a clock)
//       and pulls it back (request: small, reply: the payload), one message in
//       flight. The peer measured in the same run: raw TCP between this
//       process and a forked one, the same payload and an 8-byte reply,
//       TCP_NODELAY. Prints MB/s (payload bytes / wall time) and the ratio,
//       per payload path (see payload_path: "caf", "tcp", "local").
//   net_bench --what=allreduce [--procs=4] [--bytes=8388608] [--iters=20] [--path=caf,tcp,local]
//       P processes each contribute a vector; all get the sum (the shards
//       keep the mean: one multiplication away) through P shards, one per
//       process (see AllreduceMember). bench/allreduce_compare.sh runs it against
//       MPI_Allreduce. [--concat=1] copies the result into one vector per member;
//       [--arena=1] pushes blocks of the shared arena (0: heap vectors).
//       DML_BULK_STATS=1 in the environment prints each member's fetch counters.
//   net_bench --what=cocoa --data=FILE [--binarize=T] [--nodes=4] [--rounds=30]
//       cocoa with K = nodes workers and 2 shards, H = 1 epoch, for a fixed
//       number of rounds, in-process and on K node processes: seconds and
//       bytes per round (medians of --repeat).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <condition_variable>
#include <map>
#include <mutex>
#include <memory>
#include <string>
#include <thread>
#include <vector>
#include <cmath>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include "dml/net/local_cluster.hpp"
#include "dml/actors/network.hpp"
#include "dml/actors/transport.hpp"
#include "dml/actors/node.hpp"
#include "dml/actors/parameter_shard.hpp"
#include "dml/actors/runtime.hpp"
#include "dml/data/libsvm.hpp"
#include "dml/net/bulk.hpp"

namespace {

using Clock = std::chrono::steady_clock;

std::map<std::string, std::string> ParseFlags(int argc, char** argv) {
  std::map<std::string, std::string> f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) continue;
    auto eq = a.find('=');
    f[a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2)] =
        eq == std::string::npos ? "1" : a.substr(eq + 1);
  }
  return f;
}
std::string Get(const std::map<std::string, std::string>& f, const std::string& k,
                const std::string& d) {
  auto it = f.find(k);
  return it == f.end() ? d : it->second;
}
std::vector<long> Longs(const std::string& s) {
  std::vector<long> out;
  size_t b = 0;
  while (b <= s.size()) {
    size_t e = std::min(s.find(',', b), s.size());
    if (e > b) out.push_back(std::stol(s.substr(b, e - b)));
    b = e + 1;
  }
  return out;
}
double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The payload paths compared: "caf" (every vector inside CAF's messages),
// "tcp" (vectors of >= 128 KiB by reference, fetched over TCP: the path
// between machines) and "local" (the same, fetched by a single copy from
// the sender's memory: the default between processes of one machine).
struct payload_path {
  std::string name;
  bool bulk = false;
  bool same_host = false;
  std::string tls_dir;  // "tls": CAF over TLS with DIR/node.pem, node.key, ca.pem (bulk off)
  dml::actors::TlsFiles tls() const {
    if (tls_dir.empty()) return {};
    return {tls_dir + "/node.pem", tls_dir + "/node.key", tls_dir + "/ca.pem"};
  }
  std::vector<std::string> node_args() const {
    if (!tls_dir.empty()) {
      auto t = tls();
      return {"--bulk=off", "--tls-cert=" + t.cert, "--tls-key=" + t.key, "--tls-ca=" + t.ca};
    }
    if (!bulk) return {"--bulk=off"};
    return {"--bulk=on", same_host ? "--bulk-local=on" : "--bulk-local=off"};
  }
};
std::vector<payload_path> Paths(const std::string& list, const std::string& tls_dir) {
  std::vector<payload_path> out;
  for (const char* name : {"caf", "tcp", "local", "tls"}) {
    const std::string n = name;
    if (("," + list + ",").find("," + n + ",") == std::string::npos) continue;
    out.push_back({n, n == "tcp" || n == "local", n == "local", n == "tls" ? tls_dir : ""});
  }
  return out;
}

// Push and pull MB/s per path and size, for the TLS / plaintext ratio.
std::map<std::string, std::map<long, std::pair<double, double>>> g_throughput;

std::string NodeBinary() {
  std::string self = dml::net::LocalCluster::NodeBinaryNextToSelf();  // .../bench/dml-node
  return self.substr(0, self.rfind('/')) + "/../samples/dml-node";
}

bool ReadAll(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t r = ::read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}
bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t r = ::write(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// Raw TCP: messages of `bytes` payload (8-byte length header), each
// answered with 8 bytes. Returns seconds for `count` round trips.
double RawTcp(size_t bytes, int count) {
  int ls = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(ls, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(ls, reinterpret_cast<sockaddr*>(&addr), &len);
  ::listen(ls, 1);
  const pid_t pid = ::fork();
  if (pid == 0) {
    int c = ::accept(ls, nullptr, nullptr);
    int one = 1;
    ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::vector<char> buf;
    uint64_t n = 0;
    while (ReadAll(c, reinterpret_cast<char*>(&n), 8)) {
      buf.resize(n);
      if (!ReadAll(c, buf.data(), n)) break;
      uint64_t ack = n;
      if (!WriteAll(c, reinterpret_cast<char*>(&ack), 8)) break;
    }
    std::_Exit(0);
  }
  ::close(ls);
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  ::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  int one = 1;
  ::setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::vector<char> payload(bytes, 1);
  uint64_t n = bytes, ack = 0;
  // Warm-up, then timed.
  for (int i = 0; i < 3; ++i) {
    WriteAll(s, reinterpret_cast<char*>(&n), 8);
    WriteAll(s, payload.data(), bytes);
    ReadAll(s, reinterpret_cast<char*>(&ack), 8);
  }
  const auto t = Clock::now();
  for (int i = 0; i < count; ++i) {
    WriteAll(s, reinterpret_cast<char*>(&n), 8);
    WriteAll(s, payload.data(), bytes);
    ReadAll(s, reinterpret_cast<char*>(&ack), 8);
  }
  const double secs = Since(t);
  ::close(s);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return secs;
}

// One pass of the throughput table over one payload path (payload_path).
int ThroughputPath(const payload_path& path, const std::vector<long>& sizes, int repeat) {
  auto cluster = dml::net::LocalCluster::Start(NodeBinary(), 1, path.node_args());
  if (!cluster.ok()) {
    std::fprintf(stderr, "%s\n", std::string(cluster.status().message()).c_str());
    return 1;
  }
  dml::actors::process_config cfg(2, dml::net::BulkOptions{path.same_host});
  if (path.bulk && !cfg.bulk().Serve("127.0.0.1").ok()) return 1;
  if (auto st = dml::actors::ConfigureTls(cfg, path.tls()); !st.ok()) {
    std::fprintf(stderr, "%s\n", std::string(st.message()).c_str());
    return 1;
  }
  caf::actor_system sys(cfg);
  auto hp = dml::actors::ParseHostPort(cluster->addresses()[0]);
  auto node = dml::actors::RemoteActor<dml::actors::node_actor>(sys, hp->first, hp->second);
  if (!node) return 1;
  caf::scoped_actor self{sys};
  // Endpoints exchanged: each side fetches the other's references.
  if (auto st = dml::actors::AdmitTo(self, *node, "", std::chrono::seconds(10)); !st.ok()) {
    std::fprintf(stderr, "%s\n", std::string(st.message()).c_str());
    return 1;
  }
  for (long bytes : sizes) {
    const size_t n = static_cast<size_t>(bytes) / sizeof(double);
    const int count = bytes <= 4096 ? 4000 : bytes <= (1 << 20) ? 300 : 60;
    dml::actors::shard_config sc;
    sc.mode = dml::Mode::kCocoa;
    sc.workers = 1;
    sc.begin = 0;
    sc.end = static_cast<int64_t>(n);
    sc.model.kind = dml::ModelKind::kLogisticL2;
    caf::actor shard_handle;
    self->request(*node, std::chrono::seconds(10), dml::actors::shard_atom_v, sc,
                  caf::actor_cast<caf::actor>(self))
        .receive([&](const caf::actor& a) { shard_handle = a; },
                 [&](caf::error& e) { std::fprintf(stderr, "%s\n", sys.render(e).c_str()); });
    auto shard = caf::actor_cast<dml::actors::parameter_shard>(shard_handle);
    const dml::actors::dvec payload(std::vector<double>(n, 1e-9));
    std::vector<double> push_s, pull_s, raw_s;
    for (int r = 0; r < repeat; ++r) {
      auto t = Clock::now();
      for (int i = 0; i < count; ++i) {
        self->request(shard, std::chrono::seconds(60), dml::actors::push_atom_v, int32_t{0},
                      int64_t{0}, payload)
            .receive([](int64_t) {}, [&](caf::error& e) {
              std::fprintf(stderr, "push: %s\n", sys.render(e).c_str());
            });
      }
      push_s.push_back(Since(t));
      t = Clock::now();
      for (int i = 0; i < count; ++i) {
        self->request(shard, std::chrono::seconds(60), dml::actors::pull_atom_v, int32_t{0},
                      int64_t{0})
            .receive(
                [&](const dml::actors::dvec& v) {
                  // A large range arrives by reference: fetched here, as an
                  // actor would.
                  auto got = dml::actors::ResolveBlocking(
                      sys, v, caf::actor_cast<caf::strong_actor_ptr>(shard));
                  if (!got.wire_error.empty()) {
                    std::fprintf(stderr, "pull: %s\n", got.wire_error.c_str());
                  }
                },
                [&](caf::error& e) {
              std::fprintf(stderr, "pull: %s\n", sys.render(e).c_str());
            });
      }
      pull_s.push_back(Since(t));
      raw_s.push_back(RawTcp(static_cast<size_t>(bytes), count));
    }
    const double mb = static_cast<double>(bytes) * count / 1e6;
    const double push = mb / Median(push_s), pull = mb / Median(pull_s), raw = mb / Median(raw_s);
    std::printf("%6s %10ld %10d %12.1f %12.1f %12.1f %10.2f %10.2f\n", path.name.c_str(), bytes, count,
                push, pull, raw, push / raw, pull / raw);
    g_throughput[path.name][bytes] = {push, pull};
    std::fflush(stdout);
    self->send_exit(shard_handle, caf::exit_reason::user_shutdown);
  }
  self->send_exit(*node, caf::exit_reason::user_shutdown);
  return 0;
}

int Throughput(const std::map<std::string, std::string>& flags) {
  const auto sizes = Longs(Get(flags, "sizes", "4096,1048576,8388608"));
  const int repeat = std::stoi(Get(flags, "repeat", "3"));
  std::printf("%6s %10s %10s %12s %12s %12s %10s %10s\n", "path", "bytes", "messages", "push MB/s",
              "pull MB/s", "rawTCP MB/s", "push/raw", "pull/raw");
  const std::string tls_dir = Get(flags, "tls-dir", "");
  auto paths = Paths(Get(flags, "path", "caf,tcp,local"), tls_dir);
  for (const auto& path : paths) {
    if (!path.tls_dir.empty() || path.name != "tls") continue;
    std::fprintf(stderr, "--path=tls needs --tls-dir=DIR (node.pem, node.key, ca.pem; "
                         "tests/common/make_tls.sh DIR makes them)\n");
    return 2;
  }
  for (const auto& path : paths) {
    if (int rc = ThroughputPath(path, sizes, repeat); rc != 0) return rc;
  }
  // TLS against plaintext CAF, measured in this run.
  if (g_throughput.count("tls") && g_throughput.count("caf")) {
    for (const auto& [bytes, tls] : g_throughput["tls"]) {
      auto it = g_throughput["caf"].find(bytes);
      if (it == g_throughput["caf"].end()) continue;
      std::printf("tls/caf %10ld bytes: push %.2f pull %.2f\n", bytes, tls.first / it->second.first,
                  tls.second / it->second.second);
    }
  }
  return 0;
}

int Cocoa(const std::map<std::string, std::string>& flags) {
  const std::string data = Get(flags, "data", "");
  const int k = std::stoi(Get(flags, "nodes", "4"));
  const int rounds = std::stoi(Get(flags, "rounds", "30"));
  const int repeat = std::stoi(Get(flags, "repeat", "3"));
  dml::LibsvmOptions lo;
  if (flags.count("binarize")) lo.binarize_threshold = std::stod(Get(flags, "binarize", "0"));
  auto loaded = dml::ReadLibsvm(data, lo);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", std::string(loaded.status().message()).c_str());
    return 2;
  }
  auto cluster = dml::net::LocalCluster::Start(NodeBinary(), k);
  if (!cluster.ok()) return 1;
  dml::Runtime rt;
  dml::JobSpec s;
  s.data.path = data;
  s.data.load = lo;
  s.model.kind = dml::ModelKind::kLogisticL2;
  s.model.lambda = dml::LambdaFromC(1.0, loaded->x.rows());
  s.mode.kind = dml::Mode::kCocoa;
  s.mode.workers = k;
  s.mode.shards = 2;
  s.stop.gap_rel = 0;
  s.stop.max_epochs = rounds;
  std::printf("data %s: %lld x %lld; cocoa K=%d S=2, H=1 epoch, %d rounds\n", data.c_str(),
              static_cast<long long>(loaded->x.rows()), static_cast<long long>(loaded->x.cols()),
              k, rounds);
  std::printf("%-12s %14s %14s %12s\n", "where", "s/round", "bytes/round", "final gap");
  for (bool remote : {false, true}) {
    s.cluster.nodes = remote ? cluster->addresses() : std::vector<std::string>{};
    std::vector<double> per_round;
    double bytes = 0, gap = 0;
    for (int r = 0; r < repeat; ++r) {
      auto j = rt.Submit(s);
      if (!j.ok()) return 1;
      auto res = j->Wait();
      if (!res.ok()) {
        std::fprintf(stderr, "%s\n", std::string(res.status().message()).c_str());
        return 1;
      }
      // Rounds after the first certificate (round 0 is the zero model).
      per_round.push_back(res->seconds / std::max(1, res->rounds));
      bytes = static_cast<double>(res->bytes_exchanged) / std::max(1, res->rounds);
      gap = res->gap;
    }
    std::printf("%-12s %14.5f %14.4g %12.3e\n", remote ? "on nodes" : "in-process",
                Median(per_round), bytes, gap);
    std::fflush(stdout);
  }
  return 0;
}

// One member of the allreduce: owns shard `rank` (keys [rank*n/P,
// (rank+1)*n/P) of the vector, model-averaging rule: gather P pushes, keep
// their mean), publishes it, connects to the other members' shards, then
// per iteration sends each range of its vector to the shard owning it in a
// pushpull, answered with that range of the result (reduce-scatter +
// all-gather through shards). Writes its median seconds per iteration to
// DIR/time<rank>.
int AllreduceMember(const std::map<std::string, std::string>& flags) {
  const int rank = std::stoi(Get(flags, "rank", "0"));
  const int procs = std::stoi(Get(flags, "procs", "4"));
  const long bytes = std::stol(Get(flags, "bytes", "8388608"));
  const int iters = std::stoi(Get(flags, "iters", "20"));
  const std::string dir = Get(flags, "dir", "/tmp");
  const int64_t n = bytes / static_cast<long>(sizeof(double));
  const auto paths = Paths(Get(flags, "path", "local"), "");
  if (paths.size() != 1) return 2;
  std::vector<int64_t> bounds(procs + 1);
  for (int s = 0; s <= procs; ++s) bounds[s] = n * s / procs;
  dml::actors::process_config cfg(std::stoi(Get(flags, "threads", "2")),
                                 dml::net::BulkOptions{paths[0].same_host});
  if (paths[0].bulk && !cfg.bulk().Serve("127.0.0.1").ok()) return 1;
  caf::actor_system sys(cfg);
  dml::actors::shard_config sc;
  sc.mode = dml::Mode::kModelAveraging;
  sc.workers = procs;
  sc.begin = bounds[rank];
  sc.end = bounds[rank + 1];
  sc.model.kind = dml::ModelKind::kLogisticL2;
  auto own = dml::actors::spawn_parameter_shard(sys, sc);
  // Every pair of members shares exactly one connection, opened by the
  // higher rank: CAF 0.17 lost messages (the run hung) when two processes
  // connected to each other at the same time. So each member publishes a
  // directory: a lower rank's directory hands out its shard, and a higher
  // rank leaves its own shard there (over the connection it opened).
  struct directory_state {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<caf::actor> shards;
  };
  auto known = std::make_shared<directory_state>();
  known->shards.resize(procs);
  // Ranks tell each other their bulk endpoints with their shards: each
  // fetches the others' references from there only.
  const std::string my_endpoint = cfg.bulk().endpoint().Encode();
  dml::actors::BulkPeers* peers = &cfg.bulk_peers();
  auto directory = sys.spawn([own, known, procs, my_endpoint,
                              peers](caf::event_based_actor*) -> caf::behavior {
    return {
        [own, my_endpoint](dml::actors::read_atom) {
          return caf::make_message(caf::actor_cast<caf::actor>(own), my_endpoint);
        },
        [known, procs, peers](dml::actors::init_atom, int32_t r, const caf::actor& shard,
                              const std::string& endpoint) {
          if (r < 0 || r >= procs || !shard) return;
          auto e = dml::net::BulkEndpoint::Decode(endpoint);
          if (!e.ok()) return;
          peers->Set(shard->node(), *std::move(e));
          std::lock_guard<std::mutex> lock(known->mu);
          known->shards[r] = shard;
          known->cv.notify_all();
        },
    };
  });
  auto port = dml::actors::Publish(sys, directory, 0, "127.0.0.1");
  if (!port) return 1;
  {
    const std::string f = dir + "/port" + std::to_string(rank);
    FILE* out = std::fopen((f + ".tmp").c_str(), "w");
    std::fprintf(out, "%u\n", static_cast<unsigned>(*port));
    std::fclose(out);
    std::rename((f + ".tmp").c_str(), f.c_str());
  }
  std::vector<dml::actors::parameter_shard> shards(procs);
  shards[rank] = own;
  {
    caf::scoped_actor asker{sys};
    for (int s = 0; s < rank; ++s) {
      unsigned p = 0;
      for (int tries = 0; tries < 4000 && p == 0; ++tries) {
        FILE* in = std::fopen((dir + "/port" + std::to_string(s)).c_str(), "r");
        if (in != nullptr) {
          if (std::fscanf(in, "%u", &p) != 1) p = 0;
          std::fclose(in);
        }
        if (p == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      auto d = dml::actors::RemoteActor(sys, "127.0.0.1", static_cast<uint16_t>(p));
      if (!d) return 1;
      bool got = false;
      asker->request(*d, std::chrono::seconds(30), dml::actors::read_atom_v)
          .receive(
              [&](const caf::actor& shard, const std::string& endpoint) {
                auto e = dml::net::BulkEndpoint::Decode(endpoint);
                if (!shard || !e.ok()) return;
                cfg.bulk_peers().Set(shard->node(), *std::move(e));
                shards[s] = caf::actor_cast<dml::actors::parameter_shard>(shard);
                got = true;
              },
              [](caf::error&) {});
      if (!got) return 1;
      asker->send(*d, dml::actors::init_atom_v, int32_t{rank}, caf::actor_cast<caf::actor>(own),
                  my_endpoint);
    }
  }
  {
    std::unique_lock<std::mutex> lock(known->mu);
    const bool all = known->cv.wait_for(lock, std::chrono::seconds(60), [&] {
      for (int s = rank + 1; s < procs; ++s) {
        if (!known->shards[s]) return false;
      }
      return true;
    });
    if (!all) return 1;
    for (int s = rank + 1; s < procs; ++s) {
      shards[s] = caf::actor_cast<dml::actors::parameter_shard>(known->shards[s]);
    }
  }
  caf::scoped_actor self{sys};
  // --concat=1: every iteration copies the P pulled ranges into one vector
  // (MPI's output form); 0: the result stays as the P ranges a pull returns.
  const bool concat = Get(flags, "concat", "1") != "0";
  std::vector<double> mine(static_cast<size_t>(n), 1.0 + rank), sum(static_cast<size_t>(n));
  std::vector<dml::actors::dvec> pieces(procs);
  // --arena=1: the pushed ranges live in the bulk channel's shared arena
  // (same-host shards read them in place); 0: ordinary heap vectors.
  const bool arena = Get(flags, "arena", "1") != "0";
  std::vector<dml::actors::dvec> parts;
  for (int s = 0; s < procs; ++s) {
    const auto m = static_cast<std::size_t>(bounds[s + 1] - bounds[s]);
    if (auto block = arena ? cfg.bulk().Allocate(m) : std::nullopt) {
      std::copy(mine.begin() + bounds[s], mine.begin() + bounds[s + 1], block->data);
      parts.emplace_back(block->owner, block->data, m);
    } else {
      parts.emplace_back(std::vector<double>(mine.begin() + bounds[s], mine.begin() + bounds[s + 1]));
    }
  }
  std::vector<double> per_iter;
  bool ok = true;
  for (int it = 0; it < iters + 2 && ok; ++it) {  // 2 warm-up iterations
    const auto t = Clock::now();
    // One pushpull per shard, all in flight at once: each pushes this
    // member's range and is answered with the range's mean once all P
    // pushes of the round are in.
    using handle = decltype(self->request(shards[0], std::chrono::seconds(60),
                                          dml::actors::pushpull_atom_v, int32_t{rank},
                                          int64_t{it}, parts[0]));
    std::vector<handle> exchanges;
    for (int s = 0; s < procs; ++s) {
      exchanges.push_back(self->request(shards[s], std::chrono::seconds(60),
                                        dml::actors::pushpull_atom_v, int32_t{rank}, int64_t{it},
                                        parts[s]));
    }
    for (int s = 0; s < procs; ++s) {
      exchanges[s].receive(
          [&](const dml::actors::dvec& reply) {
            const dml::actors::dvec v = dml::actors::ResolveBlocking(
                sys, reply, caf::actor_cast<caf::strong_actor_ptr>(shards[s]));
            if (!v.wire_error.empty()) {
              std::fprintf(stderr, "rank %d: %s\n", rank, v.wire_error.c_str());
              ok = false;
              return;
            }
            if (concat) std::copy(v.view().begin(), v.view().end(), sum.begin() + bounds[s]);
            pieces[s] = v;
          },
          [&](caf::error& e) {
            std::fprintf(stderr, "rank %d: %s\n", rank, sys.render(e).c_str());
            ok = false;
          });
    }
    if (it >= 2) per_iter.push_back(Since(t));
  }
  // The shards keep the mean: sum = mean * P. Check every value of the
  // last iteration's result (the pieces, and the concatenation if made).
  const double expect = (procs * (procs + 1) / 2.0) / procs;
  for (int s = 0; ok && s < procs; ++s) {
    const auto v = pieces[s].view();
    if (static_cast<int64_t>(v.size()) != bounds[s + 1] - bounds[s]) ok = false;
    for (std::size_t j = 0; ok && j < v.size(); ++j) {
      if (std::abs(v[j] - expect) > 1e-12 ||
          (concat && sum[static_cast<std::size_t>(bounds[s]) + j] != v[j])) {
        std::fprintf(stderr, "rank %d: wrong result %g at %lld, expected %g\n", rank, v[j],
                     static_cast<long long>(bounds[s] + static_cast<int64_t>(j)), expect);
        ok = false;
      }
    }
  }
  if (std::getenv("DML_BULK_STATS") != nullptr) {
    const auto b = cfg.bulk().stats();
    std::fprintf(stderr, "rank %d: fetches %llu in place %llu direct %llu single %llu\n", rank,
                 (unsigned long long)b.fetches, (unsigned long long)b.in_place,
                 (unsigned long long)b.direct, (unsigned long long)b.single_copy);
  }
  FILE* out = std::fopen((dir + "/time" + std::to_string(rank)).c_str(), "w");
  std::fprintf(out, "%.9f\n", ok ? Median(per_iter) : -1.0);
  std::fclose(out);
  // Let the peers finish their last pulls before the shard goes away.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  self->send_exit(own, caf::exit_reason::user_shutdown);
  self->send_exit(directory, caf::exit_reason::user_shutdown);
  sys.middleman().unpublish(directory, *port);
  return ok ? 0 : 1;
}

int AllreducePath(const std::map<std::string, std::string>& flags, const std::string& path) {
  const int procs = std::stoi(Get(flags, "procs", "4"));
  const std::string bytes = Get(flags, "bytes", "8388608");
  const std::string iters = Get(flags, "iters", "20");
  const std::string concat = Get(flags, "concat", "1");
  char tmpl[] = "/tmp/dml-allreduce-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  std::string self_exe = dml::net::LocalCluster::NodeBinaryNextToSelf();
  self_exe = self_exe.substr(0, self_exe.rfind('/')) + "/net_bench";
  std::vector<pid_t> pids;
  for (int r = 0; r < procs; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      std::vector<std::string> args = {self_exe, "--what=allreduce-member",
                                       "--rank=" + std::to_string(r),
                                       "--procs=" + std::to_string(procs), "--bytes=" + bytes,
                                       "--iters=" + iters, "--dir=" + dir, "--path=" + path,
                                       "--concat=" + concat, "--threads=" + Get(flags, "threads", "2"),
                                       "--arena=" + Get(flags, "arena", "1")};
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(self_exe.c_str(), argv.data());
      std::_Exit(127);
    }
    pids.push_back(pid);
  }
  bool ok = true;
  for (pid_t p : pids) {
    int status = 0;
    ::waitpid(p, &status, 0);
    ok &= WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  double worst = 0;
  for (int r = 0; r < procs; ++r) {
    FILE* in = std::fopen((dir + "/time" + std::to_string(r)).c_str(), "r");
    double t = -1;
    if (in != nullptr) {
      if (std::fscanf(in, "%lf", &t) != 1) t = -1;
      std::fclose(in);
    }
    if (t < 0) ok = false;
    worst = std::max(worst, t);
  }
  (void)std::system(("rm -rf '" + dir + "'").c_str());
  if (!ok) {
    std::fprintf(stderr, "allreduce through shards failed\n");
    return 1;
  }
  std::printf("allreduce through shards (%s path, %s): %d processes, %s bytes each: median "
              "%.3f ms per allreduce (slowest member)\n",
              path.c_str(), concat == "0" ? "result as P ranges" : "result copied into one vector",
              procs, bytes.c_str(), worst * 1e3);
  std::fflush(stdout);
  return 0;
}

int Allreduce(const std::map<std::string, std::string>& flags) {
  for (const auto& path : Paths(Get(flags, "path", "caf,tcp,local"), "")) {
    if (int rc = AllreducePath(flags, path.name); rc != 0) return rc;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  dml::actors::TuneAllocatorForMessages();
  const auto flags = ParseFlags(argc, argv);
  const std::string what = Get(flags, "what", "throughput");
  if (what == "throughput") return Throughput(flags);
  if (what == "cocoa") return Cocoa(flags);
  if (what == "allreduce") return Allreduce(flags);
  if (what == "allreduce-member") return AllreduceMember(flags);
  std::fprintf(stderr, "unknown --what=%s\n", what.c_str());
  return 2;
}
