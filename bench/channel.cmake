# bench_channel: latency and bandwidth of RmaChannel next to a plain
# MPI_Send/MPI_Recv ping-pong (run it under mpirun -n 2; see docs/rma.md).
if(TARGET trillion_calibrate)
  add_executable(bench_channel ${CMAKE_CURRENT_LIST_DIR}/bench_channel.cpp)
  target_link_libraries(bench_channel PRIVATE trillion_calibrate trillion_warnings trillion_arch)
endif()
