#include "dml/actors/network.hpp"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include <caf/actor_system_config.hpp>
#include <caf/actor_system.hpp>
#include <caf/atom.hpp>
#include <caf/actor_control_block.hpp>
#include <caf/execution_unit.hpp>
#include <caf/node_id.hpp>
#include <caf/io/middleman.hpp>
#include <caf/timespan.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dml/actors/register_types.hpp"
#include "dml/actors/transport.hpp"
#include "dml/util/status.hpp"

namespace dml::actors {

void ConfigureNetwork(caf::actor_system_config& cfg) {
  // No middleman heartbeats: with them (1 s interval, 10 s timeout) four
  // processes exchanging 4-8 MiB payloads on 2 cores lost links that were
  // healthy, and every request on them waited forever (reproduced with
  // net_bench --what=allreduce; shared/CAF-0.17-NOTES.md saw the same with
  // a 1 s timeout). A killed or crashed peer closes its sockets and is
  // noticed at once without them; a hung-but-alive peer is not (see README).
  // Automatic connections (a node connecting straight to a third node it
  // learned about) hung four processes exchanging 8 MiB payloads, every
  // time (net_bench --what=allreduce --procs=4); without them traffic to a
  // third node is relayed by the node that introduced it. Slower, but it
  // does not lose messages.
  cfg.set("middleman.enable-automatic-connections", false);
  // No BASP worker threads: CAF 0.17 decodes a peer's message on one of
  // them when it has any, and a malformed built-in value throws there,
  // which ends the process (std::terminate); without workers the broker
  // decodes, and our broker (transport.cpp) survives it.
  cfg.set("middleman.workers", static_cast<size_t>(0));
}

void TuneAllocatorForMessages() {
  // glibc refuses mmap thresholds above 32 MiB (HEAP_MAX_SIZE / 2 on 64-bit).
  constexpr int kKeep = 32 << 20;
  mallopt(M_MMAP_THRESHOLD, kKeep);
  mallopt(M_TRIM_THRESHOLD, 8 * kKeep);
}

void ConfigureProcess(caf::actor_system_config& cfg, int threads) {
  RegisterTypes(cfg);
  LoadMiddleman(cfg);
  ConfigureNetwork(cfg);
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  // At most kMaxSchedulerThreads: CAF starts them all at once, and a
  // thread it cannot start throws from its constructor (a process asked
  // for 10^8 aborted).
  cfg.set("scheduler.max-threads",
          static_cast<size_t>(std::min(threads > 0 ? threads : static_cast<int>(hw),
                                       kMaxSchedulerThreads)));
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

process_config::process_config(int threads, net::BulkOptions bulk)
    : bulk_(std::make_unique<net::BulkChannel>(bulk)), peers_(std::make_unique<BulkPeers>()) {
  ConfigureProcess(*this, threads);
}

void BulkPeers::Set(const caf::node_id& process, net::BulkEndpoint e) {
  std::lock_guard<std::mutex> lock(mu_);
  by_process_[caf::to_string(process)] = std::move(e);
}

absl::Status BulkPeers::SetAll(const std::vector<std::string>& table) {
  if (table.size() % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bulk peer table: ", table.size(), " entries; expected pairs"));
  }
  std::vector<std::pair<std::string, net::BulkEndpoint>> parsed;
  for (std::size_t i = 0; i < table.size(); i += 2) {
    auto e = net::BulkEndpoint::Decode(table[i + 1]);
    if (!e.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bulk peer table, entry ", i / 2, ": ", e.status().message()));
    }
    parsed.emplace_back(table[i], *std::move(e));
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [p, e] : parsed) by_process_.emplace(p, std::move(e));
  return absl::OkStatus();
}

std::vector<std::string> BulkPeers::Table() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [p, e] : by_process_) {
    out.push_back(p);
    out.push_back(e.Encode());
  }
  return out;
}

std::size_t BulkPeers::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return by_process_.size();
}

std::optional<net::BulkEndpoint> BulkPeers::Get(const caf::node_id& process) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_process_.find(caf::to_string(process));
  if (it == by_process_.end()) return std::nullopt;
  return it->second;
}

BulkPeers* BulkPeersOf(caf::actor_system& sys) {
  const auto* cfg = dynamic_cast<const process_config*>(&sys.config());
  return cfg != nullptr ? &cfg->bulk_peers() : nullptr;
}

absl::Status CheckBulkSource(caf::actor_system& sys, const caf::strong_actor_ptr& from,
                             const net::BulkRef& ref) {
  const net::BulkEndpoint named = net::EndpointOf(ref);
  if (!from) {
    return absl::PermissionDeniedError(absl::StrCat(
        "bulk reference to ", named.ToString(), " from an anonymous sender: not fetched"));
  }
  std::optional<net::BulkEndpoint> advertised;
  if (from->node() == sys.node()) {
    if (net::BulkChannel* own = BulkChannelOf(sys)) advertised = own->endpoint();
  } else if (BulkPeers* peers = BulkPeersOf(sys)) {
    advertised = peers->Get(from->node());
  }
  if (!advertised) {
    return absl::PermissionDeniedError(
        absl::StrCat("bulk reference to ", named.ToString(), " from process ",
                     caf::to_string(from->node()),
                     ", which advertised no bulk endpoint when admitted: not fetched"));
  }
  if (advertised->host.empty() || *advertised != named) {
    return absl::PermissionDeniedError(absl::StrCat(
        "bulk reference to ", named.ToString(), " from process ", caf::to_string(from->node()),
        ", which advertised ", advertised->ToString(), " when admitted: not fetched"));
  }
  return absl::OkStatus();
}

process_config::~process_config() = default;

net::BulkChannel* BulkChannelOf(caf::execution_unit* ctx) {
  return ctx != nullptr ? BulkChannelOf(ctx->system()) : nullptr;
}

net::BulkChannel* BulkChannelOf(caf::actor_system& sys) {
  const auto* cfg = dynamic_cast<const process_config*>(&sys.config());
  return cfg != nullptr ? &cfg->bulk() : nullptr;
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
