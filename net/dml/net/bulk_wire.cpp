// The bulk channel's socket helpers (dml/net/internal/bulk_wire.hpp) and
// LocalAddressFor.
#include "dml/net/internal/bulk_wire.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "dml/net/bulk.hpp"

namespace dml::net::internal {
namespace {

// Room for one descriptor beside a header (SCM_RIGHTS).
struct FdMessage {
  iovec iov;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  FdMessage(void* header, std::size_t n) : iov{header, n} {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
  }
};

}  // namespace

std::string Errno() { return std::strerror(errno); }

bool SendAll(int fd, const void* p, std::size_t n) {
  auto* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t r = ::send(fd, c, n, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}
bool RecvAll(int fd, void* p, std::size_t n) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = ::recv(fd, c, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) errno = ECONNRESET;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

void SetTimeouts(int fd, bool recv, bool send) {
  timeval tv{};
  tv.tv_sec = kBulkIoTimeout.count();
  const timeval none{};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, recv ? &tv : &none, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, send ? &tv : &none, sizeof(tv));
}

void NoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

absl::Status NoTicket(const std::string& peer, uint64_t ticket) {
  return absl::NotFoundError(
      absl::StrCat("bulk: ", peer, " holds no ticket ", ticket, " (fetched already or expired)"));
}

bool SendRelease(int fd, uint64_t ticket) {
  const Request release{kMagic, kVersion, kRelease, ticket};
  return SendAll(fd, &release, sizeof(release));
}

bool SendWithFd(int sock, const void* header, std::size_t n, int fd) {
  FdMessage m(const_cast<void*>(header), n);
  msghdr& msg = m.msg;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  ssize_t r;
  do {
    r = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
  } while (r < 0 && errno == EINTR);
  if (r <= 0) return false;
  const auto sent = static_cast<std::size_t>(r);
  return sent == n || SendAll(sock, static_cast<const char*>(header) + sent, n - sent);
}

bool RecvWithFd(int sock, void* header, std::size_t n, int* fd) {
  *fd = -1;
  FdMessage m(header, n);
  msghdr& msg = m.msg;
  ssize_t r;
  do {
    r = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (r < 0 && errno == EINTR);
  if (r == 0) errno = ECONNRESET;
  if (r <= 0) return false;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
        c->cmsg_len >= CMSG_LEN(sizeof(int))) {
      const std::size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < k; ++i) {
        int got = -1;
        std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        if (*fd < 0) {
          *fd = got;
        } else {
          ::close(got);  // more than we asked for
        }
      }
    }
  }
  const auto read = static_cast<std::size_t>(r);
  if (read < n && !RecvAll(sock, static_cast<char*>(header) + read, n - read)) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
    return false;
  }
  return true;
}

absl::StatusOr<std::pair<sockaddr_storage, socklen_t>> Resolve(const std::string& host,
                                                               uint16_t port, int socktype,
                                                               bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = socktype;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
      rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("bulk: cannot resolve ", host, ": ", ::gai_strerror(rc)));
  }
  std::pair<sockaddr_storage, socklen_t> out{};
  std::memcpy(&out.first, res->ai_addr, res->ai_addrlen);
  out.second = res->ai_addrlen;
  ::freeaddrinfo(res);
  return out;
}

socklen_t AbstractAddress(const std::string& name, sockaddr_un* addr) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  const std::size_t n = std::min(name.size(), sizeof(addr->sun_path) - 1);
  std::memcpy(addr->sun_path + 1, name.data(), n);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

uint64_t RandomU64() {
  uint64_t x = 0;
  if (::getrandom(&x, sizeof(x), 0) == static_cast<ssize_t>(sizeof(x))) return x;
  // No entropy source: still unique within this process.
  static std::atomic<uint64_t> fallback{0x9E3779B97F4A7C15ull};
  x = fallback.fetch_add(0x9E3779B97F4A7C15ull) ^ static_cast<uint64_t>(::getpid()) << 32;
  x ^= static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return x;
}

}  // namespace dml::net::internal

namespace dml::net {

using internal::Errno;
using internal::Resolve;

absl::StatusOr<std::string> LocalAddressFor(const std::string& host, uint16_t port) {
  auto addr = Resolve(host, port, SOCK_DGRAM, /*passive=*/false);
  if (!addr.ok()) return addr.status();
  const int fd = ::socket(addr->first.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError("bulk: socket: " + Errno());
  // Connecting a datagram socket sends nothing; it only picks the route.
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr->first), addr->second) != 0) {
    const std::string why = Errno();
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("bulk: no route to ", host, ": ", why));
  }
  sockaddr_storage local{};
  socklen_t len = sizeof(local);
  const int rc = ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len);
  ::close(fd);
  if (rc != 0) return absl::UnavailableError("bulk: getsockname: " + Errno());
  char text[INET6_ADDRSTRLEN] = {};
  const void* src = local.ss_family == AF_INET6
                        ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr)
                        : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr);
  if (::inet_ntop(local.ss_family, src, text, sizeof(text)) == nullptr) {
    return absl::UnavailableError("bulk: inet_ntop: " + Errno());
  }
  return std::string(text);
}

}  // namespace dml::net
