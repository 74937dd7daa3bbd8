#!/usr/bin/env bash
# The macOS (arm64) build check (README, "macOS"): every translation unit of
# the tree compiled for aarch64-macos with zig's clang (PyPI ziglang, pinned),
# against Apple's libc headers and libc++ as zig ships them and third-party
# headers staged from Debian 13; every program that needs no third-party
# library beyond PCRE2, xxHash and Boost.Test (built here for the target)
# linked into a Mach-O arm64 executable against libSystem. Nothing runs.
#
#   bash tools/check-macos.sh
#
# Steps, each skipped when its result is already there (rerunning is cheap):
#   1. zig: a venv with ziglang==$ZIGLANG in $TOP/venv
#   2. stage: headers of Debian 13's packages (apt-get download with a
#      private apt state), PCRE2 built from Debian's source package, xxHash's
#      library from its header, into $TOP/stage
#   3. configure and build $TOP/build (CMake, cmake/toolchains/aarch64-macos-zig.cmake,
#      -DTRILLION_MACOS_CHECK=ON): a compile or link error fails the check
#   4. verify: what linked is Mach-O arm64, and every .c/.cpp of the tree was compiled
#   5. the tb5 BTL (src/transport/tb5/btl), a step of its own: compiled against
#      Open MPI 5.0's headers (TRILLION_TB5_BTL_OMPI5=OFF skips it)
#
# Environment: TRILLION_MACOS_DIR (default build-macos), JOBS (default 2),
# TRILLION_TB5_BTL_OMPI5=ON|OFF (sets the CMake option of step 5).
# Runs on Debian or Ubuntu with tools/install-deps.sh's packages (apt-get,
# dpkg-deb, python3-venv, pkg-config, cmake, file) and the network (PyPI,
# deb.debian.org).
set -euo pipefail
main() {  # (read whole before it runs: editing the file meanwhile changes nothing)
src=$(cd "$(dirname "$0")/.." && pwd)
TOP=${TRILLION_MACOS_DIR:-$src/build-macos}
JOBS=${JOBS:-2}
ZIGLANG=0.15.2
SUITE=trixie
MIRROR=http://deb.debian.org/debian
# Headers only (nothing of them is linked): Open MPI 5.0 and parallel HDF5
# 1.14 as Homebrew ships their generations, Boost, nlohmann-json, xxHash.
PACKAGES="libopenmpi-dev libhdf5-openmpi-dev libboost1.83-dev nlohmann-json3-dev libxxhash-dev"
# <infiniband/verbs.h> and the kernel header it includes, copied alone.
VERBS_PACKAGES="libibverbs-dev linux-libc-dev"
# For the tb5 BTL (step 5): what Open MPI's internal headers include.
BTL_PACKAGES="libhwloc-dev libpmix-dev libevent-dev"
STAGE_FORMAT=2  # bump when what the stage holds changes
start=$SECONDS
step() { printf '\n== macOS check, step %s (%ss)\n' "$*" $((SECONDS - start)); }
die() { echo "macOS check: FAILED: $*" >&2; exit 1; }
# fetch_orig SOURCE DIR [.h]: the upstream tarball of Debian's source package
# SOURCE, checked against the SHA-256 of the signed Sources index (apt's
# private state, step 2), unpacked into DIR (only its headers with .h);
# prints the Debian version.
fetch_orig() {
  local version dir orig sha
  read -r version dir orig sha < <(apt-cache showsrc "$1" | awk -v want="$1" '
    /^Package:/ {p = $2} /^Version:/ {v = $2} /^Directory:/ {d = $2} /^Checksums-Sha256:/ {c = 1; next} /^[^ ]/ {c = 0}
    c && $3 ~ /\.orig\.tar\./ && p == want {o = $3; s = $1} END {if (o) print v, d, o, s}') || true
  [ -n "${orig:-}" ] || die "no source package $1 in $SUITE's Sources index"
  "$py" - "$MIRROR/$dir/$orig" "$sha" "$2" "${3:-}" <<'EOF' || die "the source of $1"
import hashlib, os, sys, tarfile, urllib.request
url, sha, into, only = sys.argv[1:]
data = urllib.request.urlopen(url, timeout=300).read()
if hashlib.sha256(data).hexdigest() != sha:
    sys.exit(f"{url}: SHA-256 differs from the Sources index")
path = os.path.join(into, url.rsplit("/", 1)[1])
os.makedirs(into, exist_ok=True)
open(path, "wb").write(data)
with tarfile.open(path) as t:
    members = [m for m in t.getmembers() if not only or m.name.endswith(only)]
    t.extractall(into, members, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
os.remove(path)
EOF
  echo "$version"
}
mkdir -p "$TOP"

step "1: zig's clang, ziglang==$ZIGLANG in $TOP/venv"
py=/usr/bin/python3
[ -x $py ] || py=python3
if [ "$("$TOP/venv/bin/python3" -c 'import importlib.metadata as m; print(m.version("ziglang"))' 2>/dev/null)" != $ZIGLANG ]; then
  "$py" -m venv "$TOP/venv" || die "python3 -m venv (apt-get install python3-venv)"
  "$TOP/venv/bin/pip" install -q --disable-pip-version-check "ziglang==$ZIGLANG"
fi
export TRILLION_MACOS_VENV=$TOP/venv
"$src/tools/macos/zig-c++" --version | head -1

step "2: the stage, $TOP/stage"
stage=$TOP/stage
stamp="$STAGE_FORMAT $SUITE $PACKAGES $VERBS_PACKAGES"
if [ "$(cat "$stage/.staged" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$stage" "$TOP/apt" "$TOP/debs" "$TOP/src"
  mkdir -p "$stage/target/lib/pkgconfig" "$TOP/debs" "$TOP/src"
  # A private apt state for Debian 13 (arm64: its configured headers are
  # those of a 64-bit arm target, as the Mac's), signed by the keyring of the
  # host's apt; nothing of the host's apt configuration or state is used.
  apt=$TOP/apt
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/parts" "$apt/prefs"
  : > "$apt/status"
  cat > "$apt/sources.list" <<EOF
deb [arch=arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR $SUITE main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR $SUITE main
EOF
  cat > "$apt/apt.conf" <<EOF
Dir::State "$apt"; Dir::State::Lists "$apt/lists"; Dir::State::status "$apt/status";
Dir::Cache "$apt/cache"; Dir::Etc::SourceList "$apt/sources.list"; Dir::Etc::SourceParts "$apt/parts";
Dir::Etc::Parts "$apt/parts"; Dir::Etc::Preferences "$apt/prefs/none"; Dir::Etc::PreferencesParts "$apt/prefs";
APT::Architecture "arm64"; APT::Architectures { "arm64"; }; Acquire::Languages "none";
APT::Sandbox::User "root"; Acquire::IndexTargets::deb::DEP-11::DefaultEnabled "false";
EOF
  export APT_CONFIG=$apt/apt.conf
  apt-get -qq update || die "apt-get update ($SUITE, $MIRROR)"
  (cd "$TOP/debs" && apt-get -qq download $PACKAGES $VERBS_PACKAGES) || die "apt-get download"
  for p in $PACKAGES; do dpkg-deb -x "$TOP/debs/${p}_"*.deb "$stage"; done
  # HDF5's H5pubconf.h is configured for Linux: it says <features.h> (glibc's)
  # exists, and H5public.h includes it. Homebrew's, configured on macOS, does not.
  sed -i 's|^#define H5_HAVE_FEATURES_H 1|/* H5_HAVE_FEATURES_H: glibc only (tools/check-macos.sh) */|' \
    "$stage/usr/include/hdf5/openmpi/H5pubconf.h"
  # verbs.h and what it includes; the Linux headers they include (kernel
  # integer types, ETH_ALEN) become a few lines, so no Linux header is on the
  # check's search path.
  for p in $VERBS_PACKAGES; do dpkg-deb -x "$TOP/debs/${p}_"*.deb "$TOP/src/verbs"; done
  v=$stage/verbs/include
  mkdir -p "$v/infiniband" "$v/rdma"
  cp "$TOP/src/verbs/usr/include/infiniband/"{verbs.h,verbs_api.h,ib_user_ioctl_verbs.h} "$v/infiniband/"
  cp "$TOP/src/verbs/usr/include/rdma/ib_user_verbs.h" "$v/rdma/"
  sed -i 's|#include <linux/[a-z_]*\.h>|#include <infiniband/kernel_types.h>|' "$v"/infiniband/*.h "$v"/rdma/*.h
  cat > "$v/infiniband/kernel_types.h" <<'EOF'
/* Linux's <linux/types.h> and <linux/if_ether.h>, as much as rdma-core's verbs headers use (tools/check-macos.sh). */
#pragma once
#include <stdint.h>
typedef uint8_t __u8; typedef uint16_t __u16; typedef uint32_t __u32; typedef uint64_t __u64;
typedef int8_t __s8; typedef int16_t __s16; typedef int32_t __s32; typedef int64_t __s64;
typedef __u16 __be16; typedef __u32 __be32; typedef __u64 __be64;
typedef __u16 __le16; typedef __u32 __le32; typedef __u64 __le64;
typedef __u64 __attribute__((aligned(8))) __aligned_u64;
#define ETH_ALEN 6
EOF
  # PCRE2 from Debian's source package (the upstream tarball, its SHA-256
  # from the signed Sources index), built for the target as Homebrew does
  # (8-bit, JIT), into stage/target with its pkg-config file.
  version=$(fetch_orig pcre2 "$TOP/src")
  pcre2_src=$(ls -d "$TOP"/src/pcre2-*/)
  echo "pcre2 $version: building for arm64 macOS"
  cmake -S "$pcre2_src" -B "$TOP/src/pcre2-build" -DCMAKE_TOOLCHAIN_FILE="$src/cmake/toolchains/aarch64-macos-zig.cmake" \
    -DTRILLION_MACOS_STAGE="$stage" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$stage/target" \
    -DBUILD_SHARED_LIBS=OFF -DPCRE2_BUILD_PCRE2_8=ON -DPCRE2_BUILD_PCRE2_16=OFF -DPCRE2_BUILD_PCRE2_32=OFF \
    -DPCRE2_SUPPORT_JIT=ON -DPCRE2_BUILD_PCRE2GREP=OFF -DPCRE2_BUILD_TESTS=OFF -DPCRE2_SUPPORT_LIBZ=OFF \
    -DPCRE2_SUPPORT_LIBBZ2=OFF -DPCRE2_SUPPORT_LIBREADLINE=OFF -DPCRE2_SUPPORT_LIBEDIT=OFF >"$TOP/src/pcre2.log" 2>&1 &&
    cmake --build "$TOP/src/pcre2-build" -j"$JOBS" >>"$TOP/src/pcre2.log" 2>&1 &&
    cmake --install "$TOP/src/pcre2-build" >>"$TOP/src/pcre2.log" 2>&1 ||
    { tail -30 "$TOP/src/pcre2.log"; die "building pcre2 for macOS"; }
  # xxHash: its library is its header compiled with XXH_IMPLEMENTATION.
  printf '#define XXH_STATIC_LINKING_ONLY\n#define XXH_IMPLEMENTATION\n#include <xxhash.h>\n' > "$TOP/src/xxhash.c"
  "$src/tools/macos/zig-cc" -O2 -I"$stage/usr/include" -c "$TOP/src/xxhash.c" -o "$TOP/src/xxhash.o"
  "$src/tools/macos/zig-ar" rcs "$stage/target/lib/libxxhash.a" "$TOP/src/xxhash.o"
  xxh_version=$(awk '/^#define XXH_VERSION_(MAJOR|MINOR|RELEASE) /{v = v (v ? "." : "") $3} END {print v}' "$stage/usr/include/xxhash.h")
  cat > "$stage/target/lib/pkgconfig/libxxhash.pc" <<EOF
Name: libxxhash
Description: xxHash, built for arm64 macOS by tools/check-macos.sh
Version: $xxh_version
Libs: -L$stage/target/lib -lxxhash
Cflags: -I$stage/usr/include
EOF
  echo "$stamp" > "$stage/.staged"
  rm -f "$TOP/build/CMakeCache.txt"  # its checks (verbs.h found?) were of the old stage
fi
for deb in "$TOP"/debs/*.deb; do echo "  staged: $(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version)"; done

step "3: configure and build $TOP/build (-j$JOBS)"
build=$TOP/build
cmake -S "$src" -B "$build" -DCMAKE_TOOLCHAIN_FILE="$src/cmake/toolchains/aarch64-macos-zig.cmake" \
  -DTRILLION_MACOS_STAGE="$stage" -DTRILLION_MACOS_CHECK=ON -DCMAKE_BUILD_TYPE=Release \
  ${TRILLION_TB5_BTL_OMPI5:+-DTRILLION_TB5_BTL_OMPI5=$TRILLION_TB5_BTL_OMPI5} >"$TOP/configure.log" 2>&1 ||
  { cat "$TOP/configure.log"; die "configuring for macOS"; }
grep -E '^-- (tb5|The CXX compiler|Found PkgConfig|Checking for module|  Found)' "$TOP/configure.log" || true
# (-k: every failing translation unit in one run; progress lines left out)
set +e
cmake --build "$build" -j"$JOBS" -- -k 2>&1 | tee "$TOP/build.log" | grep -vE '^\[ *[0-9]+%\] (Building|Linking|Built)'
status=${PIPESTATUS[0]}
set -e
if [ "$status" != 0 ]; then
  echo >&2
  grep -E 'error:|Error [0-9]' "$TOP/build.log" | sort -u | head -40 >&2
  die "a translation unit or a link failed for macOS (the compiler's messages above; whole log: $TOP/build.log)"
fi

step "4: verify"
warnings=$(grep -c 'warning:' "$TOP/build.log" || true)
linked=0 compiled=0
while read -r how name what; do
  if [ "$how" = linked ]; then
    kind=$(file -b "$what")
    case $kind in
      "Mach-O 64-bit arm64 executable"* | "Mach-O 64-bit arm64 dynamically linked shared library"*) ;;
      *) die "$name ($what) is not Mach-O arm64: $kind" ;;
    esac
    linked=$((linked + 1))
    printf '  linked    %-28s %s\n' "$name" "${kind%%,*}"
  else
    compiled=$((compiled + 1))
    printf '  compiled  %-28s (not linked: needs %s)\n' "$name" "$what"
  fi
done < "$build/macos-check-targets.txt"
# Every .c/.cpp of the tree must have been compiled, but for these, each for its reason:
excluded='^src/(kernels|calibrate)/x86/'  # x86-64 kernels and peak probes: Intel Macs are no target
excluded+='|^src/platform/linux/'      # the Linux side of the platform seams (the Linux build's)
excluded+='|^src/transport/tb5/btl/'   # step 5
excluded+='|^src/transport/tb5/core/checksum_avx2\.cpp$'  # tb5's x86 hash (AVX2), as the x86 kernels
"$py" - "$build/compile_commands.json" "$src" "$excluded" <<'EOF' || die "translation units the check did not compile (above)"
import json, re, subprocess, sys
commands, src, excluded = sys.argv[1:]
compiled = {e["file"] for e in json.load(open(commands))}
tracked = subprocess.run(["git", "-C", src, "ls-files", "*.c", "*.cpp"], capture_output=True, text=True, check=True)
missing = [f for f in tracked.stdout.split() if f"{src}/{f}" not in compiled and not re.search(excluded, f)]
counted = [f for f in compiled if not re.search(excluded, f.removeprefix(src + "/"))]
print(f"  {len(counted)} translation units compiled for arm64 macOS")
for f in missing:
    print(f"  not compiled for macOS: {f} (give it to a target, or an exclusion with its reason in tools/check-macos.sh)")
sys.exit(1 if missing else 0)
EOF
echo "  $linked executables and shared libraries linked (Mach-O arm64), $compiled compiled but not linked"
echo "  $warnings compiler warnings (grep warning: $TOP/build.log)"

step "5: the tb5 BTL against Open MPI 5's headers"
if grep -q '^TRILLION_TB5_BTL_OMPI5:BOOL=ON' "$build/CMakeCache.txt"; then
  # Open MPI's internal headers need hwloc's, PMIx's and libevent's, and
  # those Debian does not install (opal/mca/threads/pthreads/*.h, the timer
  # component's) come from the same release's source (cmake/TrillionMacosCheck.cmake).
  btl=$stage/btl
  btl_stamp="$STAGE_FORMAT $BTL_PACKAGES"
  if [ "$(cat "$btl/.staged" 2>/dev/null)" != "$btl_stamp" ]; then
    rm -rf "$btl" "$TOP/src/openmpi"
    mkdir -p "$btl"
    export APT_CONFIG=$TOP/apt/apt.conf
    (cd "$TOP/debs" && apt-get -qq download $BTL_PACKAGES) || die "apt-get download $BTL_PACKAGES"
    for p in $BTL_PACKAGES; do dpkg-deb -x "$TOP/debs/${p}_"*.deb "$btl"; done
    version=$(fetch_orig openmpi "$TOP/src/openmpi" .h)
    staged=$(dpkg-deb -f "$TOP/debs/libopenmpi-dev_"*.deb Version)
    [ "$version" = "$staged" ] || die "Open MPI's source is $version, its staged headers $staged"
    mv "$TOP"/src/openmpi/openmpi-*/ "$btl/ompi-source"
    echo "$btl_stamp" > "$btl/.staged"
  fi
  set +e
  cmake --build "$build" --target trillion_macos_tb5_btl -j"$JOBS" 2>&1 | tee "$TOP/btl.log" | grep -v '^\['
  status=${PIPESTATUS[0]}
  set -e
  [ "$status" = 0 ] || die "the tb5 BTL does not compile for macOS ($TOP/btl.log)"
else
  echo "  skipped (TRILLION_TB5_BTL_OMPI5=OFF)"
fi

echo
echo "macOS check: OK in $((SECONDS - start)) s"
}
main "$@"
