// The bulk channel's memory (dml/net/internal/bulk_memory.hpp).
#include "dml/net/internal/bulk_memory.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iterator>
#include <string>
#include <utility>

namespace dml::net::internal {

// ------------------------------------------------------------------ arena

SharedArena::~SharedArena() {
  for (auto& g : segments_) {
    ::munmap(g.base, g.size);
    if (g.shared != g.fd) ::close(g.shared);
    ::close(g.fd);
  }
}

std::optional<SharedBlock> SharedArena::Allocate(std::size_t count) {
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

bool SharedArena::Locate(const void* p, std::size_t bytes, uint32_t* segment,
                         uint64_t* offset) const {
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

int SharedArena::Fd(uint64_t segment, std::size_t* size) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (segment == 0 || segment > segments_.size()) return -1;
  *size = segments_[segment - 1].size;
  return segments_[segment - 1].shared;
}

bool SharedArena::Grow(std::size_t size) {
  const int fd = ::memfd_create("dml-bulk-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return false;
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0 ||
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
    ::close(fd);
    return false;
  }
  void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    ::close(fd);
    return false;
  }
  // Receivers get this memfd (SEGMENT): sealed against future writes, no
  // descriptor of it, however reopened, maps it writable or write()s it,
  // while our mapping made above stays writable.
  int shared = fd;
  if (::fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) != 0) {
    // A kernel before 5.1 (EINVAL): hand out a read-only descriptor
    // instead. Weaker: a receiver can still reopen its copy read-write
    // (open /proc/self/fd/<n>) and write our arena.
    const bool unknown_seal = errno == EINVAL;
    const std::string self = "/proc/self/fd/" + std::to_string(fd);
    shared = unknown_seal ? ::open(self.c_str(), O_RDONLY | O_CLOEXEC) : -1;
    if (shared < 0 || ::fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL) != 0) {
      if (shared >= 0) ::close(shared);
      ::munmap(base, size);
      ::close(fd);
      return false;
    }
  }
  segments_.push_back(Seg{fd, shared, static_cast<char*>(base), size});
  total_ += size;
  return true;
}

// ------------------------------------------------------------------ slots

SlotTable& SlotTable::Get() {
  static SlotTable* table = new SlotTable();  // never freed: readers may still look
  return *table;
}

int32_t SlotTable::Take(uint64_t ticket, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.empty()) return -1;
  const int32_t i = free_.back();
  free_.pop_back();
  slots_[i].bytes.store(bytes, std::memory_order_relaxed);
  slots_[i].ticket.store(ticket, std::memory_order_release);
  return i;
}

void SlotTable::Clear(int32_t i) {
  if (i < 0) return;
  slots_[i].ticket.store(0, std::memory_order_seq_cst);
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(i);
}

SlotTable::SlotTable() : slots_(new Slot[kSlots]) {
  free_.reserve(kSlots);
  for (std::size_t i = kSlots; i-- > 0;) free_.push_back(static_cast<int32_t>(i));
}

// ------------------------------------------------------------ buffer pool

std::shared_ptr<std::vector<double>> BufferPool::Get(std::size_t count) {
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

void BufferPool::Put(std::unique_ptr<std::vector<double>> v) {
  const std::size_t b = v->size() * sizeof(double);
  if (b < kBulkMinBytes) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.size() >= kPoolBuffers || bytes_ + b > kPoolBytes) return;
  bytes_ += b;
  free_.push_back(std::move(v));
}

}  // namespace dml::net::internal
