// host_service: a host program embedding dml::Runtime: two jobs at once, progress streamed, one cancelled.
//
//   host_service [rows] [cols]
// Generates a classification problem, runs a cocoa job (logistic, to a 1e-6
// gap) and an async SGD job (hinge SVM, effectively endless) side by side in
// one runtime, prints both progress streams, cancels the SGD job once the
// cocoa job is done, and prints the model summary of each. Exit status 0
// when the cocoa job converged and the SGD job ended as cancelled.
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include "dml/actors/runtime.hpp"
#include "dml/data/synthetic.hpp"

namespace {

std::mutex print_mu;

void Show(const char* name, const dml::Progress& p) {
  std::lock_guard<std::mutex> lock(print_mu);
  std::printf("[%s] round %3d  %7.3fs  epochs %7.2f  primal %.8f  gap %.3e  bytes %" PRId64 "\n",
              name, p.round, p.seconds, p.epochs, p.primal, p.gap, p.bytes_exchanged);
}

void Summary(const char* name, const dml::TrainResult& r) {
  int nonzero = 0;
  double norm = 0.0;
  for (double w : r.w) {
    nonzero += w != 0.0;
    norm += w * w;
  }
  std::printf("%s: %s after %d rounds, %.2f epochs, %.3f s: primal %.8f gap %.3e, |w| %.4f, %d/%zu "
              "nonzero weights, %" PRId64 " bytes exchanged\n",
              name, std::string(dml::StopReasonName(r.reason)).c_str(), r.rounds, r.epochs, r.seconds,
              r.primal, r.gap, std::sqrt(norm), nonzero, r.w.size(), r.bytes_exchanged);
}

}  // namespace

int main(int argc, char** argv) {
  dml::SyntheticOptions g;
  g.rows = argc > 1 ? std::atoll(argv[1]) : 20000;
  g.cols = argc > 2 ? std::atoll(argv[2]) : 500;
  g.nnz_per_row = 20;
  g.noise = 0.2;
  g.task = dml::Task::kClassification;
  auto generated = dml::GenerateSynthetic(g);
  if (!generated.ok()) {
    std::fprintf(stderr, "host_service: %s\n", std::string(generated.status().message()).c_str());
    return 2;
  }
  auto data = std::make_shared<const dml::Dataset>(std::move(generated->data));

  dml::Runtime rt;
  dml::JobSpec cocoa;
  cocoa.data.dataset = data;
  cocoa.model = {dml::ModelKind::kLogisticL2, 1e-4, 0.5};
  cocoa.mode.kind = dml::Mode::kCocoa;
  cocoa.mode.workers = 2;
  cocoa.mode.shards = 2;
  cocoa.stop.gap_rel = 1e-6;

  dml::JobSpec sgd = cocoa;
  sgd.model = {dml::ModelKind::kHingeSvm, 1e-3, 0.5};
  sgd.mode.kind = dml::Mode::kAsync;
  sgd.stop.max_epochs = 1000000;
  sgd.sgd.eval_every_epochs = 2;
  sgd.sgd.step_decay = sgd.model.lambda * sgd.sgd.step0;

  auto a = rt.Submit(cocoa, [](const dml::Progress& p) { Show("cocoa", p); });
  auto b = rt.Submit(sgd, [](const dml::Progress& p) { Show("async", p); });
  if (!a.ok() || !b.ok()) {
    std::fprintf(stderr, "host_service: %s\n",
                 std::string((!a.ok() ? a.status() : b.status()).message()).c_str());
    return 2;
  }
  auto ra = a->Wait();
  b->Cancel();
  auto rb = b->Wait();
  if (!ra.ok() || !rb.ok()) {
    std::fprintf(stderr, "host_service: %s\n",
                 std::string((!ra.ok() ? ra.status() : rb.status()).message()).c_str());
    return 1;
  }
  Summary("cocoa (logistic)", *ra);
  Summary("async (svm, cancelled)", *rb);
  return ra->reason == dml::StopReason::kConverged && rb->reason == dml::StopReason::kCancelled ? 0 : 1;
}
