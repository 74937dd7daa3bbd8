// check_close: the Boost.Test form of bound_misses (kernel_checks.hpp), one
// failure naming the first elements outside the float64 rounding bound.
#pragma once
#include <boost/test/unit_test.hpp>

#include "kernel_checks.hpp"

namespace trillion::test {

inline void check_close(const std::vector<float>& y, const std::vector<double>& y64, const std::vector<double>& s,
                        int64_t k) {
  const std::string misses = bound_misses(y, y64, s, k);
  BOOST_TEST(misses.empty(), misses);
}

}  // namespace trillion::test
