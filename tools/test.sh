#!/usr/bin/env bash
# Builds trillion (Release) and runs the whole test suite through CTest.
# TRILLION_SANITIZE=1 builds and tests the ASan/UBSan variant in build-asan/ instead.
# Then the parsers' fuzz targets: a clang build of only their libraries in
# build-fuzz/, each target fuzzed briefly (CTest label fuzz, tests/fuzz/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
jobs=$(nproc 2>/dev/null || echo 2)
if [ "${TRILLION_SANITIZE:-0}" = 1 ]; then
  dir=build-asan
  cmake -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRILLION_SANITIZE=ON >/dev/null
  export ASAN_OPTIONS=detect_leaks=0  # Open MPI's own allocations are reported as leaks
else
  dir=build
  cmake -B "$dir" >/dev/null
fi
cmake --build "$dir" -j "$jobs"
ctest --test-dir "$dir" --output-on-failure -j "$jobs" ${CTEST_ARGS:-}
CC=clang CXX=clang++ cmake -B build-fuzz -DTRILLION_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j "$jobs"
ctest --test-dir build-fuzz --output-on-failure -j "$jobs" -L fuzz
