# bench_model: end-to-end prefill/decode tokens/s of a converted model, with
# the weight bytes and FLOP each step touches (bench/run_all.py drives it).
if(TARGET trillion_model AND TARGET trillion_store AND TARGET trillion_plan)
  add_executable(bench_model ${CMAKE_CURRENT_LIST_DIR}/model_bench.cpp ${CMAKE_CURRENT_LIST_DIR}/b1_floor.cpp
                 ${CMAKE_CURRENT_LIST_DIR}/alternate_read.cpp ${CMAKE_CURRENT_LIST_DIR}/model_step.cpp
                 ${CMAKE_CURRENT_LIST_DIR}/model_versus.cpp)
  target_link_libraries(bench_model PRIVATE trillion_model trillion_store trillion_plan trillion_calibrate trillion_warnings
                        trillion_arch)
endif()
