#include "dml/solver/training.hpp"

#include "absl/strings/str_cat.h"
#include "dml/util/status.hpp"

namespace dml {

std::string_view ModeName(Mode mode) {
  switch (mode) {
    case Mode::kSync: return "sync";
    case Mode::kAsync: return "async";
    case Mode::kSsp: return "ssp";
    case Mode::kEasgd: return "easgd";
    case Mode::kHogwild: return "hogwild";
    case Mode::kModelAveraging: return "model-averaging";
    case Mode::kCocoa: return "cocoa";
    case Mode::kDuhl: return "duhl";
  }
  return "unknown";
}

absl::StatusOr<Mode> ParseMode(std::string_view name) {
  if (name == "sync" || name == "bsp") return Mode::kSync;
  if (name == "async" || name == "downpour") return Mode::kAsync;
  if (name == "ssp") return Mode::kSsp;
  if (name == "easgd") return Mode::kEasgd;
  if (name == "hogwild") return Mode::kHogwild;
  if (name == "model-averaging" || name == "mavg") return Mode::kModelAveraging;
  if (name == "cocoa") return Mode::kCocoa;
  if (name == "duhl") return Mode::kDuhl;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown mode \"", AsAbsl(name),
                   "\"; expected sync, async, ssp, easgd, hogwild, model-averaging, cocoa or duhl"));
}

}  // namespace dml
