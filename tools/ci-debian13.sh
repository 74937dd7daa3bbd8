#!/usr/bin/env bash
# CI's second configuration: the suite on Debian 13 (GCC 14, Open MPI 5.0,
# HDF5 1.14, Boost 1.83) beside Debian 12's (Open MPI 4.1), in a minimal
# Debian 13 root made here with debootstrap. Needs root.
#
#   tools/ci-debian13.sh                     # build, then the labels below
#   tools/ci-debian13.sh --all               # build, then the whole suite
#   tools/ci-debian13.sh -- CMD...           # build, then CMD in the clone
#
# What runs by default: the tests labelled mpi or tb5 (the runtime over
# shared memory and TCP, the e2e layout tests and every other e2e test under
# mpirun, the tb5 BTL's jobs, the namespace tests): what differs between
# Open MPI 4.1 and 5.0. The rest (kernels, model, tokenizer, store)
# does not depend on the MPI generation and runs in Debian 12's suite, and
# only the targets those tests run are built. The soak tests (label
# reliability: memory over thousands of steps, 5-6 minutes together) and the
# lm-eval backend's (label eval: Python over a pip venv, the same on either;
# its venv builds with Debian 13's Python 3.13 and the pins) are left to
# Debian 12's run, to keep CI's two configurations within an hour.
#
# The root: debootstrap --variant=minbase of trixie from the mirror apt uses
# (or deb.debian.org), kept as a tarball in $CI_D13_CACHE (default
# /var/tmp/trillion-ci) so that later runs only unpack it; each run unpacks a
# new copy, clones the repository's committed HEAD into it, runs
# tools/install-deps.sh (which also fetches the Open MPI source release whose
# headers btl/tb5 needs) and the build, and deletes the copy. The root is a
# mount point with /run a tmpfs of its own and proc, sys, dev mounted, so
# network namespaces work inside it (ip netns exec needs both).
set -euo pipefail
mode=labels cmd=() labels='mpi|tb5' skip='reliability|eval'
while [ $# -gt 0 ]; do
  case $1 in
    --all) mode=all; shift ;;
    --) shift; mode=cmd; cmd=("$@"); break ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "ci-debian13: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "ci-debian13: needs root (debootstrap, mounts, chroot)" >&2; exit 1; }
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
cache=${CI_D13_CACHE:-/var/tmp/trillion-ci}
mkdir -p "$cache"
tarball=$cache/trixie-minbase.tar
start=$(date +%s)
stamp() { echo "ci-debian13: $(( $(date +%s) - start )) s: $*" >&2; }

if [ ! -f "$tarball" ]; then
  command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }
  mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  mirror=${mirror:-http://deb.debian.org/debian}
  base=$(mktemp -d "$cache/base.XXXX")
  stamp "debootstrap trixie from $mirror (once; log in $cache/debootstrap.log)"
  debootstrap --variant=minbase --include=git,ca-certificates trixie "$base" "$mirror" >"$cache/debootstrap.log" 2>&1
  tar -C "$base" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball" && rm -rf "$base"
fi

root=$(mktemp -d "$cache/root.XXXX")
cleanup() {
  umount -R -l "$root" 2>/dev/null || true
  for m in run dev proc sys; do umount -l "$root/$m" 2>/dev/null || true; done
  # never delete through a mount that is still there (the host's /dev, /sys)
  if grep -q " $root[/ ]" /proc/mounts; then echo "ci-debian13: $root still has mounts; left in place" >&2
  else rm -rf "$root"; fi
}
trap cleanup EXIT
tar -C "$root" -xf "$tarball"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
mount --bind "$root" "$root"  # a mount point, so `ip netns exec` can make / a slave
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
mount -t tmpfs tmpfs "$root/run"
mkdir -p "$root/run/lock"
git clone -q "$repo" "$root/root/repo"
stamp "root ready; clone of $(git -C "$repo" rev-parse --short HEAD)"

in_root() { chroot "$root" /bin/bash -lc "cd /root/repo && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 && $1"; }
in_root "bash tools/install-deps.sh"
stamp "dependencies installed"
in_root "cmake -B build >/dev/null"
targets=""
if [ "$mode" = labels ]; then
  # Only what the selected tests run: the executables and plugins their
  # commands name (the trillion binary, the MPI test programs, btl/tb5 and
  # the verbs simulator), not every unit test and benchmark.
  # Read from ctest's JSON: each test's command and its REQUIRED_FILES (the
  # programs a script runs without naming them on its command line).
  named=$(in_root "ctest --test-dir build -N --show-only=json-v1 -L '$labels' -LE '$skip'" | python3 -c '
import json, re, sys
for t in json.load(sys.stdin)["tests"]:
    args = list(t.get("command", []))
    for p in t.get("properties", []):
        if p["name"] == "REQUIRED_FILES":
            args += p["value"]
    for a in args:  # paths inside arguments too: -DCOMMAND=mpiexec;...;/root/repo/build/x
        print("\n".join(re.findall(r"/root/repo/build/[^\s\";:=]+", a)))' |
          sed 's|.*/||; s|^lib\(.*\)\.so$|\1|'; echo mca_btl_tb5)
  all=$(in_root "cmake --build build --target help" | sed -n 's/^\.\.\. \([^ ]*\).*/\1/p')
  targets=$(comm -12 <(sort -u <<<"$named") <(sort -u <<<"$all") | sed 's/^/--target /' | tr '\n' ' ')
fi
in_root "cmake --build build -j \$(nproc) $targets"
stamp "built ${targets:-everything}"
case $mode in
  labels) in_root "ctest --test-dir build --output-on-failure -j \$(nproc) -L '$labels' -LE '$skip'" ;;
  all) in_root "ctest --test-dir build --output-on-failure -j \$(nproc)" ;;
  cmd) in_root "$(printf '%q ' "${cmd[@]}")" ;;
esac
stamp "done"
