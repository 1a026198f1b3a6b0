#include "dml/solver/cocoa_local.hpp"

#include "dml/solver/internal/solvers.hpp"
#include "dml/util/status.hpp"

namespace dml {

absl::StatusOr<std::unique_ptr<LocalSolver>> MakeLocalSolver(LocalBlock block,
                                                             const ModelSpec& model,
                                                             uint64_t seed) {
  DML_RETURN_IF_ERROR(Validate(model));
  if (FormulationOf(model.kind) == Formulation::kDual) {
    return internal::MakeDualLocalSolver(std::move(block), model, seed);
  }
  return internal::MakePrimalLocalSolver(std::move(block), model, seed);
}

}  // namespace dml
