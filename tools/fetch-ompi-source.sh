#!/usr/bin/env bash
# Fetches and unpacks the source release of the Open MPI that Debian's
# libopenmpi-dev installed, for the headers Open MPI 5 leaves out of its
# development package (cmake/TrillionOmpiSource.cmake: without them btl/tb5
# cannot include opal/mca/btl/btl.h). Run by tools/install-deps.sh on Open MPI
# 5; CMake then finds the tree by itself.
#
#   tools/fetch-ompi-source.sh [--dest DIR]     # default /usr/local/src
#
# Gives DIR/openmpi-<version> (e.g. /usr/local/src/openmpi-5.0.7). The tarball
# is Debian's orig tarball of the installed source package, from the mirror
# apt uses, checked against a SHA-256 pinned here, or, for a version not
# pinned, against the package's .dsc (said so on stderr). Nothing is done if
# the tree is there already.
set -euo pipefail
dest=/usr/local/src
while [ $# -gt 0 ]; do
  case $1 in
    --dest) dest=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "fetch-ompi-source: unknown argument $1" >&2; exit 2 ;;
  esac
done

# SHA-256 of Debian's orig tarballs (the upstream release, recompressed).
pinned() {
  case $1 in
    5.0.7) echo 97f10c04e9b9a1771db3fd005009e4c07afa3ce739f940e41eb0fc7397cb9473 ;;
    *) echo "" ;;
  esac
}

srcver=$(dpkg-query -W -f '${source:Version}' libopenmpi-dev 2>/dev/null) || {
  echo "fetch-ompi-source: libopenmpi-dev is not installed (a Debian package); elsewhere use jobs/tb5/build-openmpi.sh" >&2
  exit 1
}
srcver=${srcver#*:}          # no epoch in pool file names
upstream=${srcver%-*}        # 5.0.7-1 -> 5.0.7
version=${upstream%%+*}      # a +dfsg/+repack suffix is not part of the release's version
tree=$dest/openmpi-$version
if [ -f "$tree/VERSION" ]; then
  echo "fetch-ompi-source: $tree is there"
  exit 0
fi

mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
[ -n "$mirror" ] || mirror=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}
pool=${mirror%/}/pool/main/o/openmpi
tarball=openmpi_${upstream}.orig.tar.xz

fetch() {  # URL FILE
  if command -v curl >/dev/null; then curl -fsSL -o "$2" "$1"
  elif command -v wget >/dev/null; then wget -q -O "$2" "$1"
  else python3 -c 'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' "$1" "$2"
  fi
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
want=$(pinned "$version")
if [ -z "$want" ]; then
  fetch "$pool/openmpi_${srcver}.dsc" "$work/dsc"
  want=$(awk -v f="$tarball" '/^Checksums-Sha256:/{s=1; next} /^[^ ]/{s=0} s && $3 == f {print $1}' "$work/dsc")
  [ -n "$want" ] || { echo "fetch-ompi-source: no SHA-256 of $tarball in openmpi_${srcver}.dsc" >&2; exit 1; }
  echo "fetch-ompi-source: Open MPI $version is not pinned here; checking $tarball against Debian's openmpi_${srcver}.dsc" >&2
fi
echo "fetch-ompi-source: $pool/$tarball" >&2
fetch "$pool/$tarball" "$work/$tarball"
got=$(sha256sum "$work/$tarball" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then
  echo "fetch-ompi-source: $tarball has SHA-256 $got, expected $want; not unpacked" >&2
  exit 1
fi
mkdir -p "$dest"
tar -C "$work" -xJf "$work/$tarball"
[ -f "$work/openmpi-$version/VERSION" ] || { echo "fetch-ompi-source: $tarball holds no openmpi-$version/" >&2; exit 1; }
mv "$work/openmpi-$version" "$tree"
echo "fetch-ompi-source: Open MPI $version source in $tree"
