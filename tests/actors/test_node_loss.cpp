// Node loss in every phase of a job on three dml-node processes: a job
// never fails because a node died at the wrong moment. Training-phase
// losses (async continues, sync and cocoa restart from a checkpoint) are
// in test_cluster; this file covers the start-up: a node lost while the
// actors are spawned (connecting) and while the workers load their data
// (loading), where the start-up begins again on the nodes left, and while
// a checkpoint is written (checkpointing).
#define BOOST_TEST_MODULE actors_node_loss
#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <fcntl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dml/net/local_cluster.hpp"
#include "dml/objective/model_io.hpp"
#include "dml/actors/runtime.hpp"
#include "dml/data/libsvm.hpp"
#include "dml/data/synthetic.hpp"
#include "dml/solver/solver.hpp"

#ifndef DML_NODE_BINARY
#error "DML_NODE_BINARY must name the dml-node executable"
#endif

namespace {

using Clock = std::chrono::steady_clock;

std::string TempPath(const char* stem) {
  char tmpl[64];
  std::snprintf(tmpl, sizeof tmpl, "/tmp/dml-test-%s-XXXXXX", stem);
  const int fd = mkstemp(tmpl);
  BOOST_REQUIRE(fd >= 0);
  close(fd);
  return tmpl;
}

struct Data {
  Data() {
    dml::SyntheticOptions o;
    o.rows = 2000;
    o.cols = 80;
    o.nnz_per_row = 8;
    o.noise = 0.3;
    o.seed = 21;
    o.task = dml::Task::kClassification;
    auto s = dml::GenerateSynthetic(o);
    BOOST_REQUIRE_MESSAGE(s.ok(), s.status().ToString());
    path = TempPath("loss");
    BOOST_REQUIRE(dml::WriteLibsvm(s->data, path).ok());
    data = std::make_shared<const dml::Dataset>(std::move(s->data));
  }
  ~Data() { std::remove(path.c_str()); }
  std::string path;
  std::shared_ptr<const dml::Dataset> data;
};

double Optimum(const Data& d, const dml::ModelSpec& m) {
  dml::SolverOptions o;
  o.stop.gap_rel = 1e-12;
  o.stop.max_epochs = 5000;
  auto r = dml::Train(*d.data, m, o);
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  return r->primal;
}

dml::JobSpec Spec(dml::Mode mode, const std::string& path, double p_star) {
  dml::JobSpec s;
  s.data.path = path;
  s.model.kind = dml::ModelKind::kLogisticL2;
  s.model.lambda = 1e-3;
  s.mode.kind = mode;
  s.mode.workers = 2;  // worker 0 on node 0, worker 1 on node 1, shards on nodes 2 and 0
  s.mode.shards = 2;
  s.mode.seed = 5;
  s.sgd.batch_size = 32;
  s.sgd.step0 = 0.5;
  s.sgd.step_decay = s.model.lambda * s.sgd.step0;
  s.stop.max_seconds = 60;
  if (mode == dml::Mode::kCocoa) {
    s.stop.gap_rel = 1e-7;
    s.stop.max_epochs = 5000;
  } else {
    s.stop.gap_rel = 0;
    s.stop.max_epochs = 400;
    s.stop.target_primal = p_star + 1e-3;
  }
  return s;
}

std::string Events(const std::vector<dml::Progress>& history) {
  std::string all;
  for (const auto& p : history) {
    if (!p.event.empty()) all += "[round " + std::to_string(p.round) + "] " + p.event + "\n";
  }
  return all;
}

void CheckFinished(const dml::TrainResult& r, dml::Mode mode, double p_star) {
  if (mode == dml::Mode::kCocoa) {
    BOOST_CHECK(r.reason == dml::StopReason::kConverged);
    BOOST_TEST(r.gap <= 1e-7 * std::abs(r.primal));
    BOOST_TEST(std::abs(r.primal - p_star) <= 1e-6 * std::abs(p_star));
  } else {
    BOOST_CHECK(r.reason == dml::StopReason::kTargetReached);
    BOOST_TEST(r.primal - p_star <= 1e-3);
  }
}

}  // namespace

// Loading: the data path is a FIFO, so every worker of the first start-up
// blocks in its load (the job sits in the loading phase for as long as the
// test wants). The real file then takes the FIFO's name, node 1 is killed,
// and the start-up begins again on nodes 0 and 2, whose new workers read
// the file. The blocked readers of the first start-up are released after
// the job (their answers belong to a voided generation).
BOOST_AUTO_TEST_CASE(a_node_lost_while_the_workers_load_restarts_the_start_up) {
  Data d;
  for (dml::Mode mode : {dml::Mode::kCocoa, dml::Mode::kSync, dml::Mode::kAsync}) {
    BOOST_TEST_CONTEXT("mode " << dml::ModeName(mode)) {
      const double p_star = Optimum(d, dml::ModelSpec{dml::ModelKind::kLogisticL2, 1e-3});
      auto c = dml::net::LocalCluster::Start(DML_NODE_BINARY, 3, {"--threads=1"});
      BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
      const std::string path = TempPath("fifo");
      const std::string fifo_link = path + ".fifo";
      std::remove(path.c_str());
      BOOST_REQUIRE_EQUAL(::mkfifo(path.c_str(), 0600), 0);
      BOOST_REQUIRE_EQUAL(::link(path.c_str(), fifo_link.c_str()), 0);
      dml::Runtime rt;
      dml::JobSpec s = Spec(mode, path, p_star);
      s.cluster.nodes = c->addresses();
      auto j = rt.Submit(s);
      BOOST_REQUIRE_MESSAGE(j.ok(), j.status().ToString());
      // Spawning takes milliseconds; the loads then wait on the FIFO.
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      BOOST_REQUIRE(!j->Done());
      {
        const std::string copy = path + ".data";
        std::ifstream in(d.path, std::ios::binary);
        std::ofstream out(copy, std::ios::binary);
        out << in.rdbuf();
        out.close();
        BOOST_REQUIRE_EQUAL(std::rename(copy.c_str(), path.c_str()), 0);
      }
      c->Kill(1);
      auto r = j->Wait();
      const int fd = ::open(fifo_link.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) ::close(fd);  // EOF for the first start-up's blocked readers
      BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
      const std::string events = Events(r->history);
      BOOST_TEST_MESSAGE("events:\n" << events << "final P-P* " << r->primal - p_star);
      BOOST_TEST(events.find("lost node(s) 1 while loading; the start-up began again on 2 "
                             "node(s)") != std::string::npos,
                 events);
      CheckFinished(*r, mode, p_star);
      BOOST_TEST(c->Stop().ok());
      std::remove(path.c_str());
      std::remove(fifo_link.c_str());
    }
  }
}

// Connecting: node 1 is stopped (SIGSTOP: it keeps its socket, so only the
// coordinator's liveness pings can tell) after this runtime connected to
// it, so the spawn request sent there never answers. The silent node is
// taken as lost while connecting and the job starts up on the other two.
BOOST_AUTO_TEST_CASE(a_node_lost_while_the_actors_are_spawned_restarts_the_start_up) {
  Data d;
  const double p_star = Optimum(d, dml::ModelSpec{dml::ModelKind::kLogisticL2, 1e-3});
  auto c = dml::net::LocalCluster::Start(DML_NODE_BINARY, 3, {"--threads=1"});
  BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  dml::Runtime rt;
  dml::JobSpec s = Spec(dml::Mode::kCocoa, d.path, p_star);
  s.cluster.nodes = c->addresses();
  s.recovery.node_silence_seconds = 1.0;
  {
    // A first job connects this runtime to the nodes (and admits it).
    auto first = rt.Submit(s);
    BOOST_REQUIRE_MESSAGE(first.ok(), first.status().ToString());
    auto r = first->Wait();
    BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  }
  BOOST_REQUIRE_EQUAL(::kill(c->pid(1), SIGSTOP), 0);
  auto j = rt.Submit(s);
  BOOST_REQUIRE_MESSAGE(j.ok(), j.status().ToString());
  auto r = j->Wait();
  c->Kill(1);  // SIGKILL ends a stopped process too
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  const std::string events = Events(r->history);
  BOOST_TEST_MESSAGE("events:\n" << events);
  BOOST_TEST(events.find("node 1 (" + c->addresses()[1] + ") silent for 1 s; lost node(s) 1 "
                         "while connecting; the start-up began again on 2 node(s)") !=
                 std::string::npos,
             events);
  CheckFinished(*r, dml::Mode::kCocoa, p_star);
  BOOST_TEST(c->Stop().ok());
}

// Stopping and finishing: the job is cancelled and a node is killed right
// after, while the coordinator collects the final model (cocoa drains the
// round in progress, then, for a primal model such as L1-logistic, asks the
// workers for their coordinates; sync halts its workers and certifies the
// last model, as it does when it reaches its target). Wherever the loss
// lands, the job ends cancelled with a model, never failed.
BOOST_AUTO_TEST_CASE(a_node_lost_while_the_job_stops_still_ends_it_cancelled) {
  Data d;
  const double p_star = Optimum(d, dml::ModelSpec{dml::ModelKind::kLogisticL2, 1e-3});
  struct Case {
    dml::Mode mode;
    dml::ModelKind model;
  };
  for (Case k : {Case{dml::Mode::kCocoa, dml::ModelKind::kLogisticL2},
                 Case{dml::Mode::kCocoa, dml::ModelKind::kLogisticL1},
                 Case{dml::Mode::kSync, dml::ModelKind::kLogisticL2}}) {
    const dml::Mode mode = k.mode;
    BOOST_TEST_CONTEXT("mode " << dml::ModeName(mode) << ", model " << dml::ModelName(k.model)) {
      auto c = dml::net::LocalCluster::Start(DML_NODE_BINARY, 3, {"--threads=1"});
      BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
      dml::Runtime rt;
      dml::JobSpec s = Spec(mode, d.path, p_star);
      s.model.kind = k.model;
      if (k.model == dml::ModelKind::kLogisticL1) s.model.lambda = 1e-4;
      s.cluster.nodes = c->addresses();
      s.stop.gap_rel = 0;  // runs until cancelled
      s.stop.target_primal.reset();
      s.stop.max_epochs = 1000000;
      s.cocoa.local_epochs = 0.05;
      s.recovery.checkpoint_every = 4;
      auto j = rt.Submit(s);
      BOOST_REQUIRE_MESSAGE(j.ok(), j.status().ToString());
      std::vector<dml::Progress> seen;
      const auto deadline = Clock::now() + std::chrono::seconds(30);
      while (seen.size() < 8 && !j->Done() && Clock::now() < deadline) {
        for (auto& p : j->Poll()) seen.push_back(std::move(p));
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      BOOST_REQUIRE_MESSAGE(!j->Done(), "the job ended before the fault was injected");
      j->Cancel();
      c->Kill(1);
      auto r = j->WaitFor(std::chrono::seconds(60));
      BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
      BOOST_TEST_MESSAGE("events:\n" << Events(r->history) << "P-P* " << r->primal - p_star);
      BOOST_CHECK(r->reason == dml::StopReason::kCancelled);
      BOOST_TEST(r->w.size() == static_cast<std::size_t>(d.data->x.cols()));
      BOOST_TEST(r->primal < std::log(2.0));
      BOOST_TEST(c->Stop().ok());
    }
  }
}

namespace {

// Whether a thread of this process is blocked opening a FIFO for writing
// (the kernel's wait channel for that is wait_for_partner).
bool SomeThreadWaitsOnAFifo() {
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream wchan(task.path() / "wchan");
    std::string where;
    if (std::getline(wchan, where) && where == "wait_for_partner") return true;
  }
  return false;
}

}  // namespace

// Checkpointing: the checkpoint file's temporary name is a FIFO, so the
// coordinator blocks inside its first checkpoint write (after it gathered
// every worker's coordinates) until the test opens the other end. Node 1 is
// killed while it is blocked there; the write then completes and the job
// restores from that checkpoint on the nodes left and converges.
BOOST_AUTO_TEST_CASE(a_node_lost_while_a_checkpoint_is_written_restores_from_it) {
  Data d;
  const double p_star = Optimum(d, dml::ModelSpec{dml::ModelKind::kLogisticL2, 1e-3});
  auto c = dml::net::LocalCluster::Start(DML_NODE_BINARY, 3, {"--threads=1"});
  BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  const std::string ckpt = TempPath("ckpt");
  const std::string tmp = dml::TemporaryPathFor(ckpt);
  BOOST_REQUIRE(::mkfifo(tmp.c_str(), 0600) == 0);
  dml::Runtime rt;
  dml::JobSpec s = Spec(dml::Mode::kCocoa, d.path, p_star);
  s.cluster.nodes = c->addresses();
  s.recovery.path = ckpt;
  s.recovery.checkpoint_every = 3;
  auto j = rt.Submit(s);
  BOOST_REQUIRE_MESSAGE(j.ok(), j.status().ToString());
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (!SomeThreadWaitsOnAFifo() && !j->Done() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  BOOST_REQUIRE_MESSAGE(SomeThreadWaitsOnAFifo(), "the coordinator never reached its checkpoint write");
  c->Kill(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the loss is seen meanwhile
  const int fd = ::open(tmp.c_str(), O_RDONLY);  // releases the writer
  BOOST_REQUIRE(fd >= 0);
  char buf[65536];
  int64_t written = 0;
  for (ssize_t got; (got = ::read(fd, buf, sizeof buf)) > 0;) written += got;
  ::close(fd);
  BOOST_TEST(written > 0);
  auto r = j->WaitFor(std::chrono::seconds(60));
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  const std::string events = Events(r->history);
  BOOST_TEST_MESSAGE("events:\n" << events);
  BOOST_TEST(events.find("lost node(s) 1") != std::string::npos);
  // fsync of a FIFO fails (EINVAL): the failed write is reported and the
  // job goes on from the checkpoint it holds in memory.
  BOOST_TEST(events.find("checkpoint not written") != std::string::npos);
  BOOST_TEST(events.find("restarted from the checkpoint of round 0") != std::string::npos);
  // The same, as the structured events the metrics file gets.
  std::vector<std::string> kinds;
  for (const auto& p : r->history) {
    for (const auto& e : p.events) kinds.push_back(e.kind);
  }
  BOOST_TEST(std::count(kinds.begin(), kinds.end(), "checkpoint_failed") >= 1);
  BOOST_TEST(std::count(kinds.begin(), kinds.end(), "restarted") == 1);
  CheckFinished(*r, dml::Mode::kCocoa, p_star);
  BOOST_TEST(c->Stop().ok());
  std::remove(tmp.c_str());
  std::remove(ckpt.c_str());
}
