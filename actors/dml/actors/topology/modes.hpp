#pragma once
// The topology of each mode, one per file of this folder; MakeTopology
// (factory.cpp) is the only caller.

#include <memory>

#include "dml/actors/messages.hpp"
#include "dml/actors/topology/topology.hpp"

namespace dml::actors {

/// The immutable policy of each mode (sync, async, ssp, easgd, hogwild,
/// model averaging, cocoa, duhl), for MakeTopology.
std::shared_ptr<const topology> MakeSyncTopology();
std::shared_ptr<const topology> MakeAsyncTopology();
std::shared_ptr<const topology> MakeSspTopology();
std::shared_ptr<const topology> MakeEasgdTopology();
std::shared_ptr<const topology> MakeHogwildTopology();
std::shared_ptr<const topology> MakeModelAveragingTopology();
std::shared_ptr<const topology> MakeCocoaTopology();
std::shared_ptr<const topology> MakeDuhlTopology();

}  // namespace dml::actors
