# Warnings and sanitizers as INTERFACE targets, linked by every trillion target
# (no global flag appends).
add_library(trillion_warnings INTERFACE)
target_compile_options(trillion_warnings INTERFACE -Wall -Wextra -Wno-unused-parameter)

add_library(trillion_sanitize INTERFACE)
if(TRILLION_FUZZ)
  # Every library gets libFuzzer's coverage instrumentation (the fuzz targets
  # link the fuzzer itself: tests/fuzz); any UBSan report is a crash, so the
  # fuzzer stops on it and saves the input.
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "TRILLION_FUZZ needs clang (libFuzzer): cmake -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang")
  endif()
  target_compile_options(trillion_sanitize INTERFACE
    -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  target_link_options(trillion_sanitize INTERFACE -fsanitize=address,undefined)
elseif(TRILLION_SANITIZE)
  target_compile_options(trillion_sanitize INTERFACE
    -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  target_link_options(trillion_sanitize INTERFACE -fsanitize=address,undefined)
endif()

add_library(trillion_arch INTERFACE)
if(TRILLION_NATIVE)
  target_compile_options(trillion_arch INTERFACE -march=native)
endif()
