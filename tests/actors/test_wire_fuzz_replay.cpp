// The wire fuzz entry (fuzz/fuzz_wire_entry.cpp) without libFuzzer: the seed
// corpus, deterministic mutations of it, and random byte strings, so every
// build exercises the fuzz target's checks (a violated check aborts this
// test). scripts/fuzz_wire.sh runs the same entry under libFuzzer + ASan.
#define BOOST_TEST_MODULE actors_wire_fuzz_replay
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fuzz_wire.hpp"

namespace {

void Run(const std::string& bytes) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(actors_wire_fuzz_replay)

BOOST_AUTO_TEST_CASE(seed_corpus) {
  const auto seeds = dml::fuzz::WireSeeds();
  BOOST_TEST(seeds.size() >= 11u);
  for (const auto& [name, bytes] : seeds) {
    BOOST_TEST_CONTEXT(name) {
      BOOST_TEST(!bytes.empty());
      BOOST_TEST(bytes.size() % 8 == 0u);
      Run(bytes);
    }
  }
}

BOOST_AUTO_TEST_CASE(mutated_seeds) {
  // The kinds of edit libFuzzer makes: byte flips and overwrites, word-sized
  // overwrites, truncation, duplication of a chunk, splices of two seeds.
  const auto seeds = dml::fuzz::WireSeeds();
  std::mt19937_64 rng(20240611);
  std::uniform_int_distribution<int> byte(0, 255);
  int runs = 0;
  for (int round = 0; round < 1000; ++round) {
    for (const auto& seed : seeds) {
      std::string b = seed.second;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits && !b.empty(); ++e) {
        const std::size_t at = rng() % b.size();
        switch (rng() % 6) {
          case 0: b[at] = static_cast<char>(b[at] ^ (1 << (rng() % 8))); break;
          case 1: b[at] = static_cast<char>(byte(rng)); break;
          case 2: {
            const uint32_t v = static_cast<uint32_t>(rng());
            if (at + 4 <= b.size()) std::memcpy(&b[at], &v, 4);
            break;
          }
          case 3: b.resize(at - at % 8); break;
          case 4: b.insert(at - at % 8, b.substr(at - at % 8, 8)); break;
          case 5: {
            const std::string& other = seeds[rng() % seeds.size()].second;
            const std::size_t from = (rng() % other.size()) / 8 * 8;
            b = b.substr(0, at - at % 8) + other.substr(from);
            break;
          }
        }
      }
      Run(b);
      ++runs;
    }
  }
  BOOST_TEST_MESSAGE(runs << " mutated seeds");
}

BOOST_AUTO_TEST_CASE(random_bytes) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 4000; ++i) {
    std::string b(rng() % 200, '\0');
    for (char& c : b) c = static_cast<char>(rng());
    // Half of them get a plausible one-segment table, to reach Cap'n Proto's
    // pointer checks instead of stopping at the framing.
    if (i % 2 == 0 && b.size() >= 8) {
      b.resize(b.size() / 8 * 8);
      const uint32_t table[2] = {0, static_cast<uint32_t>(b.size() / 8 - 1)};
      std::memcpy(&b[0], table, 8);
    }
    Run(b);
  }
}

BOOST_AUTO_TEST_SUITE_END()
