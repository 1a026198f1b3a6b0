#pragma once
// Plain C++ payloads that cross process boundaries. Actors and solvers see
// only these structs; dml/net/codec.hpp converts them to and from the Cap'n
// Proto wire format (dml/net/wire.capnp). No Cap'n Proto type appears here.

#include <cstdint>
#include <vector>

namespace dml::net {

/// A sparse float vector of logical length `dim`: values[k] sits at
/// indices[k]. Invariants (checked by the codec on both encode and decode,
/// not by the struct): indices.size() == values.size(), indices strictly
/// increasing and < dim, dim <= 2^32, values finite.
struct SparseVec {
  uint64_t dim = 0;
  std::vector<uint32_t> indices;
  std::vector<float> values;

  friend bool operator==(const SparseVec& a, const SparseVec& b) {
    return a.dim == b.dim && a.indices == b.indices && a.values == b.values;
  }
  friend bool operator!=(const SparseVec& a, const SparseVec& b) { return !(a == b); }
};

/// A dense float vector. Invariant (checked by the codec): values finite.
struct DenseVec {
  std::vector<float> values;

  friend bool operator==(const DenseVec& a, const DenseVec& b) { return a.values == b.values; }
  friend bool operator!=(const DenseVec& a, const DenseVec& b) { return !(a == b); }
};

}  // namespace dml::net
