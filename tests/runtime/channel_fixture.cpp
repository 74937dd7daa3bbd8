#define BOOST_TEST_MODULE runtime_channel
#include "channel_fixture.hpp"

#include <boost/test/unit_test.hpp>

#include "mpi_fixture.hpp"

namespace trillion::test {

MpiEnv& env() { return mpi_env(); }

BOOST_TEST_GLOBAL_FIXTURE(MpiFixture);

}  // namespace trillion::test
