#include "dml/actors/messages.hpp"

#include <string>

#include <caf/none.hpp>
#include <caf/sec.hpp>

#include "dml/actors/internal/raw_vector.hpp"

namespace dml::actors {

caf::error inspect(caf::serializer& f, dvec& x) { return internal::write_raw(f, x.data.get()); }

caf::error inspect(caf::deserializer& f, dvec& x) {
  return internal::read_raw(f, x.data, kMaxVectorEntries, "dvec");
}

caf::error inspect(caf::serializer& f, key_list& x) { return internal::write_raw(f, x.keys.get()); }

caf::error inspect(caf::deserializer& f, key_list& x) {
  return internal::read_raw(f, x.keys, kMaxVectorEntries, "key_list");
}

caf::error inspect(caf::serializer& f, sparse_dvec& x) {
  if (auto err = internal::write_raw(f, x.index.get())) return err;
  return internal::write_raw(f, x.value.get());
}

caf::error inspect(caf::deserializer& f, sparse_dvec& x) {
  if (auto err = internal::read_raw(f, x.index, kMaxVectorEntries, "sparse_dvec index")) return err;
  if (auto err = internal::read_raw(f, x.value, kMaxVectorEntries, "sparse_dvec value")) return err;
  if (x.index->size() != x.value->size()) {
    return caf::make_error(caf::sec::invalid_argument,
                           "sparse_dvec: " + std::to_string(x.index->size()) + " indices but " +
                               std::to_string(x.value->size()) + " values");
  }
  return caf::none;
}

}  // namespace dml::actors
