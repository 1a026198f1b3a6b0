#pragma once
// Serialising a vector of trivially copyable numbers as its length followed
// by ONE raw block (CAF 0.17 would otherwise write element by element, ~15x
// slower; see shared/CAF-0.17-NOTES.md), and reading it back defensively:
// a length above `max_elems`, or longer than the bytes actually received,
// is refused before any allocation. Little-endian hosts only (checked in
// dense_block.cpp). Internal to actors/.

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <caf/binary_deserializer.hpp>
#include <caf/deserializer.hpp>
#include <caf/error.hpp>
#include <caf/none.hpp>
#include <caf/sec.hpp>
#include <caf/serializer.hpp>

namespace dml::actors::internal {

template <class T>
caf::error write_raw(caf::serializer& f, const std::vector<T>* v) {
  static_assert(std::is_trivially_copyable_v<T>);
  std::size_t n = v ? v->size() : 0;
  if (auto err = f.begin_sequence(n)) return err;
  // apply_raw takes void* for both directions; a serializer only reads.
  if (n > 0) {
    if (auto err = f.apply_raw(n * sizeof(T), const_cast<T*>(v->data()))) return err;
  }
  return f.end_sequence();
}

template <class T>
caf::error read_raw(caf::deserializer& f, std::shared_ptr<const std::vector<T>>& out,
                    std::size_t max_elems, const char* what) {
  std::size_t n = 0;
  if (auto err = f.begin_sequence(n)) return err;
  if (n > max_elems) {
    return caf::make_error(caf::sec::invalid_argument,
                           std::string(what) + ": length " + std::to_string(n) +
                               " exceeds the limit of " + std::to_string(max_elems));
  }
  if (auto* bin = dynamic_cast<caf::binary_deserializer*>(&f);
      bin != nullptr && bin->remaining() < n * sizeof(T)) {
    return caf::make_error(caf::sec::invalid_argument,
                           std::string(what) + ": length " + std::to_string(n) + " needs " +
                               std::to_string(n * sizeof(T)) + " bytes but only " +
                               std::to_string(bin->remaining()) + " remain");
  }
  auto values = std::make_shared<std::vector<T>>(n);
  if (n > 0) {
    if (auto err = f.apply_raw(n * sizeof(T), values->data())) return err;
  }
  if (auto err = f.end_sequence()) return err;
  out = std::move(values);
  return caf::none;
}

}  // namespace dml::actors::internal
