#pragma once
// The bulk channel's byte protocol (described in dml/net/bulk.hpp) and the
// socket helpers both of its sides use: whole-buffer sends and receives,
// timeouts, a descriptor beside a header (SCM_RIGHTS), addresses. Plain
// POSIX; for the bulk channel's .cpp files.
// Thread-safety: stateless functions (RandomU64's fallback is atomic).

#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dml::net::internal {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the bulk protocol sends host-order doubles: little-endian hosts only");

inline constexpr uint32_t kMagic = 0x424c4d44;  // "DMLB"
inline constexpr uint16_t kVersion = 2;
enum Op : uint16_t { kSend = 1, kMap = 2, kRelease = 3, kHold = 4, kSegment = 5 };
enum Status : uint32_t { kOk = 0, kUnknownTicket = 1, kNotAllowed = 2 };
// Values land and are checked in chunks this large (stays in L2).
inline constexpr std::size_t kChunkDoubles = std::size_t{1} << 15;  // 256 KiB

struct Request {
  uint32_t magic;
  uint16_t version;
  uint16_t op;
  uint64_t ticket;
};
struct Response {
  uint32_t magic;
  uint32_t status;
  uint64_t ticket;
  uint64_t bytes;
  uint64_t address;
};
static_assert(sizeof(Request) == 16 && sizeof(Response) == 32, "packed wire headers");

// strerror(errno), for messages.
std::string Errno();

// Both loops return false on EOF, error or timeout (errno tells which).
bool SendAll(int fd, const void* p, std::size_t n);
bool RecvAll(int fd, void* p, std::size_t n);

// Bounds receives (recv) and sends (send) on fd by kBulkIoTimeout; false
// lifts the bound.
void SetTimeouts(int fd, bool recv, bool send);
void NoDelay(int fd);

// errno values by which the kernel refuses to let us read another process
// (no ptrace rights, a seccomp filter): the peer then streams instead.
inline bool KernelRefused(int e) { return e == EPERM || e == ENOSYS || e == EACCES; }

// The answer to a ticket the sender no longer holds (or that this receiver
// already read directly).
absl::Status NoTicket(const std::string& peer, uint64_t ticket);

// Tells the sender we are done with a ticket we read ourselves (MAP or
// direct); no answer comes.
bool SendRelease(int fd, uint64_t ticket);

// Sends `fd` with the response header.
bool SendWithFd(int sock, const void* header, std::size_t n, int fd);

// Receives n header bytes and the descriptor sent with them (*fd -1: none).
bool RecvWithFd(int sock, void* header, std::size_t n, int* fd);

// host:port's first address (passive: for bind, "" = any). Errors:
// Unavailable naming the host.
absl::StatusOr<std::pair<sockaddr_storage, socklen_t>> Resolve(const std::string& host,
                                                               uint16_t port, int socktype,
                                                               bool passive);

// An abstract Unix socket address (Linux): scoped to the network namespace,
// gone with the process, nothing in the file system.
socklen_t AbstractAddress(const std::string& name, sockaddr_un* addr);

// 64 random bits (tickets, socket names).
uint64_t RandomU64();

}  // namespace dml::net::internal
