// The one factory of training modes. A new mode: a new file in this folder
// and one line here.
#include "dml/actors/topology/modes.hpp"

namespace dml::actors {

std::shared_ptr<const topology> MakeTopology(Mode mode) {
  switch (mode) {
    case Mode::kSync: return MakeSyncTopology();
    case Mode::kAsync: return MakeAsyncTopology();
    case Mode::kSsp: return MakeSspTopology();
    case Mode::kEasgd: return MakeEasgdTopology();
    case Mode::kHogwild: return MakeHogwildTopology();
    case Mode::kModelAveraging: return MakeModelAveragingTopology();
    case Mode::kCocoa: return MakeCocoaTopology();
    case Mode::kDuhl: return MakeDuhlTopology();
  }
  return nullptr;  // a Mode value outside the enum (checked where it is decoded)
}

}  // namespace dml::actors
