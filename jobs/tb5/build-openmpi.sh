#!/usr/bin/env bash
# btl/tb5 for an Open MPI installed without its development headers
# (Homebrew's open-mpi): the plugin is built against the headers of the same
# release, configured with the installed build's own configure command line,
# and loads into the installed Open MPI (docs/tb5.md: why not a second,
# whole Open MPI). One command on a Mac with internet:
#
#   jobs/tb5/build-openmpi.sh [--prefix DIR]
#
# Makes, in DIR (default ~/.local/trillion-tb5):
#   openmpi-V/               the release V of the installed Open MPI, configured
#   build/                   trillion's CMake build of the plugin only
#   lib/openmpi/mca_btl_tb5.so
# and prints the mpirun arguments that load it. Steps: the version and the
# configure command line from the installed ompi_info; the release tarball
# (download.open-mpi.org) checked against the SHA-256 Homebrew's formula
# records for it (brew info --json=v2), or --sha256; configure; a check that
# the configured headers agree with the installed build (version, debug);
# cmake -DTRILLION_OMPI_SOURCE=DIR/openmpi-V. Hours of a whole build are not
# needed: only configure runs (minutes).
#
# Options: --version V (default: the installed one), --tarball URL and
# --sha256 HASH (another source of the same release, e.g. Debian's orig
# tarball), --drop REGEX (leave out configure options matching REGEX, e.g.
# language bindings whose toolchains are not installed: '--(enable-mpi-java|with-jdk-dir)').
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
prefix=$HOME/.local/trillion-tb5 version="" tarball="" sha256="" drop=""
while [ $# -gt 0 ]; do
  case $1 in
    --prefix) prefix=$2; shift 2 ;;
    --version) version=$2; shift 2 ;;
    --tarball) tarball=$2; shift 2 ;;
    --sha256) sha256=$2; shift 2 ;;
    --drop) drop=$2; shift 2 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "build-openmpi: unknown argument $1" >&2; exit 2 ;;
  esac
done
die() { echo "build-openmpi: $*" >&2; exit 1; }
command -v ompi_info >/dev/null || die "no ompi_info on PATH: install Open MPI first (brew install open-mpi)"
installed=$(ompi_info -V | sed -n 's/^Open MPI v\([0-9][0-9.]*\).*/\1/p' | head -n 1)
[ -n "$installed" ] || die "cannot read the installed Open MPI's version from ompi_info -V"
version=${version:-$installed}
[ "$version" = "$installed" ] || die "Open MPI $installed is installed; a plugin for $version would not load into it"
case $version in 5.0.*) ;; *) die "btl/tb5 builds against Open MPI 4.1 or 5.0; on $version use its own headers" ;; esac
# The installed build's configure arguments, quoted by ompi_info ('--a' '--b=c').
line=$(ompi_info -a | sed -n 's/^ *Configure command line: //p' | head -n 1)
[ -n "$line" ] || die "ompi_info -a shows no configure command line"
eval "given=($line)"
args=()
for a in "${given[@]}"; do
  if [ -n "$drop" ] && [[ $a =~ $drop ]]; then echo "build-openmpi: leaving out $a" >&2; continue; fi
  args+=("$a")
done

fetch() {  # URL FILE (macOS has curl; a minimal Linux may have only python3)
  if command -v curl >/dev/null; then curl -fsSL -o "$2" "$1"
  else python3 -c 'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' "$1" "$2"; fi
}
sha256_of() { if command -v sha256sum >/dev/null; then sha256sum "$1"; else shasum -a 256 "$1"; fi | cut -d' ' -f1; }
if [ -z "$tarball" ] && [ -z "$sha256" ] && command -v brew >/dev/null; then
  # Homebrew's formula records the tarball it built its bottle from, and its SHA-256.
  read -r tarball sha256 < <(brew info --json=v2 open-mpi | python3 -c '
import json, sys
f = json.load(sys.stdin)["formulae"][0]
s = f["urls"]["stable"]
print(s["url"], s["checksum"]) if f["versions"]["stable"] == sys.argv[1] else print("", "")' "$version") || true
fi
tarball=${tarball:-https://download.open-mpi.org/release/open-mpi/v${version%.*}/openmpi-$version.tar.bz2}
[ -n "$sha256" ] || die "no SHA-256 for $tarball: give --sha256 (open-mpi.org lists it beside the tarball)"

tree=$prefix/openmpi-$version
mkdir -p "$prefix"
if [ ! -f "$tree/VERSION" ]; then
  file=$prefix/$(basename "$tarball")
  echo "build-openmpi: $tarball" >&2
  fetch "$tarball" "$file.part" || die "cannot download $tarball"
  mv "$file.part" "$file"
  got=$(sha256_of "$file")
  [ "$got" = "$sha256" ] || die "$file has SHA-256 $got, expected $sha256"
  rm -rf "$tree.part" && mkdir "$tree.part"
  tar -C "$tree.part" -xf "$file" --strip-components 1
  [ -f "$tree.part/VERSION" ] || die "$file is not an Open MPI release tarball"
  mv "$tree.part" "$tree"
fi
stamp=$(printf '%q ' "${args[@]}")
if [ ! -f "$tree/opal/include/opal_config.h" ] || [ "$(cat "$tree/.trillion-configure" 2>/dev/null)" != "$stamp" ]; then
  echo "build-openmpi: configuring $tree as the installed Open MPI was (log: $prefix/configure.log)" >&2
  (cd "$tree" && ./configure "${args[@]}") >"$prefix/configure.log" 2>&1 ||
    die "configure failed (last lines below; --drop leaves out options for absent toolchains)
$(tail -n 15 "$prefix/configure.log")"
  printf '%s' "$stamp" >"$tree/.trillion-configure"
fi

# The configured headers must describe the installed build's objects.
config=$tree/opal/include/opal_config.h
define() { sed -n "s/^#define $1 \\(.*\\)$/\\1/p" "$config" | head -n 1; }
[ "$(define OPAL_MAJOR_VERSION).$(define OPAL_MINOR_VERSION).$(define OPAL_RELEASE_VERSION)" = "$version" ] ||
  die "$config is not Open MPI $version's"
debug=$(ompi_info | sed -n 's/^ *Debug support: //p' | head -n 1)
want=0; [ "$debug" = yes ] && want=1
[ "$(define OPAL_ENABLE_DEBUG)" = "$want" ] ||
  die "the installed Open MPI has debug support '$debug' but $config says OPAL_ENABLE_DEBUG $(define OPAL_ENABLE_DEBUG)"

cmake -S "$repo" -B "$prefix/build" -DTRILLION_OMPI_SOURCE="$tree" -DTRILLION_BUILD_TESTS=OFF \
  -DTRILLION_BUILD_BENCH=OFF >"$prefix/cmake.log" 2>&1 || die "cmake failed: see $prefix/cmake.log"
grep -q 'TRILLION_TB5_BTL:INTERNAL=ON' "$prefix/build/CMakeCache.txt" ||
  die "the plugin is not configured: $(grep 'tb5:' "$prefix/cmake.log" | tail -n 3)"
cmake --build "$prefix/build" --target mca_btl_tb5 -j "$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)" \
  >"$prefix/build.log" 2>&1 || die "the plugin did not build: see $prefix/build.log"
mkdir -p "$prefix/lib/openmpi"
cp "$prefix/build/lib/openmpi/mca_btl_tb5.so" "$prefix/lib/openmpi/"
pkglibdir=$(ompi_info --path pkglibdir | sed -n 's/^ *Pkglibdir: //p')
echo "build-openmpi: $prefix/lib/openmpi/mca_btl_tb5.so, for Open MPI $version. Run with:"
echo "  mpirun --mca mca_base_component_path $prefix/lib/openmpi:$pkglibdir --mca btl self,tb5 ..."
