#pragma once
// dense_block: a float vector payload for actor messages. In-process sends
// share it (the message holds a shared_ptr to immutable data: no copy);
// across processes it is serialised as its length followed by the floats as
// ONE raw block, not element by element (CAF 0.17's default for
// std::vector<float>, ~15x slower; see shared/CAF-0.17-NOTES.md).
//
// Byte order on the wire: the raw block is the host's float layout. libdml
// only builds on little-endian hosts (static_assert in dense_block.cpp), so
// the block is IEEE-754 binary32 little-endian, the same as Cap'n Proto's
// List(Float32) in dml/net/wire.capnp.

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

namespace dml::actors {

/// An immutable, shareable float vector. Copying a dense_block copies a
/// pointer; the floats are never mutated after construction, so any number
/// of actors may read them concurrently. A default-constructed block is
/// empty (no allocation).
struct dense_block {
  std::shared_ptr<const std::vector<float>> data;

  dense_block() = default;
  /// Takes ownership of `values`.
  explicit dense_block(std::vector<float> values)
      : data(std::make_shared<const std::vector<float>>(std::move(values))) {}

  std::size_t size() const { return data ? data->size() : 0; }
  absl::Span<const float> view() const {
    return data ? absl::Span<const float>(*data) : absl::Span<const float>();
  }
};

/// Largest block a peer may send us (2^28 floats = 1 GiB). CAF's network
/// layer has no payload bound of its own, so the deserializer refuses longer
/// lengths before allocating (and refuses lengths longer than the bytes
/// actually received).
inline constexpr std::size_t kMaxDenseBlockFloats = std::size_t{1} << 28;

/// Writes the length (CAF's varbyte sequence size) and then all floats with
/// one apply_raw call.
caf::error inspect(caf::serializer& f, dense_block& x);

/// Reads what the serializer overload wrote. Errors (as caf::error with
/// sec::invalid_argument): length above kMaxDenseBlockFloats, or longer than
/// the remaining input.
caf::error inspect(caf::deserializer& f, dense_block& x);

/// Every other inspector (CAF's to_string): shows the type and the length,
/// not the floats.
template <class Inspector>
std::enable_if_t<!std::is_base_of_v<caf::serializer, Inspector> &&
                     !std::is_base_of_v<caf::deserializer, Inspector>,
                 typename Inspector::result_type>
inspect(Inspector& f, dense_block& x) {
  std::size_t n = x.size();
  return f(caf::meta::type_name("dense_block"), n);
}

}  // namespace dml::actors
