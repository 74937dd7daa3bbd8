# bench_memory: the machine's read bandwidth and FMA peak (the roofline).
if(TARGET trillion_calibrate)
  add_executable(bench_memory ${CMAKE_CURRENT_LIST_DIR}/memory_bench.cpp)
  target_compile_options(bench_memory PRIVATE -O3)
  target_link_libraries(bench_memory PRIVATE trillion_calibrate trillion_warnings)
endif()
