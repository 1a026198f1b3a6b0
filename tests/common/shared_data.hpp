#pragma once
// Tests that read ../shared/data skip (and say why) where that folder is
// absent, e.g. on a fresh CI machine that has only the repository.

#include <filesystem>
#include <string>

#include <boost/test/unit_test.hpp>

namespace dml::testing {

inline std::string SharedDataDir() { return std::string(DML_SHARED_DIR) + "/data"; }

/// Boost.Test precondition: `BOOST_AUTO_TEST_CASE(name, *boost::unit_test::precondition(
/// dml::testing::SharedDataPresent))`.
inline boost::test_tools::assertion_result SharedDataPresent(boost::unit_test::test_unit_id) {
  const std::string dir = SharedDataDir();
  boost::test_tools::assertion_result r(std::filesystem::is_directory(dir));
  r.message() << "skipped: shared datasets not found at " << dir
              << " (configure with -DDML_SHARED_DIR=...)";
  return r;
}

}  // namespace dml::testing
