#include "dml/actors/dense_block.hpp"

#include "dml/actors/internal/raw_vector.hpp"

namespace dml::actors {

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "dense_block's raw wire block assumes a little-endian host"
#endif
static_assert(sizeof(float) == 4, "dense_block's wire block is IEEE-754 binary32");

caf::error inspect(caf::serializer& f, dense_block& x) {
  return internal::write_raw(f, x.data.get());
}

caf::error inspect(caf::deserializer& f, dense_block& x) {
  return internal::read_raw(f, x.data, kMaxDenseBlockFloats, "dense_block");
}

}  // namespace dml::actors
