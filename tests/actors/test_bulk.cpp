// The bulk channel (dml/net/bulk.hpp): its byte protocol and both fetch
// paths (TCP; same machine: single copy), its errors and limits, and the
// dvec encoding that uses it inside CAF messages.
#define BOOST_TEST_MODULE actors_bulk
#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <algorithm>
#include <chrono>
#include <limits>
#include <thread>
#include <sstream>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include "dml/actors/messages.hpp"
#include "dml/actors/network.hpp"
#include "dml/net/bulk.hpp"
#include "bulk_testing.hpp"

namespace {

using dml::net::BulkChannel;
using dml::net::BulkOptions;
using dml::net::BulkRef;

using dml::testing::OfferVector;
using dml::testing::Ramp;
using dml::testing::Serving;

// A direct reader's RELEASE is not waited on: the sender drops the offer
// when its connection thread reads it.
bool PendingDrops(const BulkChannel& c, std::size_t n) {
  for (int i = 0; i < 500 && c.pending() != n; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return c.pending() == n;
}

bool SameBytes(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

// Raw TCP connection to the channel's port (for protocol tests).
int RawConnect(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  return fd;
}

}  // namespace

BOOST_AUTO_TEST_CASE(tcp_fetch_returns_the_offered_bytes_once) {
  auto server = Serving();
  BulkChannel client(BulkOptions{/*same_host=*/false});
  const auto v = Ramp(300000);
  const BulkRef ref = OfferVector(*server, v);
  BOOST_TEST(ref.host == "127.0.0.1");
  BOOST_TEST(ref.port == server->port());
  BOOST_TEST(!ref.local.empty());  // the server has a Unix socket; this client ignores it
  BOOST_TEST(ref.count == v.size());
  BOOST_TEST(server->pending() == 1u);
  auto got = client.Fetch(ref);
  BOOST_REQUIRE_MESSAGE(got.ok(), got.status().ToString());
  BOOST_TEST(SameBytes(*got->vector, v));
  BOOST_TEST(got->finite);
  BOOST_TEST(server->pending() == 0u);
  BOOST_TEST(client.stats().fetches == 1u);
  BOOST_TEST(client.stats().single_copy == 0u);
  BOOST_TEST(client.stats().unix_stream == 0u);
  BOOST_TEST(client.stats().bytes == v.size() * sizeof(double));

  // The same ticket again (over the pooled connection): gone.
  auto again = client.Fetch(ref);
  BOOST_TEST((again.status().code() == absl::StatusCode::kNotFound));
  BOOST_TEST(std::string(again.status().message()) ==
                 "bulk: 127.0.0.1:" + std::to_string(server->port()) + " holds no ticket " +
                     std::to_string(ref.ticket) + " (fetched already or expired)",
             again.status().message());

  // Many fetches over the pooled connection, in any order.
  std::vector<BulkRef> refs;
  for (int k = 0; k < 20; ++k) refs.push_back(OfferVector(*server, Ramp(1000 + k)));
  for (int k = 19; k >= 0; --k) {
    auto r = client.Fetch(refs[k]);
    BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    BOOST_TEST(r->count == 1000u + k);
    BOOST_TEST(r->values[r->count - 1] == 0.25 * (999 + k) - 3.0);
  }
  BOOST_TEST(client.stats().fetches == 21u);
}

BOOST_AUTO_TEST_CASE(same_host_fetch_is_a_single_copy_and_checks_finiteness) {
  auto server = Serving();
  BulkChannel client;  // same_host on
  const auto v = Ramp(100001);  // not a whole number of chunks
  auto got = client.Fetch(OfferVector(*server, v));
  BOOST_REQUIRE_MESSAGE(got.ok(), got.status().ToString());
  BOOST_TEST(SameBytes(*got->vector, v));
  BOOST_TEST(got->finite);
  BOOST_TEST(client.stats().single_copy == 1u);
  BOOST_TEST(client.stats().direct == 1u);  // read with no request
  BOOST_TEST(PendingDrops(*server, 0));

  // Non-finite values arrive bit for bit, flagged as not all finite (the
  // receiving handler then names the key).
  for (double bad : {std::numeric_limits<double>::quiet_NaN(),
                     -std::numeric_limits<double>::infinity()}) {
    auto w = Ramp(70000);
    w[65537] = bad;
    auto r = client.Fetch(OfferVector(*server, w));
    BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    BOOST_TEST(SameBytes(*r->vector, w));
    BOOST_TEST(!r->finite);
  }
  BOOST_TEST(client.stats().single_copy == 3u);
  BOOST_TEST(client.stats().direct == 3u);
  // The read buffers were released: nothing waits.
  BOOST_TEST(PendingDrops(*server, 0));

  // A received buffer comes back to the channel when dropped; the next
  // fetch of the same length (single copy or stream) overwrites it whole.
  BulkChannel tcp_client(BulkOptions{false});
  for (BulkChannel* c : {&client, &tcp_client}) {
    const double* first = nullptr;
    {
      auto a = c->Fetch(OfferVector(*server, Ramp(50000)));
      BOOST_REQUIRE(a.ok());
      first = a->values;
    }
    std::vector<double> other(50000);
    for (std::size_t i = 0; i < other.size(); ++i) other[i] = -static_cast<double>(i);
    auto b = c->Fetch(OfferVector(*server, other));
    BOOST_REQUIRE(b.ok());
    BOOST_TEST(b->values == first);
    BOOST_TEST(SameBytes(*b->vector, other));
  }
}

BOOST_AUTO_TEST_CASE(a_process_on_the_same_machine_is_read_in_place) {
  int to_parent[2], to_child[2];
  BOOST_REQUIRE(::pipe(to_parent) == 0 && ::pipe(to_child) == 0);
  const std::size_t n = 500000;
  const pid_t pid = ::fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    // The sender: two offers, their references to the parent, then wait.
    BulkChannel c;
    if (!c.Serve("127.0.0.1").ok()) ::_exit(3);
    auto owner = std::make_shared<std::vector<double>>(Ramp(n));
    for (int k = 0; k < 2; ++k) {
      auto ref = c.Offer(owner, owner->data(), n);
      if (!ref) ::_exit(4);
      const std::string line = ref->local + " " + std::to_string(ref->port) + " " +
                               std::to_string(ref->ticket) + " " + std::to_string(ref->address) +
                               " " + std::to_string(ref->slot) + "\n";
      if (::write(to_parent[1], line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
        ::_exit(5);
      }
    }
    char done = 0;
    (void)!::read(to_child[0], &done, 1);
    ::_exit(PendingDrops(c, 0) ? 0 : 6);
  }
  std::string text;
  char buf[256];
  while (std::count(text.begin(), text.end(), '\n') < 2) {
    const ssize_t r = ::read(to_parent[0], buf, sizeof(buf));
    BOOST_REQUIRE(r > 0);
    text.append(buf, static_cast<std::size_t>(r));
  }
  std::vector<BulkRef> refs(2);
  std::istringstream in(text);
  for (auto& ref : refs) {
    in >> ref.local >> ref.port >> ref.ticket >> ref.address >> ref.slot;
    ref.host = "127.0.0.1";
    ref.count = n;
  }
  BulkChannel same_host;
  auto a = same_host.Fetch(refs[0]);
  BOOST_REQUIRE_MESSAGE(a.ok(), a.status().ToString());
  BOOST_TEST(SameBytes(*a->vector, Ramp(n)));
  BOOST_TEST(same_host.stats().single_copy == 1u);
  BOOST_TEST(same_host.stats().direct == 1u);  // from the other process, with no request
  BulkChannel tcp_only(BulkOptions{false});
  auto b = tcp_only.Fetch(refs[1]);
  BOOST_REQUIRE_MESSAGE(b.ok(), b.status().ToString());
  BOOST_TEST(SameBytes(*b->vector, Ramp(n)));
  BOOST_TEST(tcp_only.stats().single_copy == 0u);
  BOOST_REQUIRE(::write(to_child[1], "x", 1) == 1);
  int status = 0;
  BOOST_REQUIRE(::waitpid(pid, &status, 0) == pid);
  BOOST_TEST(WIFEXITED(status));
  BOOST_TEST(WEXITSTATUS(status) == 0);  // the sender holds nothing any more
}

// A block of the sender's shared arena is read where it lies: the receiver
// holds the offer while any copy of the view lives, the block is not
// reused meanwhile (not even once the sender lets go of it), and the
// release frees it for the next allocation of its size.
BOOST_AUTO_TEST_CASE(an_arena_block_is_read_in_place_and_held_while_viewed) {
  auto server = Serving();
  const std::size_t n = 300000;
  const std::vector<double> v = Ramp(n);
  auto block = server->Allocate(n);
  BOOST_REQUIRE(block.has_value());
  BOOST_REQUIRE_EQUAL(block->count, n);
  std::copy(v.begin(), v.end(), block->data);
  const double* const first = block->data;
  auto ref = server->Offer(block->owner, block->data, n);
  BOOST_REQUIRE(ref.has_value());
  BOOST_TEST(ref->segment == 1u);
  BOOST_TEST(ref->offset % sizeof(double) == 0u);
  block.reset();  // only the offer keeps the block now
  dml::net::BulkValues view;
  {
    BulkChannel receiver;
    auto got = receiver.Fetch(*ref);
    BOOST_REQUIRE_MESSAGE(got.ok(), got.status().ToString());
    BOOST_TEST(got->in_place);
    BOOST_TEST(!got->vector);  // no copy was made
    BOOST_TEST(got->values != first);  // our own mapping of the segment
    BOOST_REQUIRE_EQUAL(got->count, n);
    BOOST_TEST(std::memcmp(got->values, v.data(), n * sizeof(double)) == 0);
    BOOST_TEST(receiver.stats().in_place == 1u);
    // Single use: the same reference again is refused while held.
    auto again = receiver.Fetch(*ref);
    BOOST_TEST((again.status().code() == absl::StatusCode::kNotFound), again.status().ToString());
    view = *std::move(got);
  }  // the receiving channel goes; the view keeps its mapping and its hold
  BOOST_TEST(server->pending() == 1u);
  auto other = server->Allocate(n);
  BOOST_REQUIRE(other.has_value());
  BOOST_TEST(other->data != first);  // held: not handed out again
  std::fill(other->data, other->data + n, 7.0);
  BOOST_TEST(std::memcmp(view.values, v.data(), n * sizeof(double)) == 0);
  view = dml::net::BulkValues{};  // RELEASE
  BOOST_TEST(PendingDrops(*server, 0));
  auto reused = server->Allocate(n);
  BOOST_REQUIRE(reused.has_value());
  BOOST_TEST(reused->data == first);  // back in the arena, same size
}

// The same across processes: the view is the other process's block, read
// with no copy; dropping it releases the hold there.
BOOST_AUTO_TEST_CASE(another_process_arena_block_is_read_in_place) {
  int to_parent[2], to_child[2];
  BOOST_REQUIRE(::pipe(to_parent) == 0 && ::pipe(to_child) == 0);
  const std::size_t n = 400000;
  const pid_t pid = ::fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    BulkChannel c;
    if (!c.Serve("127.0.0.1").ok()) ::_exit(3);
    auto block = c.Allocate(n);
    if (!block) ::_exit(4);
    const std::vector<double> v = Ramp(n);
    std::copy(v.begin(), v.end(), block->data);
    auto ref = c.Offer(block->owner, block->data, n);
    if (!ref || ref->segment == 0) ::_exit(5);
    const std::string line = ref->local + " " + std::to_string(ref->port) + " " +
                             std::to_string(ref->ticket) + " " + std::to_string(ref->segment) +
                             " " + std::to_string(ref->offset) + "\n";
    if (::write(to_parent[1], line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      ::_exit(6);
    }
    char done = 0;
    (void)!::read(to_child[0], &done, 1);
    ::_exit(PendingDrops(c, 0) ? 0 : 7);  // released by the reader
  }
  std::string text;
  char buf[256];
  while (text.find('\n') == std::string::npos) {
    const ssize_t r = ::read(to_parent[0], buf, sizeof(buf));
    BOOST_REQUIRE(r > 0);
    text.append(buf, static_cast<std::size_t>(r));
  }
  BulkRef ref;
  std::istringstream in(text);
  in >> ref.local >> ref.port >> ref.ticket >> ref.segment >> ref.offset;
  ref.host = "127.0.0.1";
  ref.count = n;
  BulkChannel receiver;
  auto got = receiver.Fetch(ref);
  BOOST_REQUIRE_MESSAGE(got.ok(), got.status().ToString());
  BOOST_TEST(got->in_place);
  const std::vector<double> v = Ramp(n);
  BOOST_TEST(std::memcmp(got->values, v.data(), n * sizeof(double)) == 0);
  got = dml::net::BulkValues{};  // RELEASE
  BOOST_REQUIRE(::write(to_child[1], "x", 1) == 1);
  int status = 0;
  BOOST_REQUIRE(::waitpid(pid, &status, 0) == pid);
  BOOST_TEST(WIFEXITED(status));
  BOOST_TEST(WEXITSTATUS(status) == 0);
}

// A reference into the arena that does not match it (a segment the sender
// does not have, values past a segment's end) is data loss, never a read
// outside the mapping; the hold is given back.
BOOST_AUTO_TEST_CASE(a_bad_arena_reference_is_data_loss) {
  auto server = Serving();
  const std::size_t n = 1000;
  auto block = server->Allocate(n);
  BOOST_REQUIRE(block.has_value());
  std::fill(block->data, block->data + n, 1.0);
  BulkChannel receiver;
  auto ref = server->Offer(block->owner, block->data, n);
  BOOST_REQUIRE(ref.has_value());
  BulkRef wrong_segment = *ref;
  wrong_segment.segment = 9;
  auto a = receiver.Fetch(wrong_segment);
  BOOST_TEST((a.status().code() == absl::StatusCode::kDataLoss), a.status().ToString());
  BOOST_TEST(std::string(a.status().message()).find("segment 9") != std::string::npos,
             a.status().ToString());
  BOOST_TEST(PendingDrops(*server, 0));  // released, and single use
  ref = server->Offer(block->owner, block->data, n);
  BOOST_REQUIRE(ref.has_value());
  BulkRef past_end = *ref;
  past_end.offset = dml::net::kBulkArenaSegmentBytes - 8;
  auto b = receiver.Fetch(past_end);
  BOOST_TEST((b.status().code() == absl::StatusCode::kDataLoss), b.status().ToString());
  BOOST_TEST(std::string(b.status().message()).find("pass the end of segment 1") !=
                 std::string::npos,
             b.status().ToString());
  BOOST_TEST(PendingDrops(*server, 0));
  // A channel that does not read in place (TCP only) is served a copy.
  ref = server->Offer(block->owner, block->data, n);
  BulkChannel tcp_only(BulkOptions{false});
  auto c = tcp_only.Fetch(*ref);
  BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  BOOST_TEST(!c->in_place);
  BOOST_TEST(SameBytes(*c->vector, std::vector<double>(n, 1.0)));
  BOOST_TEST(!tcp_only.Allocate(n).has_value());  // no arena without same_host
}

// A same-host reference names the values and the sender's slot; a read
// whose checks fail is never used: the protocol answers instead.
BOOST_AUTO_TEST_CASE(a_direct_read_that_fails_its_checks_asks_by_the_protocol) {
  auto server = Serving();
  BulkChannel client;
  const auto v = Ramp(40000);
  auto w = Ramp(40000);
  w[123] = 7.5;
  // A slot address the sender never had (the kernel refuses the read):
  // served by MAP.
  const BulkRef r0 = OfferVector(*server, v);
  BOOST_REQUIRE(r0.address != 0 && r0.slot != 0);
  BulkRef bogus = r0;
  bogus.slot = 8;
  auto a = client.Fetch(bogus);
  BOOST_REQUIRE_MESSAGE(a.ok(), a.status().ToString());
  BOOST_TEST(SameBytes(*a->vector, v));
  BOOST_TEST(client.stats().single_copy == 1u);
  BOOST_TEST(client.stats().direct == 0u);
  // Another offer's slot: its ticket does not match, so MAP again.
  const BulkRef r1 = OfferVector(*server, v);
  const BulkRef r2 = OfferVector(*server, w);
  BulkRef crossed = r1;
  crossed.slot = r2.slot;
  auto b = client.Fetch(crossed);
  BOOST_REQUIRE_MESSAGE(b.ok(), b.status().ToString());
  BOOST_TEST(SameBytes(*b->vector, v));
  BOOST_TEST(client.stats().direct == 0u);
  // Fetched already (over TCP): its slot is cleared, so no stale read.
  const BulkRef r3 = OfferVector(*server, v);
  BulkChannel tcp(BulkOptions{false});
  BOOST_REQUIRE(tcp.Fetch(r3).ok());
  auto c = client.Fetch(r3);
  BOOST_TEST((c.status().code() == absl::StatusCode::kNotFound), c.status().ToString());
  BOOST_TEST(client.stats().direct == 0u);
  // r2 itself is read directly, once.
  auto d = client.Fetch(r2);
  BOOST_REQUIRE_MESSAGE(d.ok(), d.status().ToString());
  BOOST_TEST(SameBytes(*d->vector, w));
  BOOST_TEST(client.stats().direct == 1u);
  BOOST_TEST(PendingDrops(*server, 0));
  auto again = client.Fetch(r2);
  BOOST_TEST((again.status().code() == absl::StatusCode::kNotFound), again.status().ToString());
  // A dropped channel clears its slots before its buffers go.
  BulkRef gone;
  {
    auto s = Serving();
    gone = OfferVector(*s, v);
  }
  auto e = client.Fetch(gone);
  BOOST_TEST(!e.ok());
  BOOST_TEST(client.stats().direct == 1u);
}

BOOST_AUTO_TEST_CASE(a_size_other_than_announced_is_data_loss) {
  auto server = Serving();
  for (bool same_host : {false, true}) {
    BulkChannel client(BulkOptions{same_host});
    BulkRef ref = OfferVector(*server, Ramp(100));
    ref.count = 101;
    auto r = client.Fetch(ref);
    BOOST_TEST((r.status().code() == absl::StatusCode::kDataLoss));
    BOOST_TEST(std::string(r.status().message()).find("sent 800 bytes (status 0) for ticket") !=
                   std::string::npos,
               r.status().message());
    BOOST_TEST(std::string(r.status().message()).find("announced 101 doubles") !=
               std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(an_unreachable_peer_is_unavailable) {
  BulkRef ref;
  {
    auto s = Serving();
    ref = OfferVector(*s, Ramp(10));
  }  // closed: nobody listens there now, neither on TCP nor on the Unix socket
  BulkChannel client;
  auto r = client.Fetch(ref);
  BOOST_TEST((r.status().code() == absl::StatusCode::kUnavailable));
  BOOST_TEST(std::string(r.status().message()) ==
                 "bulk: cannot connect to 127.0.0.1:" + std::to_string(ref.port) +
                     ": Connection refused",
             r.status().message());
}

BOOST_AUTO_TEST_CASE(a_peer_speaking_another_protocol_is_hung_up_on_and_others_are_served) {
  auto server = Serving();
  const int fd = RawConnect(server->port());
  const char junk[16] = "GET / HTTP/1.0\n";
  BOOST_REQUIRE(::send(fd, junk, sizeof(junk), 0) == 16);
  char c = 0;
  BOOST_TEST(::recv(fd, &c, 1, 0) == 0);  // closed without an answer
  ::close(fd);
  BulkChannel client;
  auto r = client.Fetch(OfferVector(*server, Ramp(10)));
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  BOOST_TEST(r->values[9] == 0.25 * 9 - 3.0);
}

BOOST_AUTO_TEST_CASE(map_is_refused_over_tcp) {
  // A MAP (op 2) hands out an address in the sender: only over the Unix
  // socket, whose peer is on this machine. Over TCP the answer is status 2
  // and the offer stays.
  auto server = Serving();
  const BulkRef ref = OfferVector(*server, Ramp(10));
  const int fd = RawConnect(server->port());
  unsigned char req[16] = {0x44, 0x4d, 0x4c, 0x42, 2, 0, 2, 0};
  std::memcpy(req + 8, &ref.ticket, 8);
  BOOST_REQUIRE(::send(fd, req, sizeof(req), 0) == 16);
  unsigned char resp[32];
  std::size_t got = 0;
  while (got < sizeof(resp)) {
    const ssize_t r = ::recv(fd, resp + got, sizeof(resp) - got, 0);
    BOOST_REQUIRE(r > 0);
    got += static_cast<std::size_t>(r);
  }
  uint32_t magic, status;
  uint64_t ticket, bytes, address;
  std::memcpy(&magic, resp, 4);
  std::memcpy(&status, resp + 4, 4);
  std::memcpy(&ticket, resp + 8, 8);
  std::memcpy(&bytes, resp + 16, 8);
  std::memcpy(&address, resp + 24, 8);
  BOOST_TEST(magic == 0x424c4d44u);
  BOOST_TEST(status == 2u);
  BOOST_TEST(ticket == ref.ticket);
  BOOST_TEST(bytes == 0u);
  BOOST_TEST(address == 0u);
  ::close(fd);
  BOOST_TEST(server->pending() == 1u);
}

BOOST_AUTO_TEST_CASE(offers_are_bounded) {
  BulkChannel idle;
  auto owner = std::make_shared<std::vector<double>>(Ramp(10));
  BOOST_TEST(!idle.Offer(owner, owner->data(), 10).has_value());  // not serving
  auto server = Serving();
  // The limit counts announced bytes; an offer is never read before a fetch.
  const std::size_t limit = dml::net::kBulkMaxPendingBytes / sizeof(double);
  BOOST_TEST(server->Offer(owner, owner->data(), limit - 10).has_value());
  BOOST_TEST(!server->Offer(owner, owner->data(), 11).has_value());
  BOOST_TEST(server->Offer(owner, owner->data(), 10).has_value());
  BOOST_TEST(server->stats().refused_offers == 1u);
  BOOST_TEST(server->stats().offers == 2u);
  auto second = server->Serve("127.0.0.1");
  BOOST_TEST((second.code() == absl::StatusCode::kFailedPrecondition));
}

BOOST_AUTO_TEST_CASE(local_address_for_a_loopback_peer) {
  auto a = dml::net::LocalAddressFor("127.0.0.1", 4242);
  BOOST_REQUIRE_MESSAGE(a.ok(), a.status().ToString());
  BOOST_TEST(*a == "127.0.0.1");
  auto bad = dml::net::LocalAddressFor("no-such-host.invalid", 1);
  BOOST_TEST((bad.status().code() == absl::StatusCode::kUnavailable));
}

// The CAF encoding: a large dvec becomes a BulkVector reference that the
// decoder resolves; a small one stays inline; a dead reference becomes the
// payload's wire_error (answered to the sender as an error), not a crash.
BOOST_AUTO_TEST_CASE(large_dvecs_travel_by_reference_inside_caf_messages) {
  dml::actors::process_config cfg(1);
  caf::actor_system sys(cfg);
  BulkChannel& bulk = cfg.bulk();
  // Not serving yet: every vector inline.
  const std::size_t big = dml::net::kBulkMinBytes / sizeof(double);
  {
    dml::actors::dvec x(Ramp(big));
    std::vector<char> buf;
    caf::binary_serializer sink(sys, buf);
    BOOST_REQUIRE(!inspect(sink, x));
    BOOST_TEST(buf.size() > big * sizeof(double));
  }
  BOOST_REQUIRE(bulk.Serve("127.0.0.1").ok());
  // The sender of what follows: an actor of this process.
  caf::scoped_actor me{sys};
  const caf::strong_actor_ptr from = caf::actor_cast<caf::strong_actor_ptr>(me);
  for (std::size_t n : {big - 1, big, 4 * big}) {
    dml::actors::dvec x(Ramp(n));
    std::vector<char> buf;
    caf::binary_serializer sink(sys, buf);
    BOOST_REQUIRE(!inspect(sink, x));
    const bool by_reference = n >= big;
    BOOST_TEST(bulk.pending() == (by_reference ? 1u : 0u), "n = " << n);
    // Inline: the values themselves; by reference: a few dozen bytes.
    if (by_reference) {
      BOOST_TEST(buf.size() < 192u);
    } else {
      BOOST_TEST(buf.size() > n * sizeof(double));
    }
    dml::actors::dvec y;
    caf::binary_deserializer source(sys, buf);
    BOOST_REQUIRE(!inspect(source, y));
    // The deserializer only decodes the reference: nothing is fetched
    // inside it (the sender still holds the offer).
    BOOST_TEST((y.ref != nullptr) == by_reference, "n = " << n);
    if (by_reference) {
      BOOST_TEST(y.size() == 0u);
      BOOST_TEST(bulk.pending() == 1u);
    }
    y = dml::actors::ResolveBlocking(sys, y, from);
    BOOST_TEST(y.wire_error.empty(), y.wire_error);
    BOOST_REQUIRE_EQUAL(y.size(), n);
    BOOST_TEST(std::memcmp(y.data(), x.data(), n * sizeof(double)) == 0);
    BOOST_TEST(y.finite == by_reference);  // checked as it arrived
    BOOST_TEST(PendingDrops(bulk, 0));
  }
  // The same reference twice: the sender no longer holds it.
  dml::actors::dvec x(Ramp(big));
  std::vector<char> buf;
  caf::binary_serializer sink(sys, buf);
  BOOST_REQUIRE(!inspect(sink, x));
  for (int k = 0; k < 2; ++k) {
    dml::actors::dvec y;
    caf::binary_deserializer source(sys, buf);
    BOOST_REQUIRE(!inspect(source, y));
    BOOST_REQUIRE(y.ref != nullptr);
    y = dml::actors::ResolveBlocking(sys, y, from);
    if (k == 0) {
      BOOST_TEST(y.wire_error.empty(), y.wire_error);
    } else {
      BOOST_TEST(y.size() == 0u);
      BOOST_TEST(y.wire_error.find("holds no ticket") != std::string::npos, y.wire_error);
    }
  }
  // A reference to a sender that is gone: another actor system's channel.
  std::vector<char> b2;
  uint16_t dead_port = 0;
  caf::strong_actor_ptr dead;
  {
    dml::actors::process_config cfg2(1);
    caf::actor_system sys2(cfg2);
    BOOST_REQUIRE(cfg2.bulk().Serve("127.0.0.1").ok());
    dead_port = cfg2.bulk().port();
    // As if admitted: its endpoint is where its references are fetched.
    BOOST_REQUIRE(sys2.node() != sys.node());
    cfg.bulk_peers().Set(sys2.node(), cfg2.bulk().endpoint());
    caf::scoped_actor there{sys2};
    dead = caf::actor_cast<caf::strong_actor_ptr>(there);
    dml::actors::dvec z(Ramp(big));
    caf::binary_serializer s2(sys2, b2);
    BOOST_REQUIRE(!inspect(s2, z));
    BOOST_TEST(cfg2.bulk().pending() == 1u);
  }
  dml::actors::dvec w;
  caf::binary_deserializer source2(sys, b2);
  BOOST_REQUIRE(!inspect(source2, w));
  BOOST_REQUIRE(w.ref != nullptr);
  // Not from the process that offered it (nor from one that advertised
  // it): refused before any connection.
  dml::actors::dvec stray = dml::actors::ResolveBlocking(sys, w, from);
  BOOST_TEST(stray.wire_error ==
                 "bulk reference to 127.0.0.1:" + std::to_string(dead_port) + " " +
                     w.ref->local + " from process " + caf::to_string(sys.node()) +
                     ", which advertised " + bulk.endpoint().ToString() +
                     " when admitted: not fetched",
             stray.wire_error);
  BOOST_TEST(dml::actors::ResolveBlocking(sys, w, nullptr).wire_error.find(
                 "from an anonymous sender: not fetched") != std::string::npos);
  w = dml::actors::ResolveBlocking(sys, w, dead);
  BOOST_TEST(w.size() == 0u);
  BOOST_TEST(w.wire_error == "bulk: cannot connect to 127.0.0.1:" + std::to_string(dead_port) +
                                 ": Connection refused",
             w.wire_error);
}
