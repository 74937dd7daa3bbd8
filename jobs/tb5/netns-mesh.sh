#!/bin/sh
# N fake hosts cabled as a full mesh on one Linux machine (root): what four
# Macs joined by Thunderbolt 5 cables look like to tb5, for the tests
# (tests/transport/tb5_mesh_netns.sh) and for jobs/tb5/check-cluster --runner netns.
#   netns-mesh.sh probe                     exits 0 where namespaces can be made and entered, else 1
#   netns-mesh.sh up NAME N DIR             hosts NAME-h0..NAME-h<N-1>; writes DIR/wiring, DIR/hosts
#   netns-mesh.sh down NAME N               deletes them (idempotent)
#   netns-mesh.sh exec NAME I CMD [ARGS...] runs CMD on host I
#   netns-mesh.sh agent HOST CMD            Open MPI's launch agent (plm_rsh_agent / plm_ssh_agent):
#                                           HOST an address of the mesh; TB5_MESH_NAME and TB5_MESH_HOSTS
#                                           in the environment (mpirun's, which the agent inherits)
# Each host is a network namespace NAME-h<i> with its own hostname (unshare
# --uts; Open MPI tells hosts apart by it) and TB5_SIM_HOST set to it. No
# bridge: one veth pair per pair of hosts, a cable, whose ends are named as
# the port's peer (host i's port to host j is "tb<j>") and carry a /30 of
# their own, 10.$TB5_MESH_NET.0.0/24 cut in order of the pairs (0-1, 0-2,
# ..., 1-2, ...): cable k is 10.NET.0.(4k+1) at its lower host, .(4k+2) at
# the other, as on Macs where every Thunderbolt port is its own subnet.
# DIR/wiring lists the cables for the verbs simulator (TB5_SIM_WIRING: the
# device on port tb<j> is rdma_tb<j>); DIR/hosts is a hostfile of one slot per
# host (host 0 by its address on the cable to host 1, the others by theirs on
# the cable to host 0, which is where mpirun runs). Nothing is made in the
# root namespace, so deleting the namespaces removes every cable.
set -eu
net=${TB5_MESH_NET:-214}

# addr I J: host I's address on the cable to host J.
addr() {
  a=$1 b=$2 n=$hosts
  [ "$a" -lt "$b" ] && lo=$a hi=$b side=1 || { lo=$b hi=$a side=2; }
  k=0 i=0
  while [ $i -lt "$lo" ]; do k=$((k + n - 1 - i)); i=$((i + 1)); done
  k=$((k + hi - lo - 1))
  echo "10.$net.0.$((4 * k + side))"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
probe)
  p="tb5mprobe$$"
  ip netns add "$p" 2>/dev/null || exit 1
  ok=0
  ip netns exec "$p" true 2>/dev/null && ip -n "$p" link add name pa type veth peer name pb 2>/dev/null || ok=1
  ip netns del "$p" 2>/dev/null || true
  exit $ok ;;
up)
  name=$1 hosts=$2 dir=$3
  case $hosts in 2|3|4|5|6|7|8) ;; *) echo "netns-mesh: 2..8 hosts, not $hosts" >&2; exit 2 ;; esac
  sh "$0" down "$name" "$hosts"
  mkdir -p "$dir"
  : > "$dir/wiring"
  : > "$dir/hosts"
  i=0
  while [ $i -lt "$hosts" ]; do
    ip netns add "$name-h$i"
    ip -n "$name-h$i" link set lo up
    i=$((i + 1))
  done
  i=0
  while [ $i -lt "$hosts" ]; do
    j=$((i + 1))
    while [ $j -lt "$hosts" ]; do
      ip link add "tb$j" netns "$name-h$i" type veth peer name "tb$i" netns "$name-h$j"
      ip -n "$name-h$i" addr add "$(addr $i $j)/30" dev "tb$j"
      ip -n "$name-h$j" addr add "$(addr $j $i)/30" dev "tb$i"
      ip -n "$name-h$i" link set "tb$j" up
      ip -n "$name-h$j" link set "tb$i" up
      echo "$name-h$i rdma_tb$j $(addr $i $j)/30 $name-h$j rdma_tb$i $(addr $j $i)/30" >> "$dir/wiring"
      j=$((j + 1))
    done
    if [ $i -eq 0 ]; then main=$(addr 0 1); else main=$(addr $i 0); fi
    echo "$main slots=1" >> "$dir/hosts"
    i=$((i + 1))
  done ;;
down)
  name=$1 hosts=$2 i=0
  while [ $i -lt "$hosts" ]; do ip netns del "$name-h$i" 2>/dev/null || true; i=$((i + 1)); done ;;
exec)
  name=$1 i=$2
  shift 2
  exec ip netns exec "$name-h$i" unshare --uts sh -c \
    'hostname "$0" && TB5_SIM_HOST="$0" && export TB5_SIM_HOST && exec "$@"' "$name-h$i" "$@" ;;
agent)
  host=$1
  shift
  name=$TB5_MESH_NAME hosts=$TB5_MESH_HOSTS idx=
  i=0
  while [ $i -lt "$hosts" ] && [ -z "$idx" ]; do
    j=0
    while [ $j -lt "$hosts" ]; do
      [ $i -ne $j ] && [ "$(addr $i $j)" = "$host" ] && idx=$i && break
      j=$((j + 1))
    done
    i=$((i + 1))
  done
  [ -n "$idx" ] || { echo "netns-mesh: $host is no address of mesh $name" >&2; exit 2; }
  # Not orted's --daemonize: a new session is a scheduler autogroup of its
  # own, which a loaded Linux 6.x host can leave unscheduled for a minute
  # (docs/tb5.md); in mpirun's session every rank is scheduled as a peer.
  c=$(printf ' %s' "$@" | sed -e 's/ --daemonize$//' -e 's/ --daemonize / /')
  exec sh "$0" exec "$name" "$idx" sh -c "$c" ;;
*)
  sed -n '2,10p' "$0" >&2
  exit 2 ;;
esac
