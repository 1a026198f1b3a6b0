#pragma once
// Asking a dml-node for a hogwild job's key-value member (node.hpp's kv
// message) the way a coordinator does, for the tests of who may.

#include <chrono>
#include <cstdint>
#include <string>

#include <caf/actor_cast.hpp>
#include <caf/scoped_actor.hpp>

#include "dml/actors/node.hpp"

namespace dml::testing {

/// Asks `node` for a member (rank 1 of 2, keys [0, 10), homed on rank 1)
/// of `coordinator`'s group: "listening" when it answers a port, else the
/// refusal as CAF renders it.
inline std::string AskForKvMember(caf::scoped_actor& self, const actors::node_actor& node,
                                  const caf::actor& coordinator) {
  std::string got;
  self->request(node, std::chrono::seconds(10), actors::kv_atom_v, coordinator, int64_t{10},
                int64_t{1}, true, int32_t{1}, int32_t{2}, int32_t{1}, int32_t{1})
      .receive([&](int32_t port) { got = port > 0 ? "listening" : "port 0"; },
               [&](caf::error& e) { got = self->system().render(e); });
  return got;
}

}  // namespace dml::testing
