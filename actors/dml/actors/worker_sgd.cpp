// A worker's SGD loop (internal/worker_state.hpp): pulls, pushes, the
// exchanges of the local-model modes, and the step that the job's topology
// composes from them (worker_ops).
#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <caf/send.hpp>

#include "dml/actors/internal/bulk_resolve.hpp"
#include "dml/actors/internal/worker_state.hpp"
#include "dml/data/libsvm.hpp"
#include "dml/data/partition.hpp"
#include "dml/util/status.hpp"

namespace dml::actors::internal {
namespace {
void step_done(self_ptr self, uint64_t loop);
std::vector<key_list> batch_keys(const worker_state& st, const std::vector<int64_t>& rows);
// Pushes a hogwild worker keeps in flight on the key-value store before it
// waits for the oldest (bounds the deltas held in the store's queues).
constexpr std::size_t kKvPushWindow = 8;

// The distinct columns of `rows`, sorted, into `out` (uint32_t: shard key
// lists; int64_t: key-value store keys).
template <class Key>
void DistinctColumns(const Dataset& data, const std::vector<int64_t>& rows, std::vector<Key>& out) {
  out.clear();
  for (int64_t r : rows) {
    const SparseView v = data.x.outer(r);
    out.insert(out.end(), v.index, v.index + v.size);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
}

// HogwildStep's regulariser weights for a worker that samples only its own
// rows: 1 / (the chance its batch touches column j), times K / K_j where
// K_j workers' rows touch j, so that the K workers' steps together apply
// the whole regulariser to every column in expectation (with the local
// weights alone, a column missing from some partitions would get K_j / K
// of it, and the iterates a biased optimum).
std::vector<double> KvInverseTouch(const worker_state& st) {
  std::vector<double> inv = InverseTouchProbabilities(st.local, st.cfg.batch_size);
  if (!st.shared_data) return inv;  // one partition: nothing to rescale
  const std::vector<int32_t>& touching =
      st.cfg.hogwild->PartitionsTouching(*st.shared_data, st.cfg.workers);
  for (std::size_t j = 0; j < touching.size() && j < inv.size(); ++j) {
    if (touching[j] > 0) inv[j] *= static_cast<double>(st.cfg.workers) / touching[j];
  }
  return inv;
}

}  // namespace

// Pulls every shard's range into st.w; with `keys` (one list per shard, null
// for the whole range) only those keys are fetched and written.
void pull_all(self_ptr self, int64_t clock, std::function<void()> done,
              std::function<void(caf::error)> on_error, std::vector<key_list> keys) {
  auto& st = self->state;
  st.lazy_ahead = false;  // what is pulled replaces the model
  auto counter = std::make_shared<fan_in>(st.shards.size());
  for (std::size_t s = 0; s < st.shards.size(); ++s) {
    key_list k = s < keys.size() ? keys[s] : key_list{};
    auto on_err = first_error(counter, on_error);
    auto on_part = [self, s, k, counter, done, on_err](dvec part) mutable {
      auto& st = self->state;
      if (counter->failed) return;
      const int64_t b = st.bounds[s];
      // A reply is checked before it touches w: a peer's bad bytes or a
      // wrong length fail the step, never write out of range.
      const std::size_t want =
          k.keys ? k.size() : static_cast<std::size_t>(st.bounds[s + 1] - b);
      if (!part.wire_error.empty() || part.size() != want) {
        return on_err(fail(st.who + "pull reply from shard " + std::to_string(s) + ": " +
                           (part.wire_error.empty()
                                ? std::to_string(part.size()) + " values, expected " +
                                      std::to_string(want)
                                : part.wire_error)));
      }
      if (k.keys) {
        for (std::size_t i = 0; i < part.size(); ++i) {
          st.w[b + (*k.keys)[i]] = part.data()[i];
        }
        st.bytes += k.bytes();
      } else {
        std::copy(part.view().begin(), part.view().end(), st.w.begin() + b);
      }
      st.bytes += part.bytes();
      if (--counter->remaining == 0) done();
    };
    const std::size_t want =
        k.keys ? k.size() : static_cast<std::size_t>(st.bounds[s + 1] - st.bounds[s]);
    auto on_reply = [self, on_part, want](dvec& part) mutable {
      internal::with_values(self, self->state.fetcher, std::move(part), on_part, want);
    };
    if (k.keys) {
      self->request(st.shards[s], kRequestTimeout, pull_atom_v, st.cfg.index, clock, k)
          .then(on_reply, on_err);
    } else {
      self->request(st.shards[s], kRequestTimeout, pull_atom_v, st.cfg.index, clock)
          .then(on_reply, on_err);
    }
  }
}

namespace {

// The keys a minibatch reads, per shard, where a key list is cheaper than the
// range (4 bytes out and 8 back per key against 8 per range entry).
std::vector<key_list> batch_keys(const worker_state& st, const std::vector<int64_t>& rows) {
  std::vector<uint32_t> cols;
  DistinctColumns(st.local, rows, cols);
  std::vector<key_list> out(st.shards.size());
  auto it = cols.begin();
  for (std::size_t s = 0; s < st.shards.size(); ++s) {
    const int64_t b = st.bounds[s], e = st.bounds[s + 1];
    auto end = std::lower_bound(it, cols.end(), static_cast<uint32_t>(e));
    const int64_t count = end - it;
    if (count * 12 < (e - b) * 8) {
      auto keys = std::make_shared<std::vector<uint32_t>>();
      keys->reserve(count);
      for (auto j = it; j != end; ++j) keys->push_back(static_cast<uint32_t>(*j - b));
      out[s].keys = std::move(keys);
    }
    it = end;
  }
  return out;
}

}  // namespace

// Pushes x (length = model dimension) split by shard, sparse where smaller.
// `movable`, when given, is x itself and may be moved into a message that
// covers all of it (one shard): no copy.
void push_all(self_ptr self, int64_t clock, const std::vector<double>& x,
              std::function<void()> done, std::function<void(caf::error)> on_error,
              std::vector<double>* movable) {
  auto& st = self->state;
  auto counter = std::make_shared<fan_in>(st.shards.size());
  auto on_ack = [counter, done](int64_t) {
    if (counter->failed) return;
    if (--counter->remaining == 0) done();
  };
  auto on_err = first_error(counter, on_error);
  for (std::size_t s = 0; s < st.shards.size(); ++s) {
    const int64_t b = st.bounds[s], e = st.bounds[s + 1];
    int64_t nnz = 0;
    for (int64_t j = b; j < e; ++j) nnz += x[j] != 0.0;
    // A sparse entry costs 12 bytes, a dense one 8.
    if (nnz * 12 < (e - b) * 8) {
      auto index = std::make_shared<std::vector<uint32_t>>();
      auto value = std::make_shared<std::vector<double>>();
      index->reserve(nnz);
      value->reserve(nnz);
      for (int64_t j = b; j < e; ++j) {
        if (x[j] != 0.0) {
          index->push_back(static_cast<uint32_t>(j - b));
          value->push_back(x[j]);
        }
      }
      sparse_dvec msg{std::move(index), std::move(value), {}};
      st.bytes += msg.bytes();
      self->request(st.shards[s], kRequestTimeout, push_atom_v, st.cfg.index, clock, msg)
          .then(on_ack, on_err);
    } else {
      dvec msg = (b == 0 && e == static_cast<int64_t>(x.size()) && movable)
                     ? dvec(std::move(*movable))
                     : dvec(std::vector<double>(x.begin() + b, x.begin() + e));
      st.bytes += msg.bytes();
      self->request(st.shards[s], kRequestTimeout, push_atom_v, st.cfg.index, clock, msg)
          .then(on_ack, on_err);
    }
  }
}

void finish_run(self_ptr self, caf::error err, uint64_t loop) {
  auto& st = self->state;
  if (!st.running || loop != st.loop) return;
  st.running = false;
  if (err) {
    st.run_promise.deliver(std::move(err));
  } else {
    st.run_promise.deliver(st.report());
  }
}

namespace {

// After a step: count it, report progress, schedule the next one. A
// continuation of a superseded loop (the coordinator restarted this worker
// after a recovery) is dropped.
void step_done(self_ptr self, uint64_t loop) {
  auto& st = self->state;
  if (loop != st.loop) return;
  ++st.clock;
  st.processed += st.cfg.batch_size;
  if (st.cfg.coordinator && st.clock % st.report_every == 0) {
    caf::anon_send(st.cfg.coordinator, st.report());
  }
  if (st.clock >= st.permit && !st.halted && st.clock < st.max_clock) {
    st.parked = true;  // a permit or a halt resumes the loop
    return;
  }
  self->send(self, step_atom_v, st.loop);
}

}  // namespace

caf::error as_error(const worker_state& st, const absl::Status& s) {
  // The status code travels beside the text (the coordinator fails the job
  // with both: a worker's ResourceExhausted stays one).
  return caf::make_error(caf::sec::runtime_error, st.who + std::string(s.message()),
                         static_cast<int32_t>(s.code()));
}

namespace {

// easgd and model averaging, every tau steps: each shard gets this
// worker's range of its local model (`send(s, x)` makes the request) and
// `fold(w + begin, reply)` takes the reply into that range; the step ends
// once every shard has answered. `what` names the exchange in errors.
template <class Send, class Fold, class Fail>
void exchange_with_shards(self_ptr self, uint64_t loop, const char* what, Send send, Fold fold,
                          Fail on_error) {
  auto& st = self->state;
  sync_local_model(st);  // the lazily stepped model goes out
  auto counter = std::make_shared<fan_in>(st.shards.size());
  for (std::size_t s = 0; s < st.shards.size(); ++s) {
    const int64_t b = st.bounds[s], e = st.bounds[s + 1];
    dvec x(std::vector<double>(st.w.begin() + b, st.w.begin() + e));
    st.bytes += 2 * x.bytes();
    auto on_values = [self, b, len = e - b, counter, loop, what, fold,
                      on_err = first_error(counter, on_error)](dvec reply) mutable {
          auto& st = self->state;
          if (counter->failed || loop != st.loop) return;
          if (!reply.wire_error.empty() || static_cast<int64_t>(reply.size()) != len) {
            return on_err(fail(st.who + what + " reply: " +
                               (reply.wire_error.empty()
                                    ? std::to_string(reply.size()) + " values, expected " +
                                          std::to_string(len)
                                    : reply.wire_error)));
          }
          fold(st.w.data() + b, reply);
          if (--counter->remaining == 0) {
            ++st.exchanges;
            step_done(self, loop);
          }
    };
    send(s, x).then(
        [self, on_values, len = static_cast<std::size_t>(e - b)](dvec& reply) mutable {
          internal::with_values(self, self->state.fetcher, std::move(reply), on_values, len);
        },
        first_error(counter, on_error));
  }
}

// The operations a mode's SGD step is made of (topology.hpp), on this
// worker's state; one per step, `rows` its minibatch.
class step_ops final : public worker_ops {
 public:
  step_ops(self_ptr self, uint64_t loop, std::vector<int64_t> rows)
      : self_(self), loop_(loop), rows_(std::move(rows)) {}

  int64_t clock() const override { return self_->state.clock; }
  int32_t tau() const override { return self_->state.cfg.tau; }

  void gradient_exchange() override {
    // The loss gradient reads w only at the batch's columns: pull those.
    auto self = self_;
    const uint64_t loop = loop_;
    auto on_error = error_handler();
    auto& st = self->state;
    pull_all(self, st.clock, [self, rows = rows_, on_error, loop] {
      auto& st = self->state;
      if (loop != st.loop) return;  // superseded: never push to the new shards
      auto g = st.cfg.saga ? SagaGradient(st.local, st.cfg.model, rows, st.w, st.saga_memory)
               : st.svrg_mu.empty()
                   ? MinibatchGradient(st.local, st.cfg.model, rows, st.w,
                                       /*include_regularizer=*/false)
                   : SvrgGradient(st.local, st.cfg.model, rows, st.w, st.anchor, st.svrg_mu);
      if (!g.ok()) return on_error(as_error(st, g.status()));
      push_all(self, st.clock, *g, [self, loop] { internal::step_done(self, loop); },
               on_error);
    }, on_error, batch_keys(st, rows_));
  }

  absl::Status local_step() override {
    auto& st = self_->state;
    if (!st.lazy || rows_.size() > st.lazy_batch) {
      sync_local_model(st);
      st.lazy_batch = std::max<std::size_t>(rows_.size(), static_cast<std::size_t>(st.cfg.batch_size));
      auto m = MakeLazySgdModel(st.local, st.cfg.model, st.lazy_batch, st.cfg.feature_steps);
      if (!m.ok()) return m.status();
      st.lazy = *std::move(m);
    }
    if (!st.lazy_ahead) st.lazy->Load(st.w);  // w moved (an exchange) since
    if (auto s = st.lazy->Step(rows_, st.step_size()); !s.ok()) return s;
    st.lazy_ahead = true;
    return absl::OkStatus();
  }

  absl::Status shared_model_step() override {
    auto& st = self_->state;
    hogwild_model& m = *st.cfg.hogwild;
    const double t = static_cast<double>(m.steps.fetch_add(1, std::memory_order_relaxed)) /
                     static_cast<double>(m.step_sharers > 0 ? m.step_sharers : st.cfg.workers);
    // As the async shards' staleness rule, 1 / sqrt(1 + tau), with the
    // delay it cannot measure taken as K - 1: the other workers' concurrent
    // steps. Measured, K = 4: news20 after 40 epochs 14.1% above the optimum
    // with the calibrated step 4, 10.7% with 4 / sqrt(4); a9a after 30
    // epochs 9.1e-4 with 1, 1.2e-3 with 1 / sqrt(4): on balance kept.
    const double step = st.cfg.step0 / (1.0 + st.cfg.step_decay * t) /
                        std::sqrt(static_cast<double>(st.cfg.workers));
    if (!m.kv.empty()) return kv_model_step(st, m, step);
    const Dataset& data = *st.shared_data;
    if (st.inv_touch.empty()) st.inv_touch = InverseTouchProbabilities(data, st.cfg.batch_size);
    return HogwildStep(data, st.cfg.model, rows_, step, st.inv_touch, m.w.data(), m.w.size(),
                       st.hog_scratch, st.cfg.feature_steps);
  }

  // Hogwild over the key-value store: pull the batch's columns, step them
  // as a local model, push the change (the store adds it to whatever other
  // workers pushed meanwhile). The pull waits (in this process: one
  // message per other node, microseconds); pushes do not, up to a window.
  absl::Status kv_model_step(worker_state& st, hogwild_model& m, double step) {
    KvNode& kv = m.kv_of(st.cfg.index);
    const Dataset& data = st.local;
    if (st.inv_touch.empty()) st.inv_touch = KvInverseTouch(st);
    if (st.kv_w.size() != static_cast<std::size_t>(st.d)) {
      st.kv_w = std::vector<std::atomic<double>>(static_cast<std::size_t>(st.d));
    }
    if (st.kv_next_clock == st.clock) {
      st.kv_keys.swap(st.kv_next_keys);  // this batch's, found when localizing it
    } else {
      DistinctColumns(data, rows_, st.kv_keys);
    }
    st.kv_pulled.assign(st.kv_keys.size(), 0.0);
    DML_ASSIGN_OR_RETURN(KvHandle pull, kv.Pull(st.kv_keys, st.kv_pulled.data()));
    DML_RETURN_IF_ERROR(kv.Wait(pull));
    for (std::size_t i = 0; i < st.kv_keys.size(); ++i) {
      st.kv_w[static_cast<std::size_t>(st.kv_keys[i])].store(st.kv_pulled[i],
                                                             std::memory_order_relaxed);
    }
    DML_RETURN_IF_ERROR(HogwildStep(data, st.cfg.model, rows_, step, st.inv_touch, st.kv_w.data(),
                                    st.kv_w.size(), st.hog_scratch, st.cfg.feature_steps));
    st.kv_deltas.resize(st.kv_keys.size());
    for (std::size_t i = 0; i < st.kv_keys.size(); ++i) {
      st.kv_deltas[i] =
          st.kv_w[static_cast<std::size_t>(st.kv_keys[i])].load(std::memory_order_relaxed) -
          st.kv_pulled[i];
    }
    DML_ASSIGN_OR_RETURN(KvHandle push, kv.Push(st.kv_keys, st.kv_deltas));
    st.kv_pushes.push_back(std::move(push));
    while (st.kv_pushes.size() > kKvPushWindow) {
      DML_RETURN_IF_ERROR(kv.Wait(st.kv_pushes.front()));
      st.kv_pushes.pop_front();
    }
    if (kv.options().dynamic) {
      // Latency hiding: the next batch's columns move here while this one
      // is pushed; its pull then finds them in place (or queued on the way).
      // Its rows depend only on the clock (SampleBatch), so its columns are
      // kept for that step.
      const auto next = SampleBatch(st.cfg.seed, st.cfg.index, st.clock + 1, data.x.rows(),
                                    st.cfg.batch_size);
      DistinctColumns(data, next, st.kv_next_keys);
      st.kv_next_clock = st.clock + 1;
      DML_RETURN_IF_ERROR(kv.Localize(st.kv_next_keys).status());
    }
    return absl::OkStatus();
  }

  void elastic_exchange() override {
    // The shard moves the center toward x and replies e; the local model
    // moves by -e.
    auto self = self_;
    exchange_with_shards(
        self, loop_, "elastic",
        [self](std::size_t s, const dvec& x) {
          auto& st = self->state;
          return self->request(st.shards[s], kRequestTimeout, elastic_atom_v, st.cfg.index, x);
        },
        [](double* w, const dvec& e) {
          for (std::size_t j = 0; j < e.size(); ++j) w[j] -= e.data()[j];
        },
        error_handler());
  }

  void average_exchange() override {
    // Push the local model and continue from the mean, one pushpull per shard.
    auto self = self_;
    exchange_with_shards(
        self, loop_, "model-averaging",
        [self](std::size_t s, const dvec& x) {
          auto& st = self->state;
          return self->request(st.shards[s], kRequestTimeout, pushpull_atom_v, st.cfg.index,
                               st.exchanges, x);
        },
        [](double* w, const dvec& mean) { std::copy(mean.view().begin(), mean.view().end(), w); },
        error_handler());
  }

  void step_done() override { internal::step_done(self_, loop_); }
  void fail(absl::Status why) override { error_handler()(as_error(self_->state, why)); }

 private:
  std::function<void(caf::error)> error_handler() const {
    auto self = self_;
    const uint64_t loop = loop_;
    return [self, loop](caf::error err) { finish_run(self, std::move(err), loop); };
  }

  self_ptr self_;
  uint64_t loop_;
  std::vector<int64_t> rows_;
};

}  // namespace

void sgd_step(self_ptr self) {
  auto& st = self->state;
  if (!st.running) return;
  const uint64_t loop = st.loop;
  if (st.halted || st.clock >= st.max_clock) {
    finish_run(self, caf::none, loop);
    return;
  }
  // Hogwild in memory samples the whole dataset; on the key-value store a
  // worker samples its own rows (its node is where its data lives).
  const bool whole = st.shared_data && !(st.cfg.hogwild && !st.cfg.hogwild->kv.empty());
  const Dataset& sample_from = whole ? *st.shared_data : st.local;
  step_ops ops(self, loop,
               SampleBatch(st.cfg.seed, st.cfg.index, st.clock, sample_from.x.rows(),
                           st.cfg.batch_size));
  st.topo->sgd_step(ops);
}


}  // namespace dml::actors::internal

namespace dml::actors {

namespace {

// Key-value groups being stopped. A group's last owner is usually an actor
// exiting; stopping a CAF 0.17 actor system from one of another system's
// scheduler threads, or while blocking them (a join), hung at the
// runtime's teardown (seen 2 runs of 3). So a thread of its own stops it,
// unjoined, and the runtime waits for the count after its own system.
struct KvReaper {
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0;
};
KvReaper& Reaper() {
  static KvReaper* r = new KvReaper;  // never destroyed: a reaping thread may outlive statics
  return *r;
}

}  // namespace

hogwild_model::~hogwild_model() {
  if (kv.empty()) return;
  KvReaper& r = Reaper();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    ++r.in_flight;
  }
  std::thread([nodes = std::move(kv), &r]() mutable {
    nodes.clear();
    std::lock_guard<std::mutex> lock(r.mu);
    --r.in_flight;
    r.cv.notify_all();
  }).detach();
}

bool AwaitKvShutdowns(std::chrono::duration<double> timeout) {
  KvReaper& r = Reaper();
  std::unique_lock<std::mutex> lock(r.mu);
  return r.cv.wait_for(lock, timeout, [&] { return r.in_flight == 0; });
}

const std::vector<int32_t>& hogwild_model::PartitionsTouching(const Dataset& full, int workers) {
  std::call_once(touching_once_, [&] {
    auto ranges = BalancedRanges(full.x.offsets(), workers);
    if (!ranges.ok()) return;
    touching_.assign(static_cast<std::size_t>(full.x.cols()), 0);
    std::vector<int32_t> last(touching_.size(), -1);
    for (int32_t k = 0; k < static_cast<int32_t>(ranges->size()); ++k) {
      const auto& range = (*ranges)[static_cast<std::size_t>(k)];
      for (int64_t r = range.begin; r < range.end; ++r) {
        const SparseView v = full.x.outer(r);
        for (std::size_t p = 0; p < v.size; ++p) {
          const std::size_t j = v.index[p];
          if (last[j] != k) {
            last[j] = k;
            ++touching_[j];
          }
        }
      }
    }
  });
  return touching_;
}

absl::Status hogwild_model::allocate_kv(std::size_t d, int workers, int64_t block,
                                        bool localize) {
  KvOptions o;
  o.keys = static_cast<int64_t>(d);
  o.block = block;
  o.dynamic = localize;
  DML_ASSIGN_OR_RETURN(auto group, KvNode::StartLocalGroup(workers, o, 1));
  kv.assign(std::make_move_iterator(group.begin()), std::make_move_iterator(group.end()));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> hogwild_model::read() const {
  if (kv.empty()) {
    std::vector<double> out(w.size());
    for (std::size_t j = 0; j < w.size(); ++j) out[j] = w[j].load(std::memory_order_relaxed);
    return out;
  }
  std::vector<int64_t> keys(size());
  for (std::size_t j = 0; j < keys.size(); ++j) keys[j] = static_cast<int64_t>(j);
  std::vector<double> out(keys.size(), 0.0);
  DML_ASSIGN_OR_RETURN(KvHandle h, kv[0]->Pull(keys, out.data()));
  DML_RETURN_IF_ERROR(kv[0]->Wait(h));
  return out;
}

}  // namespace dml::actors
