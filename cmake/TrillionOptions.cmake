# Warnings and sanitizers as INTERFACE targets, linked by every trillion target
# (no global flag appends).
add_library(trillion_warnings INTERFACE)
target_compile_options(trillion_warnings INTERFACE -Wall -Wextra -Wno-unused-parameter)

add_library(trillion_sanitize INTERFACE)
if(TRILLION_SANITIZE)
  target_compile_options(trillion_sanitize INTERFACE
    -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  target_link_options(trillion_sanitize INTERFACE -fsanitize=address,undefined)
endif()

add_library(trillion_arch INTERFACE)
if(TRILLION_NATIVE)
  target_compile_options(trillion_arch INTERFACE -march=native)
endif()
