#pragma once
// A parameter shard's range of values, shared copy-on-write with the
// snapshots handed to pullers: K pulls of one state share one buffer, and a
// write copies it only while a snapshot of it is still referenced (in
// flight, held by a reader, or offered on the bulk channel).
//
// Why not shared_ptr::use_count(): it is a relaxed load. A reader on
// another thread that drops its snapshot decrements the count, but seeing
// the decremented count orders nothing, so the reader's last read of the
// values did not happen-before the shard's in-place write (a data race,
// reported by TSan against an instrumented CAF). Here every buffer carries
// an atomic `viewed` flag: the snapshots of one buffer version share one
// control block whose deleter clears the flag with release when the last
// snapshot goes, and the shard reads it with acquire before writing in
// place or reusing the buffer.
//
// Model averaging replaces every value each round (next_block, commit):
// then they live in a block of the bulk channel's shared arena, which
// pullers on this machine read in place (no copy); the other modes update
// in place and keep a std::vector.
//
// Thread-safety: one owner (the shard's actor); snapshots may be read and
// dropped on any thread.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "dml/net/bulk.hpp"

namespace dml::actors::internal {

class shard_values {
 public:
  /// One buffer version's snapshot: `owner` keeps the values alive (and the
  /// buffer marked viewed); `vec` is set when a std::vector holds them.
  struct snapshot {
    std::shared_ptr<const void> owner;
    const double* data = nullptr;
    std::size_t size = 0;
    std::shared_ptr<const std::vector<double>> vec;
  };

  void assign(std::size_t n, double v) { replace(std::vector<double>(n, v)); }
  void replace(std::vector<double> v) {
    cur_ = std::make_shared<buffer>();
    cur_->vec = std::move(v);
    cur_->data = cur_->vec.data();
    cur_->size = cur_->vec.size();
    view_.reset();
  }
  std::size_t size() const { return cur_->size; }
  double operator[](std::size_t j) const { return cur_->data[j]; }

  /// The values to update in place: w's own buffer when no snapshot still
  /// reads it, else a copy (which becomes w).
  std::vector<double>& mut() {
    view_.reset();  // the shard's own reference to the current version
    if (cur_->block || cur_->viewed()) {
      auto fresh = take_spare(cur_->size);
      std::copy(cur_->data, cur_->data + cur_->size, fresh->vec.begin());
      spare_ = std::move(cur_);
      cur_ = std::move(fresh);
      if (spare_->block) spare_.reset();  // arena blocks go back to the arena
    }
    return cur_->vec;
  }

  /// A snapshot of the current values (no copy).
  snapshot share() {
    if (!view_) {
      cur_->in_view.store(true, std::memory_order_relaxed);
      std::shared_ptr<buffer> keep = cur_;
      view_ = std::shared_ptr<const void>(keep->data, [keep](const void*) {
        keep->in_view.store(false, std::memory_order_release);
      });
    }
    snapshot s;
    s.owner = view_;
    s.data = cur_->data;
    s.size = cur_->size;
    if (!cur_->block) s.vec = std::shared_ptr<const std::vector<double>>(view_, &cur_->vec);
    return s;
  }

  /// For a writer that replaces all n values: where to write them, never
  /// w's own buffer, so a round rejected after the write (a bad value found
  /// while summing) leaves w as it was; commit() makes them w. A block of
  /// `bulk`'s arena (the spare block when no snapshot still reads it, else
  /// a new one), or with no arena a vector.
  double* next_block(std::size_t n, net::BulkChannel* bulk) {
    if (next_ && !next_->block) spare_ = std::move(next_);  // a rejected round's
    next_ = nullptr;
    if (bulk != nullptr) {
      if (!(block_spare_ && !block_spare_->viewed() && block_spare_->size == n)) {
        block_spare_.reset();
        if (auto block = bulk->Allocate(n)) {
          block_spare_ = std::make_shared<buffer>();
          block_spare_->block = std::move(block->owner);
          block_spare_->data = block->data;
          block_spare_->size = n;
        }
      }
      if (block_spare_) {
        next_ = block_spare_;
        return next_->data;
      }
    }
    next_ = take_spare(n);
    return next_->data;
  }

  void commit() {
    view_.reset();
    std::shared_ptr<buffer> old = std::move(cur_);
    cur_ = std::move(next_);
    if (cur_ == block_spare_) block_spare_.reset();
    if (old->block) {
      block_spare_ = std::move(old);
    } else {
      spare_ = std::move(old);
    }
  }

 private:
  struct buffer {
    std::vector<double> vec;
    std::shared_ptr<void> block;  // set: the values are an arena block
    double* data = nullptr;
    std::size_t size = 0;
    std::atomic<bool> in_view{false};
    bool viewed() const { return in_view.load(std::memory_order_acquire); }
  };

  // A vector buffer of n values that no snapshot reads: the spare one (the
  // buffer a snapshot held last time, once its readers are done: no
  // allocation, no page faults in steady state), else a new one.
  std::shared_ptr<buffer> take_spare(std::size_t n) {
    std::shared_ptr<buffer> b = std::move(spare_);
    if (!b || b->block || b->viewed()) b = std::make_shared<buffer>();
    b->vec.resize(n);
    b->data = b->vec.data();
    b->size = n;
    return b;
  }

  std::shared_ptr<buffer> cur_ = std::make_shared<buffer>();
  std::shared_ptr<buffer> spare_, block_spare_, next_;
  std::shared_ptr<const void> view_;  // the current version's snapshot owner
};

}  // namespace dml::actors::internal
