// check_close: the Boost.Test form of bound_misses (kernel_checks.hpp), one
// failure naming the first elements outside the float64 rounding bound.
#pragma once
#include <boost/test/unit_test.hpp>

#include "kernel_checks.hpp"
#include "kernels/kernel_table.hpp"

namespace trillion::test {

inline void check_close(const std::vector<float>& y, const std::vector<double>& y64, const std::vector<double>& s,
                        int64_t k) {
  const std::string misses = bound_misses(y, y64, s, k);
  BOOST_TEST(misses.empty(), misses);
}

// Runs check(avx2, avx512) with the two kernel tables whose float kernels
// must agree bit for bit; on a CPU without AVX-512 VNNI says so and checks nothing.
template <class Check>
void with_avx2_and_avx512_tables(Check check) {
  if (!kernel_isa_available(KernelIsa::avx512)) {
    BOOST_TEST_MESSAGE("no AVX-512 VNNI on this CPU: avx512 vs avx2 bits not checked");
    return;
  }
  check(kernel_table(KernelIsa::avx2), kernel_table(KernelIsa::avx512));
}

}  // namespace trillion::test
