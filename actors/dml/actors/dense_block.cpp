#include "dml/actors/dense_block.hpp"

#include <caf/binary_deserializer.hpp>
#include <caf/none.hpp>
#include <caf/sec.hpp>

#include <string>

namespace dml::actors {

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "dense_block's raw wire block assumes a little-endian host"
#endif
static_assert(sizeof(float) == 4, "dense_block's wire block is IEEE-754 binary32");

caf::error inspect(caf::serializer& f, dense_block& x) {
  std::size_t n = x.size();
  if (auto err = f.begin_sequence(n)) return err;
  if (n > 0) {
    // apply_raw takes void* for both directions; a serializer only reads.
    if (auto err = f.apply_raw(n * sizeof(float), const_cast<float*>(x.data->data()))) return err;
  }
  return f.end_sequence();
}

caf::error inspect(caf::deserializer& f, dense_block& x) {
  std::size_t n = 0;
  if (auto err = f.begin_sequence(n)) return err;
  if (n > kMaxDenseBlockFloats) {
    return caf::make_error(caf::sec::invalid_argument,
                           "dense_block: length " + std::to_string(n) + " exceeds the limit of " +
                               std::to_string(kMaxDenseBlockFloats) + " floats");
  }
  // BASP hands us a binary_deserializer over the received bytes: refuse a
  // length the payload cannot hold before allocating for it.
  if (auto* bin = dynamic_cast<caf::binary_deserializer*>(&f);
      bin != nullptr && bin->remaining() < n * sizeof(float)) {
    return caf::make_error(caf::sec::invalid_argument,
                           "dense_block: length " + std::to_string(n) + " needs " +
                               std::to_string(n * sizeof(float)) + " bytes but only " +
                               std::to_string(bin->remaining()) + " remain");
  }
  auto values = std::make_shared<std::vector<float>>(n);
  if (n > 0) {
    if (auto err = f.apply_raw(n * sizeof(float), values->data())) return err;
  }
  if (auto err = f.end_sequence()) return err;
  x.data = std::move(values);
  return caf::none;
}

}  // namespace dml::actors
