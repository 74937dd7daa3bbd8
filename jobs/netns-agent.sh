#!/bin/sh
# Open MPI's launch agent for the emulated cluster (jobs/study/cluster.py):
# where mpirun would `ssh HOST CMD`, this enters HOST's network namespace.
#   netns-agent.sh HOST CMD...          (as plm_rsh_agent / plm_ssh_agent: CMD is one shell string)
#   netns-agent.sh --local HOST ARGV... (starts mpirun itself inside host 0)
# HOST is 10.N.0.<i+1>; the namespace is $TRILLION_CLUSTER-h<i>. Each host gets
# its own hostname (unshare --uts: Open MPI tells nodes apart by it, and vader's
# shared-memory files would collide) and is pinned to core i mod
# $TRILLION_CLUSTER_CORES, so ranks on different hosts do not share a core
# while cores last.
set -eu
local=0
if [ "${1:-}" = --local ]; then local=1; shift; fi
host=$1
shift
last=${host##*.}
case $last in ''|*[!0-9]*) echo "netns-agent: $host is not an emulated host's address" >&2; exit 2 ;; esac
idx=$((last - 1))
ns="${TRILLION_CLUSTER:-trl}-h$idx"
core=$((idx % ${TRILLION_CLUSTER_CORES:-1}))
if [ "$local" = 1 ]; then
  exec ip netns exec "$ns" unshare --uts taskset -c "$core" sh -c 'hostname "$0" && exec "$@"' "$ns" "$@"
fi
# Open MPI asks the remote daemon to --daemonize, which starts a session and
# with it a scheduler autogroup of its own; on a loaded Linux 6.x host a whole
# autogroup can go unscheduled for seconds to a minute (measured with the tb5
# namespace tests: a rank runnable but not run for 20 s while its peers spun).
# The daemon stays in mpirun's session instead, so every rank of the cluster
# is scheduled as a peer, as on separate machines. (Open MPI 5's prted makes
# its own session whatever it is asked; mpirun's --leave-session-attached,
# which jobs/study/cluster.py passes there, stops that.)
cmd=$(printf ' %s' "$@" | sed -e 's/ --daemonize$//' -e 's/ --daemonize / /')
exec ip netns exec "$ns" unshare --uts taskset -c "$core" sh -c 'hostname "$0" && exec sh -c "$1"' "$ns" "$cmd"
