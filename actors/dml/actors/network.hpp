#pragma once
// Network settings shared by every libdml process (runtime and dml-node),
// and address parsing. Both ends must agree on these, so they live here once.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include <caf/fwd.hpp>

#include "absl/status/statusor.h"

namespace dml::actors {

/// Middleman settings of a libdml process: no automatic connections (they
/// hung 4-process bulk exchanges: traffic to a third node is relayed by the
/// node that introduced it) and no heartbeats (they dropped healthy links
/// under bulk transfers; a killed peer is still noticed at once through its
/// closed socket, a hung one is not).
/// Call in the actor_system_config constructor, after load<middleman>().
void configure_network(caf::actor_system_config& cfg);

/// Everything a libdml process's actor system needs: the message types,
/// the network layer (configure_network) and the scheduler settings the
/// training actors rely on; `threads` 0 = one per core. Call in the
/// actor_system_config constructor.
void configure_process(caf::actor_system_config& cfg, int threads);

/// "host:port" -> (host, port). Errors: InvalidArgument saying what is wrong
/// (no colon, empty host, port not a number in [1, 65535]).
absl::StatusOr<std::pair<std::string, uint16_t>> ParseHostPort(std::string_view addr);

}  // namespace dml::actors
