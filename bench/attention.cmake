# bench_attention: MLA decode attention at long context (4k, 16k cached
# positions): cache GB/s against the read bandwidth, FLOP/s against the peak.
if(TARGET trillion_model)
  add_executable(bench_attention ${CMAKE_CURRENT_LIST_DIR}/attention_bench.cpp)
  target_link_libraries(bench_attention PRIVATE trillion_model trillion_warnings trillion_arch Boost::program_options)
endif()
