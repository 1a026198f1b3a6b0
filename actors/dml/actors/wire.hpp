#pragma once
// The actors' names for the one codec (dml/net/payload_codec.hpp): the
// payloads' bytes, checkpoint files, decode errors. CAF's inspect overloads
// (messages.hpp, implemented in wire.cpp) write exactly these bytes.

#include "dml/actors/dense_block.hpp"
#include "dml/actors/messages.hpp"
#include "dml/net/payload_codec.hpp"

namespace dml::actors {

/// net's codec functions and checkpoint type under the actors' names.
using net::FromWire;
using net::job_checkpoint;
using net::ReadCheckpointFile;
using net::ToWire;
using net::WireErrorOf;
using net::WriteCheckpointFile;

}  // namespace dml::actors
