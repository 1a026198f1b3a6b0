// Who may use a bulk channel's same-host endpoints (dml/net/bulk.hpp): the
// abstract Unix socket serves this user's processes only (SO_PEERCRED),
// and an arena segment's descriptor handed out by SEGMENT cannot write
// into the sender's arena.
#define BOOST_TEST_MODULE net_bulk_peers
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <grp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dml/net/bulk.hpp"
#include "bulk_testing.hpp"

namespace {

using dml::net::BulkChannel;
using dml::net::BulkOptions;
using dml::net::BulkRef;

constexpr uid_t kNobody = 65534;

using dml::testing::Ramp;
using dml::testing::Serving;

// An offer with a Unix socket to fetch it from (what these tests attack).
BulkRef OfferVector(BulkChannel& c, const std::vector<double>& v) {
  BulkRef ref = dml::testing::OfferVector(c, v);
  BOOST_REQUIRE(!ref.local.empty());
  return ref;
}

// The channel's abstract Unix socket, as its references name it.
socklen_t Abstract(const std::string& name, sockaddr_un* addr) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  const std::size_t n = std::min(name.size(), sizeof(addr->sun_path) - 1);
  std::memcpy(addr->sun_path + 1, name.data(), n);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

// A protocol v2 request (16 bytes, see dml/net/bulk.hpp).
std::vector<unsigned char> Request(uint16_t op, uint64_t ticket) {
  std::vector<unsigned char> req = {0x44, 0x4d, 0x4c, 0x42, 2, 0,
                                    static_cast<unsigned char>(op), 0};
  req.resize(16);
  std::memcpy(req.data() + 8, &ticket, 8);
  return req;
}

// How the child that asked as another user fared (its exit status).
enum ChildOutcome : int {
  kNoAnswer = 0,  // hung up on before any answer byte
  kAnswered = 1,
  kCannotDrop = 10,
  kCannotConnect = 11,
  kTimedOut = 12,
  kSendFailed = 13,
};

// Forks a child that becomes nobody, connects to `local` and asks for
// `ticket` by SEND; returns its outcome. The child makes system calls only
// (the parent's threads may hold the allocator's locks).
int AskAsNobody(const std::string& local, uint64_t ticket) {
  sockaddr_un addr;
  const socklen_t len = Abstract(local, &addr);
  const std::vector<unsigned char> req = Request(/*SEND=*/1, ticket);
  const pid_t pid = ::fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) {
      ::_exit(kCannotDrop);
    }
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), len) != 0) {
      ::_exit(kCannotConnect);
    }
    timeval tv{};
    tv.tv_sec = 10;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    // The server may hang up before the request lands (EPIPE) or with it
    // unread (ECONNRESET instead of EOF): neither is an answer.
    if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
      ::_exit(errno == EPIPE || errno == ECONNRESET ? kNoAnswer : kSendFailed);
    }
    char c = 0;
    const ssize_t r = ::recv(fd, &c, 1, 0);
    if (r == 0 || (r < 0 && errno == ECONNRESET)) ::_exit(kNoAnswer);
    ::_exit(r > 0 ? kAnswered : kTimedOut);
  }
  int status = 0;
  BOOST_REQUIRE(::waitpid(pid, &status, 0) == pid);
  BOOST_REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

// Receives a 32-byte response and the descriptor sent with it (-1: none).
int RecvHeaderAndFd(int sock, unsigned char (&resp)[32]) {
  iovec iov{resp, sizeof(resp)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t r = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL);
  BOOST_REQUIRE_EQUAL(r, 32);
  int fd = -1;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (c != nullptr && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
    std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
  }
  return fd;
}

}  // namespace

// A process of another user on this machine reaches the abstract socket
// (no file permissions guard it) but is hung up on, unanswered, and
// counted; this user's processes are still served.
BOOST_AUTO_TEST_CASE(another_user_is_refused_on_the_unix_socket) {
  if (::geteuid() != 0) {
    BOOST_TEST_MESSAGE("skipped: becoming another user needs root");
    return;
  }
  auto server = Serving();
  const std::vector<double> v = Ramp(20000);
  const BulkRef ref = OfferVector(*server, v);
  const uint64_t before = server->refused_peers();
  BOOST_TEST(AskAsNobody(ref.local, ref.ticket) == kNoAnswer);
  BOOST_TEST(server->refused_peers() == before + 1);
  BOOST_TEST(server->pending() == 1u);  // the offer was not touched

  BulkChannel same_user;
  auto got = same_user.Fetch(ref);
  BOOST_REQUIRE_MESSAGE(got.ok(), got.status().ToString());
  BOOST_REQUIRE_EQUAL(got->count, v.size());
  BOOST_TEST(std::memcmp(got->values, v.data(), v.size() * sizeof(double)) == 0);
  BOOST_TEST(same_user.stats().single_copy + same_user.stats().unix_stream == 1u);
  BOOST_TEST(server->refused_peers() == before + 1);

  // A uid the channel was told to allow is served.
  BulkOptions open;
  open.allowed_uids = {kNobody};
  auto shared = Serving(open);
  const BulkRef r2 = OfferVector(*shared, v);
  BOOST_TEST(AskAsNobody(r2.local, r2.ticket) == kAnswered);
  BOOST_TEST(shared->refused_peers() == 0u);
}

// The descriptor SEGMENT hands out maps the sender's arena for reading
// only: no writable shared mapping, no write(), not even through a reopen
// of it, while the sender keeps writing its blocks through its own mapping.
BOOST_AUTO_TEST_CASE(a_segment_descriptor_cannot_write_the_senders_arena) {
  auto server = Serving();
  const std::size_t n = 100000;
  auto block = server->Allocate(n);
  BOOST_REQUIRE(block.has_value());
  const std::vector<double> v = Ramp(n);
  std::copy(v.begin(), v.end(), block->data);
  auto ref = server->Offer(block->owner, block->data, n);
  BOOST_REQUIRE(ref.has_value());
  BOOST_REQUIRE(ref->segment != 0u);

  sockaddr_un addr;
  const socklen_t len = Abstract(ref->local, &addr);
  const int sock = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  BOOST_REQUIRE(::connect(sock, reinterpret_cast<sockaddr*>(&addr), len) == 0);
  const auto req = Request(/*SEGMENT=*/5, ref->segment);
  BOOST_REQUIRE(::send(sock, req.data(), req.size(), MSG_NOSIGNAL) == 16);
  unsigned char resp[32];
  const int fd = RecvHeaderAndFd(sock, resp);
  BOOST_REQUIRE(fd >= 0);
  uint32_t status = 1;
  uint64_t size = 0;
  std::memcpy(&status, resp + 4, 4);
  std::memcpy(&size, resp + 16, 8);
  BOOST_TEST(status == 0u);
  BOOST_REQUIRE(size >= ref->offset + n * sizeof(double));

  const int seals = ::fcntl(fd, F_GET_SEALS);
  BOOST_REQUIRE(seals >= 0);
  const bool sealed = (seals & 0x0010 /* F_SEAL_FUTURE_WRITE */) != 0;
  // Only a kernel without the seal (< 5.1) gets a read-only descriptor.
  BOOST_TEST_MESSAGE("future-write seal: " << (sealed ? "yes" : "no (read-only descriptor)"));

  errno = 0;
  void* rw = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  BOOST_TEST((rw == MAP_FAILED));
  BOOST_TEST(errno == (sealed ? EPERM : EACCES), "mmap: " << std::strerror(errno));
  if (rw != MAP_FAILED) ::munmap(rw, size);
  const double junk = 1e300;
  errno = 0;
  BOOST_TEST(::pwrite(fd, &junk, sizeof(junk), static_cast<off_t>(ref->offset)) == -1);
  BOOST_TEST((errno == EPERM || errno == EBADF), "pwrite: " << std::strerror(errno));
  errno = 0;
  BOOST_TEST(::write(fd, &junk, sizeof(junk)) == -1);
  BOOST_TEST((errno == EPERM || errno == EBADF), "write: " << std::strerror(errno));
  if (sealed) {
    // The seal holds whichever way the file is opened.
    const std::string self = "/proc/self/fd/" + std::to_string(fd);
    const int again = ::open(self.c_str(), O_RDWR | O_CLOEXEC);
    BOOST_REQUIRE(again >= 0);
    errno = 0;
    BOOST_TEST(::pwrite(again, &junk, sizeof(junk), static_cast<off_t>(ref->offset)) == -1);
    BOOST_TEST(errno == EPERM, "pwrite after reopen: " << std::strerror(errno));
    BOOST_TEST((::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, again, 0) == MAP_FAILED));
    ::close(again);
  }

  // A read-only mapping works and cannot be made writable.
  void* ro = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  BOOST_REQUIRE(ro != MAP_FAILED);
  const auto* seen = reinterpret_cast<const double*>(static_cast<const char*>(ro) + ref->offset);
  BOOST_TEST(std::memcmp(seen, v.data(), n * sizeof(double)) == 0);
  BOOST_TEST(::mprotect(ro, size, PROT_READ | PROT_WRITE) == -1);
  // The owner still writes its block, and the reader sees it.
  block->data[7] = 42.5;
  BOOST_TEST(seen[7] == 42.5);
  ::munmap(ro, size);
  ::close(fd);
  ::close(sock);

  // The channel's own in-place read accepts the segment.
  BulkChannel receiver;
  auto got = receiver.Fetch(*ref);
  BOOST_REQUIRE_MESSAGE(got.ok(), got.status().ToString());
  BOOST_TEST(got->in_place);
  BOOST_TEST(got->values[7] == 42.5);
  BOOST_TEST(got->values[8] == v[8]);
}
