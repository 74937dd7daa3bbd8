#!/bin/sh
# with_library_on_rank.sh RANK BANNER PROGRAM [ARGS...]: runs PROGRAM with
# TRILLION_TEST_MPI_LIBRARY=BANNER on rank RANK only (runtime/mpi_transport.hpp):
# the hosts of one job running different Open MPI versions, on one machine.
# (Not an MPMD launch: Debian's Open MPI 5 mpirun segfaults on any,
# open-mpi/ompi issue 13303.)
rank=$1 banner=$2
shift 2
if [ "${OMPI_COMM_WORLD_RANK:-0}" = "$rank" ]; then
  TRILLION_TEST_MPI_LIBRARY=$banner
  export TRILLION_TEST_MPI_LIBRARY
fi
exec "$@"
