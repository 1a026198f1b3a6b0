#define BOOST_TEST_MODULE sparse
#include <boost/test/unit_test.hpp>
