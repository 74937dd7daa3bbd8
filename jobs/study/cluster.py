"""An emulated cluster on one machine: N hosts as network namespaces joined by
a bridge, each link rate-limited by `tc tbf` to a link profile, and the
Open MPI settings that launch ranks across them (jobs/netns-agent.sh enters a
host's namespace where mpirun would ssh).

Layout for prefix P (default "trl"), hosts 0..N-1:
  namespace P-sw        the switch: bridge P-br and one end of each veth
  namespace P-h<i>      host i: veth "eth0" with 10.77.<net>.<i+1>/24
Nothing is created in the root namespace, so deleting the namespaces removes
every device with them (a veth dies with either of its namespaces): tear-down
is `ip netns del` of each, and it is idempotent. `up` tears down first, so an
interrupted `up` (or a crashed study) is cleaned by the next one or by `down`.

Latency: this kernel has no netem, so no delay can be added on a link. What a
profile emulates is the rate (tbf, measured exact); its latency is the one
the namespaces have (~0.1 ms for a small notified put), which the profile
states as measured. Nothing is faked in software.
"""
import atexit
import fcntl
import json
import os
import re
import subprocess

AGENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "netns-agent.sh")
PREFIX_RE = re.compile(r"^[a-z][a-z0-9]{0,5}$")  # veth names must stay within 15 characters


class ClusterError(Exception):
    pass


def check_prefix(prefix):
    if not PREFIX_RE.match(prefix):
        raise ClusterError(f"cluster name {prefix!r}: use 1-6 lower-case letters or digits, starting with a letter")


def load_link(path):
    """A link profile {"link": {"name", "latency_s", "bandwidth_bytes_per_s"}, "source"} (the shape
    `trillion plan --link-profile` reads). bandwidth 0 or null: no rate limit."""
    try:
        with open(path) as fp:
            doc = json.load(fp)
    except (OSError, ValueError) as e:
        raise ClusterError(f"link profile {path}: {e}") from None
    link = doc.get("link") if isinstance(doc, dict) else None
    if not isinstance(link, dict) or not isinstance(link.get("name"), str):
        raise ClusterError(f"link profile {path}: needs {{\"link\": {{\"name\", \"latency_s\", "
                           f"\"bandwidth_bytes_per_s\"}}}}")
    bw = link.get("bandwidth_bytes_per_s") or 0
    lat = link.get("latency_s")
    if not isinstance(bw, (int, float)) or bw < 0:
        raise ClusterError(f"link profile {path}: bandwidth_bytes_per_s must be a number >= 0")
    if not isinstance(lat, (int, float)) or lat < 0:
        raise ClusterError(f"link profile {path}: latency_s must be a number >= 0")
    # "emulate": {"rate_limit": false}: the link's bandwidth is what the veth
    # gives (measured, for the predictor), so the cluster adds no tbf.
    emulate = doc.get("emulate") if isinstance(doc.get("emulate"), dict) else {}
    limit = emulate.get("rate_limit", True)
    if not isinstance(limit, bool):
        raise ClusterError(f"link profile {path}: emulate.rate_limit must be true or false")
    return {"name": link["name"], "latency_s": float(lat), "bandwidth_bytes_per_s": float(bw), "path": path,
            "rate_bytes_per_s": float(bw) if limit else 0.0}


def _sh(*cmd, check=True):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and p.returncode != 0:
        raise ClusterError(f"{' '.join(cmd)}: {p.stderr.strip() or 'exit ' + str(p.returncode)}")
    return p


def lock(prefix):
    """Holds the cluster name for this process (released when it exits): a
    second study with the same --name would tear this one's hosts down."""
    d = "/run/lock" if os.path.isdir("/run/lock") else "/tmp"
    fp = open(os.path.join(d, f"trillion-cluster-{prefix}.lock"), "w")
    try:
        fcntl.flock(fp, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fp.close()
        raise ClusterError(f"cluster {prefix!r} is in use by another study (give --name another prefix)") from None
    # Removed at exit (while still held), so a study leaves no file behind.
    atexit.register(lambda: (os.path.exists(fp.name) and os.remove(fp.name), fp.close()))
    return fp


def namespaces(prefix):
    """This cluster's namespaces that exist now."""
    out = _sh("ip", "netns", "list", check=False).stdout
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    return [n for n in names if n == f"{prefix}-sw" or re.match(rf"^{re.escape(prefix)}-h\d+$", n)]


def down(prefix="trl"):
    """Deletes every namespace of the cluster (and with them every veth and the bridge)."""
    check_prefix(prefix)
    for ns in namespaces(prefix):
        _sh("ip", "netns", "del", ns, check=False)
    left = namespaces(prefix)
    if left:
        raise ClusterError(f"could not delete namespaces {left}")


def subnet(net=77):
    return f"10.{net}.0.0/24"


def address(i, net=77):
    return f"10.{net}.0.{i + 1}"


def _limit(ns, dev, bw):
    """tbf on dev's egress: the rate of one direction of the link."""
    if bw <= 0:
        return
    rate_bit = int(bw * 8)
    # burst: at least one 64 KB TSO segment plus a little, or the rate cannot be reached.
    burst = max(128 * 1024, int(bw / 250))
    _sh("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev, "root", "tbf",
        "rate", f"{rate_bit}bit", "burst", str(burst), "latency", "100ms")


def up(hosts, link, prefix="trl", net=77):
    """Creates the cluster (after tearing down any earlier one of the same prefix).
    On any failure it is torn down again and ClusterError says which step failed."""
    check_prefix(prefix)
    if not 1 <= hosts <= 64:
        raise ClusterError(f"hosts = {hosts}: use 1..64")
    down(prefix)
    sw = f"{prefix}-sw"
    try:
        _sh("ip", "netns", "add", sw)
        _sh("ip", "-n", sw, "link", "add", f"{prefix}-br", "type", "bridge")
        _sh("ip", "-n", sw, "link", "set", f"{prefix}-br", "up")
        for i in range(hosts):
            ns = f"{prefix}-h{i}"
            a, b = f"{prefix}{i}a", f"{prefix}{i}b"
            _sh("ip", "netns", "add", ns)
            _sh("ip", "-n", sw, "link", "add", a, "type", "veth", "peer", "name", b, "netns", ns)
            _sh("ip", "-n", sw, "link", "set", a, "master", f"{prefix}-br", "up")
            _sh("ip", "-n", ns, "link", "set", b, "name", "eth0")
            _sh("ip", "-n", ns, "addr", "add", f"{address(i, net)}/24", "dev", "eth0")
            _sh("ip", "-n", ns, "link", "set", "eth0", "up")
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
            _limit(ns, "eth0", link["rate_bytes_per_s"])  # host -> switch
            _limit(sw, a, link["rate_bytes_per_s"])        # switch -> host
    except BaseException:
        down(prefix)
        raise


def hostfile(path, hosts, net=77):
    """One slot per emulated host (one rank per machine)."""
    with open(path, "w") as fp:
        for i in range(hosts):
            fp.write(f"{address(i, net)} slots=1\n")


def ompi_major(mpirun="mpirun"):
    """The Open MPI generation mpirun belongs to (4, 5, ...; 0 if unknown):
    `mpirun (Open MPI) 5.0.7`."""
    try:
        out = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    m = re.search(r"\(Open MPI\) (\d+)\.", out)
    return int(m.group(1)) if m else 0


def launch_args(agent, net, major):
    """mpirun's settings for the emulated cluster, by Open MPI generation:
    4.1's ORTE launches through plm_rsh_agent and its windows over TCP need
    osc/pt2pt; 5.0's PRRTE takes plm_ssh_* and prte_if_include (as --prtemca;
    by interface name: PRRTE 3.0.8 finds no interface for a subnet in a
    namespace) and has osc/rdma run windows over btl/tcp (active messages).
    PRRTE's remote daemon makes a session of its own unless mpirun has
    --leave-session-attached (netns-agent.sh says why that matters)."""
    if major >= 5:
        return ["--prtemca", "plm_ssh_agent", agent, "--prtemca", "plm_ssh_no_tree_spawn", "1",
                "--prtemca", "prte_if_include", "eth0", "--leave-session-attached", "--mca", "osc", "rdma"]
    return ["--mca", "plm_rsh_agent", agent, "--mca", "plm_rsh_no_tree_spawn", "1",
            "--mca", "oob_tcp_if_include", subnet(net), "--mca", "osc", "pt2pt"]


def mpirun_prefix(hosts, hostfile_path, prefix="trl", net=77, cores=None):
    """The command that starts an mpirun of `hosts` ranks on the cluster: it
    runs inside host 0's namespace (the daemons connect back to it) with its
    own hostname, and launches the other hosts' daemons through netns-agent.sh.
    Each host is pinned to core i mod cores (TRILLION_CLUSTER_CORES for the agent);
    --bind-to none, since every namespace would otherwise bind its rank to its
    "own" core 0; --map-by node, one rank per host (PRRTE otherwise maps 2 ranks
    by core, both on host 0 when oversubscription is allowed)."""
    cores = cores or os.cpu_count() or 1
    env = ["env", f"TRILLION_CLUSTER={prefix}", f"TRILLION_CLUSTER_NET={net}", f"TRILLION_CLUSTER_CORES={cores}",
           "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"]
    enter0 = [os.path.abspath(AGENT), "--local", address(0, net)]
    mca = launch_args(os.path.abspath(AGENT), net, ompi_major()) + [
        "--mca", "mpi_yield_when_idle", "1", "--mca", "btl", "self,tcp",
        "--mca", "btl_tcp_if_include", subnet(net)]
    if "TRILLION_FAULT" in os.environ:  # the fault tests' hook (src/common/fault.hpp) reaches every host's ranks
        mca += ["-x", "TRILLION_FAULT"]
    return env + enter0 + ["mpirun", "-hostfile", hostfile_path, "-np", str(hosts), "--map-by", "node", "--bind-to", "none"] + mca


def available():
    """'' when namespaces can be made here, else why not."""
    probe = f"trlprobe{os.getpid()}"  # its own: probes may run at once
    p = _sh("ip", "netns", "add", probe, check=False)
    if p.returncode != 0:
        return f"ip netns add failed: {p.stderr.strip()}"
    try:
        q = _sh("ip", "-n", probe, "link", "add", "trlprba", "type", "veth", "peer", "name", "trlprbb", check=False)
        if q.returncode != 0:
            return f"veth pairs cannot be made: {q.stderr.strip()}"
        t = _sh("ip", "netns", "exec", probe, "tc", "qdisc", "add", "dev", "trlprba", "root", "tbf",
                "rate", "1gbit", "burst", "131072", "latency", "100ms", check=False)
        if t.returncode != 0:
            return f"tc tbf is not available: {t.stderr.strip()}"
        return ""
    finally:
        _sh("ip", "netns", "del", probe, check=False)
