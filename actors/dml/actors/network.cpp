#include "dml/actors/network.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/io/middleman.hpp>
#include <caf/timespan.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dml/actors/register_types.hpp"
#include "dml/util/status.hpp"

namespace dml::actors {

void configure_network(caf::actor_system_config& cfg) {
  // 1 s heartbeats with a 10 s timeout: shorter timeouts dropped healthy
  // links during bursts of 8 MiB messages here (shared/CAF-0.17-NOTES.md).
  cfg.set("middleman.heartbeat-interval", caf::timespan{std::chrono::seconds(1)});
  cfg.set("middleman.connection-timeout", caf::timespan{std::chrono::seconds(10)});
  cfg.set("middleman.enable-automatic-connections", true);
}

void configure_process(caf::actor_system_config& cfg, int threads) {
  register_types(cfg);
  cfg.load<caf::io::middleman>();
  configure_network(cfg);
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  cfg.set("scheduler.max-threads", static_cast<size_t>(threads > 0 ? threads : hw));
  // CAF's default lets an actor run until its mailbox is empty. A worker
  // of an SGD mode keeps its mailbox non-empty by design (each step sends
  // the next), so without a bound it would own a scheduler thread forever:
  // its peers would starve (async modes then train on one partition) and
  // the coordinator's timer would never fire.
  cfg.set("scheduler.max-throughput", static_cast<size_t>(4));
  // With CAF 0.17's work-stealing policy, two such self-scheduling actors
  // still starved every other actor of a 2-thread system (reproduced:
  // coordinators stopped receiving their timer and reports, and jobs could
  // not be cancelled); one shared FIFO queue keeps all actors moving.
  cfg.set("scheduler.policy", caf::atom("sharing"));
}

absl::StatusOr<std::pair<std::string, uint16_t>> ParseHostPort(std::string_view addr) {
  const auto colon = addr.rfind(':');
  if (colon == std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", AsAbsl(addr), "\": expected host:port"));
  }
  std::string host(addr.substr(0, colon));
  if (host.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("\"", AsAbsl(addr), "\": empty host"));
  }
  uint32_t port = 0;
  if (!absl::SimpleAtoi(AsAbsl(addr.substr(colon + 1)), &port) || port == 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", AsAbsl(addr), "\": port must be a number in [1, 65535]"));
  }
  return std::make_pair(std::move(host), static_cast<uint16_t>(port));
}

}  // namespace dml::actors
