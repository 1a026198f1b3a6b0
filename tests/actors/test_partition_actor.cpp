// partition_actor: exact stats, matvec against a direct computation, local
// sends share the payload, dense_block's raw-block serialisation, and a
// matvec over the network between two actor systems in this process (the
// second one stands in for another process).
#define BOOST_TEST_MODULE actors_partition
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/deep_to_string.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include "dml/actors/dense_block.hpp"
#include "dml/actors/partition_actor.hpp"
#include "dml/actors/wire.hpp"
#include "dml/actors/register_types.hpp"
#include "dml/actors/type_ids.hpp"
#include "dml/data/sparse.hpp"

namespace {

using dml::actors::dense_block;
using dml::actors::matvec_atom_v;
using dml::actors::partition_actor;
using dml::actors::stats_atom_v;

// Every request in these tests is bounded: a lost reply fails the test, it
// never hangs it.
constexpr auto kTimeout = std::chrono::seconds(20);

struct test_config : caf::actor_system_config {
  test_config() {
    load<caf::io::middleman>();
    dml::actors::RegisterTypes(*this);
    set("scheduler.max-threads", 2);
  }
};

// Owns an actor system (middleman loaded, libdml types registered) and a
// scoped actor to talk from. Actors listed in `long_lived` get an exit
// message before the system is destroyed, even when a test fails half-way:
// a published actor left alive makes ~actor_system wait forever.
struct system_fixture {
  test_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  std::vector<caf::actor> long_lived;

  ~system_fixture() {
    for (auto& a : long_lived) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }

  partition_actor spawn_partition(dml::Dataset data) {
    auto part = dml::actors::spawn_partition_actor(sys, std::move(data));
    long_lived.push_back(caf::actor_cast<caf::actor>(part));
    return part;
  }
};

dml::Dataset MakeDataset(int64_t rows, int64_t cols, std::vector<int64_t> offsets,
                         std::vector<uint32_t> indices, std::vector<float> values) {
  auto x = dml::CsrMatrix::FromArrays(rows, cols, std::move(offsets), std::move(indices),
                                      std::move(values));
  BOOST_REQUIRE_MESSAGE(x.ok(), x.status().ToString());
  dml::Dataset d;
  d.x = *std::move(x);
  d.y.assign(static_cast<std::size_t>(rows), 1.0f);
  return d;
}

// Each row gets about density * cols nonzeros at distinct random columns.
dml::Dataset RandomDataset(int64_t rows, int64_t cols, double density, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> column(0, cols - 1);
  std::poisson_distribution<int> count(density * static_cast<double>(cols));
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<int64_t> offsets{0};
  std::vector<uint32_t> indices;
  std::vector<float> values;
  for (int64_t i = 0; i < rows; ++i) {
    std::vector<uint32_t> row;
    for (int k = count(rng); k > 0; --k) row.push_back(static_cast<uint32_t>(column(rng)));
    std::sort(row.begin(), row.end());
    row.erase(std::unique(row.begin(), row.end()), row.end());
    for (uint32_t j : row) {
      indices.push_back(j);
      values.push_back(value(rng));
    }
    offsets.push_back(static_cast<int64_t>(indices.size()));
  }
  return MakeDataset(rows, cols, std::move(offsets), std::move(indices), std::move(values));
}

std::vector<float> RandomVector(std::size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  std::vector<float> w(n);
  for (float& x : w) x = value(rng);
  return w;
}

// z = A w straight from the CSR arrays: double accumulation in column order,
// rounded once (what the actor promises).
std::vector<float> DirectProduct(const dml::CsrMatrix& a, const std::vector<float>& w) {
  std::vector<float> z(static_cast<std::size_t>(a.rows()));
  for (int64_t i = 0; i < a.rows(); ++i) {
    double sum = 0.0;
    for (int64_t k = a.offsets()[i]; k < a.offsets()[i + 1]; ++k) {
      sum += double(a.values()[k]) * double(w[a.indices()[k]]);
    }
    z[static_cast<std::size_t>(i)] = static_cast<float>(sum);
  }
  return z;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(partition_actor_local, system_fixture)

BOOST_AUTO_TEST_CASE(stats_reply_is_exact) {
  // 3 x 4 with 5 nonzeros.
  auto part = spawn_partition(
      MakeDataset(3, 4, {0, 2, 2, 5}, {0, 2, 0, 1, 3}, {1.0f, -2.0f, 0.5f, 3.0f, -1.0f}));
  bool replied = false;
  self->request(part, kTimeout, stats_atom_v)
      .receive(
          [&](int64_t rows, int64_t cols, int64_t nnz) {
            replied = true;
            BOOST_TEST(rows == 3);
            BOOST_TEST(cols == 4);
            BOOST_TEST(nnz == 5);
          },
          [&](caf::error& err) { BOOST_FAIL("stats failed: " << sys.render(err)); });
  BOOST_TEST(replied);
}

BOOST_AUTO_TEST_CASE(matvec_equals_direct_computation) {
  dml::Dataset data = RandomDataset(300, 80, 0.1, 11);
  const std::vector<float> w = RandomVector(80, 12);
  const std::vector<float> expected = DirectProduct(data.x, w);
  auto part = spawn_partition(std::move(data));
  bool replied = false;
  self->request(part, kTimeout, matvec_atom_v, dense_block(w))
      .receive(
          [&](const dense_block& z) {
            replied = true;
            BOOST_REQUIRE_EQUAL(z.size(), expected.size());
            BOOST_TEST(*z.data == expected, boost::test_tools::per_element());
          },
          [&](caf::error& err) { BOOST_FAIL("matvec failed: " << sys.render(err)); });
  BOOST_TEST(replied);
}

BOOST_AUTO_TEST_CASE(matvec_with_wrong_length_is_an_error_reply) {
  auto part = spawn_partition(MakeDataset(2, 3, {0, 1, 2}, {0, 2}, {1.0f, 2.0f}));
  bool failed = false;
  self->request(part, kTimeout, matvec_atom_v, dense_block(std::vector<float>{1.0f}))
      .receive([&](const dense_block&) { BOOST_FAIL("a wrong-length matvec succeeded"); },
               [&](caf::error& err) {
                 failed = true;
                 BOOST_CHECK(err == caf::sec::invalid_argument);
                 const std::string text = sys.render(err);
                 BOOST_TEST(text.find("matvec: SpmvCpu: w has 1 entries but the matrix has 3 "
                                      "columns") != std::string::npos,
                            text);
               });
  BOOST_TEST(failed);
}

BOOST_AUTO_TEST_CASE(local_sends_share_the_block) {
  // An untyped echo: the reply must carry the very vector we sent.
  auto echo = sys.spawn([]() -> caf::behavior {
    return {[](const dense_block& b) { return b; }};
  });
  long_lived.push_back(echo);
  const dense_block sent(std::vector<float>(1 << 20, 1.5f));
  self->request(echo, kTimeout, sent)
      .receive([&](const dense_block& got) { BOOST_TEST(got.data.get() == sent.data.get()); },
               [&](caf::error& err) { BOOST_FAIL("echo failed: " << sys.render(err)); });
}

BOOST_AUTO_TEST_CASE(dense_block_serializes_as_one_capnp_envelope) {
  const dense_block block(std::vector<float>{1.0f, -2.0f, 0.5f});
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  dense_block copy = block;
  BOOST_REQUIRE(!sink(copy));
  // CAF's varbyte length (1 byte for 56), then the Envelope exactly as
  // ToWire writes it: segment table (8), root pointer (8), Envelope struct
  // (16), DenseVector struct (8), then the 3 floats contiguously, padded.
  auto wire = dml::actors::ToWire(block);
  BOOST_REQUIRE(wire.ok());
  BOOST_REQUIRE_EQUAL(wire->size(), 56u);
  BOOST_REQUIRE_EQUAL(buf.size(), 1u + 56u);
  BOOST_TEST(static_cast<int>(buf[0]) == 56);
  BOOST_TEST(std::string(buf.begin() + 1, buf.end()) == *wire);
  BOOST_TEST(std::memcmp(buf.data() + 41, block.data->data(), 3 * sizeof(float)) == 0);
  const unsigned char minus_two[4] = {0x00, 0x00, 0x00, 0xc0};
  BOOST_TEST(std::memcmp(buf.data() + 45, minus_two, 4) == 0);

  dense_block back;
  caf::binary_deserializer source{sys, buf};
  BOOST_REQUIRE(!source(back));
  BOOST_TEST(back.wire_error.empty());
  BOOST_TEST(*back.data == *block.data, boost::test_tools::per_element());
  BOOST_TEST(caf::deep_to_string(block).find("dense_block[3]") != std::string::npos,
             caf::deep_to_string(block));

  // CAF framing that claims more bytes than arrived is refused before
  // allocating.
  std::vector<char> cut(buf.begin(), buf.end() - 1);
  dense_block bad;
  caf::binary_deserializer short_source{sys, cut};
  auto err = short_source(bad);
  BOOST_REQUIRE(err);
  BOOST_CHECK(err == caf::sec::invalid_argument);
  BOOST_TEST(sys.render(err).find("payload claims 56 bytes but only 55 remain") !=
                 std::string::npos,
             sys.render(err));
  // A length beyond the limit is refused outright (varbyte 2^31 + 1).
  std::vector<char> huge = {char(0x81), char(0x80), char(0x80), char(0x80), char(0x08)};
  caf::binary_deserializer huge_source{sys, huge};
  err = huge_source(bad);
  BOOST_REQUIRE(err);
  BOOST_TEST(sys.render(err).find("exceeds the limit") != std::string::npos, sys.render(err));
  BOOST_TEST(!bad.data);

  // Intact framing around a payload of the wrong kind: the CAF message
  // survives and the payload carries the decode error for its handler.
  std::vector<char> wrong = buf;
  wrong[1 + 18] = 4;  // Envelope discriminant (bytes 18-19): sparseUpdate, not denseVector
  dense_block mislabelled;
  caf::binary_deserializer wrong_source{sys, wrong};
  BOOST_REQUIRE(!wrong_source(mislabelled));
  BOOST_TEST(!mislabelled.data);
  BOOST_TEST(mislabelled.wire_error ==
             "expected payload kind 'denseVector', got payload kind 'sparseUpdate'");
}

BOOST_AUTO_TEST_CASE(matvec_over_the_network) {
  // Big enough that w (200k floats) and z (5k floats) span many TCP reads.
  dml::Dataset data = RandomDataset(5000, 200000, 0.0005, 21);
  const std::vector<float> w = RandomVector(200000, 22);
  const std::vector<float> expected = DirectProduct(data.x, w);
  const int64_t nnz = data.x.nnz();
  auto part = spawn_partition(std::move(data));

  auto port = sys.middleman().publish(part, 0, "127.0.0.1");
  // Boost evaluates a REQUIRE's message even on success: render only errors.
  BOOST_REQUIRE_MESSAGE(port, "publish failed: " << (port ? "" : sys.render(port.error())));
  BOOST_TEST_MESSAGE("published on 127.0.0.1:" << *port);
  {
    // The "other process": its own config, types registered the same way.
    test_config cfg2;
    caf::actor_system sys2{cfg2};
    {
      auto remote = sys2.middleman().remote_actor<partition_actor>("127.0.0.1", *port);
      BOOST_REQUIRE_MESSAGE(remote, "remote_actor failed: "
                                        << (remote ? "" : sys2.render(remote.error())));
      caf::scoped_actor self2{sys2};

      bool stats_ok = false;
      self2->request(*remote, kTimeout, stats_atom_v)
          .receive(
              [&](int64_t rows, int64_t cols, int64_t n) {
                stats_ok = true;
                BOOST_TEST(rows == 5000);
                BOOST_TEST(cols == 200000);
                BOOST_TEST(n == nnz);
              },
              [&](caf::error& err) { BOOST_FAIL("remote stats: " << sys2.render(err)); });
      BOOST_TEST(stats_ok);

      bool matvec_ok = false;
      self2->request(*remote, kTimeout, matvec_atom_v, dense_block(w))
          .receive(
              [&](const dense_block& z) {
                matvec_ok = true;
                BOOST_REQUIRE_EQUAL(z.size(), expected.size());
                BOOST_TEST(std::memcmp(z.data->data(), expected.data(),
                                       expected.size() * sizeof(float)) == 0);
              },
              [&](caf::error& err) { BOOST_FAIL("remote matvec: " << sys2.render(err)); });
      BOOST_TEST(matvec_ok);

      // Errors travel back too, with their context.
      bool error_ok = false;
      self2->request(*remote, kTimeout, matvec_atom_v, dense_block(std::vector<float>(3)))
          .receive([&](const dense_block&) { BOOST_FAIL("a wrong-length matvec succeeded"); },
                   [&](caf::error& err) {
                     error_ok = true;
                     BOOST_CHECK(err == caf::sec::invalid_argument);
                     BOOST_TEST(sys2.render(err).find("w has 3 entries") != std::string::npos,
                                sys2.render(err));
                   });
      BOOST_TEST(error_ok);
    }
    // sys2 (and its proxy of `part`) goes away first, like a client process.
  }
  auto unpublished = sys.middleman().unpublish(part, *port);
  BOOST_TEST(static_cast<bool>(unpublished));
  // The fixture sends `part` its exit before `sys` is destroyed.
}

BOOST_AUTO_TEST_SUITE_END()
