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
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

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

std::string BulkEndpoint::ToString() const {
  if (host.empty()) return "none";
  return absl::StrCat(host, ":", port, local.empty() ? "" : " ", local);
}

std::string BulkEndpoint::Encode() const {
  if (host.empty()) return "";
  return absl::StrCat(host, "\n", port, "\n", local);
}

absl::StatusOr<BulkEndpoint> BulkEndpoint::Decode(std::string_view text) {
  if (text.empty()) return BulkEndpoint{};
  if (text.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError("bulk endpoint: a NUL byte");
  }
  const std::vector<absl::string_view> parts =
      absl::StrSplit(absl::string_view(text.data(), text.size()), '\n');
  if (parts.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("bulk endpoint: ", parts.size(), " lines; expected host, port, local"));
  }
  uint32_t port = 0;
  if (parts[0].empty() || parts[0].size() > 255) {
    return absl::InvalidArgumentError("bulk endpoint: host empty or over 255 bytes");
  }
  if (!absl::SimpleAtoi(parts[1], &port) || port == 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("bulk endpoint: port \"", parts[1], "\" is not in [1, 65535]"));
  }
  if (parts[2].size() > 255) return absl::InvalidArgumentError("bulk endpoint: local over 255 bytes");
  return BulkEndpoint{std::string(parts[0]), static_cast<uint16_t>(port), std::string(parts[2])};
}

}  // namespace dml::net
