#define BOOST_TEST_MODULE trillion model
#include <boost/test/unit_test.hpp>
