# Cross build for arm64 macOS with zig's clang (PyPI ziglang: Apple's libc
# headers as of its SDK, libSystem's link stubs, libc++ built for the
# target): the macOS build check, tools/check-macos.sh (README, "macOS"),
# with -DTRILLION_MACOS_CHECK=ON. On a Mac, build without a toolchain file.
set(CMAKE_SYSTEM_NAME Darwin)
set(CMAKE_SYSTEM_PROCESSOR arm64)
set(CMAKE_OSX_ARCHITECTURES "" CACHE STRING "")   # zig's -target says arm64
set(CMAKE_OSX_SYSROOT "" CACHE PATH "")           # zig brings the SDK's headers
set(CMAKE_OSX_DEPLOYMENT_TARGET "" CACHE STRING "")

# tools/macos/zig-tool: zig from the check's venv (TRILLION_MACOS_VENV).
set(CMAKE_C_COMPILER ${CMAKE_CURRENT_LIST_DIR}/../../tools/macos/zig-cc)
set(CMAKE_CXX_COMPILER ${CMAKE_CURRENT_LIST_DIR}/../../tools/macos/zig-c++)
set(CMAKE_AR ${CMAKE_CURRENT_LIST_DIR}/../../tools/macos/zig-ar CACHE FILEPATH "")
set(CMAKE_RANLIB ${CMAKE_CURRENT_LIST_DIR}/../../tools/macos/zig-ranlib CACHE FILEPATH "")

# The stage: third-party headers (and the few libraries built for the
# target) that tools/check-macos.sh puts there. Nothing of the build
# machine's is found: packages, headers, libraries and .pc files only from
# the stage, programs from the host.
set(TRILLION_MACOS_STAGE ${CMAKE_CURRENT_LIST_DIR}/../../build-macos/stage CACHE PATH "the macOS check's stage")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES TRILLION_MACOS_STAGE)
set(CMAKE_FIND_ROOT_PATH ${TRILLION_MACOS_STAGE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(ENV{PKG_CONFIG_LIBDIR} ${TRILLION_MACOS_STAGE}/target/lib/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")
# <infiniband/verbs.h> where a Mac's SDK would put it, on the compiler's own
# search path: rdma-core's, staged (macOS 26.2's RDMA over Thunderbolt has
# verbs, but no Apple header is available here).
set(CMAKE_C_STANDARD_INCLUDE_DIRECTORIES ${TRILLION_MACOS_STAGE}/verbs/include)
set(CMAKE_CXX_STANDARD_INCLUDE_DIRECTORIES ${TRILLION_MACOS_STAGE}/verbs/include)
