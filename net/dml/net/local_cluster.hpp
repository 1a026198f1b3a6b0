#pragma once
// A local cluster: N dml-node processes on loopback, started and stopped by
// one object (dml-train --local-nodes, tests, benchmarks). CAF-free.
//
// Ownership: the object owns its child processes; destroying it sends them
// SIGTERM, waits up to 5 s each, then SIGKILLs what is left. Not
// thread-safe (one owner). Errors as absl::Status, never exceptions.

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dml::net {

/// N dml-node child processes on loopback; owns them (see above). Move-only,
/// not thread-safe.
class LocalCluster {
 public:
  /// Starts `n` nodes from the executable `node_binary` on 127.0.0.1 with
  /// ephemeral ports, each named "node<i>", extra arguments appended, and
  /// waits (up to 20 s) until every node has published its port.
  /// Errors: InvalidArgument (n < 1), NotFound (the binary is not
  /// executable), Unavailable (a node exited before listening; its log tail
  /// is in the message), DeadlineExceeded (a node did not listen in 20 s).
  /// Internal (mkdtemp or fork failed). Nodes already started are stopped
  /// again on error. `made_dir`, where given, is called with dir() as soon
  /// as it exists (a caller that must remove it if killed meanwhile). Each
  /// node runs in a process group of its own: a terminal's Ctrl-C reaches
  /// the launcher, which decides what its nodes do.
  static absl::StatusOr<LocalCluster> Start(
      const std::string& node_binary, int n, std::vector<std::string> extra_args = {},
      const std::function<void(const std::string&)>& made_dir = nullptr);

  /// Moving transfers the children (assignment first stops the target's
  /// own); the moved-from object owns none.
  LocalCluster(LocalCluster&& other) noexcept;
  LocalCluster& operator=(LocalCluster&& other) noexcept;
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;
  /// Stops the children: SIGTERM, up to 5 s each, then SIGKILL.
  ~LocalCluster();

  /// "127.0.0.1:port" of each node, in start order.
  const std::vector<std::string>& addresses() const { return addresses_; }
  /// Process id of node i (no bounds check); -1 once killed.
  pid_t pid(int i) const { return pids_[i]; }
  /// Path of node i's log (its stderr), while the cluster exists.
  std::string log_path(int i) const;
  /// The directory of the nodes' port files and logs ($TMPDIR, else /tmp),
  /// removed by Stop.
  const std::string& dir() const { return dir_; }
  /// SIGKILLs node i (fault tests) and reaps it.
  void Kill(int i);
  /// SIGTERMs every node and waits for it; OK if all exited with status 0.
  /// Errors: DeadlineExceeded if a node ignored SIGTERM for 5 s (it is then
  /// SIGKILLed), Internal for a non-zero exit.
  absl::Status Stop();

  /// Path of "dml-node" in the running program's directory (not checked to
  /// exist; plain "dml-node" if /proc/self/exe cannot be read).
  static std::string NodeBinaryNextToSelf();
  /// Path of the program `name` in the running program's directory (not
  /// checked to exist); empty where /proc/self/exe cannot be read whole.
  static std::string ProgramNextToSelf(const std::string& name);

 private:
  LocalCluster() = default;
  std::vector<pid_t> pids_;
  std::vector<std::string> addresses_;
  std::string dir_;  // port files and logs
};

}  // namespace dml::net
