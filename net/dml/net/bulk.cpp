// BulkChannel's life cycle and counters. The rest of the channel:
// bulk_server.cpp (offers, serving them), bulk_fetch.cpp (fetching by
// copy), bulk_in_place.cpp (reading a peer's arena in place),
// bulk_wire.cpp (the byte protocol's socket helpers), bulk_memory.cpp (the
// shared arena, liveness slots, buffer pool); its state is in
// internal/bulk_channel.hpp.
#include "dml/net/bulk.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <mutex>

#include "dml/net/internal/bulk_channel.hpp"
#include "dml/net/internal/bulk_memory.hpp"

namespace dml::net {

using internal::SharedArena;

BulkChannel::BulkChannel(BulkOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  if (options.same_host) impl_->arena = std::make_shared<SharedArena>();
}

BulkChannel::~BulkChannel() {
  impl_->DropAll();
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
    for (auto& c : impl_->connections) ::shutdown(c.fd, SHUT_RDWR);
  }
  if (impl_->serving) {
    const char c = 1;
    (void)!::write(impl_->wake[1], &c, 1);
    impl_->acceptor.join();
  }
  for (auto& c : impl_->connections) {
    c.thread.join();
    ::close(c.fd);
  }
  for (int fd : {impl_->tcp_fd, impl_->unix_fd, impl_->wake[0], impl_->wake[1]}) {
    if (fd >= 0) ::close(fd);
  }
  for (auto& [_, v] : impl_->idle) {
    for (auto& c : v) ::close(c.fd);
  }
}

std::optional<SharedBlock> BulkChannel::Allocate(std::size_t count) {
  if (!impl_->arena) return std::nullopt;
  return impl_->arena->Allocate(count);
}

BulkStats BulkChannel::stats() const {
  const Impl& m = *impl_;
  BulkStats out;
  out.offers = m.n_offers.load();
  out.refused_offers = m.n_refused.load();
  out.fetches = m.n_fetches.load();
  out.single_copy = m.n_single.load();
  out.direct = m.n_direct.load();
  out.unix_stream = m.n_unix.load();
  out.in_place = m.n_in_place.load();
  out.bytes = m.n_bytes.load();
  out.refused_peers = m.n_refused_peers.load();
  return out;
}

}  // namespace dml::net
