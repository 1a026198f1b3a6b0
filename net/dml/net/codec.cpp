// Codec between dml::net payload structs and dml/net/wire.capnp.
//
// Bulk arrays move with memcpy: on a little-endian host the in-memory layout
// of std::vector<uint32_t>/std::vector<float> is exactly Cap'n Proto's packed
// little-endian list layout, so the list's raw bytes are filled (encode) or
// read (decode) in one copy. A big-endian host takes the element-wise path,
// where Cap'n Proto swaps bytes.

#include "dml/net/codec.hpp"

#include <capnp/any.h>
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>
#include <kj/io.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dml/net/internal/envelope.hpp"
#include "dml/net/wire.capnp.h"

namespace dml::net {

using internal::CheckListLength;
using internal::DecodeEnvelope;
using internal::FillList;
using internal::Flatten;
using internal::ReadList;
using internal::WordsFor4ByteList;

absl::Status ValidateSparse(const SparseVec& v) {
  if (v.indices.size() != v.values.size()) {
    return absl::InvalidArgumentError(absl::StrFormat("indices has %d entries but values has %d",
                                                      v.indices.size(), v.values.size()));
  }
  if (v.dim > (uint64_t{1} << 32)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("dim %d exceeds the 32-bit index space", v.dim));
  }
  for (std::size_t k = 0; k < v.indices.size(); ++k) {
    if (v.indices[k] >= v.dim) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "index %d at position %d is out of range for dim %d", v.indices[k], k, v.dim));
    }
    if (k > 0 && v.indices[k] <= v.indices[k - 1]) {
      return absl::InvalidArgumentError(
          absl::StrFormat("indices not strictly increasing at position %d: %d after %d", k,
                          v.indices[k], v.indices[k - 1]));
    }
    if (!std::isfinite(v.values[k])) {
      return absl::InvalidArgumentError(
          absl::StrFormat("value at position %d is not finite (%g)", k, v.values[k]));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateDense(const DenseVec& v) {
  for (std::size_t k = 0; k < v.values.size(); ++k) {
    if (!std::isfinite(v.values[k])) {
      return absl::InvalidArgumentError(
          absl::StrFormat("value at position %d is not finite (%g)", k, v.values[k]));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> EncodeSparse(const SparseVec& v) {
  if (auto s = ValidateSparse(v); !s.ok()) return s;
  if (auto s = CheckListLength(v.indices.size(), "SparseVec"); !s.ok()) return s;
  const std::size_t n = v.indices.size();
  // root pointer + Envelope (1 data, 1 pointer) + SparseVector (1 data,
  // 2 pointers) + the two lists: the whole message fits one first segment.
  const std::size_t words = 1 + 2 + 3 + 2 * WordsFor4ByteList(n);
  try {
    capnp::MallocMessageBuilder builder(static_cast<unsigned>(words),
                                        capnp::AllocationStrategy::FIXED_SIZE);
    wire::Envelope::Builder envelope = builder.initRoot<wire::Envelope>();
    envelope.setSchemaVersion(kWireSchemaVersion);
    wire::SparseVector::Builder sparse = envelope.initSparseVector();
    sparse.setDim(v.dim);
    FillList<uint32_t>(sparse.initIndices(static_cast<unsigned>(n)), v.indices.data(), n);
    FillList<float>(sparse.initValues(static_cast<unsigned>(n)), v.values.data(), n);
    return Flatten(builder);
  } catch (const kj::Exception& e) {
    return absl::InternalError(
        absl::StrCat("EncodeSparse: Cap'n Proto error: ", e.getDescription().cStr()));
  }
}

absl::StatusOr<SparseVec> DecodeSparse(std::string_view bytes, const DecodeLimits& limits) {
  return DecodeEnvelope<SparseVec>(
      bytes, limits, wire::Envelope::SPARSE_VECTOR,
      [](wire::Envelope::Reader envelope) -> absl::StatusOr<SparseVec> {
        wire::SparseVector::Reader sparse = envelope.getSparseVector();
        capnp::List<uint32_t>::Reader indices = sparse.getIndices();
        capnp::List<float>::Reader values = sparse.getValues();
        if (indices.size() != values.size()) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "indices has %d entries but values has %d", indices.size(), values.size()));
        }
        SparseVec out;
        out.dim = sparse.getDim();
        out.indices.resize(indices.size());
        out.values.resize(values.size());
        ReadList<uint32_t>(indices, out.indices.data());
        ReadList<float>(values, out.values.data());
        if (auto s = ValidateSparse(out); !s.ok()) return s;
        return out;
      });
}

absl::StatusOr<std::string> EncodeDense(const DenseVec& v) {
  if (auto s = ValidateDense(v); !s.ok()) return s;
  if (auto s = CheckListLength(v.values.size(), "DenseVec"); !s.ok()) return s;
  const std::size_t n = v.values.size();
  // root pointer + Envelope (1 data, 1 pointer) + DenseVector (1 pointer) + list.
  const std::size_t words = 1 + 2 + 1 + WordsFor4ByteList(n);
  try {
    capnp::MallocMessageBuilder builder(static_cast<unsigned>(words),
                                        capnp::AllocationStrategy::FIXED_SIZE);
    wire::Envelope::Builder envelope = builder.initRoot<wire::Envelope>();
    envelope.setSchemaVersion(kWireSchemaVersion);
    wire::DenseVector::Builder dense = envelope.initDenseVector();
    FillList<float>(dense.initValues(static_cast<unsigned>(n)), v.values.data(), n);
    return Flatten(builder);
  } catch (const kj::Exception& e) {
    return absl::InternalError(
        absl::StrCat("EncodeDense: Cap'n Proto error: ", e.getDescription().cStr()));
  }
}

absl::StatusOr<DenseVec> DecodeDense(std::string_view bytes, const DecodeLimits& limits) {
  return DecodeEnvelope<DenseVec>(
      bytes, limits, wire::Envelope::DENSE_VECTOR,
      [](wire::Envelope::Reader envelope) -> absl::StatusOr<DenseVec> {
        capnp::List<float>::Reader values = envelope.getDenseVector().getValues();
        DenseVec out;
        out.values.resize(values.size());
        ReadList<float>(values, out.values.data());
        if (auto s = ValidateDense(out); !s.ok()) return s;
        return out;
      });
}

}  // namespace dml::net
