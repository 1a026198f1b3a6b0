#include "dml/actors/gpu_solver.hpp"

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor_addr.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/sec.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "absl/strings/str_cat.h"

namespace dml::actors {
namespace {

caf::error ToError(const absl::Status& s) {
  return caf::make_error(caf::sec::runtime_error, static_cast<int32_t>(s.code()),
                         std::string(s.message()));
}

absl::Status ToStatus(caf::actor_system& sys, const caf::error& e) {
  if (e.context().match_elements<int32_t, std::string>()) {
    return absl::Status(static_cast<absl::StatusCode>(e.context().get_as<int32_t>(0)),
                        e.context().get_as<std::string>(1));
  }
  // Not ours: the actor is gone, or CAF's own failure.
  return absl::UnavailableError(absl::StrCat("gpu_solver: ", sys.render(e)));
}

struct gpu_solver_state {
  struct entry {
    std::unique_ptr<LocalSolver> solver;
    std::shared_ptr<std::atomic<bool>> interrupt;
  };
  std::map<int32_t, entry> blocks;
  int32_t next_id = 0;
  static inline const char* name = "gpu_solver";
};

using solver_self = gpu_solver_actor::stateful_pointer<gpu_solver_state>;

// The block `id`, or an InvalidArgument error.
absl::StatusOr<gpu_solver_state::entry*> Find(solver_self self, int32_t id) {
  auto it = self->state.blocks.find(id);
  if (it == self->state.blocks.end()) {
    return absl::InvalidArgumentError(absl::StrCat("gpu_solver: no block ", id));
  }
  return &it->second;
}

gpu_solver_actor::behavior_type gpu_solver_impl(solver_self self) {
  return {
      [self](init_atom, const gpu_block_ptr& b) -> caf::result<int32_t> {
        absl::StatusOr<std::unique_ptr<LocalSolver>> s =
            b && b->make ? b->make()
                         : absl::InvalidArgumentError("gpu_solver: init without a block");
        if (!s.ok()) {
          // Nothing else would end an actor that never held a block.
          if (self->state.blocks.empty()) self->quit();
          return ToError(s.status());
        }
        const int32_t id = self->state.next_id++;
        self->state.blocks[id] = {*std::move(s), b->interrupt};
        return id;
      },
      [self](solve_atom, int32_t id, const dvec& shared, double sigma_prime, double gamma,
             int64_t steps) -> caf::result<dvec, int64_t, int64_t> {
        auto e = Find(self, id);
        if (!e.ok()) return ToError(e.status());
        if (!shared.has_values()) return ToError(absl::InvalidArgumentError("solve: no shared vector"));
        absl::StatusOr<LocalUpdate> up = (*e)->solver->Solve(
            *shared.as_vector(), sigma_prime, gamma, steps, (*e)->interrupt.get());
        if (!up.ok()) return ToError(up.status());
        return {dvec(std::move(up->delta_shared)), up->steps, up->nnz_touched};
      },
      [self](certify_atom, int32_t id, const dvec& shared) -> caf::result<block_sums> {
        auto e = Find(self, id);
        if (!e.ok()) return ToError(e.status());
        if (!shared.has_values()) return ToError(absl::InvalidArgumentError("certify: no shared vector"));
        absl::StatusOr<BlockCertificate> c = (*e)->solver->Certify(*shared.as_vector());
        if (!c.ok()) return ToError(c.status());
        return block_sums{c->loss_sum, c->gap_sum, c->reg_sum, {}};
      },
      [self](coords_atom, int32_t id) -> caf::result<dvec> {
        auto e = Find(self, id);
        if (!e.ok()) return ToError(e.status());
        return dvec((*e)->solver->coordinates());
      },
      [self](coords_atom, int32_t id, const dvec& c) -> caf::result<bool> {
        auto e = Find(self, id);
        if (!e.ok()) return ToError(e.status());
        std::vector<double> v;
        if (c.has_values()) v = *c.as_vector();
        if (auto s = (*e)->solver->set_coordinates(std::move(v)); !s.ok()) return ToError(s);
        return true;
      },
      [self](init_atom, int32_t id, const gpu_reload_ptr& r) -> caf::result<int64_t> {
        auto e = Find(self, id);
        if (!e.ok()) return ToError(e.status());
        if (!r) return ToError(absl::InvalidArgumentError("gpu_solver: reload without a block"));
        absl::StatusOr<int64_t> moved = (*e)->solver->Reload(std::move(r->block), r->kept);
        if (!moved.ok()) return ToError(moved.status());
        return *moved;
      },
      [self](halt_atom, int32_t id) {
        self->state.blocks.erase(id);
        if (self->state.blocks.empty()) self->quit();
      },
  };
}

std::mutex registry_mutex;
// By actor system and device: weak, so a gpu_solver that ended is replaced.
std::map<std::pair<const caf::actor_system*, int>, caf::actor_addr>& Registry() {
  static auto* r = new std::map<std::pair<const caf::actor_system*, int>, caf::actor_addr>;
  return *r;
}

// Forgets `stale` as the gpu_solver of (sys, device) if it still is.
void Forget(caf::actor_system& sys, int device, const gpu_solver_actor& stale) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto it = Registry().find({&sys, device});
  if (it != Registry().end() && it->second == stale.address()) Registry().erase(it);
}

// Blocking request-response from a non-actor caller: the reply's values go
// to `on_ok`; an error becomes the status.
template <class... Ts, class OnOk>
absl::Status Ask(caf::actor_system& sys, const gpu_solver_actor& to, OnOk on_ok, Ts&&... xs) {
  caf::scoped_actor self{sys};
  absl::Status status;
  self->request(to, caf::infinite, std::forward<Ts>(xs)...)
      .receive(on_ok, [&](caf::error& e) { status = ToStatus(sys, e); });
  return status;
}

class RemoteLocalSolver final : public LocalSolver {
 public:
  RemoteLocalSolver(caf::actor_system& sys, gpu_solver_actor solver, int32_t id)
      : sys_(sys), solver_(std::move(solver)), id_(id) {}
  ~RemoteLocalSolver() override { caf::anon_send(solver_, halt_atom_v, id_); }

  absl::StatusOr<LocalUpdate> Solve(const std::vector<double>& shared, double sigma_prime,
                                    double gamma, int64_t steps,
                                    const std::atomic<bool>*) override {
    // The block's own flag (given at init) is the one the actor reads.
    LocalUpdate up;
    absl::Status s = Ask(
        sys_, solver_,
        [&](dvec& delta, int64_t n, int64_t nnz) {
          up.delta_shared = delta.has_values() ? *delta.as_vector() : std::vector<double>{};
          up.steps = n;
          up.nnz_touched = nnz;
        },
        solve_atom_v, id_, Share(shared), sigma_prime, gamma, steps);
    if (!s.ok()) return s;
    return up;
  }

  absl::StatusOr<BlockCertificate> Certify(const std::vector<double>& shared) const override {
    BlockCertificate c;
    absl::Status s = Ask(
        sys_, solver_,
        [&](block_sums& b) {
          c.loss_sum = b.loss_sum;
          c.gap_sum = b.gap_sum;
          c.reg_sum = b.reg_sum;
        },
        certify_atom_v, id_, Share(shared));
    if (!s.ok()) return s;
    return c;
  }

  const std::vector<double>& coordinates() const override {
    // The interface returns a reference (and no error): a copy refreshed on
    // each call, left as it was where the actor could not answer.
    (void)Ask(
        sys_, solver_,
        [&](dvec& c) { coords_ = c.has_values() ? *c.as_vector() : std::vector<double>{}; },
        coords_atom_v, id_);
    return coords_;
  }

  absl::Status set_coordinates(std::vector<double> c) override {
    return Ask(
        sys_, solver_, [](bool) {}, coords_atom_v, id_, dvec(std::move(c)));
  }

  absl::StatusOr<int64_t> Reload(LocalBlock block, const std::vector<int64_t>& kept) override {
    auto r = std::make_shared<gpu_reload>();
    r->block = std::move(block);
    r->kept = kept;
    int64_t moved = 0;
    absl::Status s = Ask(
        sys_, solver_, [&](int64_t m) { moved = m; }, init_atom_v, id_, gpu_reload_ptr(r));
    if (!s.ok()) return s;
    return moved;
  }

 private:
  // The caller keeps `shared` alive until the reply: the request borrows it.
  static dvec Share(const std::vector<double>& v) {
    return dvec(std::shared_ptr<const void>(&v, [](const void*) {}), v.data(), v.size());
  }

  caf::actor_system& sys_;
  gpu_solver_actor solver_;
  int32_t id_;
  mutable std::vector<double> coords_;
};

}  // namespace

gpu_solver_actor GpuSolverOf(caf::actor_system& sys, int device) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  caf::actor_addr& addr = Registry()[{&sys, device}];
  if (auto live = caf::actor_cast<gpu_solver_actor>(addr)) return live;
  gpu_solver_actor a = sys.spawn<caf::detached>(gpu_solver_impl);
  addr = a.address();
  return a;
}

absl::StatusOr<std::unique_ptr<LocalSolver>> MakeRemoteLocalSolver(caf::actor_system& sys,
                                                                   int device, gpu_block block) {
  auto b = std::make_shared<gpu_block>(std::move(block));
  absl::Status last;
  // A gpu_solver may end (its last block dropped) between the lookup and
  // the init: then a fresh one.
  for (int attempt = 0; attempt < 3; ++attempt) {
    gpu_solver_actor solver = GpuSolverOf(sys, device);
    int32_t id = -1;
    caf::scoped_actor self{sys};
    bool gone = false;
    self->request(solver, caf::infinite, init_atom_v, b)
        .receive([&](int32_t got) { id = got; },
                 [&](caf::error& e) {
                   gone = e == caf::sec::request_receiver_down;
                   last = ToStatus(sys, e);
                 });
    if (id >= 0) return std::unique_ptr<LocalSolver>(new RemoteLocalSolver(sys, solver, id));
    if (!gone) return last;
    Forget(sys, device, solver);
  }
  return last;
}

absl::StatusOr<std::unique_ptr<LocalSolver>> MakeGpuLocalSolver(
    caf::actor_system& sys, LocalBlock block, const ModelSpec& model, uint64_t seed,
    const gpu::TpaScdOptions& gpu, std::shared_ptr<std::atomic<bool>> interrupt) {
  // No device to hold the block: the checks, errors and fallback of
  // MakeTpaScdLocalSolver, here.
  if (!gpu::QueryDevice(gpu.device).ok()) {
    return gpu::MakeTpaScdLocalSolver(std::move(block), model, seed, gpu);
  }
  const absl::Status valid = FormulationOf(model.kind) == Formulation::kDual
                                 ? CheckDualBlock(block, model)
                                 : CheckPrimalBlock(block, model);
  if (!valid.ok()) return valid;
  // The block is needed again if the device refuses it (the fallback runs
  // here, on the worker's thread, not in the device's actor).
  auto keep = std::make_shared<LocalBlock>(gpu.allow_fallback ? block : std::move(block));
  gpu::TpaScdOptions on_device = gpu;
  on_device.allow_fallback = false;
  gpu_block request;
  request.make = [keep, model, seed, on_device] {
    return gpu::MakeTpaScdLocalSolver(std::move(*keep), model, seed, on_device);
  };
  request.interrupt = std::move(interrupt);
  absl::StatusOr<std::unique_ptr<LocalSolver>> r =
      MakeRemoteLocalSolver(sys, gpu.device, std::move(request));
  if (r.ok()) return r;
  return gpu::LocalSolverFallback(r.status(), std::move(block), model, seed, gpu);
}

}  // namespace dml::actors
