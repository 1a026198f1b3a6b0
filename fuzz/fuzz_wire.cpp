// libFuzzer target for the actor payload wire format: the entry is
// LLVMFuzzerTestOneInput in fuzz_wire_entry.cpp (shared with the replay
// test); this file adds the seed generator mode.
//
//   fuzz_wire -write_seeds=DIR   writes one valid encoding of every payload
//                                shape to DIR and exits;
//   fuzz_wire [libFuzzer flags] CORPUS...   fuzzes (see scripts/fuzz_wire.sh).

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "fuzz_wire.hpp"

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  static constexpr char kFlag[] = "-write_seeds=";
  for (int i = 1; i < *argc; ++i) {
    const char* arg = (*argv)[i];
    if (std::strncmp(arg, kFlag, sizeof(kFlag) - 1) != 0) continue;
    const std::string dir = arg + sizeof(kFlag) - 1;
    int written = 0;
    for (const auto& [name, bytes] : dml::fuzz::WireSeeds()) {
      const std::string path = dir + "/" + name;
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      if (!out) {
        std::fprintf(stderr, "fuzz_wire: cannot write %s\n", path.c_str());
        std::exit(1);
      }
      ++written;
    }
    std::printf("fuzz_wire: wrote %d seeds to %s\n", written, dir.c_str());
    std::exit(0);
  }
  return 0;
}
