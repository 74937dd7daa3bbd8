#!/bin/sh
# tb5 across network namespaces: two fake hosts (namespaces on a bridge,
# their own hostnames), one rank each, only self,tb5, the given backend
# (udp or verbs), or, for comparison (bench/tb5_table.py), BACKEND tcp:
# only self,tcp.
#   tb5_netns.sh BACKEND PLUGIN_DIR OMPI_COMPONENT_DIR SIM_LIBRARY PROGRAM [ARGS...]
# With TB5_NETNS_SLOTS=N each host has N slots and the caller gives -n (an
# mpiexec for tests/e2e/test_layouts.py: tb5_netns_mpiexec.sh).
#   tb5_netns.sh --probe    exits 0 where namespaces can be made and entered, else 77
# Needs root (ip netns); mpirun runs inside the first namespace and reaches
# the second through an rsh agent that enters it (written below, as jobs/netns-agent.sh).
set -eu
id=$$
net="10.213.$((id % 200 + 20))"
br="tb5br$id" work=$(mktemp -d)
cleanup() {
  for i in 0 1; do ip netns del "tb5n$i$id" 2>/dev/null || true; done
  ip link del "$br" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM
# Where namespaces cannot be entered (e.g. a chroot whose / is not a mount
# point: `ip netns exec` fails to make it a slave), skip (77) with the reason.
. "$(dirname "$0")/netns_unavailable.sh"
if ! ip netns add "tb5n0$id" 2>"$work/probe" || ! ip netns exec "tb5n0$id" true 2>>"$work/probe"; then
  netns_unavailable tb5_netns "$(cat "$work/probe")"
fi
ip netns del "tb5n0$id"
[ "${1:-}" != --probe ] || exit 0
backend=$1 plugins=$2 ompi=$3 sim=$4
shift 4
ip link add "$br" type bridge
ip link set "$br" up
for i in 0 1; do
  ns="tb5n$i$id"
  ip netns add "$ns"
  ip link add "tb5v$i$id" type veth peer name "tb5p$i$id"
  ip link set "tb5p$i$id" master "$br" up
  ip link set "tb5v$i$id" netns "$ns"
  ip -n "$ns" addr add "$net.$((i + 1))/24" dev "tb5v$i$id"
  ip -n "$ns" link set "tb5v$i$id" up
  ip -n "$ns" link set lo up
done
cat > "$work/agent.sh" <<AGENT
#!/bin/sh
host=\$1; shift
case "\$host" in
  $net.1) ns=tb5n0$id; name=tb5host0 ;;
  *) ns=tb5n1$id; name=tb5host1 ;;
esac
# Not orted's --daemonize: a new session is a new scheduler autogroup, and
# on a loaded Linux 6.x host a whole autogroup can go unscheduled for a
# minute (seen here: host 1's ranks runnable but not run for 20-100 s, so
# their peers declared them dead). In mpirun's session every rank is
# scheduled as a peer (jobs/netns-agent.sh does the same).
cmd=\$(printf ' %s' "\$@" | sed -e 's/ --daemonize\$//' -e 's/ --daemonize / /')
exec ip netns exec "\$ns" unshare --uts sh -c "hostname \$name;\$cmd"
AGENT
chmod +x "$work/agent.sh"
# Ranks alternate hosts (--map-by node), so 2 ranks span both: PRRTE (Open
# MPI 5) maps 2 ranks by core by default and, with oversubscription allowed
# (the tests' environment), put both on host 0.
slots=${TB5_NETNS_SLOTS:-1} np="-np 2 --map-by node"
[ -z "${TB5_NETNS_SLOTS:-}" ] || np="--map-by node"
printf '%s slots=%s\n%s slots=%s\n' "$net.1" "$slots" "$net.2" "$slots" > "$work/hosts"
btl=self,tb5
if [ "$backend" = verbs ]; then
  extra="--mca btl_tb5_backend verbs --mca btl_tb5_verbs_library $sim"
elif [ "$backend" = tcp ]; then
  btl=self,tcp extra="--mca btl_tcp_if_include $net.0/24"
else
  extra="--mca btl_tb5_backend udp --mca btl_tb5_if_include $net.0/24"
fi
# The launcher's and the one-sided component's names by Open MPI generation:
# 4.1's ORTE takes plm_rsh_* and oob_tcp_if_include, and windows over tb5 run
# on osc/pt2pt; 5.0's PRRTE takes plm_ssh_* and prte_if_include (through
# --prtemca; by interface names: PRRTE 3.0.8 finds no interface for the
# subnet here and warns), and windows run on osc/rdma's active-message
# emulation. PRRTE's remote daemon starts a session of its own by itself
# (no --daemonize asked): --leave-session-attached keeps it in mpirun's, as
# the agent does for 4.1 (the scheduler autogroup, agent.sh above; CI saw a
# host-0 rank silent for 60 s under load on 5.0 without it).
major=$(mpirun --version 2>/dev/null | sed -n 's/^[a-z]* (Open MPI) \([0-9]*\)\..*/\1/p' | head -n 1)
if [ "${major:-4}" -ge 5 ]; then
  launch="--prtemca plm_ssh_agent $work/agent.sh --prtemca plm_ssh_no_tree_spawn 1 \
    --prtemca prte_if_include tb5v0$id,tb5v1$id --leave-session-attached --mca osc rdma"
else
  launch="--mca plm_rsh_agent $work/agent.sh --mca plm_rsh_no_tree_spawn 1 \
    --mca oob_tcp_if_include $net.0/24 --mca osc pt2pt"
fi
ip netns exec "tb5n0$id" unshare --uts sh -c "hostname tb5host0; exec mpirun --hostfile $work/hosts $np \
  $launch --mca mpi_yield_when_idle 1 --mca mca_base_component_path $plugins:$ompi \
  --mca btl $btl $extra $*"
