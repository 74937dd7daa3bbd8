#!/bin/sh
# jobs/tb5/check-cluster against four namespace hosts cabled as a full mesh
# (jobs/tb5/netns-mesh.sh) with the verbs simulator for their RDMA devices:
# every step must pass.
#   tb5_check_cluster_netns.sh BUILD_DIR PLUGIN_DIR SIM_LIBRARY
# Skipped (77) where namespaces cannot be made, a failure there when CI=true.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mesh="$root/jobs/tb5/netns-mesh.sh"
. "$here/netns_unavailable.sh"
sh "$mesh" probe || netns_unavailable tb5_check_cluster_netns
build=$1 plugins=$2 sim=$3
name="tb5c$$" work=$(mktemp -d)
trap 'sh "$mesh" down "$name" 4; rm -rf "$work"' EXIT
trap 'exit 1' INT TERM
sh "$mesh" up "$name" 4 "$work/mesh"
/usr/bin/python3 "$root/jobs/tb5/check-cluster" "$work/mesh/hosts" --runner netns --mesh "$name" \
  --build "$build" --plugins "$plugins" --sim "$sim" --work "$work/run"
