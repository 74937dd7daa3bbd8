#!/usr/bin/env bash
# Builds trillion (Release) and runs the whole test suite through CTest.
# TRILLION_SANITIZE=1 builds and tests the ASan/UBSan variant in build-asan/ instead.
# Then the parsers' fuzz targets: a clang build of only their libraries in
# build-fuzz/, each target fuzzed briefly (CTest label fuzz, tests/fuzz/README.md).
# A test group that cannot be registered here (no btl/tb5 plugin, no arm64
# cross toolchain) fails the configure step (TRILLION_REQUIRE_ALL_TESTS), and
# a label that selects no test fails the run, rather than the tests
# vanishing from the count.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
jobs=$(nproc 2>/dev/null || echo 2)
if [ "${TRILLION_SANITIZE:-0}" = 1 ]; then
  dir=build-asan
  cmake -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRILLION_SANITIZE=ON -DTRILLION_REQUIRE_ALL_TESTS=ON
  export ASAN_OPTIONS=detect_leaks=0  # Open MPI's own allocations are reported as leaks
else
  dir=build
  cmake -B "$dir" -DTRILLION_REQUIRE_ALL_TESTS=ON
fi
cmake --build "$dir" -j "$jobs"
for label in unit store kernels model mpi e2e tb5 netns docs eval reliability study faults; do
  n=$(ctest --test-dir "$dir" -N -L "^${label}\$" | sed -n 's/^Total Tests: //p')
  if [ "${n:-0}" -eq 0 ]; then
    echo "tools/test.sh: label '$label' selects no test in $dir: a test group was not registered" >&2
    exit 1
  fi
done
ctest --test-dir "$dir" --output-on-failure --no-tests=error -j "$jobs" ${CTEST_ARGS:-}
CC=clang CXX=clang++ cmake -B build-fuzz -DTRILLION_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build-fuzz -j "$jobs"
ctest --test-dir build-fuzz --output-on-failure --no-tests=error -j "$jobs" -L fuzz
