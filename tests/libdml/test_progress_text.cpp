// Progress as text: the metrics JSON lines (exact bytes) and the status line.
#define BOOST_TEST_MODULE progress_text
#include <boost/test/unit_test.hpp>

#include <limits>
#include <string>

#include "dml/metrics/progress_text.hpp"

BOOST_AUTO_TEST_CASE(json_lines_are_exact_and_escape_what_they_must) {
  BOOST_TEST(dml::JsonNumber(0.5) == "0.5");
  BOOST_TEST(dml::JsonNumber(-std::numeric_limits<double>::infinity()) == "null");
  BOOST_TEST(dml::JsonNumber(std::numeric_limits<double>::quiet_NaN()) == "null");
  BOOST_TEST(dml::JsonString("a\"b\\c\n") == "\"a\\\"b\\\\c\\u000a\"");
  dml::Progress p;
  p.round = 3;
  p.epochs = 1.5;
  p.seconds = 0.25;
  p.primal = 0.75;
  p.dual = -std::numeric_limits<double>::infinity();
  p.gap = std::numeric_limits<double>::infinity();
  p.bytes_exchanged = 1024;
  p.staleness = {0, 2};
  p.events = {{"node_lost", "lost node(s) 1"}};
  const auto lines = dml::ProgressJsonLines(p);
  BOOST_REQUIRE(lines.size() == 2u);
  BOOST_TEST(lines[0] ==
             "{\"type\":\"progress\",\"round\":3,\"epochs\":1.5,\"seconds\":0.25,\"primal\":0.75,"
             "\"dual\":null,\"gap\":null,\"bytes\":1024,\"nnz_touched\":0,\"staleness\":[0,2]}");
  BOOST_TEST(lines[1] == "{\"type\":\"event\",\"round\":3,\"seconds\":0.25,\"kind\":\"node_lost\","
                         "\"what\":\"lost node(s) 1\"}");
  dml::TrainResult r;
  r.reason = dml::StopReason::kConverged;
  r.rounds = 7;
  r.epochs = 7;
  r.primal = 0.5;
  r.dual = 0.25;
  r.gap = 0.25;
  BOOST_TEST(dml::ResultJson(r) ==
             "{\"type\":\"result\",\"reason\":\"converged\",\"rounds\":7,\"epochs\":7,\"seconds\":0,"
             "\"primal\":0.5,\"dual\":0.25,\"gap\":0.25,\"bytes\":0}");
  r.device_bytes = 4096;  // DuHL's
  BOOST_TEST(dml::ResultJson(r) ==
             "{\"type\":\"result\",\"reason\":\"converged\",\"rounds\":7,\"epochs\":7,\"seconds\":0,"
             "\"primal\":0.5,\"dual\":0.25,\"gap\":0.25,\"bytes\":0,\"device_bytes\":4096}");
}

BOOST_AUTO_TEST_CASE(the_status_line_estimates_from_the_nearest_rule) {
  dml::StopRule stop;
  stop.gap_rel = 1e-6;
  stop.max_epochs = 1000;
  dml::ProgressEstimate e(stop);
  dml::Progress p;
  p.primal = 1.0;
  p.gap = 1e-2;  // the first gap: 0% of the way to 1e-6 in log scale
  p.seconds = 1.0;
  p.epochs = 10;
  BOOST_TEST(e.StatusLine(p).find("[....................]   1%  round 0  epochs 10.0  gap 1.00e-02") == 0u);
  p.gap = 1e-4;  // halfway in log scale
  p.seconds = 2.0;
  BOOST_TEST(e.StatusLine(p) ==
             "[##########..........]  50%  round 0  epochs 10.0  gap 1.00e-04 (target 1.0e-06)  2.0s, ~2.0s left");
}
