# cmake -DCOMMAND="a;b;c" -DEXPECT=<regex> -P tb5_expect_startup_failure.cmake
# As tests/runtime/expect_failure.cmake, for jobs that must stop in MPI_Init
# (a peer no cable reaches, ranks of one host with `self,tb5` alone): Open
# MPI 4.1.4's mpiexec itself then crashes now and then in
# PMIx_server_finalize while tearing down (seen about once in 10 runs, tb5
# involved or not), and 5.0's prterun segfaults the same way. That crash of
# the launcher's, and only it, is tolerated; a rank killed by a signal still
# fails the test.
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("exit: ${rc}\nstdout:\n${out}\nstderr:\n${err}")
set(all "${out}${err}")
if(NOT "${all}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "output does not match '${EXPECT}'")
endif()
if("${all}" MATCHES "exited on signal")
  message(FATAL_ERROR "a rank was killed by a signal")
endif()
if(rc MATCHES "^[0-9]+$" AND rc GREATER 0 AND rc LESS 128)
  return()
endif()
if("${all}" MATCHES "PMIx_server_finalize" AND "${all}" MATCHES "mpiexec")
  message("mpiexec crashed in PMIx_server_finalize after the job ended (Open MPI 4.1.4): tolerated")
  return()
endif()
# Open MPI 5's launcher likewise segfaults now and then while tearing down a
# job that aborted (open-mpi/ompi#13650, open for 5.0.x): after it reported
# the rank's abort, and with no rank killed by a signal, tolerated.
if(rc STREQUAL "Segmentation fault" AND "${all}" MATCHES "prterun has exited due to process rank")
  message("prterun crashed while tearing down the aborted job (Open MPI 5, ompi#13650): tolerated")
  return()
endif()
message(FATAL_ERROR "expected a clean error exit, got ${rc}")
