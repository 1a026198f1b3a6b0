#include "dml/net/bulk.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <map>
#include <mutex>
#include <deque>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dml/util/finite.hpp"

namespace dml::net {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the bulk protocol sends host-order doubles: little-endian hosts only");

constexpr uint32_t kMagic = 0x424c4d44;  // "DMLB"
constexpr uint16_t kVersion = 2;
enum Op : uint16_t { kSend = 1, kMap = 2, kRelease = 3, kHold = 4, kSegment = 5 };
enum Status : uint32_t { kOk = 0, kUnknownTicket = 1, kNotAllowed = 2 };
// Values land and are checked in chunks this large (stays in L2).
constexpr std::size_t kChunkDoubles = std::size_t{1} << 15;  // 256 KiB

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

std::string Errno() { return std::strerror(errno); }

// Both loops return false on EOF, error or timeout (errno tells which).
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

// errno values by which the kernel refuses to let us read another process
// (no ptrace rights, a seccomp filter): the peer then streams instead.
bool KernelRefused(int e) { return e == EPERM || e == ENOSYS || e == EACCES; }

// The answer to a ticket the sender no longer holds (or that this receiver
// already read directly).
absl::Status NoTicket(const std::string& peer, uint64_t ticket) {
  return absl::NotFoundError(
      absl::StrCat("bulk: ", peer, " holds no ticket ", ticket, " (fetched already or expired)"));
}

// Tells the sender we are done with a ticket we read ourselves (MAP or
// direct); no answer comes.
bool SendRelease(int fd, uint64_t ticket) {
  const Request release{kMagic, kVersion, kRelease, ticket};
  return SendAll(fd, &release, sizeof(release));
}

// The shared arena: blocks that same-host receivers read in place. Memory
// comes in memfd segments, sealed so that they can never shrink under a
// reader's mapping (a read past the end would be SIGBUS), mapped shared.
// Blocks are whole pages; a freed block waits in a list by its byte size
// for the next request of that size (steady-state training asks for the
// same sizes every round), so a block's pages stay faulted in.
class SharedArena : public std::enable_shared_from_this<SharedArena> {
 public:
  ~SharedArena() {
    for (auto& g : segments_) {
      ::munmap(g.base, g.size);
      ::close(g.fd);
    }
  }

  std::optional<SharedBlock> Allocate(std::size_t count) {
    constexpr std::size_t kPage = 4096;
    if (count == 0 || count > (kBulkArenaMaxBytes / sizeof(double))) return std::nullopt;
    const std::size_t bytes = (count * sizeof(double) + kPage - 1) / kPage * kPage;
    char* at = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto& list = free_[bytes];
      if (!list.empty()) {
        at = list.back();
        list.pop_back();
      } else if (!segments_.empty() && segments_.back().size - used_ >= bytes) {
        at = segments_.back().base + used_;
        used_ += bytes;
      } else {
        const std::size_t size = std::max(kBulkArenaSegmentBytes, bytes);
        if (total_ + size > kBulkArenaMaxBytes || !Grow(size)) return std::nullopt;
        at = segments_.back().base;
        used_ = bytes;
      }
    }
    std::shared_ptr<SharedArena> home = shared_from_this();
    std::shared_ptr<void> owner(at, [home, bytes](void* p) {
      std::lock_guard<std::mutex> lock(home->mu_);
      home->free_[bytes].push_back(static_cast<char*>(p));
    });
    return SharedBlock{std::move(owner), reinterpret_cast<double*>(at), count};
  }

  // Where [p, p + bytes) lies: segment id (1-based) and offset; false when
  // it is not inside one segment of this arena.
  bool Locate(const void* p, std::size_t bytes, uint32_t* segment, uint64_t* offset) const {
    const auto* c = static_cast<const char*>(p);
    std::lock_guard<std::mutex> lock(mu_);
    for (std::size_t i = 0; i < segments_.size(); ++i) {
      const Seg& g = segments_[i];
      if (c >= g.base && c < g.base + g.size && bytes <= static_cast<std::size_t>(g.base + g.size - c)) {
        *segment = static_cast<uint32_t>(i + 1);
        *offset = static_cast<uint64_t>(c - g.base);
        return true;
      }
    }
    return false;
  }

  // The memfd and size of segment id (1-based); fd -1 when there is none.
  int Fd(uint64_t segment, std::size_t* size) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (segment == 0 || segment > segments_.size()) return -1;
    *size = segments_[segment - 1].size;
    return segments_[segment - 1].fd;
  }

 private:
  struct Seg {
    int fd;
    char* base;
    std::size_t size;
  };

  // Called with mu_ held.
  bool Grow(std::size_t size) {
    const int fd = ::memfd_create("dml-bulk-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return false;
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0 ||
        ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
      ::close(fd);
      return false;
    }
    void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
      ::close(fd);
      return false;
    }
    segments_.push_back(Seg{fd, static_cast<char*>(base), size});
    total_ += size;
    return true;
  }

  mutable std::mutex mu_;
  std::vector<Seg> segments_;
  std::size_t used_ = 0;  // bytes handed out of the last segment
  std::size_t total_ = 0;
  std::map<std::size_t, std::vector<char*>> free_;
};

// A peer's arena segment mapped read-only here; unmapped when the last
// view into it goes.
struct PeerSegment {
  const char* base = nullptr;
  std::size_t size = 0;
  ~PeerSegment() {
    if (base != nullptr) ::munmap(const_cast<char*>(base), size);
  }
};

// The connection on which this receiver holds a peer's offers: the peer
// drops them when it closes, so it lives as long as any view it holds (and
// the channel). One request at a time (mu).
struct HoldLink {
  std::mutex mu;
  int fd = -1;
  bool broken = false;
  ~HoldLink() {
    if (fd >= 0) ::close(fd);
  }
};

// What keeps an in-place view valid: the mapping and the hold, released
// when the view's last copy goes.
struct InPlaceHold {
  std::shared_ptr<PeerSegment> segment;
  std::shared_ptr<HoldLink> link;
  uint64_t ticket = 0;
  ~InPlaceHold();
};

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

// Sends `fd` with the response header.
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

// Receives n header bytes and the descriptor sent with them (*fd -1: none).
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

// Liveness words of offers that same-host peers read directly (no round
// trip): while an offer holds its buffer, its slot holds {ticket, bytes};
// the ticket word is cleared before the buffer can be freed. A reader
// checks the slot (right ticket, announced size), copies the values, then
// reads the ticket word again: still the ticket means the buffer was alive
// during the whole copy (tickets are random, so a slot reused by another
// offer does not match). The table lives as long as the process, so a
// reader never reads freed memory there; the process's channels share it.
class SlotTable {
 public:
  static constexpr std::size_t kSlots = 16384;  // kBulkMaxPendingBytes / kBulkMinBytes
  struct Slot {
    std::atomic<uint64_t> ticket{0};
    std::atomic<uint64_t> bytes{0};
  };

  static SlotTable& Get() {
    static SlotTable* table = new SlotTable();  // never freed: readers may still look
    return *table;
  }
  // A slot now holding {ticket, bytes}, or -1 when all are taken.
  int32_t Take(uint64_t ticket, uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.empty()) return -1;
    const int32_t i = free_.back();
    free_.pop_back();
    slots_[i].bytes.store(bytes, std::memory_order_relaxed);
    slots_[i].ticket.store(ticket, std::memory_order_release);
    return i;
  }
  // Call before the offer's buffer may be freed.
  void Clear(int32_t i) {
    if (i < 0) return;
    slots_[i].ticket.store(0, std::memory_order_seq_cst);
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(i);
  }
  uint64_t Address(int32_t i) const { return reinterpret_cast<uint64_t>(&slots_[i]); }

 private:
  SlotTable() : slots_(new Slot[kSlots]) {
    free_.reserve(kSlots);
    for (std::size_t i = kSlots; i-- > 0;) free_.push_back(static_cast<int32_t>(i));
  }
  std::mutex mu_;
  Slot* slots_;
  std::vector<int32_t> free_;
};
static_assert(sizeof(std::atomic<uint64_t>) == 8, "slot words are read as plain u64 pairs");

// Received vectors come back here when their last user lets them go, so
// the next fetch of the same length writes into pages that are already
// mapped, without zeroing them first (std::vector cannot skip that).
// Bounded: kPoolBuffers vectors and kPoolBytes in all.
class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  static constexpr std::size_t kPoolBuffers = 8;
  static constexpr std::size_t kPoolBytes = std::size_t{256} << 20;

  // A recycled vector of `count` doubles (old contents), or an empty one
  // with room for them (see Extend).
  std::shared_ptr<std::vector<double>> Get(std::size_t count) {
    std::unique_ptr<std::vector<double>> v;
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Newest first: the buffer freed last is the likeliest still in cache.
      for (auto it = free_.rbegin(); it != free_.rend(); ++it) {
        if ((*it)->size() == count) {
          v = std::move(*it);
          free_.erase(std::next(it).base());
          bytes_ -= count * sizeof(double);
          break;
        }
      }
    }
    if (!v) {
      v = std::make_unique<std::vector<double>>();
      v->reserve(count);
    }
    std::weak_ptr<BufferPool> home = weak_from_this();
    return std::shared_ptr<std::vector<double>>(v.release(), [home](std::vector<double>* p) {
      if (auto pool = home.lock()) {
        pool->Put(std::unique_ptr<std::vector<double>>(p));
      } else {
        delete p;
      }
    });
  }

 private:
  void Put(std::unique_ptr<std::vector<double>> v) {
    const std::size_t b = v->size() * sizeof(double);
    if (b < kBulkMinBytes) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.size() >= kPoolBuffers || bytes_ + b > kPoolBytes) return;
    bytes_ += b;
    free_.push_back(std::move(v));
  }

  std::mutex mu_;
  std::vector<std::unique_ptr<std::vector<double>>> free_;
  std::size_t bytes_ = 0;
};

// Makes `v` hold `count` doubles for a read to overwrite: a recycled
// vector already does; a fresh one grows by chunks as they arrive (zeroing
// a chunk that is about to be overwritten costs cache, not memory).
double* Extend(std::vector<double>& v, std::size_t at, std::size_t m, std::size_t count) {
  if (v.size() == count) return v.data() + at;
  v.resize(at + m);
  return v.data() + at;
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

// An abstract Unix socket address (Linux): scoped to the network namespace,
// gone with the process, nothing in the file system.
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

InPlaceHold::~InPlaceHold() {
  std::lock_guard<std::mutex> lock(link->mu);
  // A peer that is gone dropped the hold itself; nothing to tell it.
  if (!link->broken && !SendRelease(link->fd, ticket)) link->broken = true;
}

}  // namespace

// ------------------------------------------------------------------ state

struct BulkChannel::Impl {
  struct offer {
    std::shared_ptr<const void> owner;
    const void* data = nullptr;
    std::size_t bytes = 0;
    std::chrono::steady_clock::time_point expires;
    int32_t slot = -1;  // SlotTable index while directly readable, else -1
    uint64_t holder = 0;  // the connection that HOLDs it (served to no other), else 0
  };
  struct connection {
    std::thread thread;
    int fd = -1;
    std::shared_ptr<std::atomic<bool>> done;
  };
  // A pooled client connection and, for Unix ones, the peer's pid as the
  // kernel reports it (0: unknown, no single copy).
  struct idle_conn {
    int fd = -1;
    pid_t pid = 0;
  };

  BulkOptions options;

  // Serving side, guarded by mu.
  mutable std::mutex mu;
  bool serving = false;
  bool stopping = false;
  std::string host, local;
  uint16_t port = 0;
  int tcp_fd = -1, unix_fd = -1;
  int wake[2] = {-1, -1};
  std::thread acceptor;
  std::unordered_map<uint64_t, offer> offers;
  std::size_t pending_bytes = 0;
  std::vector<connection> connections;
  uint64_t next_connection = 1;
  // Null without same_host (then no block is offered in place).
  std::shared_ptr<SharedArena> arena;

  // Client side.
  std::mutex pool_mu;
  std::map<std::string, std::vector<idle_conn>> idle;
  std::set<std::string> unreachable_local;  // Unix names that refused: use TCP
  // Tickets this channel read directly, newest last: their senders may not
  // have read the RELEASE yet, so a repeated reference is refused here. A
  // RELEASE takes microseconds to milliseconds to be read, far less than
  // 4096 fetches.
  std::unordered_set<uint64_t> direct_seen;
  std::deque<uint64_t> direct_order;
  static constexpr std::size_t kDirectSeen = 4096;
  std::atomic<bool> single_copy_refused{false};
  // In-place reads: per sender (Unix name), the connection that holds its
  // offers and its segments mapped here. Guarded by pool_mu.
  std::map<std::string, std::shared_ptr<HoldLink>> links;
  std::map<std::pair<std::string, uint64_t>, std::shared_ptr<PeerSegment>> segments;

  std::atomic<uint64_t> n_offers{0}, n_refused{0}, n_fetches{0}, n_single{0}, n_direct{0},
      n_unix{0}, n_in_place{0}, n_bytes{0};
  std::shared_ptr<BufferPool> pool = std::make_shared<BufferPool>();

  // --------------------------------------------------------- serving

  // Removes an offer from the table, its slot cleared first (direct
  // readers then no longer trust a copy). Called with mu held.
  std::unordered_map<uint64_t, offer>::iterator Forget(
      std::unordered_map<uint64_t, offer>::iterator it) {
    SlotTable::Get().Clear(it->second.slot);
    pending_bytes -= it->second.bytes;
    return offers.erase(it);
  }

  // ticket's offer if connection `by` may have it (nobody else holds it),
  // else offers.end(). Called with mu held.
  std::unordered_map<uint64_t, offer>::iterator Servable(uint64_t ticket, uint64_t by) {
    auto it = offers.find(ticket);
    if (it != offers.end() && it->second.holder != 0 && it->second.holder != by) return offers.end();
    return it;
  }

  // Takes ticket's offer out of the table (it is served once) for
  // connection `by`; an offer another connection holds is not served.
  bool Take(uint64_t ticket, offer* out, uint64_t by) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = Servable(ticket, by);
    if (it == offers.end()) return false;
    *out = std::move(it->second);  // slot and bytes stay behind for Forget
    out->slot = -1;
    Forget(it);
    return true;
  }

  // Drops ticket's offer for connection `by` (a RELEASE, or its holder
  // gone) under mu, so its owner is let go before pending() stops counting
  // it: once pending() says it is gone, an arena block is back in its free
  // list. An offer another connection holds stays.
  void Drop(uint64_t ticket, uint64_t by) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = Servable(ticket, by);
    if (it != offers.end()) Forget(it);
  }

  // Marks ticket's offer held by connection `by`: no expiry, no direct
  // reads, served to nobody else. Its byte count, or nullopt when the
  // offer is gone or held already.
  std::optional<std::size_t> Hold(uint64_t ticket, uint64_t by) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = offers.find(ticket);
    if (it == offers.end() || it->second.holder != 0) return std::nullopt;
    SlotTable::Get().Clear(it->second.slot);
    it->second.slot = -1;
    it->second.holder = by;
    it->second.expires = std::chrono::steady_clock::time_point::max();
    return it->second.bytes;
  }

  // Drops every offer (the channel stops): direct readers see the cleared
  // words before any buffer can go.
  void DropAll() {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [_, o] : offers) SlotTable::Get().Clear(o.slot);
    offers.clear();
    pending_bytes = 0;
  }

  // Joins and closes connections whose peers hung up (a long-lived node
  // sees new ones per coordinator process). Called with mu held.
  void Reap() {
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

  void Accept() {
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

  void ServeConnection(int fd, bool is_unix, uint64_t id) {
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

  // --------------------------------------------------------- fetching

  static std::string TcpKey(const BulkRef& r) { return absl::StrCat("tcp:", r.host, ":", r.port); }
  static std::string UnixKey(const BulkRef& r) { return "unix:" + r.local; }

  bool PoolTake(const std::string& key, idle_conn* out) {
    std::lock_guard<std::mutex> lock(pool_mu);
    auto& v = idle[key];
    if (v.empty()) return false;
    *out = v.back();
    v.pop_back();
    return true;
  }
  void PoolPut(const std::string& key, idle_conn c) {
    std::lock_guard<std::mutex> lock(pool_mu);
    idle[key].push_back(c);
  }

  absl::StatusOr<idle_conn> ConnectTcp(const BulkRef& r) {
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

  // A Unix connection to the sender, or -1 when it is not on this machine
  // (not in this network namespace).
  idle_conn ConnectUnix(const BulkRef& r) {
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

  // The connection holding r's sender's offers (opened on first use), or
  // null when its Unix socket does not answer.
  std::shared_ptr<HoldLink> LinkTo(const BulkRef& r) {
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

  // Forgets a broken link and what was mapped through it (views keep
  // their own mappings).
  void DropLink(const BulkRef& r, const std::shared_ptr<HoldLink>& link) {
    std::lock_guard<std::mutex> lock(pool_mu);
    auto it = links.find(r.local);
    if (it != links.end() && it->second == link) links.erase(it);
    for (auto s = segments.begin(); s != segments.end();) {
      s = s->first.first == r.local ? segments.erase(s) : std::next(s);
    }
  }

  // r's segment mapped here: cached, else asked for on `link` (its mutex
  // held by the caller). Errors: DataLoss naming what was wrong.
  absl::StatusOr<std::shared_ptr<PeerSegment>> SegmentOf(const BulkRef& r, const std::string& peer,
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

  // Reads r in place from the sender's arena: holds the offer, maps its
  // segment, checks the reference against it. nullopt when that path is not open to us
  // (no answer on the Unix socket, a broken link): the caller then fetches
  // by copy, which says why if that fails too.
  std::optional<absl::StatusOr<BulkValues>> InPlace(const BulkRef& r, const std::string& peer) {
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

  // Reads an offer straight from the sender's memory (pid as this process
  // sees it) with no request: the values, then the offer's liveness word.
  // nullopt when that word no longer holds the ticket (the offer is gone:
  // what was copied may be garbage and is dropped) or the read failed;
  // the caller then asks the sender by the protocol, which answers why.
  // *repeat: this channel read the ticket before (the caller answers
  // NotFound, as the sender would once it has read the RELEASE).
  std::optional<BulkValues> DirectRead(const BulkRef& r, pid_t pid, bool* repeat) {
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

  // Copies `count` doubles at `address` in process pid into v (from
  // BufferPool::Get), checking each chunk while it is in cache. Returns 0,
  // or the errno of the read that failed (EIO: a short read).
  static int ReadValues(pid_t pid, uint64_t address, std::size_t count, std::vector<double>& v,
                        bool* finite) {
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

  bool SeenDirect(uint64_t ticket) {
    std::lock_guard<std::mutex> lock(pool_mu);
    return direct_seen.count(ticket) != 0;
  }

  // n bytes at `address` in process pid; a refusal by the kernel (no
  // ptrace rights, seccomp) switches this channel to streaming.
  bool ReadRemote(pid_t pid, void* dst, uint64_t address, std::size_t n) {
    iovec local{dst, n};
    iovec remote{reinterpret_cast<void*>(address), n};
    const ssize_t got = ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (got < 0 && KernelRefused(errno)) single_copy_refused.store(true);
    return got == static_cast<ssize_t>(n);
  }

  // One exchange on `c`: op SEND (or MAP, read with process_vm_readv).
  // Returns ok, or an error; *reusable tells whether c may go back to the
  // pool, *retry whether a fresh connection may succeed.
  absl::StatusOr<BulkValues> Exchange(const BulkRef& r, const std::string& peer, idle_conn c,
                                      bool map, bool* reusable, bool* retry, bool* single) {
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
};

// ------------------------------------------------------------------ public

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

std::optional<SharedBlock> BulkChannel::Allocate(std::size_t count) {
  if (!impl_->arena) return std::nullopt;
  return impl_->arena->Allocate(count);
}

std::size_t BulkChannel::pending() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->offers.size();
}

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
  return out;
}

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
