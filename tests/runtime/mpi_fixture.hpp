// The process's MpiEnv in a Boost.Test MPI executable: one per process, made
// by a global fixture. The executable's main file says
// BOOST_TEST_GLOBAL_FIXTURE(trillion::test::MpiFixture); tests call mpi_env().
#pragma once
#include <boost/test/unit_test.hpp>

#include "runtime/mpi_env.hpp"

namespace trillion::test {

inline MpiEnv*& mpi_env_slot() {
  static MpiEnv* env = nullptr;
  return env;
}

inline MpiEnv& mpi_env() { return *mpi_env_slot(); }

struct MpiFixture {
  MpiFixture() {
    auto& suite = boost::unit_test::framework::master_test_suite();
    mpi_env_slot() = new MpiEnv(suite.argc, suite.argv);
  }
  ~MpiFixture() {
    delete mpi_env_slot();
    mpi_env_slot() = nullptr;
  }
};

}  // namespace trillion::test
