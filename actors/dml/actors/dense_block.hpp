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

/// An immutable, shareable float vector. Copying a dense_block copies a
/// pointer; the floats are never mutated after construction, so any number
/// of actors may read them concurrently. A default-constructed block is
/// empty (no allocation).
struct dense_block {
  std::shared_ptr<const std::vector<float>> data;

  dense_block() = default;
  /// Takes ownership of `values`.
  std::string wire_error;  ///< set when a peer's bytes did not decode

  explicit dense_block(std::vector<float> values)
      : data(std::make_shared<const std::vector<float>>(std::move(values))) {}

  std::size_t size() const { return data ? data->size() : 0; }
  absl::Span<const float> view() const {
    return data ? absl::Span<const float>(*data) : absl::Span<const float>();
  }
};

std::string describe(const dense_block& x);
/// Across processes a dense_block is a wire.capnp DenseVector Envelope
/// (dml/actors/wire.hpp), at most kMaxVectorEntries floats.
DML_WIRE_PAYLOAD(dense_block)

}  // namespace dml::actors
