#include "dml/actors/partition_actor.hpp"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/result.hpp>
#include <caf/sec.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "dml/gpu/spmv.hpp"

namespace dml::actors {
namespace {

struct partition_state {
  // Shared so the spawn arguments (copied by CAF) never copy the data.
  std::shared_ptr<const Dataset> data;
  static inline const char* name = "dml.partition";
};

partition_actor::behavior_type partition_impl(
    partition_actor::stateful_pointer<partition_state> self, std::shared_ptr<const Dataset> data) {
  self->state.data = std::move(data);
  return {
      [self](stats_atom) -> caf::result<int64_t, int64_t, int64_t> {
        const CsrMatrix& x = self->state.data->x;
        return {x.rows(), x.cols(), x.nnz()};
      },
      [self](matvec_atom, const dense_block& w) -> caf::result<dense_block> {
        absl::StatusOr<std::vector<float>> z = gpu::SpmvCpu(self->state.data->x, w.view());
        if (!z.ok()) {
          return caf::make_error(caf::sec::invalid_argument,
                                 "matvec: " + std::string(z.status().message()));
        }
        return dense_block(*std::move(z));
      },
  };
}

}  // namespace

partition_actor spawn_partition_actor(caf::actor_system& sys, dml::Dataset data) {
  return sys.spawn(partition_impl, std::make_shared<const Dataset>(std::move(data)));
}

}  // namespace dml::actors
