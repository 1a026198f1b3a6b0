// libFuzzer target for the entry of a hostile peer's bytes into a libdml
// process: CAF 0.17's BASP header reader (the 32 bytes every frame starts
// with), the frame bound of our transport (dml/actors/transport.hpp), then
// the frame's payload read as CAF reads a message, with libdml's message
// types registered (so every payload's inspect overload, the Cap'n Proto
// envelope decoders behind them, and CAF's own type lookup see the bytes).
// A frame above the bound is dropped before its payload is looked at, as
// the transport's scribes do before sizing a buffer; what CAF throws while
// decoding closes the connection, as libdml's BASP broker does.
//
//   fuzz_frame -write_seeds=DIR   writes valid frames (a header and a
//                                 message of each libdml payload) and exits;
//   fuzz_frame [libFuzzer flags] CORPUS...   (scripts/fuzz_wire.sh frame)

#include <caf/actor_system.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/io/basp/header.hpp>
#include <caf/message.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "dml/actors/messages.hpp"
#include "dml/actors/network.hpp"
#include "dml/actors/transport.hpp"
#include "dml/actors/type_ids.hpp"

namespace {

namespace basp = caf::io::basp;

// Never destroyed: libFuzzer leaves through exit(), and an actor system
// torn down by exit handlers crashes in CAF.
caf::actor_system& System() {
  static auto* sys = new caf::actor_system(*new dml::actors::process_config(1));
  return *sys;
}

// A frame: the header for `payload`, then the payload.
std::vector<char> Frame(basp::message_type op, const std::vector<char>& payload) {
  basp::header h{op, 0, static_cast<uint32_t>(payload.size()), 0, 1, 2};
  std::vector<char> out;
  caf::binary_serializer sink{System(), out};
  if (sink(h)) std::abort();
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

std::vector<char> Serialized(caf::message m) {
  std::vector<char> out;
  caf::binary_serializer sink{System(), out};
  if (sink(m)) std::abort();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  static constexpr char kFlag[] = "-write_seeds=";
  // A small bound, so that the fuzzer reaches the refusal too.
  dml::actors::SetMaxFrameBytes(1 << 20);
  for (int i = 1; i < *argc; ++i) {
    const char* arg = (*argv)[i];
    if (std::strncmp(arg, kFlag, sizeof(kFlag) - 1) != 0) continue;
    const std::string dir = arg + sizeof(kFlag) - 1;
    using namespace dml::actors;
    dml::net::kv_message kv;
    kv.kind = static_cast<uint8_t>(dml::net::kv_kind::kPush);
    kv.keys = {1, 2};
    kv.values = {0.5, -0.5};
    int64_list bounds;
    bounds.values = {0, 10};
    block_sums sums;
    sums.loss_sum = 1;
    const std::vector<std::pair<std::string, caf::message>> seeds = {
        {"push_dvec", caf::make_message(push_atom_v, int32_t{0}, int64_t{1},
                                        dvec(std::vector<double>{1.0, 2.0}))},
        {"kv", caf::make_message(kv_atom_v, kv)},
        {"bounds", caf::make_message(connect_atom_v, bounds)},
        {"sums", caf::make_message(round_atom_v, sums)},
        {"hello", caf::make_message(hello_atom_v)},
    };
    for (const auto& [name, msg] : seeds) {
      auto frame = Frame(basp::message_type::direct_message, Serialized(msg));
      std::ofstream out(dir + "/" + name, std::ios::binary | std::ios::trunc);
      out.write(frame.data(), static_cast<std::streamsize>(frame.size()));
    }
    std::printf("fuzz_frame: wrote %zu seeds to %s\n", seeds.size(), dir.c_str());
    std::fflush(stdout);
    std::_Exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size < basp::header_size) return 0;
  basp::header hdr;
  caf::binary_deserializer head{System(), reinterpret_cast<const char*>(data), basp::header_size};
  if (head(hdr)) return 0;
  (void)basp::valid(hdr);
  // The transport refuses here, before any buffer exists.
  if (!dml::actors::FrameWithinBound(hdr.payload_len)) return 0;
  const std::size_t have = size - basp::header_size;
  if (have < hdr.payload_len) return 0;  // BASP would wait for the rest
  caf::binary_deserializer body{System(), reinterpret_cast<const char*>(data) + basp::header_size,
                                hdr.payload_len};
  caf::message msg;
  // CAF 0.17 throws on some malformed built-in values (a config_value with
  // an unknown variant index): libdml's BASP broker (transport.cpp) catches
  // that and closes the connection, so here it counts as refused. Anything
  // else (a crash, a sanitizer report) is a finding.
  try {
    (void)body(msg);
  } catch (const std::exception&) {
    return 0;
  }
  return 0;
}
