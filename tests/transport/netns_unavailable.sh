# Sourced by the namespace tests (tb5_netns.sh, tb5_mesh_netns.sh,
# tb5_check_cluster_netns.sh): `netns_unavailable NAME [REASON]` ends a test
# where network namespaces cannot be made: skipped (77), or failed under
# CI=true (CI runs as root on a real machine: a skip there would hide a
# broken test).
netns_unavailable() {
  if [ "${CI:-}" = true ]; then
    echo "$1: FAIL: network namespaces cannot be made here, and CI=true${2:+: $2}" >&2
    exit 1
  fi
  echo "$1: network namespaces unavailable here (not root, or no ip netns), skipped${2:+: $2}" >&2
  exit 77
}
