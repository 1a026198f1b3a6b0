#include "dml/net/internal/envelope.hpp"

#include <capnp/schema.h>

namespace dml::net::internal {

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

std::string DescribeKind(wire::Envelope::Which which) {
  if (which == wire::Envelope::NONE) return "no payload";
  // The union members' names come from the compiled-in schema, so a new
  // member is described without touching this function.
  const auto fields = capnp::Schema::from<wire::Envelope>().getUnionFields();
  for (auto field : fields) {
    if (field.getProto().getDiscriminantValue() == static_cast<uint16_t>(which)) {
      return absl::StrCat("payload kind '", field.getProto().getName().cStr(), "'");
    }
  }
  return absl::StrCat("unknown payload kind ", static_cast<int>(which));
}

}  // namespace dml::net::internal
