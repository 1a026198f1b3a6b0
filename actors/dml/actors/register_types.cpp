#include "dml/actors/register_types.hpp"

#include <caf/actor_system_config.hpp>

#include "dml/actors/type_ids.hpp"

namespace dml::actors {

void RegisterTypes(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::dml_actors>();
}

}  // namespace dml::actors
