#define BOOST_TEST_MODULE synthetic
#include <boost/test/unit_test.hpp>
