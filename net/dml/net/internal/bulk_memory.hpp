#pragma once
// The bulk channel's memory: the shared arena whose blocks same-host
// receivers read in place, the liveness slots of offers they read
// directly, and the receiver's pool of buffers. For the bulk channel's
// .cpp files (definitions in bulk_memory.cpp).
// Thread-safety: every member may be called from any thread.

#include <fcntl.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "dml/net/bulk.hpp"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010  // Linux 5.1; older libc headers lack it
#endif

namespace dml::net::internal {

// The shared arena: blocks that same-host receivers read in place. Memory
// comes in memfd segments, sealed so that they can never shrink under a
// reader's mapping (a read past the end would be SIGBUS), mapped shared;
// the descriptor receivers get cannot write (F_SEAL_FUTURE_WRITE, or a
// read-only descriptor where the kernel lacks that seal).
// Blocks are whole pages; a freed block waits in a list by its byte size
// for the next request of that size (steady-state training asks for the
// same sizes every round), so a block's pages stay faulted in.
class SharedArena : public std::enable_shared_from_this<SharedArena> {
 public:
  ~SharedArena();

  std::optional<SharedBlock> Allocate(std::size_t count);

  // Where [p, p + bytes) lies: segment id (1-based) and offset; false when
  // it is not inside one segment of this arena.
  bool Locate(const void* p, std::size_t bytes, uint32_t* segment, uint64_t* offset) const;

  // The descriptor to hand receivers and the size of segment id
  // (1-based); -1 when there is none. Owned by the arena.
  int Fd(uint64_t segment, std::size_t* size) const;

 private:
  struct Seg {
    int fd;      // the memfd, mapped writable at base
    int shared;  // what receivers get: fd itself once sealed, else read-only
    char* base;
    std::size_t size;
  };

  // Called with mu_ held.
  bool Grow(std::size_t size);

  mutable std::mutex mu_;
  std::vector<Seg> segments_;
  std::size_t used_ = 0;  // bytes handed out of the last segment
  std::size_t total_ = 0;
  std::map<std::size_t, std::vector<char*>> free_;
};

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

  static SlotTable& Get();
  // A slot now holding {ticket, bytes}, or -1 when all are taken.
  int32_t Take(uint64_t ticket, uint64_t bytes);
  // Call before the offer's buffer may be freed.
  void Clear(int32_t i);
  uint64_t Address(int32_t i) const { return reinterpret_cast<uint64_t>(&slots_[i]); }

 private:
  SlotTable();
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
  // with room for them (see Extend in bulk_fetch.cpp).
  std::shared_ptr<std::vector<double>> Get(std::size_t count);

 private:
  void Put(std::unique_ptr<std::vector<double>> v);

  std::mutex mu_;
  std::vector<std::unique_ptr<std::vector<double>>> free_;
  std::size_t bytes_ = 0;
};

}  // namespace dml::net::internal
