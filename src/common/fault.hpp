// A test-only hook for the fault tests (tests/e2e/test_faults.py): with
// TRILLION_FAULT=<point>[:<n>] in the environment, rank 0 (the process whose
// OMPI_COMM_WORLD_RANK is 0 or unset) stops itself with SIGSTOP the n-th
// time (default 1st) it reaches <point>, so a test can kill -9 any rank at
// exactly that moment and then let rank 0 go on (SIGCONT). Points:
//   load     every rank has opened the model; rank 0 is about to make its role
//   prefill  a step that carried prompt rows has returned
//   decode   a decode-only step has returned
//   write    half of a result line is written (and on disk)
// Without the variable a fault point costs one cached check.
#pragma once

namespace trillion {

void fault_point(const char* point);
// Whether TRILLION_FAULT names `point` in this process (to prepare a fault).
bool fault_armed(const char* point);

}  // namespace trillion
