#pragma once
// The state a job handle shares with its coordinator actor. No CAF types:
// a handle may outlive the runtime (and its actor system) that ran the job.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dml/actors/runtime.hpp"

namespace dml::detail {

struct job_state {
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  absl::StatusOr<TrainResult> result{absl::UnknownError("job still running")};
  std::vector<Progress> unpolled;
  std::function<void(const Progress&)> on_progress;
  /// Set by job::cancel() and by ~runtime; the coordinator polls it.
  std::atomic<bool> cancel{false};
  /// Set with `cancel` (and by the coordinator on other outside stops):
  /// in-process cocoa solves check it, so a cancel reaches them even while
  /// they occupy every scheduler thread.
  std::shared_ptr<std::atomic<bool>> interrupt = std::make_shared<std::atomic<bool>>(false);
  /// RuntimeOptions::cluster_secret, for the coordinator's member of a
  /// hogwild job's key-value group on nodes (the nodes use their own).
  std::string cluster_secret;

  void request_cancel() {
    cancel.store(true);
    interrupt->store(true);
  }

  void publish(const Progress& p) {
    {
      std::lock_guard<std::mutex> lock(mu);
      unpolled.push_back(p);
    }
    if (on_progress) on_progress(p);
  }

  void finish(absl::StatusOr<TrainResult> r) {
    std::lock_guard<std::mutex> lock(mu);
    if (finished) return;
    result = std::move(r);
    finished = true;
    cv.notify_all();
  }
};

}  // namespace dml::detail
