#include "dml/actors/gap_memory.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor_system.hpp>
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

}  // namespace

absl::StatusOr<gap_memory_actor> SpawnGapMemory(caf::actor_system& sys,
                                                std::shared_ptr<const Dataset> data,
                                                const ModelSpec& model, int threads) {
  if (!data) return absl::InvalidArgumentError("gap memory: no data");
  absl::StatusOr<std::unique_ptr<GapMemory>> memory = GapMemory::Make(*data, model, threads);
  if (!memory.ok()) return memory.status();
  return sys.spawn(gap_memory_impl, std::move(data),
                   std::shared_ptr<GapMemory>(*std::move(memory)));
}

}  // namespace dml::actors
