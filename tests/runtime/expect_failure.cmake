# cmake -DCOMMAND="a;b;c" -DEXPECT=<regex> -P expect_failure.cmake
# Passes when COMMAND exits non-zero and its output matches EXPECT: an error
# test must fail, say why, and not hang (CTest's TIMEOUT catches a hang).
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("exit: ${rc}\nstdout:\n${out}\nstderr:\n${err}")
if(rc EQUAL 0)
  message(FATAL_ERROR "expected a non-zero exit code")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "output does not match '${EXPECT}'")
endif()
