// Set-up collectives: broadcast, gather, reductions.
#include <boost/test/unit_test.hpp>

#include "channel_fixture.hpp"
#include "runtime/collectives.hpp"

using namespace trillion;
using trillion::test::env;

BOOST_AUTO_TEST_CASE(broadcast_from_any_root) {
  const int root = env().size() - 1;
  std::string text = env().rank() == root ? std::string(100000, 'x') + "end" : "ignored";
  BOOST_TEST(broadcast_string(env(), text, root) == std::string(100000, 'x') + "end");
  std::vector<std::byte> bytes;
  if (env().rank() == 0) bytes = {std::byte{1}, std::byte{2}, std::byte{3}};
  auto got = broadcast_bytes(env(), bytes);
  BOOST_TEST(got.size() == 3u);
  BOOST_TEST(int(got[2]) == 3);
  BOOST_TEST(broadcast_string(env(), env().rank() == 0 ? "" : "junk").empty());
}

BOOST_AUTO_TEST_CASE(gather_strings_on_root) {
  const std::string mine = "rank-" + std::to_string(env().rank()) + std::string(size_t(env().rank()), '!');
  auto all = gather_strings(env(), mine, 0);
  if (env().rank() == 0) {
    BOOST_TEST(all.size() == size_t(env().size()));
    for (int r = 0; r < env().size(); ++r)
      BOOST_TEST(all[size_t(r)] == "rank-" + std::to_string(r) + std::string(size_t(r), '!'));
  } else {
    BOOST_TEST(all.empty());
  }
}

BOOST_AUTO_TEST_CASE(reductions) {
  const int n = env().size(), r = env().rank();
  auto sum = allreduce_sum(env(), std::vector<double>{1.0, double(r)});
  BOOST_TEST(sum[0] == double(n));
  BOOST_TEST(sum[1] == double(n * (n - 1) / 2));
  auto max = allreduce_max(env(), std::vector<double>{double(r), -double(r)});
  BOOST_TEST(max[0] == double(n - 1));
  BOOST_TEST(max[1] == 0.0);
  auto isum = allreduce_sum(env(), std::vector<int64_t>{int64_t(1) << 40});
  BOOST_TEST(isum[0] == int64_t(n) << 40);
  // Different lengths on different ranks: an error everywhere, not a crash.
  BOOST_CHECK_THROW(allreduce_sum(env(), std::vector<double>(size_t(r + 1), 1.0)), CollectiveError);
}
