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
#include "dml/net/wire.capnp.h"

namespace dml::net {

static_assert(kWireSchemaVersion == wire::SCHEMA_VERSION,
              "kWireSchemaVersion must match the schemaVersion constant in wire.capnp");

namespace {

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
constexpr bool kLittleEndianHost = true;
#else
constexpr bool kLittleEndianHost = false;
#endif

constexpr std::size_t kWordBytes = sizeof(capnp::word);
// Cap'n Proto list lengths are 29-bit.
constexpr std::size_t kMaxListElements = (std::size_t{1} << 29) - 1;

std::size_t WordsFor4ByteList(std::size_t n) { return (n * 4 + kWordBytes - 1) / kWordBytes; }

// Fills a freshly initialised primitive list from `src` (list.size() == n).
template <class T>
void FillList(typename capnp::List<T>::Builder list, const T* src, std::size_t n) {
  if (n == 0) return;
  if constexpr (kLittleEndianHost) {
    // The list was just allocated by this builder with its natural element
    // size, so its bytes are n * sizeof(T) contiguous bytes in a segment the
    // builder owns (writable; the reader API merely exposes them as const).
    kj::ArrayPtr<const kj::byte> raw = capnp::AnyList::Reader(list.asReader()).getRawBytes();
    std::memcpy(const_cast<kj::byte*>(raw.begin()), src, n * sizeof(T));
  } else {
    for (std::size_t i = 0; i < n; ++i) list.set(static_cast<unsigned>(i), src[i]);
  }
}

// Copies a primitive list out. A list written with its natural element size
// is one memcpy; anything else a conforming writer may produce (e.g. a struct
// list, legal under schema evolution) goes through Cap'n Proto's accessors.
template <class T>
void ReadList(typename capnp::List<T>::Reader list, T* dst) {
  const std::size_t n = list.size();
  if (n == 0) return;
  if constexpr (kLittleEndianHost) {
    capnp::AnyList::Reader any(list);
    if (any.getElementSize() == capnp::ElementSize::FOUR_BYTES && sizeof(T) == 4) {
      kj::ArrayPtr<const kj::byte> raw = any.getRawBytes();
      if (raw.size() == n * sizeof(T)) {
        std::memcpy(dst, raw.begin(), n * sizeof(T));
        return;
      }
    }
  }
  for (std::size_t i = 0; i < n; ++i) dst[i] = list[static_cast<unsigned>(i)];
}

// Serialises a builder into one flat array (segment table + segments),
// written straight into the returned string.
std::string Flatten(capnp::MessageBuilder& builder) {
  const std::size_t words = capnp::computeSerializedSizeInWords(builder);
  std::string out(words * kWordBytes, '\0');
  kj::ArrayOutputStream stream(
      kj::arrayPtr(reinterpret_cast<kj::byte*>(out.data()), out.size()));
  capnp::writeMessage(stream, builder);
  return out;
}

absl::Status CheckListLength(std::size_t n, const char* what) {
  if (n > kMaxListElements) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s has %d entries, more than one message can hold (%d)", what, n, kMaxListElements));
  }
  return absl::OkStatus();
}

const char* KindName(wire::Envelope::Which which) {
  switch (which) {
    case wire::Envelope::NONE:
      return "no payload";
    case wire::Envelope::SPARSE_VECTOR:
      return "a SparseVector";
    case wire::Envelope::DENSE_VECTOR:
      return "a DenseVector";
  }
  return nullptr;  // a kind from a newer schema
}

std::string DescribeKind(wire::Envelope::Which which) {
  const char* name = KindName(which);
  if (name != nullptr) return name;
  return absl::StrCat("unknown payload kind ", static_cast<int>(which));
}

// Frames, limits and opens a message, then hands its Envelope to `read`,
// which returns the decoded value. Every Cap'n Proto exception becomes
// DataLoss.
template <class T, class ReadFn>
absl::StatusOr<T> DecodeEnvelope(std::string_view bytes, const DecodeLimits& limits,
                                 wire::Envelope::Which expected, ReadFn&& read) {
  if (bytes.empty()) return absl::DataLossError("empty message");
  if (bytes.size() > limits.max_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "message of %d bytes exceeds the limit of %d bytes", bytes.size(), limits.max_bytes));
  }
  if (bytes.size() % kWordBytes != 0) {
    return absl::DataLossError(absl::StrFormat(
        "message length %d is not a multiple of 8 bytes", bytes.size()));
  }
  const std::size_t words = bytes.size() / kWordBytes;

  // Cap'n Proto reads words in place and needs them 8-byte aligned.
  std::unique_ptr<capnp::word[]> aligned;
  const capnp::word* begin = reinterpret_cast<const capnp::word*>(bytes.data());
  if (reinterpret_cast<std::uintptr_t>(bytes.data()) % alignof(capnp::word) != 0) {
    aligned.reset(new capnp::word[words]);
    std::memcpy(aligned.get(), bytes.data(), bytes.size());
    begin = aligned.get();
  }

  capnp::ReaderOptions options;
  // Reading each object once traverses fewer words than the message holds;
  // anything beyond that is a pointer-aliasing amplification attack.
  options.traversalLimitInWords = words;
  try {
    capnp::FlatArrayMessageReader reader(kj::arrayPtr(begin, words), options);
    const capnp::word* end = reader.getEnd();
    if (end != begin + words) {
      return absl::DataLossError(absl::StrFormat(
          "%d trailing bytes after the message", (begin + words - end) * kWordBytes));
    }
    wire::Envelope::Reader envelope = reader.getRoot<wire::Envelope>();
    const uint16_t version = envelope.getSchemaVersion();
    if (version != kWireSchemaVersion) {
      return absl::InvalidArgumentError(
          absl::StrFormat("schema version %d, expected %d", version, kWireSchemaVersion));
    }
    const wire::Envelope::Which which = envelope.which();
    if (which != expected) {
      return absl::InvalidArgumentError(absl::StrCat("expected ", DescribeKind(expected),
                                                     ", got ", DescribeKind(which)));
    }
    return read(envelope);
  } catch (const kj::Exception& e) {
    return absl::DataLossError(
        absl::StrCat("corrupt Cap'n Proto message: ", e.getDescription().cStr()));
  }
}

}  // namespace

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
