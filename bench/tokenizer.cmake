# bench_tokenizer: MB/s and tokens/s of encode on ~10 MB of mixed text.
add_executable(bench_tokenizer ${CMAKE_CURRENT_LIST_DIR}/tokenizer_bench.cpp)
target_compile_options(bench_tokenizer PRIVATE -O3)
target_link_libraries(bench_tokenizer PRIVATE trillion_tokenizer trillion_warnings)
target_compile_definitions(bench_tokenizer PRIVATE TRILLION_FIXTURES="${PROJECT_SOURCE_DIR}/tests/fixtures")
