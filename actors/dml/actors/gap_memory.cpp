#include "dml/actors/gap_memory.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <caf/sec.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "absl/strings/str_cat.h"
#include "dml/solver/gap_memory.hpp"

namespace dml::actors {
namespace {

struct gap_memory_state {
  // Declared first, released last: the memory's threads read the data.
  std::shared_ptr<const Dataset> data;
  std::shared_ptr<GapMemory> memory;
  static inline const char* name = "gap_memory";
};

using memory_self = gap_memory_actor::stateful_pointer<gap_memory_state>;

caf::error Error(std::string what) {
  return caf::make_error(caf::sec::runtime_error, std::move(what));
}

gap_memory_actor::behavior_type gap_memory_impl(memory_self self,
                                                std::shared_ptr<const Dataset> data,
                                                std::shared_ptr<GapMemory> memory) {
  self->state.data = std::move(data);
  self->state.memory = std::move(memory);
  return {
      [self](publish_atom, const dvec& shared, const dvec& coords) -> caf::result<int64_t> {
        if (!shared.has_values() || !coords.has_values()) {
          return Error("gap memory: publish without values");
        }
        absl::StatusOr<int64_t> v =
            self->state.memory->Publish(*shared.as_vector(), *coords.as_vector());
        if (!v.ok()) return Error(std::string(v.status().message()));
        return *v;
      },
      [self](refresh_atom, bool all, const int64_list& ids) -> caf::result<int64_t> {
        GapMemory& memory = *self->state.memory;
        if (all) {
          memory.RefreshAll();
        } else {
          for (int64_t i : ids.values) {
            if (i < 0 || i >= memory.size()) {
              return Error(absl::StrCat("gap memory: refresh of coordinate ", i, "; there are ",
                                        memory.size()));
            }
          }
          memory.Refresh(ids.values);
        }
        return memory.refreshed();
      },
      [self](top_atom, int64_t m) -> caf::result<int64_list> {
        if (m < 0) return Error(absl::StrCat("gap memory: top ", m, "; at least 0"));
        const std::vector<double> z = self->state.memory->Values();
        std::vector<int64_t> ids(z.size());
        for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i);
        if (m < static_cast<int64_t>(ids.size())) {
          std::nth_element(ids.begin(), ids.begin() + m, ids.end(), [&](int64_t a, int64_t b) {
            return z[a] > z[b] || (z[a] == z[b] && a < b);
          });
          ids.resize(static_cast<std::size_t>(m));
        }
        std::sort(ids.begin(), ids.end());
        return int64_list{std::move(ids), {}};
      },
      [self](gaps_atom) -> caf::result<dvec, int64_list> {
        const int64_t last = self->state.memory->version();
        const std::vector<int64_t> versions = self->state.memory->Versions();
        std::vector<int64_t> ages(versions.size());
        for (std::size_t i = 0; i < ages.size(); ++i) {
          ages[i] = versions[i] == 0 ? last + 1 : last - versions[i];
        }
        return {dvec(self->state.memory->Values()), int64_list{std::move(ages), {}}};
      },
  };
}

// The client's calls, each a blocking request (scoped_actor).
class gap_memory_client final : public GapMemory {
 public:
  gap_memory_client(caf::actor_system& sys, gap_memory_actor actor, int64_t size)
      : sys_(sys), actor_(std::move(actor)), size_(size),
        values_(static_cast<std::size_t>(size), std::numeric_limits<double>::infinity()),
        versions_(static_cast<std::size_t>(size), 0) {}
  ~gap_memory_client() override {
    caf::anon_send_exit(actor_, caf::exit_reason::user_shutdown);
  }

  absl::StatusOr<int64_t> Publish(std::vector<double> shared,
                                  std::vector<double> coords) override {
    caf::scoped_actor self{sys_};
    absl::StatusOr<int64_t> out = absl::InternalError("gap memory: no reply");
    self->request(actor_, caf::infinite, publish_atom_v, dvec(std::move(shared)),
                  dvec(std::move(coords)))
        .receive([&](int64_t v) { out = version_ = v; },
                 [&](caf::error& e) {
                   out = absl::InvalidArgumentError(sys_.render(e));
                 });
    return out;
  }
  void RefreshAll() override { Refresh(true, {}); }
  void Refresh(const std::vector<int64_t>& ids) override { Refresh(false, ids); }
  int64_t size() const override { return size_; }
  int64_t version() const override { return version_; }
  std::vector<double> Values() const override {
    Fetch();
    return values_;
  }
  std::vector<int64_t> Versions() const override {
    Fetch();
    return versions_;
  }
  int64_t refreshed() const override { return refreshed_; }

 private:
  void Refresh(bool all, const std::vector<int64_t>& ids) {
    caf::scoped_actor self{sys_};
    self->request(actor_, caf::infinite, refresh_atom_v, all, int64_list{ids, {}})
        .receive([&](int64_t n) { refreshed_ = n; }, [](caf::error&) {});
  }
  // Values and ages; the versions back from the ages.
  void Fetch() const {
    caf::scoped_actor self{sys_};
    self->request(actor_, caf::infinite, gaps_atom_v)
        .receive(
            [&](const dvec& z, const int64_list& ages) {
              const std::shared_ptr<const std::vector<double>> v = z.as_vector();
              if (v == nullptr || v->size() != values_.size() ||
                  ages.values.size() != versions_.size()) {
                return;
              }
              values_ = *v;
              for (std::size_t i = 0; i < ages.values.size(); ++i) {
                const int64_t version = version_ - ages.values[i];
                versions_[i] = version > 0 ? version : 0;
              }
            },
            [](caf::error&) {});
  }

  caf::actor_system& sys_;
  gap_memory_actor actor_;
  int64_t size_;
  int64_t version_ = 0;
  int64_t refreshed_ = 0;
  mutable std::vector<double> values_;
  mutable std::vector<int64_t> versions_;
};

}  // namespace

namespace {

// The gap memory of `data` in an actor that keeps `data` alive, and its
// number of coordinates.
absl::StatusOr<std::pair<gap_memory_actor, int64_t>> Spawn(
    caf::actor_system& sys, std::shared_ptr<const Dataset> data, const ModelSpec& model,
    int threads, std::shared_ptr<const CscMatrix> cols = nullptr) {
  if (!data) return absl::InvalidArgumentError("gap memory: no data");
  absl::StatusOr<std::unique_ptr<GapMemory>> memory =
      cols ? GapMemory::Make(*data, model, threads, std::move(cols))
           : GapMemory::Make(*data, model, threads);
  if (!memory.ok()) return memory.status();
  const int64_t size = (*memory)->size();
  return std::make_pair(sys.spawn<caf::detached>(gap_memory_impl, std::move(data),
                                                 std::shared_ptr<GapMemory>(*std::move(memory))),
                        size);
}

}  // namespace

absl::StatusOr<gap_memory_actor> SpawnGapMemory(caf::actor_system& sys,
                                                std::shared_ptr<const Dataset> data,
                                                const ModelSpec& model, int threads) {
  auto spawned = Spawn(sys, std::move(data), model, threads);
  if (!spawned.ok()) return spawned.status();
  return spawned->first;
}

std::unique_ptr<GapMemory> MakeGapMemoryClient(caf::actor_system& sys, gap_memory_actor actor,
                                               int64_t size) {
  return std::make_unique<gap_memory_client>(sys, std::move(actor), size);
}

absl::StatusOr<std::unique_ptr<GapMemory>> MakeGapMemoryOnActor(
    caf::actor_system& sys, std::shared_ptr<const Dataset> data, const ModelSpec& model,
    int threads, std::shared_ptr<const CscMatrix> cols) {
  auto spawned = Spawn(sys, std::move(data), model, threads, std::move(cols));
  if (!spawned.ok()) return spawned.status();
  return MakeGapMemoryClient(sys, std::move(spawned->first), spawned->second);
}

}  // namespace dml::actors
