#pragma once
// dense_block: a float vector payload for actor messages. In-process sends
// share it (the message holds a shared_ptr to immutable data: no copy);
// across processes it is a Cap'n Proto DenseVector (contiguous
// little-endian binary32), never element by element.

#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include <caf/deserializer.hpp>
#include <caf/error.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/serializer.hpp>

#include "absl/types/span.h"
#include "dml/actors/messages.hpp"

namespace dml::actors {

/// net's payload under the actors' name.
using net::dense_block;

}  // namespace dml::actors

namespace dml::net {

/// "dense_block[size]", for CAF's to_string (no values).
std::string describe(const dense_block& x);
/// Across processes a dense_block is a wire.capnp DenseVector Envelope
/// (dml/actors/wire.hpp), at most kMaxVectorEntries floats.
DML_WIRE_PAYLOAD(dense_block)

}  // namespace dml::net
