// The key-value store across processes: 8 kv_stress processes on loopback,
// 4 threads each, push +1 to random keys while keys are randomly localized;
// every final value must equal the number of pushes issued to it (summed
// over the processes' own counts).
#define BOOST_TEST_MODULE kv_cluster
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#ifndef DML_KV_STRESS_BINARY
#error "DML_KV_STRESS_BINARY must name the kv_stress executable"
#endif

extern char** environ;

namespace {

// A port that was free a moment ago, below the kernel's ephemeral range
// (32768-60999): a port the kernel hands out meanwhile (to another test's
// listener or outgoing connection) cannot take it before kv_stress binds it.
int FreePort() {
  static std::mt19937 rng(static_cast<unsigned>(getpid()));
  for (;;) {
    const int port = 20000 + static_cast<int>(rng() % 10000);
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    close(fd);
    if (ok) return port;
  }
}

// "127.0.0.1:p0,127.0.0.1:p1,...": `nodes` distinct free ports.
std::string Peers(int nodes) {
  std::string peers;
  std::set<int> taken;
  for (int r = 0; r < nodes; ++r) {
    int port = FreePort();
    while (!taken.insert(port).second) port = FreePort();
    if (r > 0) peers += ",";
    peers += "127.0.0.1:" + std::to_string(port);
  }
  return peers;
}

std::vector<int64_t> ReadNumbers(const std::string& path) {
  std::ifstream f(path);
  std::vector<int64_t> v;
  for (int64_t x; f >> x;) v.push_back(x);
  return v;
}

// environ plus `extra` ("NAME=value" entries), for posix_spawn.
struct Env {
  explicit Env(std::vector<std::string> extra) : entries(std::move(extra)) {
    for (char** e = environ; *e != nullptr; ++e) entries.emplace_back(*e);
    for (auto& e : entries) ptrs.push_back(e.data());
    ptrs.push_back(nullptr);
  }
  std::vector<std::string> entries;
  std::vector<char*> ptrs;
};

// Starts kv_stress with `args` (those after the binary) in `env`, its
// stderr into the file `err` where one is named.
pid_t SpawnStress(std::vector<std::string> args, Env& env, const std::string& err = "") {
  args.insert(args.begin(), DML_KV_STRESS_BINARY);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  if (!err.empty()) {
    posix_spawn_file_actions_addopen(&files, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  }
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv[0], &files, nullptr, argv.data(), env.ptrs.data());
  posix_spawn_file_actions_destroy(&files);
  BOOST_REQUIRE(spawned == 0);
  return pid;
}

// Every process's wait status, in order; all are killed and the test fails
// if any still runs after `limit`.
std::vector<int> WaitForAll(const std::vector<pid_t>& pids, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::vector<int> statuses;
  for (pid_t pid : pids) {
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        for (pid_t p : pids) kill(p, SIGKILL);
        BOOST_FAIL("kv_stress processes still running after " << limit.count() << " s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    statuses.push_back(status);
  }
  return statuses;
}

void RunGroup(int nodes, int threads, int ops, int64_t keys, int64_t block,
              bool lose = false, int attempt = 1, const std::string& secret = "") {
  const std::string peers = Peers(nodes);
  const std::string out = std::string(DML_TEST_TMP) + "/kv_cluster." + std::to_string(getpid());
  std::vector<pid_t> pids;
  for (int r = 0; r < nodes; ++r) {
    std::vector<std::string> args = {std::to_string(r),     peers,
                                     std::to_string(threads), std::to_string(ops),
                                     std::to_string(keys),  std::to_string(block),
                                     out + "." + std::to_string(r)};
    if (lose) args.push_back("lose");
    Env env(secret.empty() ? std::vector<std::string>{}
                           : std::vector<std::string>{"DML_KV_SECRET=" + secret});
    pids.push_back(SpawnStress(std::move(args), env));
  }
  int failed = 0, port_taken = 0;
  for (int status : WaitForAll(pids, std::chrono::seconds(150))) {
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 3) ++port_taken;
  }
  if (port_taken > 0 && attempt < 3) {  // another process bound a port first
    BOOST_TEST_MESSAGE("a port was taken; the group runs again (attempt " << attempt + 1 << ")");
    return RunGroup(nodes, threads, ops, keys, block, lose, attempt + 1, secret);
  }
  BOOST_REQUIRE_MESSAGE(failed == 0, failed << " kv_stress processes failed (see their stderr)");
  if (lose) return;
  std::vector<int64_t> issued(static_cast<std::size_t>(keys), 0);
  for (int r = 0; r < nodes; ++r) {
    auto mine = ReadNumbers(out + "." + std::to_string(r) + ".issued");
    BOOST_REQUIRE(mine.size() == issued.size());
    for (std::size_t k = 0; k < mine.size(); ++k) issued[k] += mine[k];
  }
  auto values = ReadNumbers(out + ".0.values");
  BOOST_REQUIRE(values.size() == issued.size());
  int64_t wrong = 0, total = 0;
  for (std::size_t k = 0; k < values.size(); ++k) {
    total += issued[k];
    if (values[k] != issued[k] && wrong++ < 5) {
      BOOST_TEST_MESSAGE("key " << k << ": " << values[k] << " != " << issued[k] << " issued");
    }
  }
  BOOST_TEST(wrong == 0);
  BOOST_TEST(total > int64_t{nodes} * threads * ops / 2);  // pushes were issued
  for (int r = 0; r < nodes; ++r) {
    std::remove((out + "." + std::to_string(r) + ".issued").c_str());
  }
  std::remove((out + ".0.values").c_str());
}

}  // namespace

BOOST_AUTO_TEST_CASE(eight_processes_of_four_threads_lose_and_double_no_push) {
  RunGroup(8, 4, 400, 500, 1);
}

BOOST_AUTO_TEST_CASE(blocks_of_keys_across_processes) { RunGroup(4, 4, 400, 500, 16); }

BOOST_AUTO_TEST_CASE(a_crashed_process_fails_the_others_operations_at_once) {
  RunGroup(4, 1, 0, 100, 1, /*lose=*/true);
}

// With a group secret every connection proves it both ways: the group runs
// as without one (every push counted once).
BOOST_AUTO_TEST_CASE(a_group_with_a_secret_runs_as_one_without) {
  RunGroup(4, 2, 200, 300, 1, /*lose=*/false, /*attempt=*/1, "correct horse battery staple");
}

// A process with another secret, or none, is refused by name, fast, and
// never becomes part of the group (the others fail to form it).
BOOST_AUTO_TEST_CASE(a_node_with_a_wrong_or_missing_secret_is_refused) {
  for (const std::string bad : {"wrong secret", ""}) {
    BOOST_TEST_CONTEXT("rank 0's secret: \"" << bad << "\"") {
      const std::string peers = Peers(3);
      const std::string out = std::string(DML_TEST_TMP) + "/kv_secret." + std::to_string(getpid());
      std::vector<pid_t> pids;
      for (int r = 0; r < 3; ++r) {
        std::vector<std::string> extra = {"DML_KV_CONNECT_SECONDS=5"};
        const std::string secret = r == 0 ? bad : "correct horse battery staple";
        if (!secret.empty()) extra.push_back("DML_KV_SECRET=" + secret);
        Env env(extra);
        pids.push_back(SpawnStress({std::to_string(r), peers, "1", "10", "50", "1",
                                    out + "." + std::to_string(r)},
                                   env, out + "." + std::to_string(r) + ".err"));
      }
      for (int status : WaitForAll(pids, std::chrono::seconds(60))) {
        BOOST_TEST(!(WIFEXITED(status) && WEXITSTATUS(status) == 0));  // no group formed
      }
      std::ifstream e0(out + ".0.err");
      const std::string said((std::istreambuf_iterator<char>(e0)), std::istreambuf_iterator<char>());
      if (bad.empty()) {
        BOOST_TEST(said.find("kv node 0: peers[1] (127.0.0.1:") != std::string::npos, said);
        BOOST_TEST(said.find("requires the group secret and none is set (KvOptions.secret)") !=
                       std::string::npos,
                   said);
      } else {
        BOOST_TEST(said.find("refused us: ") != std::string::npos, said);
        BOOST_TEST(said.find("kv node 1: admission refused: wrong group secret") !=
                       std::string::npos,
                   said);
      }
      for (int r = 0; r < 3; ++r) std::remove((out + "." + std::to_string(r) + ".err").c_str());
    }
  }
}
