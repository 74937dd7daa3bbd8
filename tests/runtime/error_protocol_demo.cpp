// A small SPMD program that fails on purpose, run by CTest through
// expect_failure.cmake: the job must end (no hang), with a non-zero exit
// code and the failing rank's message. Modes:
//   throw   - the last rank throws mid-run while the others block in recv
//   check   - the last rank fails a set-up check_all; all ranks return 1
//   escape  - an exception escapes past MpiEnv (no run_guarded)
//   library - MpiEnv::check_same_library (run with TRILLION_TEST_MPI_LIBRARY
//             set for some ranks only: hosts with different Open MPI versions)
#include <cstdio>
#include <stdexcept>
#include <string>

#include "runtime/mpi_env.hpp"
#include "runtime/rma_channel.hpp"

using namespace trillion;

namespace {

int run(const MpiEnv& env, const std::string& mode) {
  if (mode == "library") {
    env.check_same_library();
    return 0;
  }
  RmaChannel ch(env, {.slot_bytes = 256, .slots_per_peer = 2, .name = "demo"});
  const int me = env.rank(), last = env.size() - 1;
  if (mode == "check") {
    env.check_all(me != last, "cannot open shard model-00007.h5: No such file or directory");
    return 0;
  }
  // Some traffic first, so the failure happens with the channel in use.
  const int next = (me + 1) % env.size(), prev = (me + env.size() - 1) % env.size();
  std::byte b{42};
  ch.send(next, 1, std::span(&b, 1));
  (void)ch.recv(prev);
  if (me == last) throw std::runtime_error("deliberate failure in the middle of the run");
  (void)ch.recv(last);  // never arrives: without the protocol this hangs
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MpiEnv env(argc, argv);
  const std::string mode = argc > 1 ? argv[1] : "throw";
  if (mode == "escape") {
    if (env.rank() == env.size() - 1) throw std::runtime_error("unguarded failure");
    env.barrier();  // the others wait here for the rank that threw
    return 0;
  }
  return run_guarded(env, [&] { return run(env, mode); });
}
