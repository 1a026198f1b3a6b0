#pragma once
// The data sets a benchmark runs on: LIBSVM files named on its command line,
// read as classification data (labels in {-1,+1}; the regression models
// take them as targets). Shared by tpa_scd_bench and duhl_bench.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dml/data/libsvm.hpp"

namespace dml::bench {

struct Case {
  std::string name;  ///< the file's base name, or what generated it
  Dataset data;
};

/// Each file as a case. Errors: the reader's (they name the file).
inline absl::StatusOr<std::vector<Case>> ReadCases(const std::vector<std::string>& files) {
  std::vector<Case> cases;
  for (const std::string& f : files) {
    LibsvmOptions lo;
    lo.task = Task::kClassification;
    auto d = ReadLibsvm(f, lo);
    if (!d.ok()) return d.status();
    cases.push_back({f.substr(f.find_last_of('/') + 1), *std::move(d)});
  }
  return cases;
}

}  // namespace dml::bench
