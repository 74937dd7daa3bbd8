// The integer-dot path (kernels/matmul_q8.hpp): the checks of q8_checks.hpp,
// shared with kernel_selftest, under Boost.Test.
#include <boost/test/unit_test.hpp>

#include "q8_checks.hpp"

BOOST_AUTO_TEST_CASE(integer_dot_path) {
  int checks = 0;
  const std::vector<std::string> failures = trillion::test::q8_failures(&checks);
  BOOST_TEST_MESSAGE(checks << " integer-dot checks");
  BOOST_TEST(checks > 100);
  for (const std::string& f : failures) BOOST_ERROR(f);
}
