#!/usr/bin/env bash
# Installs trillion's build and test dependencies on Debian/Ubuntu (as root or via sudo).
# macOS (Homebrew): brew install cmake open-mpi hdf5-mpi boost nlohmann-json pcre2 xxhash numpy
# For the scaling study (jobs/scaling-study): python3-matplotlib, iproute2 (ip netns, tc).
# For the tests: python3-h5py and libxxhash (the h5py/XXH64 cross-check of the format),
# g++-aarch64-linux-gnu and qemu-user (the arm64 kernels); clang and libclang-rt-dev
# (libFuzzer, for the fuzz targets of tests/fuzz). Without h5py those tests
# fail; without the others the check says SKIPPED (kernels_arm64: CTest's "Skipped").
# For the macOS build check (tools/check-macos.sh): python3-venv (zig from
# PyPI) and file (to check what it links is Mach-O). python3-venv also makes
# the eval tests' venv (tools/eval-venv.sh: lm-eval from PyPI, tests/eval).
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  build-essential cmake pkg-config git \
  libopenmpi-dev openmpi-bin libhdf5-openmpi-dev \
  libboost-program-options-dev libboost-test-dev \
  nlohmann-json3-dev libpcre2-dev libxxhash-dev \
  python3 python3-numpy python3-h5py python3-jinja2 python3-matplotlib python3-venv file \
  iproute2 util-linux xz-utils \
  g++-aarch64-linux-gnu qemu-user clang libclang-rt-dev >/dev/null
# Open MPI 5 (Debian 13) installs its development headers without the
# pthreads ones btl/tb5 needs: fetch its release source (cmake/TrillionOmpiSource.cmake).
case $(dpkg-query -W -f '${Version}' libopenmpi-dev) in
  [5-9].*) $SUDO bash "$(dirname "$0")/fetch-ompi-source.sh" ;;
esac
echo "trillion: dependencies installed"
