#!/bin/sh
# tb5 across four fake hosts cabled as a full mesh (jobs/tb5/netns-mesh.sh:
# a network namespace per host, a veth pair with a /30 per pair of hosts, no
# bridge), one rank per host, only self,tb5, the given backend: udp over the
# cables, or verbs on the simulator wired as the veths are (TB5_SIM_WIRING,
# TB5_SIM_HOST = each namespace's host name).
#   tb5_mesh_netns.sh BACKEND PLUGIN_DIR OMPI_COMPONENT_DIR SIM_LIBRARY [--expect injected|sim] PROGRAM [ARGS...]
# --expect: after the run, every rank's counters (btl_tb5_stats_file) must
# show the faults asked for: btl/tb5's injected losses, duplicates and
# reorderings (injected), or the simulator's (sim), and retransmissions, so
# that a misspelled fault option cannot turn the test into a clean run.
# With TB5_MESH_MPIEXEC=1 the caller gives -n (an mpiexec for
# tests/e2e/test_layouts.py: tb5_mesh_netns_mpiexec.sh); ranks go to hosts in turn.
#   tb5_mesh_netns.sh --probe   exits 0 where namespaces can be made, else 77
# Where namespaces cannot be made the test is skipped (77), except in CI
# (CI=true, a real machine as root), where that is a failure.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
mesh="$here/../../jobs/tb5/netns-mesh.sh"
hosts=4
. "$here/netns_unavailable.sh"
sh "$mesh" probe || netns_unavailable tb5_mesh_netns
[ "${1:-}" != --probe ] || exit 0
backend=$1 plugins=$2 ompi=$3 sim=$4
shift 4
expect=
if [ "${1:-}" = --expect ]; then expect=$2; shift 2; fi
name="tb5m$$" work=$(mktemp -d)
cleanup() {
  sh "$mesh" down "$name" "$hosts"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
sh "$mesh" up "$name" "$hosts" "$work"
# Open MPI's launch agent: a program it calls as `AGENT HOST CMD`.
printf '#!/bin/sh\nexec sh %s agent "$@"\n' "$mesh" > "$work/agent"
chmod +x "$work/agent"
net=10.${TB5_MESH_NET:-214}.0.0/24
if [ "$backend" = verbs ]; then
  extra="--mca btl_tb5_backend verbs --mca btl_tb5_verbs_library $sim -x TB5_SIM_WIRING=$work/wiring"
else
  extra="--mca btl_tb5_backend udp --mca btl_tb5_if_include $net"
fi
# The launcher's and the one-sided component's names by Open MPI generation,
# as in tb5_netns.sh: 4.1's ORTE takes plm_rsh_* and oob_tcp_if_include
# (windows on osc/pt2pt); 5.0's PRRTE plm_ssh_* and prte_if_include by
# interface names (windows on osc/rdma's active-message emulation). PRRTE's
# remote daemon starts a session of its own unasked: --leave-session-attached
# keeps every rank in mpirun's session and scheduler autogroup, as the agent's
# --daemonize strip does for 4.1 (CI on Debian 13 saw a rank silent to its
# peers for 60 s under load without it; docs/tb5.md).
major=$(mpirun --version 2>/dev/null | sed -n 's/^[a-z]* (Open MPI) \([0-9]*\)\..*/\1/p' | head -n 1)
if [ "${major:-4}" -ge 5 ]; then
  ifs=$(seq -s, -f 'tb%g' 0 $((hosts - 1)))
  launch="--prtemca plm_ssh_agent $work/agent --prtemca plm_ssh_no_tree_spawn 1 --prtemca prte_if_include $ifs --leave-session-attached --mca osc rdma"
else
  launch="--mca plm_rsh_agent $work/agent --mca plm_rsh_no_tree_spawn 1 --mca oob_tcp_if_include $net --mca osc pt2pt"
fi
np="-np $hosts"
[ -z "${TB5_MESH_MPIEXEC:-}" ] || np=
# (The agent learns which mesh from the environment mpirun passes on to it;
# --bind-to none: every namespace would bind its rank to "its" core 0.)
rc=0
TB5_MESH_NAME=$name TB5_MESH_HOSTS=$hosts sh "$mesh" exec "$name" 0 mpirun --hostfile "$work/hosts" $np \
  --map-by node --bind-to none $launch --mca mpi_yield_when_idle 1 --mca mca_base_component_path "$plugins:$ompi" \
  --mca btl self,tb5 $extra --mca btl_tb5_stats_file "$work/stats.%r" "$@" || rc=$?
[ $rc -eq 0 ] || exit $rc
[ -n "$expect" ] || exit 0
# Sum every rank's counters and check the faults asked for happened.
files=$(ls "$work"/stats.* 2>/dev/null | wc -l)
if [ "$files" -ne "$hosts" ]; then
  echo "tb5_mesh_netns: FAIL: counters from $files of $hosts ranks (btl_tb5_stats_file)" >&2
  exit 1
fi
case $expect in
  injected) need="btl_tb5_injected_lost btl_tb5_injected_duplicated btl_tb5_injected_reordered" ;;
  sim) need="btl_tb5_sim_lost btl_tb5_sim_duplicated btl_tb5_sim_reordered" ;;
  *) echo "tb5_mesh_netns: --expect injected or sim, not $expect" >&2; exit 2 ;;
esac
status=0
for counter in $need btl_tb5_retransmissions; do
  total=$(cat "$work"/stats.* | awk -v k="$counter" '$1 == k { s += $2 } END { print s + 0 }')
  echo "tb5_mesh_netns: $counter = $total (all ranks)"
  [ "$total" -gt 0 ] || { echo "tb5_mesh_netns: FAIL: no $counter: the faults asked for did not happen" >&2; status=1; }
done
exit $status
