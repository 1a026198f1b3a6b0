// Fetching by copy, the receiver's side of the bulk channel: pooled
// connections, the direct read of a same-host offer (process_vm_readv with
// no request), MAP and SEND exchanges, and BulkChannel::Fetch, which picks
// the path (dml/net/bulk.hpp).
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dml/net/bulk.hpp"
#include "dml/net/internal/bulk_channel.hpp"
#include "dml/net/internal/bulk_memory.hpp"
#include "dml/net/internal/bulk_wire.hpp"
#include "dml/util/finite.hpp"

namespace dml::net {

using namespace internal;  // the bulk channel's own protocol and helpers

namespace {

// Makes `v` hold `count` doubles for a read to overwrite: a recycled
// vector already does; a fresh one grows by chunks as they arrive (zeroing
// a chunk that is about to be overwritten costs cache, not memory).
double* Extend(std::vector<double>& v, std::size_t at, std::size_t m, std::size_t count) {
  if (v.size() == count) return v.data() + at;
  v.resize(at + m);
  return v.data() + at;
}

// `out` now refers to the whole of `buffer` (filled: its data no longer moves).
BulkValues Own(BulkValues out, std::shared_ptr<std::vector<double>> buffer) {
  out.values = buffer->data();
  out.count = buffer->size();
  out.owner = buffer;
  out.vector = std::move(buffer);
  return out;
}

// Receives `count` doubles into `v` (from BufferPool::Get), checking each
// chunk while it is in cache; *finite says whether all were.
bool RecvValues(int fd, std::size_t count, std::vector<double>& v, bool* finite) {
  *finite = true;
  for (std::size_t at = 0; at < count;) {
    const std::size_t m = std::min(kChunkDoubles, count - at);
    double* dst = Extend(v, at, m, count);
    if (!RecvAll(fd, dst, m * sizeof(double))) return false;
    *finite = *finite && AllFinite(dst, m);
    at += m;
  }
  return true;
}

}  // namespace

// ------------------------------------------------------------- connections

bool BulkChannel::Impl::PoolTake(const std::string& key, idle_conn* out) {
  std::lock_guard<std::mutex> lock(pool_mu);
  auto& v = idle[key];
  if (v.empty()) return false;
  *out = v.back();
  v.pop_back();
  return true;
}
void BulkChannel::Impl::PoolPut(const std::string& key, idle_conn c) {
  std::lock_guard<std::mutex> lock(pool_mu);
  idle[key].push_back(c);
}

absl::StatusOr<BulkChannel::Impl::idle_conn> BulkChannel::Impl::ConnectTcp(const BulkRef& r) {
  auto addr = Resolve(r.host, r.port, SOCK_STREAM, /*passive=*/false);
  if (!addr.ok()) return addr.status();
  const int fd = ::socket(addr->first.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError("bulk: socket: " + Errno());
  NoDelay(fd);
  SetTimeouts(fd, true, true);  // SO_SNDTIMEO also bounds connect on Linux
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr->first), addr->second) != 0) {
    const std::string why = Errno();
    ::close(fd);
    return absl::UnavailableError(
        absl::StrCat("bulk: cannot connect to ", r.host, ":", r.port, ": ", why));
  }
  return idle_conn{fd, 0};
}

BulkChannel::Impl::idle_conn BulkChannel::Impl::ConnectUnix(const BulkRef& r) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return {};
  sockaddr_un addr;
  const socklen_t len = AbstractAddress(r.local, &addr);
  SetTimeouts(fd, true, true);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    ::close(fd);
    return {};
  }
  // The kernel's word for who listens there, in our pid namespace (0
  // when that process is not visible from here).
  ucred cred{};
  socklen_t clen = sizeof(cred);
  pid_t pid = 0;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0) pid = cred.pid;
  return {fd, pid};
}

// ------------------------------------------------------------ direct reads

std::optional<BulkValues> BulkChannel::Impl::DirectRead(const BulkRef& r, pid_t pid,
                                                        bool* repeat) {
  *repeat = false;
  if (SeenDirect(r.ticket)) {
    *repeat = true;
    return std::nullopt;
  }
  // The sender's slot first: the offer must be held, at the size announced.
  uint64_t slot[2] = {0, 0};
  if (!ReadRemote(pid, slot, r.slot, sizeof(slot)) || slot[0] != r.ticket ||
      slot[1] != r.count * sizeof(double)) {
    return std::nullopt;
  }
  BulkValues out;
  std::shared_ptr<std::vector<double>> buffer = pool->Get(r.count);
  if (const int e = ReadValues(pid, r.address, r.count, *buffer, &out.finite); e != 0) {
    if (KernelRefused(e)) single_copy_refused.store(true);
    return std::nullopt;
  }
  // Still held after the copy: it was held throughout.
  uint64_t ticket = 0;
  if (!ReadRemote(pid, &ticket, r.slot, sizeof(ticket)) || ticket != r.ticket) {
    return std::nullopt;
  }
  std::lock_guard<std::mutex> lock(pool_mu);
  if (!direct_seen.insert(r.ticket).second) {  // the same reference, read concurrently
    *repeat = true;
    return std::nullopt;
  }
  direct_order.push_back(r.ticket);
  if (direct_order.size() > kDirectSeen) {
    direct_seen.erase(direct_order.front());
    direct_order.pop_front();
  }
  return Own(std::move(out), std::move(buffer));
}

int BulkChannel::Impl::ReadValues(pid_t pid, uint64_t address, std::size_t count,
                                  std::vector<double>& v, bool* finite) {
  *finite = true;
  for (std::size_t at = 0; at < count;) {
    const std::size_t m = std::min(kChunkDoubles, count - at);
    double* dst = Extend(v, at, m, count);
    iovec local{dst, m * sizeof(double)};
    iovec remote{reinterpret_cast<void*>(address + at * sizeof(double)), m * sizeof(double)};
    const ssize_t got = ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (got != static_cast<ssize_t>(m * sizeof(double))) return got < 0 ? errno : EIO;
    *finite = *finite && AllFinite(dst, m);
    at += m;
  }
  return 0;
}

bool BulkChannel::Impl::SeenDirect(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(pool_mu);
  return direct_seen.count(ticket) != 0;
}

bool BulkChannel::Impl::ReadRemote(pid_t pid, void* dst, uint64_t address, std::size_t n) {
  iovec local{dst, n};
  iovec remote{reinterpret_cast<void*>(address), n};
  const ssize_t got = ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
  if (got < 0 && KernelRefused(errno)) single_copy_refused.store(true);
  return got == static_cast<ssize_t>(n);
}

// --------------------------------------------------------------- exchanges

absl::StatusOr<BulkValues> BulkChannel::Impl::Exchange(const BulkRef& r, const std::string& peer,
                                                       idle_conn c, bool map, bool* reusable,
                                                       bool* retry, bool* single) {
  *reusable = false;
  *single = false;
  *retry = false;
  const Request req{kMagic, kVersion, static_cast<uint16_t>(map ? kMap : kSend), r.ticket};
  Response resp{};
  if (!SendAll(c.fd, &req, sizeof(req)) || !RecvAll(c.fd, &resp, sizeof(resp))) {
    *retry = true;
    return absl::UnavailableError(
        absl::StrCat("bulk: fetch of ticket ", r.ticket, " from ", peer, ": ", Errno()));
  }
  if (resp.magic != kMagic || resp.ticket != r.ticket) {
    return absl::DataLossError(absl::StrCat("bulk: ", peer, " answered ticket ", r.ticket,
                                            " with a malformed header"));
  }
  if (resp.status == kUnknownTicket) {
    *reusable = true;
    return NoTicket(peer, r.ticket);
  }
  if (resp.status != kOk || resp.bytes != r.count * sizeof(double)) {
    return absl::DataLossError(absl::StrCat("bulk: ", peer, " sent ", resp.bytes,
                                            " bytes (status ", resp.status, ") for ticket ",
                                            r.ticket, ", announced ", r.count, " doubles"));
  }
  BulkValues out;
  std::shared_ptr<std::vector<double>> buffer = pool->Get(r.count);
  std::vector<double>& v = *buffer;
  if (!map) {
    if (!RecvValues(c.fd, r.count, v, &out.finite)) {
      return absl::UnavailableError(absl::StrCat("bulk: fetch of ticket ", r.ticket, " from ",
                                                 peer, " broke off: ", Errno()));
    }
    *reusable = true;
    return Own(std::move(out), std::move(buffer));
  }
  // Single copy from the sender's memory, chunk by chunk.
  const int read_errno = ReadValues(c.pid, resp.address, r.count, v, &out.finite);
  if (read_errno == 0) {
    *reusable = SendRelease(c.fd, r.ticket);
    *single = true;
    return Own(std::move(out), std::move(buffer));
  }
  if (!KernelRefused(read_errno)) {
    return absl::DataLossError(absl::StrCat("bulk: single-copy read of ticket ", r.ticket,
                                            " from ", peer, " (pid ", c.pid,
                                            ") failed: ", std::strerror(read_errno)));
  }
  // The kernel does not let us read the peer (no ptrace rights, a seccomp
  // filter): have this ticket streamed, and stream from now on.
  single_copy_refused.store(true);
  const Request send{kMagic, kVersion, kSend, r.ticket};
  Response again{};
  if (!SendAll(c.fd, &send, sizeof(send)) || !RecvAll(c.fd, &again, sizeof(again)) ||
      again.magic != kMagic || again.status != kOk || again.ticket != r.ticket ||
      again.bytes != resp.bytes || !RecvValues(c.fd, r.count, v, &out.finite)) {
    return absl::UnavailableError(absl::StrCat("bulk: fetch of ticket ", r.ticket, " from ",
                                               peer, " broke off after a refused single-copy "
                                               "read: ", Errno()));
  }
  *reusable = true;
  return Own(std::move(out), std::move(buffer));
}

// ------------------------------------------------------------------ public

absl::StatusOr<BulkValues> BulkChannel::Fetch(const BulkRef& r) {
  Impl& m = *impl_;
  auto done = [&m, &r](BulkValues v, bool single, bool unix_stream,
                       bool direct = false) -> BulkValues {
    m.n_fetches.fetch_add(1);
    m.n_in_place.fetch_add(v.in_place ? 1 : 0);
    m.n_single.fetch_add(single ? 1 : 0);
    m.n_direct.fetch_add(direct ? 1 : 0);
    m.n_unix.fetch_add(unix_stream ? 1 : 0);
    m.n_bytes.fetch_add(r.count * sizeof(double));
    return v;
  };
  // Same machine: the sender's Unix socket.
  bool try_local = m.options.same_host && !r.local.empty();
  if (try_local) {
    std::lock_guard<std::mutex> lock(m.pool_mu);
    try_local = m.unreachable_local.count(r.local) == 0;
  }
  if (try_local) {
    const std::string key = Impl::UnixKey(r);
    const std::string peer = absl::StrCat(r.host, ":", r.port, " (local)");
    if (r.segment != 0) {
      if (auto got = m.InPlace(r, peer)) {
        if (!got->ok()) return got->status();
        return done(**std::move(got), false, false);
      }
    }
    for (int attempt = 0; attempt < 2; ++attempt) {
      Impl::idle_conn c;
      const bool reused = m.PoolTake(key, &c);
      if (!reused) {
        c = m.ConnectUnix(r);
        if (c.fd < 0) {  // another machine, or another network namespace
          std::lock_guard<std::mutex> lock(m.pool_mu);
          m.unreachable_local.insert(r.local);
          break;
        }
      }
      const bool map = c.pid > 0 && !m.single_copy_refused.load();
      if (map && r.address != 0 && r.slot != 0) {
        bool repeat = false;
        auto direct = m.DirectRead(r, c.pid, &repeat);
        if (repeat) {
          m.PoolPut(key, c);
          return NoTicket(peer, r.ticket);
        }
        if (direct) {
          // Done with the ticket: no answer awaited (the sender drops the
          // offer when it reads this; if it never does, the TTL does).
          if (SendRelease(c.fd, r.ticket)) {
            m.PoolPut(key, c);
          } else {
            ::close(c.fd);
          }
          return done(*std::move(direct), true, false, true);
        }
      }
      bool reusable = false, retry = false, single = false;
      auto got = m.Exchange(r, peer, c, map, &reusable, &retry, &single);
      if (reusable) {
        m.PoolPut(key, c);
      } else {
        ::close(c.fd);
      }
      if (got.ok()) return done(*std::move(got), single, !single);
      if (retry && reused) continue;  // the peer closed an idle connection
      return got.status();
    }
  }
  const std::string key = Impl::TcpKey(r);
  const std::string peer = absl::StrCat(r.host, ":", r.port);
  for (int attempt = 0; attempt < 2; ++attempt) {
    Impl::idle_conn c;
    const bool reused = m.PoolTake(key, &c);
    if (!reused) {
      auto fresh = m.ConnectTcp(r);
      if (!fresh.ok()) return fresh.status();
      c = *fresh;
    }
    bool reusable = false, retry = false, single = false;
    auto got = m.Exchange(r, peer, c, /*map=*/false, &reusable, &retry, &single);
    if (reusable) {
      m.PoolPut(key, c);
    } else {
      ::close(c.fd);
    }
    if (got.ok()) return done(*std::move(got), false, false);
    if (retry && reused) continue;
    return got.status();
  }
  return absl::UnavailableError(absl::StrCat("bulk: fetch of ticket ", r.ticket, " from ", peer,
                                             " failed twice"));
}

}  // namespace dml::net
