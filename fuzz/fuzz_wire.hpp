#pragma once
// The wire fuzz entry (fuzz_wire_entry.cpp), shared by the libFuzzer target
// (fuzz_wire.cpp, clang) and the plain replay test
// (tests/actors/test_wire_fuzz_replay.cpp, any compiler).

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

/// Decodes `data` as every actor payload type (dml/actors/wire.hpp), directly
/// and through CAF's deserializer; every value that decodes must re-encode,
/// decode again to an equal value and re-encode to the same bytes. Aborts
/// (after printing what differed) otherwise. Always returns 0.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size);

namespace dml::fuzz {

/// Valid encodings of every payload type (several shapes each): the seed
/// corpus. Pairs of (file name, bytes).
std::vector<std::pair<std::string, std::string>> WireSeeds();

}  // namespace dml::fuzz
