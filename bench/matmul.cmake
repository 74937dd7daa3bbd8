# bench_matmul: weight-streaming rate of the matmul kernels per format.
if(TARGET trillion_calibrate)
  add_executable(bench_matmul ${CMAKE_CURRENT_LIST_DIR}/matmul_bench.cpp)
  target_link_libraries(bench_matmul PRIVATE trillion_calibrate trillion_warnings trillion_arch)
endif()
