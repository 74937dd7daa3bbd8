# cmake -DCOMMAND="a;b;c" -DEXPECT=<regex> -P tb5_expect_startup_failure.cmake
# As tests/runtime/expect_failure.cmake, for jobs that must stop in MPI_Init
# (a peer no cable reaches, ranks of one host with `self,tb5` alone): Open
# MPI 4.1.4's mpiexec itself then crashes now and then in
# PMIx_server_finalize while tearing down (seen about once in 10 runs, tb5
# involved or not). That crash of mpiexec's, and only it, is tolerated; a
# rank killed by a signal still fails the test.
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
message(FATAL_ERROR "expected a clean error exit, got ${rc}")
