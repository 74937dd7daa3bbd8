#define BOOST_TEST_MODULE runtime_channel
#include "channel_fixture.hpp"

#include <boost/test/unit_test.hpp>

namespace trillion::test {
namespace {
MpiEnv* g_env = nullptr;

struct MpiFixture {
  MpiFixture() {
    auto& suite = boost::unit_test::framework::master_test_suite();
    g_env = new MpiEnv(suite.argc, suite.argv);
  }
  ~MpiFixture() {
    delete g_env;
    g_env = nullptr;
  }
};
}  // namespace

MpiEnv& env() { return *g_env; }

BOOST_TEST_GLOBAL_FIXTURE(MpiFixture);

}  // namespace trillion::test
