// Issue 10 item 2: a thread count is refused before any thread starts.
#define BOOST_TEST_MODULE files_and_limits
#include <boost/test/unit_test.hpp>

#include "common/error.hpp"
#include "common/thread_pool.hpp"

using namespace trillion;

BOOST_AUTO_TEST_CASE(thread_pool_refuses_too_many_threads_before_starting_one) {
  const int limit = thread_limit();
  BOOST_TEST(limit >= 64);
  BOOST_TEST(limit <= kMaxThreads);
  // Refused in the constructor's first lines, before any thread starts.
  // (One over the limit, not 100000: code without the check would start
  // them all, and pid_max here is 32768.)
  BOOST_CHECK_THROW(ThreadPool(limit + 1), Error);
  ThreadPool ok(2);
  BOOST_TEST(ok.size() == 2);
}
