// Exact certificates of the sequential dual engine on a second thread, beside
// its epochs (DriveDualScd's Beside path). Internal: included by scd_dual.cpp.
//
// Why: near the end of a hinge run the primal at w(alpha) swings from epoch
// to epoch (w8a at a gap of 4e-6: 3e-6 to 8e-6 on consecutive epochs while
// the dual rises smoothly), so when a certificate is taken decides when the
// run stops; on one thread a certificate costs two passes over the data (as
// much as 20-30 of the epochs over the active set there), so they are spaced
// out and most of them miss. Beside the epochs they cost the epoch thread only
// the copy of the rows that changed, and one can follow another.
//
// Thread-safety: one owner thread calls every member; while a certificate is
// in flight the helper thread reads the snapshot and the data (never the
// engine's coordinates, whose cache lines the epochs write) and writes only
// its own w and result. Errors: none (Snapshot says false where the thread
// cannot start, and the engine then certifies on its own thread).
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

#include "dml/solver/internal/scd_dual_kernel.hpp"

namespace dml::internal {

template <typename Obj>
class BesideCertifier {
 public:
  /// `x`, `y` and the engine's coordinates outlive the certifier.
  BesideCertifier(const CsrMatrix& x, const std::vector<float>& y, double lambda)
      : x_(x),
        y_(y),
        lambda_(lambda),
        alpha_(static_cast<std::size_t>(x.rows()), 0.0),
        nc_(static_cast<std::size_t>(x.rows()), 0.0),
        shrunk_(static_cast<std::size_t>(x.rows()), 0),
        changed_(x.rows()),
        w_(static_cast<std::size_t>(x.cols()), 0.0) {}
  ~BesideCertifier() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      quit_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  BesideCertifier(const BesideCertifier&) = delete;
  BesideCertifier& operator=(const BesideCertifier&) = delete;

  /// No certificate in flight and none waiting for Poll: the snapshot may
  /// be written and a certificate started.
  bool Idle() const { return state_.load(std::memory_order_acquire) == kIdle; }

  /// Before each epoch over the block whose active rows are order[0, active).
  void EpochStarts(int64_t active) { changed_ = std::max(changed_, active); }

  /// Copies into the snapshot the coordinates that may have changed since
  /// the last one and certifies it on the helper thread (started on the
  /// first call), as of the end of `epoch` (which read `nnz`). Only while
  /// Idle(). False where that thread could not start (nothing in flight).
  bool Snapshot(const DualCoord* coords, const int64_t* order, int epoch, int64_t nnz) {
    // An epoch permutes and shrinks within its active prefix, and the
    // prefixes only shrink until an unshrink: the rows outside the largest
    // prefix since the last snapshot kept their values.
    for (int64_t k = 0; k < changed_; ++k) {
      const auto i = static_cast<std::size_t>(order[k]);
      alpha_[i] = coords[i].alpha;
      nc_[i] = coords[i].nc;
      shrunk_[i] = coords[i].shrunk ? 1 : 0;
    }
    changed_ = 0;
    if (!thread_.joinable()) {
      try {
        thread_ = std::thread([this] { Loop(); });
      } catch (const std::system_error&) {
        return false;
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      epoch_ = epoch;
      nnz_ = nnz;
      state_.store(kWorking, std::memory_order_release);
    }
    cv_.notify_one();
    return true;
  }

  /// A finished certificate (of the snapshot's alpha and w(alpha)), once;
  /// the certifier is then Idle().
  std::optional<BesideDone> Poll() {
    if (state_.load(std::memory_order_acquire) != kDone) return std::nullopt;
    BesideDone d{epoch_, nnz_, exact_};
    state_.store(kIdle, std::memory_order_release);
    return d;
  }
  /// Rows the next snapshot copies (tests).
  int64_t pending_rows() const { return changed_; }

  /// Ends the certificate in flight early (its result is dropped): a run
  /// cancelled or out of time does not wait for two passes it cannot use.
  void Abandon() {
    abandon_.store(true, std::memory_order_relaxed);
    Wait();
    abandon_.store(false, std::memory_order_relaxed);
  }

  /// Until no certificate is in flight; then as Poll().
  std::optional<BesideDone> Wait() {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return state_.load(std::memory_order_acquire) != kWorking; });
    }
    return Poll();
  }

  /// The snapshot's alpha and its w, as certified by the last Poll().
  std::vector<double> alpha() const { return alpha_; }
  std::vector<double> w() const { return w_; }

 private:
  enum State : int { kIdle, kWorking, kDone };

  void Loop() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return quit_ || state_.load() == kWorking; });
        if (quit_) return;
      }
      exact_ = Certify();
      {
        std::lock_guard<std::mutex> lock(mu_);
        state_.store(kDone, std::memory_order_release);
      }
      cv_.notify_all();
    }
  }

  // PrimalFromDual's sums in its order (so w is bitwise that vector), then
  // SumDualMargins' over the snapshot.
  DualExact Certify() {
    const int64_t n = x_.rows();
    const int64_t* off = x_.offsets().data();
    const uint32_t* idx = x_.indices().data();
    const float* val = x_.values().data();
    std::fill(w_.begin(), w_.end(), 0.0);  // sized once: no allocation on this thread
    for (int64_t i = 0; i < n; ++i) {
      if ((i & 4095) == 0 && abandon_.load(std::memory_order_relaxed)) return {};
      const double a = alpha_[i];
      if (a == 0.0) continue;
      for (int64_t k = off[i]; k < off[i + 1]; ++k) w_[idx[k]] += a * static_cast<double>(val[k]);
    }
    const double scale = 1.0 / (lambda_ * static_cast<double>(n));
    double wsq = 0.0;
    for (double& wj : w_) {
      wj *= scale;
      wsq += wj * wj;
    }
    DualMarginSums s;
    for (int64_t i = 0; i < n; ++i) {
      if ((i & 4095) == 0 && abandon_.load(std::memory_order_relaxed)) return {};
      const auto len = static_cast<uint32_t>(off[i + 1] - off[i]);
      const double z = SparseDot<false>(idx + off[i], val + off[i], len, w_.data());
      double li, gi;
      Obj::LossAndGap(y_[i], alpha_[i], z, &li, &gi);
      s.loss += li;
      s.gap += gi;
      s.nc += nc_[i];
      if (shrunk_[i]) s.shrunk_gap += gi;
    }
    return DualExactFrom(s, wsq, lambda_, n);
  }

  const CsrMatrix& x_;
  const std::vector<float>& y_;
  double lambda_;
  std::vector<double> alpha_;  // the snapshot
  std::vector<double> nc_;
  std::vector<uint8_t> shrunk_;
  int64_t changed_;        // order[0, changed_) may differ from the snapshot
  std::vector<double> w_;  // w(alpha_) of the last certificate
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int> state_{kIdle};
  std::atomic<bool> abandon_{false};
  bool quit_ = false;
  int epoch_ = 0;
  int64_t nnz_ = 0;
  DualExact exact_;
  std::thread thread_;  // last: joined before the rest goes
};

}  // namespace dml::internal
