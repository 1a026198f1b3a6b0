// dml-train: trains a linear model on a LIBSVM file or generated data and prints per-epoch progress.
//
//   dml-train [options] [data.libsvm]     (every flag and its default: kUsage, --help)
//
// Exit status: 0 on success, 2 on a bad flag or bad data, 1 if training failed
// (or --mode's dml-train-runtime could not be run).
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <limits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "dml/net/local_cluster.hpp"
#include "dml/net/payload_codec.hpp"
#ifndef DML_TRAIN_ONE_PROCESS
#include "dml/actors/runtime.hpp"
#endif
#include "dml/data/cache.hpp"
#include "dml/data/libsvm.hpp"
#include "dml/data/synthetic.hpp"
#include "dml/metrics/metrics.hpp"
#include "dml/metrics/progress_text.hpp"
#include "dml/net/admission.hpp"
#include "dml/objective/model.hpp"
#include "dml/objective/liblinear_model.hpp"
#include "dml/objective/model_io.hpp"
#include "dml/util/status.hpp"
#include "cli_flags.hpp"
#include "dml/gpu/tpa_scd.hpp"
#include "dml/solver/duhl.hpp"
#include "dml/solver/solver.hpp"

namespace {

using dml::samples::Args;
using dml::samples::Get;
using dml::samples::Number;
using dml::samples::ParseArgs;
using dml::samples::ParseNumber;
using dml::samples::SameFile;

// Flags that take a value; the switches (--quiet, --resume, --svrg, ...) are in main.
const char* const kValueFlags[] = {"-c", "-e", "-o", "-s", "-B", "--lambda", "--tol", "--model", "--l1-ratio",
                                   "--solver", "--threads", "--device", "--epochs", "--time-budget",
                                   "--generate", "--nnz-per-row", "--noise", "--scale-decades", "--seed", "--test",
                                   "--binarize", "--cache", "--output", "--liblinear-model", "--metrics-out",
                                   "--model-format", "--eval-every", "--eval-pacing", "--mode",
                                   "--workers", "--shards", "--batch", "--step", "--certificate-cg", "--feature-steps", "--staleness",
                                   "--tau", "--local-epochs", "--gamma", "--nodes",
                                   "--local-nodes", "--checkpoint", "--checkpoint-every",
                                   "--node-silence", "--secret-file", "--tls-cert", "--tls-key",
                                   "--tls-ca", "--device-memory", "--selection", "--gap-threads",
                                   "--local", "--store", "--kv-block"};

int Fail(const std::string& msg) {
  std::fflush(stdout);  // what was printed comes before the error, also when piped
  std::fprintf(stderr, "dml-train: %s\n", msg.c_str());
  return 2;
}

// The runtime names a bad JobSpec field ("JobSpec.sgd.store: ..."); a CLI
// user set it with a flag, so the message leads with that flag and keeps the
// field in parentheses. Messages of other fields pass unchanged.
std::string ForCli(absl::string_view msg, bool local_nodes = false) {
  static const std::pair<absl::string_view, absl::string_view> kFlags[] = {
      {"mode.kind", "--mode"},
      {"mode.workers", "--workers"},
      {"mode.shards", "--shards"},
      {"stop.max_epochs", "--epochs"},
      {"sgd.batch_size", "--batch"},
      {"sgd.step0", "--step"},
      {"sgd.certificate_cg_steps", "--certificate-cg"},
      {"sgd.eval_every_epochs", "--eval-every"},
      {"sgd.staleness", "--staleness"},
      {"sgd.tau", "--tau"},
      {"sgd.svrg", "--svrg"},
      {"sgd.saga", "--saga"},
      {"sgd.store", "--store"},
      {"sgd.localize", "--localize"},
      {"sgd.kv_block", "--kv-block"},
      {"cocoa.local_epochs", "--local-epochs"},
      {"cocoa.gamma", "--gamma"},
      {"cocoa.local_solver", "--local"},
      {"cocoa.device", "--device"},
      {"cocoa.duhl.device_bytes", "--device-memory"},
      {"cocoa.duhl.device_fraction", "--device-memory"},
      {"cocoa.duhl.gap_threads", "--gap-threads"},
      {"recovery.checkpoint_every", "--checkpoint-every"},
      {"recovery.node_silence_seconds", "--node-silence"},
      {"recovery.path", "--checkpoint"},
      {"recovery.resume", "--resume"},
      {"cluster.nodes", "--nodes"},
  };
  constexpr absl::string_view kPrefix = "JobSpec.";
  const std::size_t colon = msg.find(": ");
  if (!absl::StartsWith(msg, kPrefix) || colon == absl::string_view::npos) {
    return std::string(msg);
  }
  // "cluster.nodes[2] (host:port)": the field, then which of its entries.
  const absl::string_view named = msg.substr(kPrefix.size(), colon - kPrefix.size());
  const absl::string_view field = named.substr(0, named.find_first_of("[ "));
  for (const auto& [f, named_flag] : kFlags) {
    if (f == field) {
      // The nodes of --local-nodes are this run's own.
      const absl::string_view flag =
          local_nodes && field == "cluster.nodes" ? absl::string_view("--local-nodes") : named_flag;
      return absl::StrCat(flag, named.substr(field.size()), ": ", msg.substr(colon + 2), " (JobSpec.",
                          field, ")");
    }
  }
  return std::string(msg);
}

// Every numeric flag's range, checked before any data is read: a bad value
// costs no load. (The library and the runtime check them again, by field.)
struct Range {
  const char* flag;
  double lo, hi;
  bool lo_open;  // lo itself is refused
  const char* what;
};
constexpr Range kRanges[] = {
    {"-c", 0, 1e300, true, "must be positive"},
    {"--lambda", 0, 1e300, true, "must be positive"},
    {"--l1-ratio", 0, 1, true, "must be in (0, 1]"},
    {"-e", 0, 1e300, false, "must be >= 0"},
    {"--tol", 0, 1e300, false, "must be >= 0"},
    {"--epochs", 1, 1e9, false, "must be >= 1"},
    {"--time-budget", 0, 1e300, true, "must be positive"},
    {"--threads", 1, 1024, false, "must be in [1, 1024]"},
    {"--gap-threads", 0, 1024, false, "must be in [0, 1024]"},
    {"--device", 0, 2147483647, false, "must be a device number >= 0"},
    {"--eval-every", 0, 1e9, false, "must be >= 0"},
    {"--eval-pacing", 0, 0.999, false, "must be in [0, 1)"},
    {"--batch", 1, 16777216, false, "must be in [1, 16777216]"},
    {"--step", 0, 1e300, true, "must be positive"},
    {"--certificate-cg", -1, 1000, false, "must be in [-1, 1000]"},
    {"--feature-steps", 0, 1, false, "must be 0 or 1"},
    {"--workers", 1, 4096, false, "must be in [1, 4096]"},
    {"--shards", 1, 4096, false, "must be in [1, 4096]"},
    {"--staleness", 0, 1e9, false, "must be >= 0"},
    {"--tau", 1, 1e9, false, "must be >= 1"},
    {"--kv-block", 1, 1e12, false, "must be >= 1"},
    {"--local-epochs", 0, 1e6, true, "must be positive"},
    {"--gamma", 0, 1, true, "must be in (0, 1]"},
    {"--local-nodes", 1, 64, false, "must be in [1, 64]"},
    {"--node-silence", 0.1, 3600, false, "must be in [0.1, 3600]"},
    {"--checkpoint-every", 0, 1e9, false, "must be >= 0"},
    {"--nnz-per-row", 1, 1e9, false, "must be >= 1"},
    {"--noise", 0, 1e300, false, "must be >= 0"},
    {"--scale-decades", 0, 30, false, "must be in [0, 30]"},
};

bool CheckRanges(const Args& args, std::string& error) {
  for (const Range& r : kRanges) {
    if ((std::string(r.flag) == "--local-epochs" || std::string(r.flag) == "--step") &&
        Get(args, r.flag) == "auto") {
      continue;
    }
    double v = 0;
    if (!Number(args, {r.flag}, v, error)) return false;
    if (!args.values.count(r.flag)) continue;
    if (v < r.lo || v > r.hi || (r.lo_open && v == r.lo)) {
      // The shortest text that reads back as the value (%g made 2147483647
      // "2.14748e+09"); a bound the rule's words do not state is named.
      auto shortest = [](double x) {
        char buf[64];
        const auto res = std::to_chars(buf, buf + sizeof buf, x);
        return std::string(buf, res.ptr);
      };
      const std::string what = r.what;
      const bool states_hi = what.find(']') != std::string::npos || what.find(')') != std::string::npos ||
                             what.find(" 0 or ") != std::string::npos;
      error = std::string(r.flag) + ": " +
              (v > r.hi && !states_hi ? "at most " + shortest(r.hi) : what) + ", got " +
              shortest(v);
      return false;
    }
  }
  return true;
}

constexpr const char* kUsage = R"(usage: dml-train [options] [data.libsvm]      train on a LIBSVM file (.gz .bz2 .xz too)
       dml-train [options] --generate RxC       or on generated data with a planted model
Model and stopping:
  --model NAME        ridge lasso elastic-net logistic logistic-l1 svm svm-squared (logistic)
  -s N                LIBLINEAR's solver number instead of --model: 0, 7 logistic; 1, 2 svm-squared;
                      3 svm; 6 logistic-l1 (the others are refused by name)
  -c C | --lambda L   regularization: LIBLINEAR's C (lambda = 1/(C n)) or lambda (1e-4)
  --l1-ratio ETA      elastic net's mix of L1 in (0, 1] (0.5)
  -B b                append a constant feature b to every example, as LIBLINEAR's -B (none)
  -e TOL | --tol TOL  stop when the duality gap <= TOL * |primal| (1e-6); unlike LIBLINEAR's -e
                      this bounds the objective's relative suboptimality
  --epochs N          at most N epochs (newton: iterations) (1000)
  --time-budget S     at most S seconds (none)
Solver (one process, without --mode):
  --solver NAME       auto: newton for ridge, logistic, svm-squared, and svm on features in
                      units spread over orders of magnitude (no more features than
                      examples), else scd (the default);
                      newton (truncated Newton, any feature scales; svm: on a smoothed
                      hinge, cut in stages), scd (coordinate
                      descent), async-scd (lock-free threads), sgd (auto), tpa-scd
                      (asynchronous SCD on a GPU; says which device ran)
  --device N          tpa-scd: the CUDA device (0)
  --gpu-fallback      tpa-scd: without CUDA, a device or enough device memory, run its CPU
                      twin (async-scd on all cores) and say why, instead of failing
  --threads T         newton and async-scd threads, and the parser's (2; parser: every core)
  --eval-every N      exact certificate every N epochs (SCD: every N passes' worth of work, an
                      epoch on a shrunk set counting its share; paced, below); 0 = when the
                      estimate says done (1; with --mode: N > 0)
  --eval-pacing R     SCD, newGLMNET: a periodic certificate also waits until the work since
                      the last is R times all the work so far (certificates stay a small part
                      of long runs; the estimate still triggers one as soon as it says done);
                      0 = every N exactly (0.25)
  --batch B --step S0 SGD minibatch and first step, here and in the SGD modes (auto: rows /
                      (32 K) within [1, 64]; auto: calibrated on a sample); the step then
                      falls as 1/(lambda t), and the average of the evaluated iterates is
                      certified beside the iterate
  --feature-steps 0|1 SGD: per-feature steps, about 1 / (the feature's mean square + lambda) (1)
  --certificate-cg N  SGD's certificate for ridge, logistic, squared hinge: a Newton-refined
                      dual point, N conjugate-gradient passes at most; -1: the plain one (16)
DuHL (a device holding part of the data; without --solver tpa-scd, its CPU twin):
  --mode duhl         a device worker: each round it solves a block of coordinates chosen
                      by their duality gaps, kept fresh by the CPU threads of a gap-memory
                      actor beside it; --workers K adds K-1 CPU workers on the rest of the
                      data (1: the device alone); cocoa's rounds, shards, --checkpoint and
                      --nodes apply; done: ends with device_bytes=N
  --device-memory M   the device's budget: a percentage of the data (10%) or bytes (10%)
  --selection R       gap (sampled by gap), gap-greedy, random, sequential, resident (gap)
  --gap-threads N     threads refreshing the gaps while the device solves (1)
  --solver tpa-scd    the device is a GPU: TPA-SCD on the block, which stays there between
                      rounds; only new rows (columns) are copied (--device, --gpu-fallback)
  --mode cocoa --local duhl  the same as cocoa's local solver on every worker's block (with
                      --solver tpa-scd: the blocks on the GPUs of the workers' processes)
Distributed (the actor runtime):
  --mode M            sync async ssp easgd hogwild model-averaging cocoa duhl (none: one process)
  --workers K         workers (2)
  --shards S          parameter shards (1)
  --staleness s       ssp: the staleness bound (2)
  --svrg              sync, async, ssp: SVRG steps, each evaluation's model the snapshot (off)
  --saga              sync, async, ssp: SAGA steps (async: ASAGA), each row's last gradient
                      remembered by its worker, their mean kept by the shards (off)
  --store memory|kv   hogwild: the shared model in this process's memory, or in a key-value
                      store with one node per worker (on --nodes: one per node), each worker
                      on its own rows (memory)
  --localize          --store kv: each worker moves its next minibatch's columns to its node
                      while it computes this one (off)
  --kv-block B        --store kv: columns per ownership block (1)
  --tau T             easgd, model-averaging: local steps per exchange (easgd 8; model
                      averaging auto: at least 8, enough that the model exchanged is no
                      larger than the data read)
  --local-epochs H    cocoa: local epochs per round, or auto (chosen while running, from 1) (1)
  --gamma G           cocoa: aggregation, 1 = adding (1)
  --nodes H:P,...     run the workers and shards on these dml-node processes (none: in-process)
  --local-nodes N     start N dml-node processes on loopback for this job (none)
  --secret-file PATH  the cluster secret of nodes started with --secret-file (none)
  --tls-cert PEM --tls-key PEM [--tls-ca PEM]  TLS to the nodes (they need the same flags)
  --node-silence S    a node silent this long counts as lost (10)
  --checkpoint PATH   write checkpoints there (Cap'n Proto) (none)
  --checkpoint-every N  cocoa: rounds between checkpoints (10; 0: none); SGD modes: every evaluation
  --resume            continue from --checkpoint PATH
Data and output:
  --test FILE         also report accuracy/AUC/log-loss (or RMSE/R^2) on this file
  --binarize T        classification from a multi-class file: label > T is +1 (none)
  --cache PATH        load through a binary cache (none)
  --generate RxC      generated data instead of a file; --nnz-per-row K (10) --noise S (0.1)
                      --scale-decades D: features in units spread over D decades (0)
  --seed N            generator and solver seed (1)
  -o | --output PATH  write the model (none)
  --model-format F    text (dml/objective/model_io.hpp) or capnp (ModelFile of net/dml/net/wire.capnp) (text)
  --liblinear-model PATH  also write it in LIBLINEAR's format (none)
  --metrics-out FILE  JSON lines: the job, progress, events, result (none); scripts/dml-plot draws them
  --quiet | -q        only the final summary
  --verbose           also the runtime's transport counters and the memory setting
Environment: with a data file of 1 MiB or more, dml-train restarts itself once with
GLIBC_TUNABLES adding glibc.malloc.hugetlb=1 (transparent huge pages, where the kernel
gives them on request), mmap_threshold=32 MiB, top_pad=16 MiB and trim_threshold=256 MiB
(tunables already set are kept); DML_TRAIN_HUGE_PAGES=0 keeps it as started.
Exit status: 0 on success, 2 on a bad flag or bad data, 1 if training failed
(or --mode's dml-train-runtime, next to dml-train, could not be run).
)";

void PrintUsage() { std::fputs(kUsage, stdout); }

// --metrics-out (dml/metrics/progress_text.hpp): the job's line first, then
// every progress entry and event, the result last; flushed per line, so it
// is readable while the job runs. The callbacks never overlap.
class MetricsFile {
 public:
  bool Open(const std::string& path) {
    f_.reset(std::fopen(path.c_str(), "w"));
    return f_ != nullptr;
  }
  bool active() const { return f_ != nullptr; }
  void Job(const std::string& fields) { Line(absl::StrCat("{\"type\":\"job\",", fields, "}")); }
  void Write(const dml::Progress& p) {
    for (const auto& l : dml::ProgressJsonLines(p)) Line(l);
  }
  void Result(const dml::TrainResult& r) { Line(dml::ResultJson(r)); }
  /// The first write error (a full disk), or empty; checked at the end.
  const std::string& error() const { return error_; }

 private:
  void Line(const std::string& json) {
    if (!f_ || !error_.empty()) return;
    if (std::fputs(json.c_str(), f_.get()) < 0 || std::fputc('\n', f_.get()) == EOF ||
        std::fflush(f_.get()) != 0) {
      error_ = std::strerror(errno);
    }
  }
  std::unique_ptr<FILE, int (*)(FILE*)> f_{nullptr, &std::fclose};
  std::string error_;
};

// On a terminal: the status line rewritten in place; events above it.
class StatusLine {
 public:
  explicit StatusLine(const dml::StopRule& stop) : estimate_(stop) {}
  void Show(const dml::Progress& p) {
    for (const auto& e : p.events) std::printf("\r\033[K%s\n", e.what.c_str());
    std::printf("\r\033[K%s", estimate_.StatusLine(p).c_str());
    std::fflush(stdout);
  }

 private:
  dml::ProgressEstimate estimate_;
};

// What the steps of main share.
struct Run {
  Args args;
  bool quiet = false;
  bool tty = false;
  dml::ModelSpec spec;
  dml::Task task = dml::Task::kClassification;
  dml::SolverOptions opt;
  // Parsed once: the training and the --test file must agree on label mapping.
  dml::LibsvmOptions load_opts;
  dml::Dataset data;
  std::string source;
  double bias = -1;  // -B: a constant feature of this value appended to every example
  std::shared_ptr<MetricsFile> metrics = std::make_shared<MetricsFile>();
  // --mode duhl or --local duhl: their flags, parsed before any data is read.
  std::optional<dml::DuhlOptions> duhl;
};

// SIGINT, SIGTERM and SIGHUP (a closed terminal). While training, the first
// one cancels the run, which
// ends with the model trained so far: it is reported and written as after
// any run (-o, --liblinear-model), and the exit status is 128 + the signal.
// Before training nothing is lost and the process ends at once; so does it on
// a second signal. Either way the temporary files and directories it made
// (--local-nodes' logs, nodes' data) are removed. The signals are blocked in
// every thread and taken by one thread of their own (sigwait), so the
// runtime's threads never see them; a signal the parent set to be ignored
// (a background job of a script) stays ignored.
class Interrupts {
 public:
  // Call before any other thread starts (the mask is inherited).
  static void Install() {
    // Never destroyed: the signal thread may take a signal while the process
    // exits.
    auto* self = new Interrupts;
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction now {};
      if (sigaction(sig, nullptr, &now) == 0 && now.sa_handler == SIG_IGN) continue;
      sigaddset(&set, sig);
    }
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    ::signal(SIGPIPE, SIG_IGN);  // a closed stdout fails the writes: OutputClosed
    instance_ = self;
    std::thread([set, self] {
      for (;;) {
        int sig = 0;
        if (sigwait(&set, &sig) != 0) continue;
        self->Take(sig);
      }
    }).detach();
  }
  // Training has begun: a signal calls `cancel` (from the signal thread).
  static void Training(std::function<void()> cancel) {
    if (instance_ == nullptr) return;
    std::lock_guard<std::mutex> lock(instance_->mu_);
    instance_->cancel_ = std::move(cancel);
  }
  // Training has ended (its result is being reported and written).
  static void Trained() {
    if (instance_ == nullptr) return;
    std::lock_guard<std::mutex> lock(instance_->mu_);
    instance_->cancel_ = nullptr;
    instance_->trained_ = true;
  }
  // A path to remove if a signal ends the process before its owner does;
  // Forget it once the owner removed it.
  // `directory`: removed with what it holds (else a file alone: a directory
  // of that name is someone else's).
  static void RemoveOnExit(std::string path, bool directory = false) {
    if (instance_ == nullptr || path.empty()) return;
    std::lock_guard<std::mutex> lock(instance_->mu_);
    instance_->paths_.push_back({std::move(path), directory});
  }
  static void Forget(const std::string& path) {
    if (instance_ == nullptr) return;
    std::lock_guard<std::mutex> lock(instance_->mu_);
    auto& v = instance_->paths_;
    v.erase(std::remove_if(v.begin(), v.end(), [&](const Registered& r) { return r.path == path; }),
            v.end());
  }
  // Files whose names start with `prefix` (in its directory), removed as
  // the paths are: a library's temporary files named after this process.
  static void RemovePrefixOnExit(std::string prefix) {
    if (instance_ == nullptr || prefix.empty()) return;
    std::lock_guard<std::mutex> lock(instance_->mu_);
    instance_->prefixes_.push_back(std::move(prefix));
  }
  // Standard output was closed by its reader (`| head`; SIGPIPE is ignored
  // so that the writes fail instead of killing the process): taken as that
  // signal, from the thread that wrote.
  static void OutputClosed() {
    if (instance_ != nullptr) instance_->Take(SIGPIPE, /*repeat_ends=*/false);
  }
  // The signal that stopped training, or 0.
  static int Received() { return instance_ == nullptr ? 0 : instance_->received_.load(); }
  static const char* Name(int sig) {
    return sig == SIGINT    ? "SIGINT"
           : sig == SIGHUP  ? "SIGHUP"
           : sig == SIGPIPE ? "closed standard output"
                            : "SIGTERM";
  }

 private:
  // `repeat_ends`: a second one ends the process (a signal; not every
  // failed write of a closed output).
  void Take(int sig, bool repeat_ends = true) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!repeat_ends && received_ != 0) return;
    if (received_ == 0 && (cancel_ || trained_)) {
      received_ = sig;
      const bool trained = trained_;
      if (cancel_) cancel_();  // under the lock: Trained() cannot end the run's life meanwhile
      lock.unlock();
      std::fprintf(stderr, "dml-train: %s: %s (a second signal ends it at once)\n", Name(sig),
                   trained ? "writing what was trained" : "stopping; the model trained so far is kept");
      return;
    }
    const bool before = received_ == 0 && !trained_;
    std::error_code ignored;
    for (const Registered& r : paths_) {
      if (r.directory) {
        std::filesystem::remove_all(r.path, ignored);
      } else if (!std::filesystem::is_directory(r.path, ignored)) {
        std::filesystem::remove(r.path, ignored);
      }
    }
    for (const std::string& prefix : prefixes_) {
      const std::filesystem::path full(prefix);
      const std::string stem = full.filename().string();
      const std::filesystem::path dir = full.has_parent_path() ? full.parent_path() : ".";
      // No exceptions on this thread: every step takes an error code.
      std::filesystem::directory_iterator it(dir, ignored), end;
      for (; !ignored && it != end; it.increment(ignored)) {
        std::error_code e2;
        if (it->path().filename().string().rfind(stem, 0) == 0 && it->is_regular_file(e2)) {
          std::filesystem::remove(it->path(), e2);
        }
      }
    }
    std::fprintf(stderr, "dml-train: %s: stopped%s\n", Name(sig), before ? " before training" : "");
    std::_Exit(128 + sig);
  }
  static inline Interrupts* instance_ = nullptr;
  std::mutex mu_;
  std::function<void()> cancel_;
  bool trained_ = false;
  std::atomic<int> received_{0};
  struct Registered {
    std::string path;
    bool directory = false;
  };
  std::vector<Registered> paths_;
  std::vector<std::string> prefixes_;
};

// A temporary file registered with Interrupts (removed if a signal ends
// the process) while this lives: one a write in this scope may leave.
class InterruptibleTemp {
 public:
  explicit InterruptibleTemp(std::string path) : path_(std::move(path)) {
    Interrupts::RemoveOnExit(path_);
  }
  ~InterruptibleTemp() { Interrupts::Forget(path_); }
  InterruptibleTemp(const InterruptibleTemp&) = delete;
  InterruptibleTemp& operator=(const InterruptibleTemp&) = delete;

 private:
  std::string path_;
};

// Flushes the progress lines; where their reader is gone (EPIPE), stops
// the run as a signal would, keeping what was trained.
void FlushOrStop() {
  if (std::fflush(stdout) != 0 && errno == EPIPE) Interrupts::OutputClosed();
}

#ifndef DML_TRAIN_ONE_PROCESS
// $TMPDIR, else /tmp: where temporary files go.
std::string TempDir() {
  const char* t = std::getenv("TMPDIR");
  return t != nullptr && *t != '\0' ? t : "/tmp";
}
#endif

// An exit status to return now, or nothing to go on.
using Exit = std::optional<int>;

Exit ParseModelAndSolver(Run& run) {
  std::string error;
  absl::StatusOr<dml::ModelKind> kind = dml::ParseModelKind(Get(run.args, "--model", "logistic"));
  if (run.args.values.count("-s")) {
    // LIBLINEAR's solver numbers name the model (the solver stays ours).
    if (run.args.values.count("--model")) return Fail("-s and --model both name the model: give one");
    int s = 0;
    if (!Number(run.args, {"-s"}, s, error)) return Fail(error);
    kind = dml::ModelOfLiblinearSolver(s);
  }
  if (!kind.ok()) return Fail(std::string(kind.status().message()));
  run.spec.kind = *kind;
  if (!Number(run.args, {"-B"}, run.bias, error)) return Fail(error);
  if (run.args.values.count("-B") && !(run.bias >= 0)) {
    return Fail("-B: expected a bias value >= 0 (LIBLINEAR's -B; -1, the default, means none)");
  }
  // The bias becomes a feature value, a float: 1e40 was an infinite column.
  if (run.bias > static_cast<double>(std::numeric_limits<float>::max())) {
    return Fail(absl::StrCat("-B: ", run.bias, " is beyond a float's range (at most ",
                             std::numeric_limits<float>::max(), ")"));
  }
  run.task = dml::TaskOf(run.spec.kind);
  run.opt.threads = 2;
  auto solver = dml::ParseSolverKind(Get(run.args, "--solver", "auto"));
  if (!solver.ok()) return Fail(std::string(solver.status().message()));
  run.opt.kind = *solver;
  int feature_steps = 1;
  if (!Number(run.args, {"--threads"}, run.opt.threads, error) ||
      !Number(run.args, {"--epochs"}, run.opt.stop.max_epochs, error) ||
      !Number(run.args, {"-e", "--tol"}, run.opt.stop.gap_rel, error) ||
      !Number(run.args, {"--time-budget"}, run.opt.stop.max_seconds, error) ||
      !Number(run.args, {"--seed"}, run.opt.seed, error) ||
      !Number(run.args, {"--eval-every"}, run.opt.eval_every, error) ||
      !Number(run.args, {"--eval-pacing"}, run.opt.eval_pacing, error) ||
      !Number(run.args, {"--l1-ratio"}, run.spec.l1_ratio, error) ||
      !Number(run.args, {"--batch"}, run.opt.sgd.batch_size, error) ||
      (Get(run.args, "--step") != "auto" &&
       !Number(run.args, {"--step"}, run.opt.sgd.step0, error)) ||
      !Number(run.args, {"--certificate-cg"}, run.opt.sgd.certificate_cg_steps, error) ||
      !Number(run.args, {"--feature-steps"}, feature_steps, error)) {
    return Fail(error);
  }
  run.opt.sgd.feature_steps = feature_steps == 1;
  run.load_opts.task = run.task;
  // --threads bounds the parser too (by default it takes every core): a
  // run asked for one thread uses one.
  if (run.args.values.count("--threads")) run.load_opts.threads = run.opt.threads;
  if (run.args.values.count("--binarize")) {
    double threshold = 0;
    if (!Number(run.args, {"--binarize"}, threshold, error)) return Fail(error);
    if (run.task != dml::Task::kClassification) {
      return Fail("--binarize: model " + std::string(dml::ModelName(run.spec.kind)) +
                  " is a regression; the threshold would be ignored");
    }
    run.load_opts.binarize_threshold = threshold;
  }
  return std::nullopt;
}

// Data: a file, or generated with a planted model; then lambda (from -c
// needs the example count).
Exit LoadData(Run& run) {
  std::string error;
  const Args& args = run.args;
  if (args.values.count("--generate")) {
    dml::SyntheticOptions g;
    g.task = run.task;
    g.noise = 0.1;
    g.seed = run.opt.seed;
    const std::string shape = Get(args, "--generate");
    const auto x = shape.find('x');
    if (x == std::string::npos || !ParseNumber(shape.substr(0, x), g.rows) ||
        !ParseNumber(shape.substr(x + 1), g.cols)) {
      return Fail("--generate: expected ROWSxCOLS, e.g. 10000x500, got \"" + shape + "\"");
    }
    if (!Number(args, {"--nnz-per-row"}, g.nnz_per_row, error) ||
        !Number(args, {"--noise"}, g.noise, error) ||
        !Number(args, {"--scale-decades"}, g.scale_decades, error)) {
      return Fail(error);
    }
    auto s = dml::GenerateSynthetic(g);
    if (!s.ok()) return Fail(std::string(s.status().message()));
    run.data = std::move(s->data);
    run.source = "generated " + shape;
  } else {
    if (args.positional.size() != 1) {
      return Fail("expected one data file or --generate RxC (see --help)");
    }
    run.source = args.positional[0];
    std::string rebuilt;
    // LoadWithCache writes CACHE.tmp.<pid>.<n> and renames it.
    if (args.values.count("--cache")) {
      Interrupts::RemovePrefixOnExit(Get(args, "--cache") + ".tmp." + std::to_string(::getpid()) + ".");
    }
    auto d = args.values.count("--cache")
                 ? dml::LoadWithCache(run.source, Get(args, "--cache"), run.load_opts, &rebuilt)
                 : dml::ReadLibsvm(run.source, run.load_opts);
    if (!d.ok()) return Fail(std::string(d.status().message()));
    // A cache that could not be used is rebuilt from the text; say why
    // (missing, stale, or corrupt: a disk that corrupts it is worth knowing).
    if (!rebuilt.empty() && !run.quiet) std::printf("cache: built from the text (%s)\n", rebuilt.c_str());
    run.data = *std::move(d);
    // A model of one class cannot say which label its other side is (its
    // file records two), and dml-predict would have to guess it.
    if (run.task == dml::Task::kClassification && !run.data.y.empty() &&
        (std::all_of(run.data.y.begin(), run.data.y.end(), [](float v) { return v > 0; }) ||
         std::all_of(run.data.y.begin(), run.data.y.end(), [](float v) { return v < 0; }))) {
      return Fail(absl::StrCat(run.source, ": all ", run.data.y.size(),
                               " examples are of one class (", run.data.y[0] > 0 ? "+1" : "-1",
                               "); a classifier needs examples of two classes"));
    }
  }
  if (run.bias >= 0) {
    run.data.x = dml::WithConstantColumn(run.data.x, static_cast<float>(run.bias), run.data.x.cols());
  }
  const int64_t n = run.data.x.rows();
  double c = 0;
  if (!Number(args, {"-c"}, c, error) || !Number(args, {"--lambda"}, run.spec.lambda, error)) {
    return Fail(error);
  }
  if (args.values.count("-c")) {
    if (!(c > 0)) return Fail("-c: expected a positive number");
    run.spec.lambda = dml::LambdaFromC(c, n);
    if (!std::isfinite(run.spec.lambda) || !(run.spec.lambda > 0)) {
      return Fail(absl::StrCat("-c: ", c, " with ", n, " examples makes lambda = 1/(C n) = ",
                               run.spec.lambda, ", not a positive finite number"));
    }
  }
  if (!run.quiet) {
    std::printf("data: %s: %lld examples, %lld features, %lld nonzeros\n", run.source.c_str(),
                static_cast<long long>(n), static_cast<long long>(run.data.x.cols()),
                static_cast<long long>(run.data.x.nnz()));
    std::string solver = absl::StrCat("; solver ", dml::AsAbsl(dml::SolverName(run.opt.kind)));
    dml::SolverKind runs = run.opt.kind;
    if (runs == dml::SolverKind::kAuto) {
      runs = dml::AutoSolver(run.spec, run.data, run.opt.threads);
      absl::StrAppend(&solver, ": ", dml::AsAbsl(dml::SolverName(runs)));
    }
    if (runs == dml::SolverKind::kAsyncScd || runs == dml::SolverKind::kNewton) {
      absl::StrAppend(&solver, ", ", run.opt.threads, " threads");
    }
    if (args.values.count("--mode")) solver.clear();  // the runtime line says what trains
    std::printf("model: %s, lambda %.6g%s\n", std::string(dml::ModelName(run.spec.kind)).c_str(),
                run.spec.lambda, solver.c_str());
  }
  return std::nullopt;
}

// The entries of --nodes H:P,..., empty ones kept (CheckNodeList names them).
std::vector<std::string> NodeEntries(const Args& args) {
  return absl::StrSplit(Get(args, "--nodes"), ',');
}

#ifndef DML_TRAIN_ONE_PROCESS
// The job's nodes: given (--nodes), started here on loopback
// (--local-nodes, kept in `cluster`), or none.
Exit ChooseNodes(const Run& run, dml::JobSpec& job,
                 std::optional<dml::net::LocalCluster>& cluster) {
  std::string error;
  const Args& args = run.args;
  int local_nodes = 0;
  if (!Number(args, {"--local-nodes"}, local_nodes, error)) return Fail(error);
  if (args.values.count("--local-nodes")) {
    if (local_nodes < 1) return Fail("--local-nodes: expected a number >= 1");
    std::vector<std::string> node_args;
    if (args.values.count("--secret-file")) {
      node_args.push_back("--secret-file=" + Get(args, "--secret-file"));
    }
    for (const char* f : {"--tls-cert", "--tls-key", "--tls-ca"}) {
      if (args.values.count(f)) node_args.push_back(std::string(f) + "=" + Get(args, f));
    }
    // Registered as soon as it exists: starting the nodes may take seconds.
    std::string dir;
    auto c = dml::net::LocalCluster::Start(dml::net::LocalCluster::NodeBinaryNextToSelf(),
                                           local_nodes, node_args, [&dir](const std::string& d) {
                                             dir = d;
                                             Interrupts::RemoveOnExit(d, /*directory=*/true);
                                           });
    if (!c.ok()) {
      Interrupts::Forget(dir);  // removed by the failed start
      return Fail("--local-nodes: " + std::string(c.status().message()));
    }
    cluster.emplace(*std::move(c));
    job.cluster.nodes = cluster->addresses();
  } else if (args.values.count("--nodes")) {
    job.cluster.nodes = NodeEntries(args);  // each checked by CheckNodeList
  }
  return std::nullopt;
}

#endif  // DML_TRAIN_ONE_PROCESS

// The files a run writes must not be files it reads (a slip in -o or
// --metrics-out destroyed the data), nor each other, nor directories, and
// their directories must exist; --test must be there. All checked before
// any data is read or a model trained, so none is lost to a late error.
// --nodes H:P,...: every entry host:port with a port in [1, 65535], named
// by its position (1-based) where it is not; before any data is read.
Exit CheckNodeList(const Args& args) {
  if (!args.values.count("--nodes")) return std::nullopt;
  const std::vector<std::string> entries = NodeEntries(args);
  for (std::size_t k = 0; k < entries.size(); ++k) {
    const std::string& entry = entries[k];
    const std::string at = "--nodes: entry " + std::to_string(k + 1);
    if (entry.empty()) return Fail(at + " is empty (expected host:port[,host:port...])");
    if (entry.find_first_of(" \t") != std::string::npos) {
      return Fail(at + " (\"" + entry + "\") holds a space");
    }
    if (entry[0] == '[' || std::count(entry.begin(), entry.end(), ':') > 1) {
      return Fail(at + " (\"" + entry + "\"): IPv6 addresses are not supported; give an IPv4 "
                  "address or a host name");
    }
    // host, then a port of digits alone.
    const std::size_t colon = entry.rfind(':');
    bool valid = colon != std::string::npos && colon > 0;
    if (valid) {
      int port = 0;
      const char* end = entry.data() + entry.size();
      const auto parsed = std::from_chars(entry.data() + colon + 1, end, port);
      valid = parsed.ec == std::errc() && parsed.ptr == end && port >= 1 && port <= 65535;
    }
    if (!valid) {
      return Fail(at + " (\"" + entry + "\"): expected host:port with a port in [1, 65535]");
    }
  }
  return std::nullopt;
}

Exit CheckFiles(const Args& args) {
  struct Named {
    std::string flag, path;
  };
  std::vector<Named> inputs, outputs;
  if (args.positional.size() == 1) inputs.push_back({"the data file", args.positional[0]});
  for (const char* f : {"--test", "--secret-file", "--tls-cert", "--tls-key", "--tls-ca"}) {
    if (args.values.count(f)) inputs.push_back({f, Get(args, f)});
  }
  for (const char* f : {"-o", "--output", "--liblinear-model", "--metrics-out", "--cache",
                        "--checkpoint"}) {
    if (args.values.count(f)) outputs.push_back({f, Get(args, f)});
  }
  // The TLS files are read when the runtime starts, after the data: said
  // here, before any load, where one cannot be read.
  for (const char* f : {"--tls-cert", "--tls-key", "--tls-ca"}) {
    if (!args.values.count(f)) continue;
    const std::string path = Get(args, f);
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0 || ::access(path.c_str(), R_OK) != 0) {
      return Fail(std::string(f) + ": " + path + ": " + std::strerror(errno));
    }
    if (S_ISDIR(info.st_mode)) return Fail(std::string(f) + ": " + path + " is a directory");
  }
  if (args.values.count("--test")) {
    struct stat info {};
    const std::string test = Get(args, "--test");
    if (::stat(test.c_str(), &info) != 0) {
      return Fail("--test: " + test + ": " + std::strerror(errno));
    }
    if (S_ISDIR(info.st_mode)) return Fail("--test: " + test + " is a directory");
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const Named& o = outputs[i];
    if (o.path.empty()) return Fail(o.flag + ": expected a path");
    struct stat info {};
    if (::stat(o.path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
      return Fail(o.flag + ": " + o.path + " is a directory");
    }
    const std::size_t slash = o.path.rfind('/');
    const std::string dir =
        slash == std::string::npos ? "." : o.path.substr(0, std::max<std::size_t>(slash, 1));
    if (::stat(dir.c_str(), &info) != 0) {
      return Fail(o.flag + ": " + o.path + ": its directory " + dir + " does not exist");
    }
    if (!S_ISDIR(info.st_mode)) {
      return Fail(o.flag + ": " + o.path + ": " + dir + " is not a directory");
    }
    // The cache is replaced by a renamed copy: a device there would be replaced.
    if (o.flag == "--cache" && ::stat(o.path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
      return Fail("--cache: " + o.path + " is not a regular file");
    }
    // Devices and terminals (/dev/null, /dev/stdout) are not destroyed by
    // writing: only a regular file, or a new one, is checked against the rest.
    if (!dml::samples::WouldOverwrite(o.path)) continue;
    for (const Named& in : inputs) {
      if (SameFile(o.path, in.path)) {
        return Fail(o.flag + ": " + o.path + " is also " + in.flag +
                    "; writing it would destroy it");
      }
    }
    for (std::size_t k = i + 1; k < outputs.size(); ++k) {
      if (SameFile(o.path, outputs[k].path)) {
        return Fail(o.flag + " and " + outputs[k].flag + " name the same file, " + o.path);
      }
    }
  }
  return std::nullopt;
}

// --mode duhl's flags, checked before any data is read.
Exit ParseDuhl(const Args& args, dml::DuhlOptions& d) {
  const std::string memory = Get(args, "--device-memory", "10%");
  // Digits only (strtod also took "0x10", "5e3" and leading blanks as bytes).
  const bool percent = !memory.empty() && memory.back() == '%';
  const std::string number = percent ? memory.substr(0, memory.size() - 1) : memory;
  const bool digits = !number.empty() && number.find_first_not_of("0123456789.") == std::string::npos &&
                      std::count(number.begin(), number.end(), '.') <= (percent ? 1 : 0);
  if (!digits) {
    return Fail("--device-memory: a percentage (10%) or a whole number of bytes, got \"" + memory +
                "\"");
  }
  const double v = std::strtod(number.c_str(), nullptr);
  if (percent) {
    if (!(v > 0 && v <= 100)) {
      return Fail("--device-memory: a percentage in (0, 100], got \"" + memory + "\"");
    }
    d.device_fraction = v / 100.0;
  } else {
    // At most 2^62: a byte count any int64 sum of the budget stays within.
    if (!(v >= 1 && v <= 4.611686018427387904e18)) {
      return Fail("--device-memory: " + memory + " bytes is out of range [1, 2^62]");
    }
    d.device_bytes = static_cast<int64_t>(std::stoll(number));
  }
  auto rule = dml::ParseDuhlSelection(Get(args, "--selection", "gap"));
  if (!rule.ok()) return Fail("--selection: " + std::string(rule.status().message()));
  d.selection = *rule;
  std::string error;
  // Its range is checked with the other flags' (kRanges).
  if (!Number(args, {"--gap-threads"}, d.gap_threads, error)) return Fail(error);
  return std::nullopt;
}

#ifndef DML_TRAIN_ONE_PROCESS
// --mode: the job on the actor runtime (in-process, or on nodes).
Exit TrainOnRuntime(Run& run, std::shared_ptr<const dml::Dataset>& shared_data,
                    std::optional<dml::net::LocalCluster>& cluster,
                    absl::StatusOr<dml::TrainResult>& result) {
  std::string error;
  const Args& args = run.args;
  auto mode = dml::ParseMode(Get(args, "--mode"));
  if (!mode.ok()) return Fail(std::string(mode.status().message()));
  dml::JobSpec job;
  job.mode.kind = *mode;
  job.model = run.spec;
  job.mode.seed = run.opt.seed;
  job.stop = run.opt.stop;
  static_cast<dml::SgdOptions&>(job.sgd) = run.opt.sgd;  // --batch, --step: one set
  if (!Number(args, {"--workers"}, job.mode.workers, error) ||
      !Number(args, {"--shards"}, job.mode.shards, error) ||
      !Number(args, {"--staleness"}, job.sgd.staleness, error) ||
      !Number(args, {"--tau"}, job.sgd.tau, error) ||
      !Number(args, {"--kv-block"}, job.sgd.kv_block, error) ||
      (Get(args, "--local-epochs") != "auto" &&
       !Number(args, {"--local-epochs"}, job.cocoa.local_epochs, error)) ||
      !Number(args, {"--gamma"}, job.cocoa.gamma, error) ||
      !Number(args, {"--checkpoint-every"}, job.recovery.checkpoint_every, error) ||
      !Number(args, {"--node-silence"}, job.recovery.node_silence_seconds, error) ||
      !Number(args, {"--eval-every"}, job.sgd.eval_every_epochs, error)) {
    return Fail(error);
  }
  job.cocoa.auto_local_epochs = Get(args, "--local-epochs") == "auto";
  if (args.values.count("--local")) {
    if (job.mode.kind != dml::Mode::kCocoa) return Fail("--local: only with --mode cocoa");
    auto local = dml::ParseSolverKind(Get(args, "--local"));
    if (!local.ok() || (*local != dml::SolverKind::kScd && *local != dml::SolverKind::kDuhl &&
                        *local != dml::SolverKind::kTpaScd)) {
      return Fail("--local: expected scd, tpa-scd or duhl, got \"" + Get(args, "--local") + "\"");
    }
    job.cocoa.local_solver = *local;
    if (*local == dml::SolverKind::kTpaScd) {  // as --solver tpa-scd below
      job.cocoa.gpu_fallback = args.values.count("--gpu-fallback") > 0;
      if (!Number(args, {"--device"}, job.cocoa.device, error)) return Fail(error);
    }
  }
  // --mode duhl: one device worker (worker 0) and --workers - 1 CPU ones.
  const bool duhl_mode = job.mode.kind == dml::Mode::kDuhl;
  if (duhl_mode && !args.values.count("--workers")) job.mode.workers = 1;
  if (duhl_mode || job.cocoa.local_solver == dml::SolverKind::kDuhl) {
    job.cocoa.duhl = run.duhl.value();  // parsed in main
    // --solver tpa-scd: DuHL's blocks on the GPU of the worker's process.
    job.cocoa.duhl.gpu = run.opt.kind == dml::SolverKind::kTpaScd;
    job.cocoa.gpu_fallback = args.values.count("--gpu-fallback") > 0;
    if (!Number(args, {"--device"}, job.cocoa.device, error)) return Fail(error);
  }
  // --solver tpa-scd with --mode cocoa: the workers' local solver on a GPU
  // (with DuHL: DuHL's blocks on it). Other modes were refused before the
  // load (main).
  if (run.opt.kind == dml::SolverKind::kTpaScd && !duhl_mode &&
      job.cocoa.local_solver != dml::SolverKind::kDuhl) {
    job.cocoa.local_solver = dml::SolverKind::kTpaScd;
    job.cocoa.gpu_fallback = args.values.count("--gpu-fallback") > 0;
    if (!Number(args, {"--device"}, job.cocoa.device, error)) return Fail(error);
  }
  job.recovery.path = Get(args, "--checkpoint");
  job.recovery.resume = args.values.count("--resume") > 0;
  job.sgd.svrg = args.values.count("--svrg") > 0;
  job.sgd.saga = args.values.count("--saga") > 0;
  job.sgd.store = Get(args, "--store") == "kv" ? dml::JobSgd::Store::kKv : dml::JobSgd::Store::kMemory;
  job.sgd.localize = args.values.count("--localize") > 0;
  shared_data = std::make_shared<const dml::Dataset>(std::move(run.data));
  dml::RuntimeOptions rt_options;
  if (args.values.count("--secret-file")) {
    auto secret = dml::net::ReadSecretFile(Get(args, "--secret-file"));
    if (!secret.ok()) return Fail("--secret-file: " + std::string(secret.status().message()));
    rt_options.cluster_secret = *std::move(secret);
  }
  if (args.values.count("--tls-cert")) rt_options.tls_cert = Get(args, "--tls-cert");
  if (args.values.count("--tls-key")) rt_options.tls_key = Get(args, "--tls-key");
  if (args.values.count("--tls-ca")) rt_options.tls_ca = Get(args, "--tls-ca");
  if (Exit e = ChooseNodes(run, job, cluster)) return e;
  // Nodes read the data from disk: the file itself, or the generated
  // data written to a temporary file (loopback clusters share this disk).
  std::string temp_data;
  // Removes the generated data's file on every return (a failed write too).
  struct remove_on_exit {
    std::string path;
    ~remove_on_exit() {
      if (path.empty()) return;
      Interrupts::Forget(path);
      std::remove(path.c_str());
    }
  } cleanup;
  if (!job.cluster.nodes.empty()) {
    if (args.values.count("--generate")) {
      std::string tmpl = TempDir() + "/dml-train-data-XXXXXX";
      const int fd = mkstemp(tmpl.data());
      if (fd < 0) {
        return Fail("cannot create a temporary data file in " + TempDir() + " (TMPDIR): " +
                    std::strerror(errno));
      }
      close(fd);
      // Nodes run elsewhere: the path they read must not depend on this
      // process's directory (a relative TMPDIR).
      char* abs_tmp = realpath(tmpl.c_str(), nullptr);
      temp_data = abs_tmp != nullptr ? abs_tmp : tmpl;
      std::free(abs_tmp);
      cleanup.path = temp_data;
      Interrupts::RemoveOnExit(temp_data);  // before the write, which may be long
      if (auto st = dml::WriteLibsvm(*shared_data, temp_data); !st.ok()) {
        return Fail(std::string(st.message()));
      }
      job.data.path = temp_data;
    } else {
      char* abs = realpath(run.source.c_str(), nullptr);
      job.data.path = abs != nullptr ? abs : run.source;
      std::free(abs);
    }
    job.data.load = run.load_opts;
    job.data.load.num_features = shared_data->x.cols();
    // Nodes get only the path: the exchange period is chosen here, from the data read.
    if (job.sgd.batch_size == 0) {
      job.sgd.batch_size = dml::AutoBatch(shared_data->x.rows(), job.mode.workers);
    }
    if (job.sgd.tau == 0 && job.mode.kind == dml::Mode::kModelAveraging) {
      job.sgd.tau = dml::AutoTau(*shared_data, job.sgd.batch_size);
    }
  } else {
    job.data.dataset = shared_data;
  }
  if (!run.quiet) {
    std::printf("runtime: mode %s, %d workers, %d shards%s\n",
                std::string(dml::ModeName(job.mode.kind)).c_str(), job.mode.workers, job.mode.shards,
                job.cluster.nodes.empty()
                    ? ""
                    : (", on " + std::to_string(job.cluster.nodes.size()) + " node processes").c_str());
    const bool duhl_workers = job.cocoa.local_solver == dml::SolverKind::kDuhl;
    if (job.mode.kind == dml::Mode::kDuhl || duhl_workers) {
      const dml::DuhlConfig& d = job.cocoa.duhl;
      const std::string budget = d.device_bytes > 0
                                     ? absl::StrCat(d.device_bytes, " bytes")
                                     : absl::StrCat(d.device_fraction * 100, "% of its data");
      std::printf("duhl: %s %s selection, device budget %s, %d gap thread(s), device %s\n",
                  duhl_workers ? "every worker:" : "worker 0 the device;",
                  std::string(dml::DuhlSelectionName(d.selection)).c_str(), budget.c_str(),
                  d.gap_threads, d.gpu ? "a GPU (TPA-SCD)" : "the CPU twin");
    }
  }
  dml::Runtime rt(rt_options);
  const bool quiet = run.quiet;
  run.metrics->Job(absl::StrCat("\"mode\":", dml::JsonString(std::string(dml::ModeName(job.mode.kind))),
                                 ",\"model\":", dml::JsonString(std::string(dml::ModelName(run.spec.kind))),
                                 ",\"lambda\":", dml::JsonNumber(run.spec.lambda),
                                 ",\"workers\":", job.mode.workers, ",\"shards\":", job.mode.shards,
                                 ",\"nodes\":", job.cluster.nodes.size(),
                                 ",\"rows\":", shared_data->x.rows(), ",\"cols\":", shared_data->x.cols(),
                                 ",\"data\":", dml::JsonString(run.source)));
  auto status = std::make_shared<StatusLine>(job.stop);
  auto handle = rt.Submit(job, [quiet, tty = run.tty, status, metrics = run.metrics](const dml::Progress& p) {
    metrics->Write(p);
    if (quiet) return;
    if (tty) return status->Show(p);
    // DuHL: what was copied to the device so far (bytes, coordinates).
    const std::string device =
        p.device_bytes > 0 ? absl::StrCat("  device ", p.device_bytes, " swaps ", p.device_swaps)
                           : "";
    std::printf("round %4d  %8.3fs  epochs %7.2f  primal %.10g  dual %.10g  gap %.3e  bytes %lld%s%s%s\n",
                p.round, p.seconds, p.epochs, p.primal, p.dual, p.gap,
                static_cast<long long>(p.bytes_exchanged), device.c_str(),
                p.event.empty() ? "" : "  event: ", p.event.c_str());
    FlushOrStop();
  });
  if (!handle.ok()) {
    return Fail(ForCli(handle.status().message(), args.values.count("--local-nodes") > 0));
  }
  Interrupts::Training([job = &*handle] { job->Cancel(); });
  // Checkpoints are written through a temporary file and renamed.
  std::optional<InterruptibleTemp> checkpoint_tmp;
  if (!job.recovery.path.empty()) checkpoint_tmp.emplace(dml::TemporaryPathFor(job.recovery.path));
  result = handle->Wait();
  Interrupts::Trained();
  if (run.tty && !quiet) std::printf("\n");
  if (!job.cluster.nodes.empty() && run.args.values.count("--verbose")) {
    const dml::TransportStats ts = rt.Transport();
    std::printf("bulk channel: %llu vectors offered, %llu fetched (%llu by single copy), "
                "%.1f MB\n",
                static_cast<unsigned long long>(ts.bulk_offers),
                static_cast<unsigned long long>(ts.bulk_fetches),
                static_cast<unsigned long long>(ts.bulk_single_copy), ts.bulk_bytes / 1e6);
  }
  return std::nullopt;
}

#else
// dml-train without the actor runtime: --mode runs dml-train-runtime, the
// same program linked with it, found next to this one. Loading CAF and
// libssl (and libcrypto, which nothing else here loads) cost every
// one-process run about 8 ms of start-up, ld.so binding their symbols, for
// a runtime it never started.
int ExecRuntime(char** argv) {
  constexpr const char* kRuntime = "dml-train-runtime";
  const std::string path = dml::net::LocalCluster::ProgramNextToSelf(kRuntime);
  // Never a bare name, which execv would look up in the working directory.
  if (path.empty()) {
    std::fflush(stdout);
    std::fprintf(stderr,
                 "dml-train: --mode runs on the actor runtime, in %s next to dml-train: cannot "
                 "find this program's directory (/proc/self/exe)\n",
                 kRuntime);
    return 1;
  }
  ::execv(path.c_str(), argv);
  const int err = errno;
  std::fflush(stdout);
  std::fprintf(stderr,
               "dml-train: --mode runs on the actor runtime, in %s (installed next to dml-train): "
               "cannot run it: %s\n",
               path.c_str(), std::strerror(err));
  return 1;
}

#endif  // DML_TRAIN_ONE_PROCESS

// Metrics of the model on `d`.
void Report(const Run& run, const char* name, const dml::Dataset& d,
            const std::vector<double>& w) {
  const auto margins = dml::Predict(d.x, w);
  auto show = [](const absl::StatusOr<double>& v) {
    return v.ok() ? std::to_string(*v) : std::string("n/a (") + std::string(v.status().message()) + ")";
  };
  if (run.task == dml::Task::kClassification) {
    std::printf("%s: accuracy %s  auc %s  log-loss %s\n", name,
                show(dml::Accuracy(d.y, margins)).c_str(), show(dml::Auc(d.y, margins)).c_str(),
                show(dml::LogLoss(d.y, margins)).c_str());
  } else {
    std::printf("%s: rmse %s  r2 %s\n", name, show(dml::Rmse(d.y, margins)).c_str(),
                show(dml::R2(d.y, margins)).c_str());
  }
}

}  // namespace

// Restarts this program once (same pid, arguments and descriptors) with
// malloc settings for a process that loads data and trains, where the data
// file is 1 MiB or more (GLIBC_TUNABLES is read only at start-up):
//   hugetlb=1                transparent huge pages for malloc's memory
//                            where the kernel gives them on request;
//   mmap_threshold=32 MiB    blocks up to 32 MiB from the heap, which
//                            hugetlb=1 grows in 2 MiB-aligned steps and
//                            backs with huge pages; an mmapped block of a
//                            few MiB (a9a's 1.8 MiB arrays) holds no
//                            aligned 2 MiB page and stayed in 4 KiB ones;
//   top_pad=16 MiB, trim_threshold=256 MiB: the heap grows in large steps
//                            and keeps what it freed (without them news20
//                            ran slower than with hugetlb alone).
// On this project's VMs a fresh 4 KiB page costs 2-3 us on first touch and
// a 2 MiB one about as much. Whole runs (medians, alternated): a9a -s 0 with
// 2 threads 55 -> 34 ms, tab-4601x57 48 -> 36 ms, news20 -s 6 288 -> 272 ms
// against hugetlb alone, which had taken 11-19% off w8a's runs. The restart
// costs a few ms, more than files under 1 MiB gain. A tunable already set
// keeps its value. DML_TRAIN_HUGE_PAGES (set to 1 here, so a restart
// happens once) set beforehand keeps the process as started; so does any
// failure. Returns what --verbose says of it.
std::string RestartWithHugePages(const Args& args, char** argv) {
#if defined(__linux__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  constexpr const char* kGuard = "DML_TRAIN_HUGE_PAGES";
  const char* set = std::getenv("GLIBC_TUNABLES");
  const std::optional<std::string> old =
      set != nullptr ? std::optional<std::string>(set) : std::nullopt;
  if (const char* guard = std::getenv(kGuard)) {
    if (std::string_view(guard) != "1") return absl::StrCat("memory: as started (", kGuard, "=", guard, ")");
    return absl::StrCat("memory: ", old ? "GLIBC_TUNABLES=" + *old : "GLIBC_TUNABLES unset", " (",
                        kGuard, "=1)");
  }
  // A compressed file counts 8 times its size: LIBSVM text shrinks 5-15x.
  struct stat data {};
  const bool compressed = args.positional.size() == 1 &&
                          (absl::EndsWith(args.positional[0], ".gz") ||
                           absl::EndsWith(args.positional[0], ".bz2") ||
                           absl::EndsWith(args.positional[0], ".xz"));
  if (args.positional.size() != 1 || ::stat(args.positional[0].c_str(), &data) != 0 ||
      !S_ISREG(data.st_mode) || data.st_size * (compressed ? 8 : 1) < (1 << 20)) {
    return "memory: as started (no data file of 1 MiB or more)";
  }
  ::setenv(kGuard, "1", 1);  // children (dml-train-runtime) start as they are
  std::string tunables = old.value_or("");
  for (const char* t : {"glibc.malloc.hugetlb=1", "glibc.malloc.mmap_threshold=33554432",
                        "glibc.malloc.top_pad=16777216", "glibc.malloc.trim_threshold=268435456"}) {
    const std::string_view name = std::string_view(t).substr(0, std::string_view(t).find('='));
    if (tunables.find(name) != std::string::npos) continue;
    absl::StrAppend(&tunables, tunables.empty() ? "" : ":", t);
  }
  if (old && tunables == *old) return absl::StrCat("memory: as started (GLIBC_TUNABLES=", *old, ")");
  ::setenv("GLIBC_TUNABLES", tunables.c_str(), 1);
  ::execv("/proc/self/exe", argv);
  const int err = errno;
  // Not restarted (no /proc): the environment goes back to what it was.
  if (old) {
    ::setenv("GLIBC_TUNABLES", old->c_str(), 1);
  } else {
    ::unsetenv("GLIBC_TUNABLES");
  }
  return absl::StrCat("memory: as started (restart: ", std::strerror(err), ")");
#else
  (void)args;
  (void)argv;
  return "memory: as started (a sanitizer's malloc)";
#endif
}

int main(int argc, char** argv) {
  Run run;
  std::string error;
  const std::map<std::string, std::string> switches = {
      {"--quiet", "--quiet"}, {"-q", "--quiet"},     {"--resume", "--resume"},
      {"--verbose", "--verbose"}, {"-h", "--help"}, {"--help", "--help"},
      {"--svrg", "--svrg"}, {"--saga", "--saga"}, {"--gpu-fallback", "--gpu-fallback"},
      {"--localize", "--localize"}};
  if (!ParseArgs(argc, argv, kValueFlags, switches, run.args, error)) {
    return Fail(error);
  }
  const std::string memory_note = RestartWithHugePages(run.args, argv);
#ifdef DML_TRAIN_ONE_PROCESS
  if (run.args.values.count("--mode") && !run.args.values.count("--help")) {
    // A mode name is checked here too: a typo is not a missing program.
    if (auto mode = dml::ParseMode(Get(run.args, "--mode")); !mode.ok()) {
      return Fail(std::string(mode.status().message()));
    }
    return ExecRuntime(argv);
  }
#endif
  Interrupts::Install();  // before any thread starts (and after the exec: it keeps no handlers)
  if (run.args.values.count("--help")) {
    PrintUsage();
    return 0;
  }
  run.quiet = run.args.values.count("--quiet") > 0;
  if (!CheckRanges(run.args, error)) return Fail(error);
  if (const std::string f = Get(run.args, "--model-format", "text"); f != "text" && f != "capnp") {
    return Fail("--model-format: expected text or capnp, got \"" + f + "\"");
  }
  if (Exit e = ParseModelAndSolver(run)) return *e;
  if (run.args.values.count("--mode")) {  // checked again where the job is built; here before any load
    if (auto mode = dml::ParseMode(Get(run.args, "--mode")); !mode.ok()) {
      return Fail(std::string(mode.status().message()));
    }
  }
  const bool duhl = Get(run.args, "--mode") == "duhl";
  const bool local_duhl = Get(run.args, "--local") == "duhl";
  if (duhl && run.args.values.count("--local")) {
    return Fail("--local: only with --mode cocoa (--mode duhl is DuHL itself)");
  }
  if (duhl || local_duhl) {
    // Checked here, before any data is read; the job takes them later.
    dml::DuhlOptions d;
    if (Exit e = ParseDuhl(run.args, d)) return *e;
    run.duhl = d;
  } else {
    for (const char* f : {"--device-memory", "--selection", "--gap-threads"}) {
      if (run.args.values.count(f)) {
        return Fail(std::string(f) + " is a flag of --mode duhl and --mode cocoa --local duhl");
      }
    }
  }
  // The key-value store holds hogwild's model only; checked before any load.
  if (const std::string store = Get(run.args, "--store", "memory"); store != "memory" && store != "kv") {
    return Fail("--store: expected memory or kv, got \"" + store + "\"");
  }
  if (Get(run.args, "--store") == "kv" &&
      (!run.args.values.count("--mode") ||
       *dml::ParseMode(Get(run.args, "--mode")) != dml::Mode::kHogwild)) {
    return Fail("--store kv: only with --mode hogwild (the other modes keep the model on the "
                "parameter shards)");
  }
  for (const char* f : {"--localize", "--kv-block"}) {
    if (run.args.values.count(f) && Get(run.args, "--store") != "kv") {
      return Fail(std::string(f) + " is a flag of --store kv");
    }
  }
  // Flags one of which would otherwise win without a word.
  const auto given = [&](const char* f) { return run.args.values.count(f) > 0; };
  for (const auto& [a, b] : {std::pair<const char*, const char*>{"-c", "--lambda"}, {"-e", "--tol"},
                             {"--nodes", "--local-nodes"}, {"-o", "--output"}}) {
    if (given(a) && given(b)) return Fail(std::string(a) + " and " + b + " both set it: give one");
  }
  if (given("--generate") && !run.args.positional.empty()) {
    return Fail("--generate and a data file (" + run.args.positional[0] + ") both give the data: "
                "give one");
  }
  const bool tpa = Get(run.args, "--solver") == "tpa-scd";
  const bool local_tpa = Get(run.args, "--local") == "tpa-scd";
  for (const char* f : {"--device", "--gpu-fallback"}) {
    if (given(f) && !tpa && !local_tpa) {
      return Fail(std::string(f) + " is a flag of --solver tpa-scd (or --local tpa-scd)");
    }
  }
  if (given("--l1-ratio") && run.spec.kind != dml::ModelKind::kElasticNet) {
    return Fail("--l1-ratio is elastic-net's; model " +
                std::string(dml::ModelName(run.spec.kind)) + " has no l1 ratio");
  }
  // With --mode the runtime decides how each worker solves: --solver only
  // puts the local solver (or DuHL's device) on a GPU (tpa-scd).
  if (given("--mode") && given("--solver") && !tpa && Get(run.args, "--solver") != "auto") {
    return Fail("--solver " + Get(run.args, "--solver") + " with --mode " +
                Get(run.args, "--mode") + ": the runtime picks each worker's solver (--local "
                "for cocoa's); only --solver tpa-scd applies there");
  }
  // 0 (certify when the estimate says done) is the single-process solvers'
  // rule; the runtime evaluates every N epochs (the job refused 0 by its
  // field name, after the load).
  if (given("--mode") && given("--eval-every") && Get(run.args, "--eval-every") != "" &&
      std::atof(Get(run.args, "--eval-every").c_str()) == 0.0) {
    return Fail("--eval-every 0 (when the estimate says done) is for one process; with --mode "
                "the runtime evaluates every N epochs: give N > 0");
  }
  // Flags of some modes only, which the others would drop without a word.
  if (given("--mode")) {
    // By the parsed mode: names have aliases (mavg, bsp, downpour).
    const std::string mode = Get(run.args, "--mode");
    const dml::Mode kind = *dml::ParseMode(mode);  // parsed above
    if (tpa && kind != dml::Mode::kCocoa && kind != dml::Mode::kDuhl) {  // before any load
      return Fail("--solver tpa-scd runs alone, as --mode cocoa's local solver or as --mode duhl's "
                  "device; not with --mode " + mode);
    }
    const bool rounds = kind == dml::Mode::kCocoa || kind == dml::Mode::kDuhl;
    struct OnlyIn {
      const char* flag;
      bool applies;
      const char* modes;
    };
    for (const OnlyIn& o :
         {OnlyIn{"--staleness", kind == dml::Mode::kSsp, "ssp"},
          OnlyIn{"--tau", kind == dml::Mode::kEasgd || kind == dml::Mode::kModelAveraging,
                 "easgd and model-averaging"},
          OnlyIn{"--batch", !rounds, "the SGD modes"}, OnlyIn{"--step", !rounds, "the SGD modes"},
          OnlyIn{"--feature-steps", !rounds, "the SGD modes"},
          OnlyIn{"--certificate-cg", !rounds, "the SGD modes"},
          OnlyIn{"--threads", false, "one process's newton and async-scd"},
          OnlyIn{"--eval-pacing", false, "one process's SCD and newGLMNET"},
          OnlyIn{"--store", kind == dml::Mode::kHogwild, "hogwild"},
          OnlyIn{"--shards", kind != dml::Mode::kHogwild,
                 "the modes with parameter shards (hogwild shares one model)"},
          OnlyIn{"--local-epochs", rounds, "cocoa and duhl"},
          OnlyIn{"--gamma", rounds, "cocoa and duhl"}}) {
      if (given(o.flag) && !o.applies) {
        return Fail(std::string(o.flag) + " is a flag of " + o.modes + ", not of --mode " + mode);
      }
    }
  }
  // Runtime-only switches would otherwise be dropped without a word.
  if (!run.args.values.count("--mode")) {
    for (const char* f : {"--svrg", "--saga", "--staleness", "--tau", "--shards", "--workers",
                          "--nodes", "--local-nodes", "--checkpoint", "--checkpoint-every",
                          "--resume", "--node-silence", "--local", "--local-epochs", "--gamma",
                          "--store"}) {
      if (run.args.values.count(f)) {
        return Fail(std::string(f) + " is a flag of the distributed runtime (--mode ...); "
                                     "without --mode one process trains");
      }
    }
  }
  // More flags that would otherwise be dropped without a word.
  const bool on_nodes = given("--nodes") || given("--local-nodes");
  for (const char* f : {"--node-silence", "--secret-file", "--tls-cert", "--tls-key", "--tls-ca"}) {
    if (given(f) && !on_nodes) {
      return Fail(std::string(f) + " is a flag of jobs on node processes (--nodes, --local-nodes)");
    }
  }
  // On nodes it also sets the in-memory restart point after a node loss.
  if (given("--checkpoint-every") && !given("--checkpoint") && !on_nodes) {
    return Fail("--checkpoint-every: no --checkpoint PATH to write to (and no nodes to restart)");
  }
  if (given("--resume") && !given("--checkpoint")) {
    return Fail("--resume: needs --checkpoint PATH (the checkpoint to resume from)");
  }
  if (given("--mode") && on_nodes && *dml::ParseMode(Get(run.args, "--mode")) == dml::Mode::kHogwild &&
      Get(run.args, "--store") != "kv") {
    return Fail("--mode hogwild on nodes needs --store kv (its in-memory model exists only inside "
                "one process)");
  }
  if (!given("--mode")) {
    const std::string solver = Get(run.args, "--solver", "auto");
    for (const char* f : {"--batch", "--step", "--feature-steps", "--certificate-cg"}) {
      if (given(f) && solver != "sgd") {
        return Fail(std::string(f) + " is a flag of --solver sgd (and of the SGD modes), not of "
                                     "--solver " + solver);
      }
    }
    if (given("--threads") && solver == "scd") {
      return Fail("--threads: --solver scd is sequential (async-scd and newton take threads)");
    }
  }
  if (Exit e = CheckNodeList(run.args)) return *e;
  if (Exit e = CheckFiles(run.args)) return *e;
  // A model or the metrics written to standard output (-o /dev/stdout, or
  // the file stdout goes to): the run's own lines go to stderr instead, so
  // that the stream holds that output alone (they had overwritten its first
  // lines). Two such outputs cannot share the stream.
  std::vector<const char*> to_stdout;
  for (const char* f : {"-o", "--output", "--liblinear-model", "--metrics-out"}) {
    if (given(f) && dml::samples::IsStandardOutput(Get(run.args, f))) to_stdout.push_back(f);
  }
  if (to_stdout.size() > 1) {
    return Fail(std::string(to_stdout[0]) + " and " + to_stdout[1] +
                " both name standard output; one stream cannot hold both");
  }
  for (const char* f : to_stdout) {
    std::fflush(stdout);
    const int model_fd = ::dup(STDOUT_FILENO);
    if (model_fd < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
      return Fail(std::string(f) + ": cannot set standard output aside for the model: " +
                  std::strerror(errno));
    }
    run.args.values[f] = "/dev/fd/" + std::to_string(model_fd);
  }
  if (run.args.values.count("--metrics-out") &&
      !run.metrics->Open(Get(run.args, "--metrics-out"))) {
    return Fail("--metrics-out: cannot open " + Get(run.args, "--metrics-out") + " for writing");
  }
  if (given("--verbose") && !run.quiet) std::printf("%s\n", memory_note.c_str());
  if (Exit e = LoadData(run)) return *e;
  run.tty = isatty(fileno(stdout));
  if (!run.quiet || run.metrics->active()) {
    auto status = std::make_shared<StatusLine>(run.opt.stop);
    run.opt.on_epoch = [tty = run.tty, quiet = run.quiet, status,
                        metrics = run.metrics](const dml::Progress& r) {
      metrics->Write(r);
      if (quiet) return;
      if (tty) return status->Show(r);
      // "read": the data nonzeros this epoch read (not the model's nonzeros).
      std::printf("epoch %4d  %8.3fs  primal %.10g  dual %.10g  gap %.3e  read %lld%s%s\n", r.round,
                  r.seconds, r.primal, r.dual, r.gap, static_cast<long long>(r.nnz_touched),
                  r.event.empty() ? "" : "  ", r.event.c_str());
      FlushOrStop();
    };
  }
  // --local-nodes' nodes outlive the job until its model is written: a
  // second signal while they stop must not lose it. Their directory stays
  // registered with Interrupts until stopping them removed it.
#ifndef DML_TRAIN_ONE_PROCESS
  std::optional<dml::net::LocalCluster> cluster;
  struct stop_cluster {
    std::optional<dml::net::LocalCluster>& cluster;
    ~stop_cluster() {
      if (!cluster) return;
      const std::string dir = cluster->dir();
      cluster.reset();
      Interrupts::Forget(dir);
    }
  } stopper{cluster};
#endif
  absl::StatusOr<dml::TrainResult> result;
  // The runtime shares the data with its workers; metrics read it from there.
  std::shared_ptr<const dml::Dataset> shared_data;
  const bool on_runtime = run.args.values.count("--mode") > 0;
  if (on_runtime) {
#ifndef DML_TRAIN_ONE_PROCESS
    if (Exit e = TrainOnRuntime(run, shared_data, cluster, result)) return *e;
#endif
  } else {
    run.metrics->Job(absl::StrCat(
        "\"solver\":", dml::JsonString(std::string(dml::SolverName(run.opt.kind))),
        ",\"model\":", dml::JsonString(std::string(dml::ModelName(run.spec.kind))),
        ",\"lambda\":", dml::JsonNumber(run.spec.lambda), ",\"threads\":", run.opt.threads,
        ",\"rows\":", run.data.x.rows(), ",\"cols\":", run.data.x.cols(),
        ",\"data\":", dml::JsonString(run.source)));
    dml::gpu::TpaScdOptions gpu;
    gpu.allow_fallback = run.args.values.count("--gpu-fallback") > 0;
    gpu.log = [](std::string_view line) {
      std::fprintf(stderr, "dml-train: %s\n", std::string(line).c_str());
    };
    std::string device_error;
    if (!Number(run.args, {"--device"}, gpu.device, device_error)) return Fail(device_error);
    std::atomic<bool> cancel{false};
    run.opt.stop.cancel = &cancel;
    Interrupts::Training([&cancel] { cancel = true; });
    result = dml::gpu::Train(run.data, run.spec, run.opt, gpu);
    Interrupts::Trained();
    run.opt.stop.cancel = nullptr;
  }
  if (result.ok()) run.metrics->Result(*result);
  const dml::Dataset& trained_on = shared_data ? *shared_data : run.data;
  if (run.tty && !run.quiet && !on_runtime) std::printf("\n");
  if (!result.ok()) {
    // A signal before the job trained (its nodes still loading) cancels it
    // with an error: nothing was trained, the signal says why.
    if (const int sig = Interrupts::Received(); sig != 0) {
      std::fprintf(stderr, "dml-train: %s: stopped before training (%s): nothing was trained\n",
                   Interrupts::Name(sig), std::string(result.status().message()).c_str());
      return 128 + sig;
    }
    std::fprintf(stderr, "dml-train: %s\n",
                 ForCli(result.status().message(), run.args.values.count("--local-nodes") > 0).c_str());
    return result.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  // Epochs to the nearest whole (a run of 20 that read a batch past them
  // showed 21), at least 1 once any ran.
  const double epochs = result->epochs;
  const long long shown = epochs > 0 && epochs < 1 ? 1 : std::llround(epochs);
  // Newton's rule counts its iterations (--epochs: iterations), each
  // several passes over the data: both are said.
  const bool newton = !on_runtime &&
                      (run.opt.kind == dml::SolverKind::kNewton ||
                       result->note.find("ran newton") != std::string::npos) &&
                      result->rounds != shown;
  const std::string progress =
      newton ? absl::StrCat(result->rounds, " iterations (", shown, " passes over the data)")
             : absl::StrCat(shown, " epochs");
  std::printf("done: %s after %s in %.3fs: primal %.10g dual %.10g duality gap %.3e%s\n",
              std::string(dml::StopReasonName(result->reason)).c_str(), progress.c_str(), result->seconds,
              result->primal,
              result->dual, result->gap,
              duhl || local_duhl ? (" device_bytes=" + std::to_string(result->device_bytes)).c_str()
                                 : "");
  if (!result->note.empty() && !run.quiet) std::printf("solver: %s\n", result->note.c_str());
  Report(run, "train", trained_on, result->w);
  const std::string out =
      run.args.values.count("-o") ? Get(run.args, "-o") : Get(run.args, "--output");
  // The model files are written through a temporary file renamed once
  // complete: a second signal meanwhile removes it and leaves any old file
  // whole.
  if (!out.empty()) {
    const InterruptibleTemp tmp(dml::TemporaryPathFor(out));
    dml::LinearModel model{run.spec, result->w, trained_on.classes, run.bias};
    // dml-predict reads a test file with the same threshold.
    if (run.load_opts.binarize_threshold) model.binarize = *run.load_opts.binarize_threshold;
    const std::string format = Get(run.args, "--model-format", "text");
    const absl::Status st = format == "capnp"
                                ? dml::net::WriteModelFile(out, {model, result->primal, result->gap})
                                : dml::WriteModelText(model, out);
    if (!st.ok()) return Fail(std::string(st.message()));
    if (!run.quiet) std::printf("model written to %s\n", out.c_str());
  }
  const std::string liblinear = Get(run.args, "--liblinear-model");
  if (!liblinear.empty()) {
    const bool named = trained_on.classes.size() == 2;
    const dml::LiblinearModel m =
        dml::ToLiblinear(run.spec, result->w, named ? trained_on.classes[0] : -1.0,
                         named ? trained_on.classes[1] : 1.0, run.bias);
    const InterruptibleTemp tmp(dml::TemporaryPathFor(liblinear));
    if (auto st = dml::WriteLiblinearModel(m, liblinear); !st.ok()) {
      return Fail(std::string(st.message()));
    }
    if (!run.quiet) std::printf("LIBLINEAR model written to %s\n", liblinear.c_str());
  }
  // After the model files: a bad test file loses nothing trained.
  if (run.args.values.count("--test")) {
    // The test labels map as the training set's did (its -1 and +1 values),
    // so a test file of one class is not taken as the other.
    dml::LibsvmOptions test_opts = run.load_opts;
    if (run.task == dml::Task::kClassification && !test_opts.binarize_threshold) {
      test_opts.classes = trained_on.classes;
    }
    auto t = dml::ReadLibsvm(Get(run.args, "--test"), test_opts);
    if (!t.ok()) return Fail(std::string(t.status().message()));
    if (run.bias >= 0) {  // the bias weight is the model's last
      t->x = dml::WithConstantColumn(t->x, static_cast<float>(run.bias), trained_on.x.cols() - 1);
    }
    Report(run, "test", *t, result->w);
  }
  if (!run.metrics->error().empty()) {
    std::fprintf(stderr, "dml-train: --metrics-out %s: write failed: %s\n",
                 Get(run.args, "--metrics-out").c_str(), run.metrics->error().c_str());
    return 1;
  }
  // Cancelled by a signal: what was trained is written; the status says so.
  if (const int sig = Interrupts::Received(); sig != 0) return 128 + sig;
  return 0;
}
