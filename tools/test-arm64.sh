#!/bin/sh
# Cross-builds the kernels and their Boost-free self test for arm64 and runs it
# under qemu-aarch64. Needs: apt-get install -y g++-aarch64-linux-gnu qemu-user
#   tools/test-arm64.sh [BUILD_DIR]   (default: build-arm64)
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-arm64}
cmake -S "$src" -B "$build" -DCMAKE_TOOLCHAIN_FILE="$src/cmake/toolchains/aarch64-linux-gnu.cmake" \
  -DTRILLION_KERNELS_ONLY=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j2 --target kernel_selftest
for isa in best neon portable; do
  echo "TRILLION_ISA=$isa:"
  TRILLION_ISA=$isa qemu-aarch64 -L /usr/aarch64-linux-gnu "$build/tests/kernels/kernel_selftest"
done
# qemu's default CPU (max) has dotprod and i8mm: "best" is neon-i8mm, and every
# run checks each available path against the portable one.
# An ARMv8.0 CPU without dotprod: the integer-dot path takes widening
# multiplies instead of SDOT (qemu's default CPU has dotprod).
echo "TRILLION_ISA=neon on cortex-a53 (no dotprod):"
TRILLION_ISA=neon qemu-aarch64 -cpu cortex-a53 -L /usr/aarch64-linux-gnu "$build/tests/kernels/kernel_selftest"
