#define BOOST_TEST_MODULE cache
#include <boost/test/unit_test.hpp>
