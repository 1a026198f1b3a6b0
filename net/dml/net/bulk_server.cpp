// Serving offers, the sender's side of the bulk channel: the offer table,
// the acceptor and a thread per connection that answers the byte protocol
// (dml/net/bulk.hpp).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dml/net/bulk.hpp"
#include "dml/net/internal/bulk_channel.hpp"
#include "dml/net/internal/bulk_memory.hpp"
#include "dml/net/internal/bulk_wire.hpp"

namespace dml::net {

using namespace internal;  // the bulk channel's own protocol and helpers

// ------------------------------------------------------------------ offers

std::unordered_map<uint64_t, BulkChannel::Impl::offer>::iterator BulkChannel::Impl::Forget(
    std::unordered_map<uint64_t, offer>::iterator it) {
  SlotTable::Get().Clear(it->second.slot);
  pending_bytes -= it->second.bytes;
  return offers.erase(it);
}

std::unordered_map<uint64_t, BulkChannel::Impl::offer>::iterator BulkChannel::Impl::Servable(
    uint64_t ticket, uint64_t by) {
  auto it = offers.find(ticket);
  if (it != offers.end() && it->second.holder != 0 && it->second.holder != by) return offers.end();
  return it;
}

bool BulkChannel::Impl::Take(uint64_t ticket, offer* out, uint64_t by) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = Servable(ticket, by);
  if (it == offers.end()) return false;
  *out = std::move(it->second);  // slot and bytes stay behind for Forget
  out->slot = -1;
  Forget(it);
  return true;
}

void BulkChannel::Impl::Drop(uint64_t ticket, uint64_t by) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = Servable(ticket, by);
  if (it != offers.end()) Forget(it);
}

std::optional<std::size_t> BulkChannel::Impl::Hold(uint64_t ticket, uint64_t by) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = offers.find(ticket);
  if (it == offers.end() || it->second.holder != 0) return std::nullopt;
  SlotTable::Get().Clear(it->second.slot);
  it->second.slot = -1;
  it->second.holder = by;
  it->second.expires = std::chrono::steady_clock::time_point::max();
  return it->second.bytes;
}

void BulkChannel::Impl::DropAll() {
  std::lock_guard<std::mutex> lock(mu);
  for (auto& [_, o] : offers) SlotTable::Get().Clear(o.slot);
  offers.clear();
  pending_bytes = 0;
}

void BulkChannel::Impl::Reap() {
  for (auto it = connections.begin(); it != connections.end();) {
    if (it->done->load()) {
      it->thread.join();
      ::close(it->fd);
      it = connections.erase(it);
    } else {
      ++it;
    }
  }
}

// ------------------------------------------------------------- connections

void BulkChannel::Impl::Accept() {
  for (;;) {
    pollfd fds[3] = {{tcp_fd, POLLIN, 0}, {wake[0], POLLIN, 0}, {unix_fd, POLLIN, 0}};
    const nfds_t nfds = unix_fd >= 0 ? 3 : 2;
    if (::poll(fds, nfds, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    for (nfds_t i : {nfds_t{0}, nfds_t{2}}) {
      if (i >= nfds || (fds[i].revents & POLLIN) == 0) continue;
      const bool is_unix = i == 2;
      const int fd = ::accept4(fds[i].fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      if (is_unix && !PeerAllowed(fd)) {
        ::close(fd);
        continue;
      }
      if (!is_unix) NoDelay(fd);
      std::lock_guard<std::mutex> lock(mu);
      if (stopping) {
        ::close(fd);
        return;
      }
      Reap();
      auto done = std::make_shared<std::atomic<bool>>(false);
      const uint64_t id = next_connection++;
      connections.push_back(connection{std::thread([this, fd, is_unix, done, id] {
                                         ServeConnection(fd, is_unix, id);
                                         done->store(true);
                                       }),
                                       fd, done});
    }
  }
}

bool BulkChannel::Impl::PeerAllowed(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    const std::string why = Errno();
    n_refused_peers.fetch_add(1);
    std::fprintf(stderr, "bulk: refused a connection on Unix socket %s: SO_PEERCRED: %s\n",
                 local.c_str(), why.c_str());
    return false;
  }
  const uid_t self = ::geteuid();
  const auto& allowed = options.allowed_uids;
  if (cred.uid == self || std::find(allowed.begin(), allowed.end(), cred.uid) != allowed.end()) {
    return true;
  }
  // Counted before the caller hangs up, so whoever sees the hang-up sees
  // the count.
  n_refused_peers.fetch_add(1);
  std::fprintf(stderr,
               "bulk: refused a connection on Unix socket %s from pid %d uid %u: not uid %u "
               "nor in BulkOptions::allowed_uids\n",
               local.c_str(), static_cast<int>(cred.pid), static_cast<unsigned>(cred.uid),
               static_cast<unsigned>(self));
  return false;
}

void BulkChannel::Impl::ServeConnection(int fd, bool is_unix, uint64_t id) {
  // An idle pooled connection waits for its next request without a time
  // limit; a send to a reader that stopped reading must not block forever.
  SetTimeouts(fd, /*recv=*/false, /*send=*/true);
  std::unordered_set<uint64_t> held;  // offers this connection HOLDs
  Request req{};
  while (RecvAll(fd, &req, sizeof(req))) {
    if (req.magic != kMagic || req.version != kVersion) break;  // not our protocol: hang up
    if (req.op == kRelease) {
      // A reader is done with the ticket (none held: ignore).
      Drop(req.ticket, id);
      held.erase(req.ticket);
      continue;
    }
    if ((req.op == kHold || req.op == kSegment) && !is_unix) {
      const Response resp{kMagic, kNotAllowed, req.ticket, 0, 0};
      if (!SendAll(fd, &resp, sizeof(resp))) break;
      continue;
    }
    if (req.op == kHold) {
      const auto bytes = Hold(req.ticket, id);
      if (bytes) held.insert(req.ticket);
      const Response resp{kMagic, bytes ? kOk : kUnknownTicket, req.ticket, bytes ? *bytes : 0, 0};
      if (!SendAll(fd, &resp, sizeof(resp))) break;
      continue;
    }
    if (req.op == kSegment) {
      std::size_t size = 0;
      const int seg = arena ? arena->Fd(req.ticket, &size) : -1;
      const Response resp{kMagic, seg >= 0 ? kOk : kUnknownTicket, req.ticket, size, 0};
      if (!(seg >= 0 ? SendWithFd(fd, &resp, sizeof(resp), seg) : SendAll(fd, &resp, sizeof(resp)))) {
        break;
      }
      continue;
    }
    if (req.op != kSend && req.op != kMap) break;
    if (req.op == kMap && !is_unix) {
      Response resp{kMagic, kNotAllowed, req.ticket, 0, 0};
      if (!SendAll(fd, &resp, sizeof(resp))) break;
      continue;
    }
    offer o;
    const bool found = Take(req.ticket, &o, id);
    Response resp{kMagic, found ? kOk : kUnknownTicket, req.ticket, found ? o.bytes : 0,
                  found && req.op == kMap ? reinterpret_cast<uint64_t>(o.data) : 0};
    if (!SendAll(fd, &resp, sizeof(resp))) break;
    if (!found) continue;
    if (req.op == kSend) {
      if (!SendAll(fd, o.data, o.bytes)) break;
      continue;
    }
    // MAP: the peer reads our buffer itself; keep it alive until it says
    // so (or gives up: timeout, hang-up). A peer the kernel does not let
    // read us asks for the same ticket by SEND instead.
    SetTimeouts(fd, /*recv=*/true, /*send=*/true);
    Request next{};
    const bool heard = RecvAll(fd, &next, sizeof(next));
    SetTimeouts(fd, /*recv=*/false, /*send=*/true);
    if (!heard || next.magic != kMagic || next.ticket != req.ticket) break;
    if (next.op == kSend) {
      const Response again{kMagic, kOk, req.ticket, o.bytes, 0};
      if (!SendAll(fd, &again, sizeof(again)) || !SendAll(fd, o.data, o.bytes)) break;
    } else if (next.op != kRelease) {
      break;
    }
  }
  // The reader is gone (or broke the protocol): what it held goes.
  for (uint64_t t : held) Drop(t, id);
  // Hang up (a peer that broke the protocol sees EOF); the destructor
  // closes the fd, so no other thread can meet a reused number.
  ::shutdown(fd, SHUT_RDWR);
}

// ------------------------------------------------------------------ public

absl::Status BulkChannel::Serve(const std::string& host, uint16_t port) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  if (m.serving) {
    return absl::FailedPreconditionError(
        absl::StrCat("bulk: serving already on ", m.host, ":", m.port));
  }
  auto addr = Resolve(host, port, SOCK_STREAM, /*passive=*/true);
  if (!addr.ok()) return addr.status();
  const int tcp = ::socket(addr->first.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (tcp < 0) return absl::UnavailableError("bulk: socket: " + Errno());
  int one = 1;
  ::setsockopt(tcp, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(tcp, reinterpret_cast<sockaddr*>(&addr->first), addr->second) != 0 ||
      ::listen(tcp, 64) != 0) {
    const std::string why = Errno();
    ::close(tcp);
    return absl::UnavailableError(absl::StrCat("bulk: cannot listen on ", host, ":", port, ": ", why));
  }
  sockaddr_storage bound{};
  socklen_t blen = sizeof(bound);
  ::getsockname(tcp, reinterpret_cast<sockaddr*>(&bound), &blen);
  const uint16_t actual = ntohs(bound.ss_family == AF_INET6
                                    ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                    : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC) != 0) {
    ::close(tcp);
    return absl::UnavailableError("bulk: pipe: " + Errno());
  }
  int ux = -1;
  std::string local;
  if (m.options.same_host) {
    // Best effort: without it, same-host peers fetch over TCP.
    local = absl::StrCat("dml-bulk.", ::getpid(), ".", absl::Hex(RandomU64()));
    ux = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un ua;
    const socklen_t ulen = AbstractAddress(local, &ua);
    if (ux >= 0 && (::bind(ux, reinterpret_cast<sockaddr*>(&ua), ulen) != 0 || ::listen(ux, 64) != 0)) {
      ::close(ux);
      ux = -1;
    }
    if (ux < 0) local.clear();
  }
  m.tcp_fd = tcp;
  m.unix_fd = ux;
  m.wake[0] = wake[0];
  m.wake[1] = wake[1];
  m.host = host;
  m.port = actual;
  m.local = local;
  m.serving = true;
  Impl* raw = impl_.get();
  m.acceptor = std::thread([raw] { raw->Accept(); });
  return absl::OkStatus();
}

bool BulkChannel::serving() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->serving;
}
std::string BulkChannel::host() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->host;
}
uint16_t BulkChannel::port() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->port;
}
BulkEndpoint BulkChannel::endpoint() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->serving) return {};
  return {impl_->host, impl_->port, impl_->local};
}

std::optional<BulkRef> BulkChannel::Offer(std::shared_ptr<const void> owner, const double* data,
                                          std::size_t count) {
  Impl& m = *impl_;
  const std::size_t bytes = count * sizeof(double);
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(m.mu);
  if (!m.serving || m.stopping) return std::nullopt;
  for (auto it = m.offers.begin(); it != m.offers.end();) {
    if (it->second.expires < now) {
      it = m.Forget(it);
    } else {
      ++it;
    }
  }
  if (m.pending_bytes + bytes > kBulkMaxPendingBytes) {
    m.n_refused.fetch_add(1);
    return std::nullopt;
  }
  // Random tickets: a peer cannot guess another receiver's ticket.
  uint64_t ticket = RandomU64();
  while (m.offers.count(ticket) != 0) ticket = RandomU64();
  // Same-host peers may read it directly (when a liveness word is free).
  const int32_t slot = m.local.empty() ? -1 : SlotTable::Get().Take(ticket, bytes);
  m.offers[ticket] = Impl::offer{std::move(owner), data, bytes, now + kBulkTtl, slot};
  m.pending_bytes += bytes;
  m.n_offers.fetch_add(1);
  BulkRef ref{m.host, m.port, m.local, ticket, count};
  if (slot >= 0) {
    ref.address = reinterpret_cast<uint64_t>(data);
    ref.slot = SlotTable::Get().Address(slot);
  }
  if (!m.local.empty() && m.arena) m.arena->Locate(data, bytes, &ref.segment, &ref.offset);
  return ref;
}

uint64_t BulkChannel::refused_peers() const { return impl_->n_refused_peers.load(); }

std::size_t BulkChannel::pending() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->offers.size();
}

}  // namespace dml::net
