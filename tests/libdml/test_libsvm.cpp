#define BOOST_TEST_MODULE libsvm
#include <boost/test/unit_test.hpp>
