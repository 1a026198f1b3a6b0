// Reading a same-host peer's shared arena in place (no copy): the held
// connection to the peer, its segments mapped read-only here, and the hold
// that keeps a view valid (dml/net/bulk.hpp).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dml/net/bulk.hpp"
#include "dml/net/internal/bulk_channel.hpp"
#include "dml/net/internal/bulk_memory.hpp"
#include "dml/net/internal/bulk_wire.hpp"

namespace dml::net {

using namespace internal;  // the bulk channel's own protocol and helpers

namespace {

// What keeps an in-place view valid: the mapping and the hold, released
// when the view's last copy goes.
struct InPlaceHold {
  std::shared_ptr<PeerSegment> segment;
  std::shared_ptr<HoldLink> link;
  uint64_t ticket = 0;
  ~InPlaceHold();
};

InPlaceHold::~InPlaceHold() {
  std::lock_guard<std::mutex> lock(link->mu);
  // A peer that is gone dropped the hold itself; nothing to tell it.
  if (!link->broken && !SendRelease(link->fd, ticket)) link->broken = true;
}

}  // namespace

std::shared_ptr<HoldLink> BulkChannel::Impl::LinkTo(const BulkRef& r) {
  {
    std::lock_guard<std::mutex> lock(pool_mu);
    auto it = links.find(r.local);
    if (it != links.end()) return it->second;
  }
  idle_conn c = ConnectUnix(r);
  if (c.fd < 0) return nullptr;
  auto link = std::make_shared<HoldLink>();
  link->fd = c.fd;
  std::lock_guard<std::mutex> lock(pool_mu);
  return links.emplace(r.local, link).first->second;  // another thread's link wins; ours closes
}

void BulkChannel::Impl::DropLink(const BulkRef& r, const std::shared_ptr<HoldLink>& link) {
  std::lock_guard<std::mutex> lock(pool_mu);
  auto it = links.find(r.local);
  if (it != links.end() && it->second == link) links.erase(it);
  for (auto s = segments.begin(); s != segments.end();) {
    s = s->first.first == r.local ? segments.erase(s) : std::next(s);
  }
}

absl::StatusOr<std::shared_ptr<PeerSegment>> BulkChannel::Impl::SegmentOf(const BulkRef& r,
                                                                         const std::string& peer,
                                                                         HoldLink& link) {
  const auto key = std::make_pair(r.local, static_cast<uint64_t>(r.segment));
  {
    std::lock_guard<std::mutex> lock(pool_mu);
    auto it = segments.find(key);
    if (it != segments.end()) return it->second;
  }
  const Request req{kMagic, kVersion, kSegment, r.segment};
  Response resp{};
  int fd = -1;
  if (!SendAll(link.fd, &req, sizeof(req)) || !RecvWithFd(link.fd, &resp, sizeof(resp), &fd)) {
    link.broken = true;
    return absl::UnavailableError(
        absl::StrCat("bulk: segment ", r.segment, " from ", peer, ": ", Errno()));
  }
  auto fail = [&](const std::string& why) -> absl::Status {
    if (fd >= 0) ::close(fd);
    return absl::DataLossError(absl::StrCat("bulk: segment ", r.segment, " from ", peer, ": ", why));
  };
  if (resp.magic != kMagic || resp.ticket != r.segment) return fail("malformed header");
  if (resp.status != kOk || fd < 0) return fail(absl::StrCat("refused (status ", resp.status, ")"));
  struct stat st {};
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != resp.bytes) {
    return fail(absl::StrCat("announced ", resp.bytes, " bytes, the memfd has ", st.st_size));
  }
  // Unsealed, the sender could shrink it under our mapping (SIGBUS here).
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) return fail("not sealed against shrinking");
  // Senders hand out descriptors that cannot write their arena (sealed, or
  // read-only where the kernel lacks the seal); one that can is from a
  // sender that does not keep that promise: refuse rather than hold it.
  const int access = ::fcntl(fd, F_GETFL);
  if ((seals & F_SEAL_FUTURE_WRITE) == 0 && (access < 0 || (access & O_ACCMODE) != O_RDONLY)) {
    return fail("its memfd is writable (neither sealed against future writes nor read-only)");
  }
  void* base = ::mmap(nullptr, resp.bytes, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  fd = -1;
  if (base == MAP_FAILED) return fail("mmap: " + Errno());
  auto seg = std::make_shared<PeerSegment>();
  seg->base = static_cast<const char*>(base);
  seg->size = resp.bytes;
  std::lock_guard<std::mutex> lock(pool_mu);
  segments[key] = seg;
  return seg;
}

std::optional<absl::StatusOr<BulkValues>> BulkChannel::Impl::InPlace(const BulkRef& r,
                                                                     const std::string& peer) {
  std::shared_ptr<HoldLink> link = LinkTo(r);
  if (!link) return std::nullopt;
  std::unique_lock<std::mutex> lock(link->mu);
  if (link->broken) {
    lock.unlock();
    DropLink(r, link);
    return std::nullopt;
  }
  const Request req{kMagic, kVersion, kHold, r.ticket};
  Response resp{};
  if (!SendAll(link->fd, &req, sizeof(req)) || !RecvAll(link->fd, &resp, sizeof(resp))) {
    link->broken = true;
    lock.unlock();
    DropLink(r, link);
    return std::nullopt;
  }
  if (resp.magic != kMagic || resp.ticket != r.ticket) {
    link->broken = true;
    return absl::DataLossError(absl::StrCat("bulk: ", peer, " answered HOLD of ticket ",
                                            r.ticket, " with a malformed header"));
  }
  if (resp.status == kUnknownTicket) return NoTicket(peer, r.ticket);
  const uint64_t bytes = r.count * sizeof(double);
  absl::Status bad;
  std::shared_ptr<PeerSegment> seg;
  if (resp.status != kOk || resp.bytes != bytes) {
    bad = absl::DataLossError(absl::StrCat("bulk: ", peer, " holds ", resp.bytes,
                                           " bytes (status ", resp.status, ") for ticket ",
                                           r.ticket, ", announced ", r.count, " doubles"));
  } else if (auto got = SegmentOf(r, peer, *link); !got.ok()) {
    bad = got.status();
  } else if ((*got)->size < r.offset || (*got)->size - r.offset < bytes) {
    bad = absl::DataLossError(absl::StrCat("bulk: ticket ", r.ticket, " from ", peer, ": ",
                                           bytes, " bytes at offset ", r.offset,
                                           " pass the end of segment ", r.segment, " (",
                                           (*got)->size, " bytes)"));
  } else {
    seg = *std::move(got);
  }
  if (!bad.ok()) {
    if (!link->broken && !SendRelease(link->fd, r.ticket)) link->broken = true;
    return bad;
  }
  lock.unlock();
  BulkValues out;
  out.values = reinterpret_cast<const double*>(seg->base + r.offset);
  out.count = r.count;
  // Not checked here: a pass over values that stay where they are would
  // not leave them in cache for the consumer (unlike a copy's chunks), so
  // the consumer that needs them finite checks them as it reads them
  // anyway (the shard's push), as it does for a decoded inline Vector.
  out.finite = false;
  out.in_place = true;
  auto hold = std::make_shared<InPlaceHold>();
  hold->segment = std::move(seg);
  hold->link = std::move(link);
  hold->ticket = r.ticket;
  out.owner = std::move(hold);
  return out;
}

}  // namespace dml::net
