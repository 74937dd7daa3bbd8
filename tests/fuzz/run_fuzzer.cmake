# One fuzz target's short run in the test suite (tests/fuzz/CMakeLists.txt):
#   cmake -DFUZZER=bin -DSECONDS=n -DSEEDS=dir -DWORK=dir -P run_fuzzer.cmake
# Starts each time from the committed seeds (WORK is emptied), never writes
# into the source tree, and fails on any finding (crash, sanitizer report,
# timeout, out-of-memory), leaving the input in WORK/ to be made a regression.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/corpus)
execute_process(
  COMMAND ${FUZZER} -max_total_time=${SECONDS} -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
          -artifact_prefix=${WORK}/ ${WORK}/corpus ${SEEDS}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
string(REGEX MATCH "#[0-9]+[ \t]+DONE[^\n]*" done "${out}")
string(REGEX MATCH "stat::number_of_executed_units: [0-9]+" units "${out}")
message("${done}  (${units})")
if(NOT rc EQUAL 0)
  message("${out}")
  message(FATAL_ERROR "${FUZZER} found a problem (exit ${rc}); the input is in ${WORK}/")
endif()
