#include "dml/net/local_cluster.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"

namespace dml::net {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Tail(std::string s, std::size_t n) {
  return s.size() > n ? s.substr(s.size() - n) : s;
}

// Waits for `pid` up to `timeout`; true if it exited (status in *status).
bool WaitFor(pid_t pid, std::chrono::milliseconds timeout, int* status) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const pid_t r = ::waitpid(pid, status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

std::string LocalCluster::ProgramNextToSelf(const std::string& name) {
  char buf[4096];
  const ssize_t len = ::readlink("/proc/self/exe", buf, sizeof(buf));
  if (len <= 0 || static_cast<std::size_t>(len) >= sizeof(buf)) return "";  // unread or cut
  std::string self(buf, static_cast<std::size_t>(len));
  const auto slash = self.rfind('/');
  return (slash == std::string::npos ? std::string(".") : self.substr(0, slash)) + "/" + name;
}

std::string LocalCluster::NodeBinaryNextToSelf() {
  const std::string path = ProgramNextToSelf("dml-node");
  return path.empty() ? "dml-node" : path;
}

absl::StatusOr<LocalCluster> LocalCluster::Start(const std::string& node_binary, int n,
                                                 std::vector<std::string> extra_args,
                                                 const std::function<void(const std::string&)>& made_dir) {
  if (n < 1) return absl::InvalidArgumentError(absl::StrCat("local cluster of ", n, " nodes"));
  if (::access(node_binary.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("dml-node executable ", node_binary, ": ",
                                            std::strerror(errno)));
  }
  const char* tmpdir = std::getenv("TMPDIR");
  std::string tmpl = absl::StrCat(tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp",
                                  "/dml-cluster-XXXXXX");
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", tmpl, ": ", std::strerror(errno)));
  }
  LocalCluster c;
  c.dir_ = tmpl;
  if (made_dir) made_dir(c.dir_);
  for (int i = 0; i < n; ++i) {
    const std::string port_file = absl::StrCat(c.dir_, "/node", i, ".port");
    const std::string log = absl::StrCat(c.dir_, "/node", i, ".log");
    std::vector<std::string> args = {node_binary, "--host=127.0.0.1", "--port=0",
                                     "--port-file=" + port_file, absl::StrCat("--name=node", i)};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    const pid_t pid = ::fork();
    if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
    if (pid == 0) {
      // Child: dies with its launcher (even a kill -9 of it), logs to its
      // own file, then becomes the node.
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      // A launcher that takes its signals on a thread of its own blocks
      // them (dml-train); the node gets the default mask (exec keeps it).
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::signal(SIGPIPE, SIG_DFL);  // an ignored SIGPIPE would survive exec
      ::setpgid(0, 0);  // out of the launcher's group: its terminal's Ctrl-C is the launcher's
      FILE* f = std::freopen(log.c_str(), "w", stderr);
      (void)f;
      // A process outside the terminal's foreground group must not write to it.
      if (f != nullptr) ::dup2(::fileno(stderr), STDOUT_FILENO);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(node_binary.c_str(), argv.data());
      std::fprintf(stderr, "exec %s: %s\n", node_binary.c_str(), std::strerror(errno));
      std::_Exit(127);
    }
    c.pids_.push_back(pid);
  }
  // Each node writes its port file (atomically, by rename) once it listens.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (int i = 0; i < n; ++i) {
    const std::string port_file = absl::StrCat(c.dir_, "/node", i, ".port");
    while (true) {
      std::string port = ReadAll(port_file);
      if (!port.empty()) {
        while (!port.empty() && (port.back() == '\n' || port.back() == ' ')) port.pop_back();
        c.addresses_.push_back("127.0.0.1:" + port);
        break;
      }
      int status = 0;
      if (::waitpid(c.pids_[i], &status, WNOHANG) == c.pids_[i]) {
        c.pids_[i] = -1;
        return absl::UnavailableError(
            absl::StrCat("node ", i, " exited before listening: ",
                         Tail(ReadAll(absl::StrCat(c.dir_, "/node", i, ".log")), 600)));
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat("node ", i, " did not listen within 20 s"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  return c;
}

std::string LocalCluster::log_path(int i) const { return absl::StrCat(dir_, "/node", i, ".log"); }

LocalCluster::LocalCluster(LocalCluster&& o) noexcept
    : pids_(std::move(o.pids_)), addresses_(std::move(o.addresses_)), dir_(std::move(o.dir_)) {
  o.pids_.clear();
  o.dir_.clear();
}

LocalCluster& LocalCluster::operator=(LocalCluster&& o) noexcept {
  if (this != &o) {
    (void)Stop();
    pids_ = std::move(o.pids_);
    addresses_ = std::move(o.addresses_);
    dir_ = std::move(o.dir_);
    o.pids_.clear();
    o.dir_.clear();
  }
  return *this;
}

LocalCluster::~LocalCluster() { (void)Stop(); }

void LocalCluster::Kill(int i) {
  if (i < 0 || i >= static_cast<int>(pids_.size()) || pids_[i] <= 0) return;
  ::kill(pids_[i], SIGKILL);
  int status = 0;
  ::waitpid(pids_[i], &status, 0);
  pids_[i] = -1;
}

absl::Status LocalCluster::Stop() {
  absl::Status result;
  for (pid_t p : pids_) {
    if (p > 0) ::kill(p, SIGTERM);
  }
  for (std::size_t i = 0; i < pids_.size(); ++i) {
    if (pids_[i] <= 0) continue;
    int status = 0;
    if (!WaitFor(pids_[i], std::chrono::seconds(5), &status)) {
      ::kill(pids_[i], SIGKILL);
      ::waitpid(pids_[i], &status, 0);
      result = absl::DeadlineExceededError(
          absl::StrCat("node ", i, " ignored SIGTERM for 5 s and was killed; its log ends: ",
                       Tail(ReadAll(absl::StrCat(dir_, "/node", i, ".log")), 600)));
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      if (result.ok()) {
        result = absl::InternalError(absl::StrCat("node ", i, " exited with status ", status));
      }
    }
    pids_[i] = -1;
  }
  pids_.clear();
  if (!dir_.empty()) {
    std::error_code ignored;  // no shell: the path may hold any character
    std::filesystem::remove_all(dir_, ignored);
    dir_.clear();
  }
  return result;
}

}  // namespace dml::net
