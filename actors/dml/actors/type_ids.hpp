#pragma once
// The one list of every libdml message type and atom, for CAF's type
// registry. Add a type here and dml::actors::register_types() picks it up;
// both ends of a connection must run the same list (type names are what CAF
// 0.17 puts on the wire and checks typed interfaces against).

#include <caf/atom.hpp>
#include <caf/type_id.hpp>

#include "dml/actors/dense_block.hpp"

CAF_BEGIN_TYPE_ID_BLOCK(dml_actors, caf::first_custom_type_id)

  // Atoms (caf::atom_constant; at most 10 characters).
  CAF_ADD_ATOM(dml_actors, dml::actors, stats_atom, "stats")
  CAF_ADD_ATOM(dml_actors, dml::actors, matvec_atom, "matvec")

  // Payload types.
  CAF_ADD_TYPE_ID(dml_actors, (dml::actors::dense_block))

CAF_END_TYPE_ID_BLOCK(dml_actors)
