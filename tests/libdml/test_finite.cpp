#define BOOST_TEST_MODULE finite
#include <boost/test/unit_test.hpp>

#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

#include "dml/util/finite.hpp"

// Every length up to 9 (each accumulator lane and the tail) and every
// position of one bad value: the check must see it wherever it is.
BOOST_AUTO_TEST_CASE(one_non_finite_value_anywhere_is_found) {
  const double bad[] = {std::numeric_limits<double>::quiet_NaN(),
                        std::numeric_limits<double>::infinity(),
                        -std::numeric_limits<double>::infinity()};
  for (std::size_t n = 1; n <= 9; ++n) {
    std::vector<double> x(n, 1.5);
    BOOST_TEST(dml::AllFinite(x.data(), n));
    for (std::size_t i = 0; i < n; ++i) {
      for (double b : bad) {
        std::vector<double> y = x;
        y[i] = b;
        BOOST_TEST(!dml::AllFinite(y.data(), n), "n " << n << " position " << i << " value " << b);
      }
    }
  }
}

// Extremes that are finite stay finite: x - x is exactly 0 for them, and
// a sum of zeros cannot overflow.
BOOST_AUTO_TEST_CASE(finite_extremes_pass) {
  std::vector<double> x = {DBL_MAX, -DBL_MAX, DBL_MIN, -0.0, 4.9e-324, 1e308, -1e308, 0.0, 3.0};
  BOOST_TEST(dml::AllFinite(x.data(), x.size()));
  BOOST_TEST(dml::AllFinite(nullptr, 0));
}
