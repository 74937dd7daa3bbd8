// A rank that hangs mid-run (SIGSTOP: no crash for mpirun to notice, as a
// wedged Thunderbolt link or a frozen machine): the others, waiting for it
// in a barrier, must end the job naming it once btl_tb5_peer_timeout_ms
// passes (tests/transport/CMakeLists.txt checks the message).
#include <mpi.h>
#include <signal.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int r;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Barrier(MPI_COMM_WORLD);  // everyone is connected and talking
  if (r == 1) raise(SIGSTOP);
  MPI_Barrier(MPI_COMM_WORLD);  // the others never get past this: rank 1 is frozen
  MPI_Finalize();
  return 0;
}
