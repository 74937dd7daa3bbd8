#define BOOST_TEST_MODULE trillion kernels
#include <boost/test/unit_test.hpp>
