#pragma once
// The input checks of the certificates computed from a primal iterate w
// (EvaluatePrimal, IterateShareOf): one text for each failure, prefixed by
// the caller's name. Internal: objective/*.cpp only.

#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "dml/data/sparse.hpp"
#include "dml/objective/model.hpp"

namespace dml::internal {

/// InvalidArgument "<who>: ..." for: w's length not the data's column count,
/// labels and rows disagreeing in number, no rows (unless allow_empty), a
/// non-finite weight (naming the feature), a label the model does not accept
/// (naming the example); in that order.
absl::Status CheckIterateInputs(std::string_view who, const Dataset& data, const ModelSpec& model,
                                const std::vector<double>& w, bool allow_empty);

}  // namespace dml::internal
