# cmake -DCOMMAND="a;b;c" -DEXPECT=<regex> [-DEXIT_CODE=<n>] -P expect_failure.cmake
# Passes when COMMAND ends by itself with a clean error exit and its output
# matches EXPECT: an error test must fail, say why, and not hang (CTest's
# TIMEOUT catches a hang). A clean error exit is a code from 1 to 127 (with
# EXIT_CODE, exactly that code); EXIT_CODE=0 turns it round: the command must
# succeed (and still print EXPECT). Death by a signal never passes: CMake
# reports it as text ("Segmentation fault"), mpirun as 128 + the signal
# number and "exited on signal N" in its output.
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("exit: ${rc}\nstdout:\n${out}\nstderr:\n${err}")
if(NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "the command died: ${rc}")
endif()
if(rc GREATER_EQUAL 128 OR "${out}${err}" MATCHES "exited on signal|Segmentation fault|core dumped")
  message(FATAL_ERROR "the command was killed by a signal (exit ${rc})")
endif()
if(DEFINED EXIT_CODE)
  if(NOT rc EQUAL EXIT_CODE)
    message(FATAL_ERROR "expected exit code ${EXIT_CODE}, got ${rc}")
  endif()
elseif(rc EQUAL 0)
  message(FATAL_ERROR "expected a non-zero exit code")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "output does not match '${EXPECT}'")
endif()
