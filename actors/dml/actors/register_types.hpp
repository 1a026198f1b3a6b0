#pragma once
// Registration of libdml's message types with a CAF actor system config.

namespace caf {
class actor_system_config;
}  // namespace caf

namespace dml::actors {

/// Registers every libdml message type and atom (dml/actors/type_ids.hpp)
/// with `cfg`. Call it on every config, in every process that sends or
/// receives libdml messages, before constructing the actor_system: a type
/// unknown to the receiver arrives as an empty message. Idempotent.
void RegisterTypes(caf::actor_system_config& cfg);

}  // namespace dml::actors
