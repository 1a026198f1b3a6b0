#pragma once
// A local cluster: N dml-node processes on loopback, started and stopped by
// one object (dml-train --local-nodes, tests, benchmarks). CAF-free.
//
// Ownership: the object owns its child processes; destroying it sends them
// SIGTERM, waits up to 5 s each, then SIGKILLs what is left. Not
// thread-safe (one owner). Errors as absl::Status, never exceptions.

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dml::net {

class LocalCluster {
 public:
  /// Starts `n` nodes from the executable `node_binary` on 127.0.0.1 with
  /// ephemeral ports, each named "node<i>", extra arguments appended, and
  /// waits (up to 20 s) until every node has published its port.
  /// Errors: n < 1, the binary cannot be run, a node exited or timed out
  /// before listening (its stderr tail is in the message).
  static absl::StatusOr<LocalCluster> Start(const std::string& node_binary, int n,
                                            std::vector<std::string> extra_args = {});

  LocalCluster(LocalCluster&& other) noexcept;
  LocalCluster& operator=(LocalCluster&& other) noexcept;
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;
  ~LocalCluster();

  /// "127.0.0.1:port" of each node, in start order.
  const std::vector<std::string>& addresses() const { return addresses_; }
  pid_t pid(int i) const { return pids_[i]; }
  /// SIGKILLs node i (fault tests) and reaps it.
  void Kill(int i);
  /// SIGTERMs every node and waits for it; OK if all exited with status 0.
  absl::Status Stop();

  /// The dml-node executable next to the running program, if there is one.
  static std::string NodeBinaryNextToSelf();

 private:
  LocalCluster() = default;
  std::vector<pid_t> pids_;
  std::vector<std::string> addresses_;
  std::string dir_;  // port files and logs
};

}  // namespace dml::net
