#!/usr/bin/env python3
"""bench_channel over btl/tb5 (udp, and verbs on the simulator) next to
btl/tcp and shared memory, with 0, 1 and 5% injected frame loss (plus as much
duplication and reordering): one-way latency of 8 B and 512 B messages and
bandwidth at 512 KiB, RmaChannel (notified put) and plain MPI send/recv, each
as a ratio to the shared-memory run.

    /usr/bin/python3 bench/tb5_table.py --build build [--ranks 2] [--quick]
    /usr/bin/python3 bench/tb5_table.py --build build --netns --sizes --losses 0

--netns runs the tcp and tb5 rows across two network namespaces (root;
tests/transport/tb5_netns.sh), one rank on each fake host. On one host Open
MPI 5's osc/rdma maps a window in shared memory whatever the BTL, so only
across hosts do its windows go through the BTL (its active-message RDMA
emulation over tb5's or tcp's send path); Open MPI 4.1's osc/pt2pt uses the
BTL either way. --sizes prints every message size of every row (latency us
and GB/s), --busy-ms the time a send takes while the target computes
outside MPI (what MpiEnv's progress thread is for), --repeat N the best of
N runs per row.

Short by design (a few seconds per row; --quick: fewer iterations): the
machine is shared. The verbs rows measure the backend's code path over the
simulator's UDP sockets, not Thunderbolt (docs/tb5.md).

--size-table: instead, MPI send/recv one-way µs and GB/s (and RmaChannel GB/s)
per message size from 4 KiB to 4 MiB for tcp, tb5 udp and tb5 on the
simulator (bench/tb5_sizes.py), with --loss also 1% and 5% loss; --repeat N
runs every row N times, rows alternating (the machine is noisy), and prints
the median; --compare DIR adds the same rows from another build (e.g. main's,
for before/after).
"""
import argparse
import os
import re
import subprocess
import sys

p = argparse.ArgumentParser()
p.add_argument("--build", default="build")
p.add_argument("--mpirun", default="mpirun")
p.add_argument("--ranks", type=int, default=2)
p.add_argument("--quick", action="store_true")
p.add_argument("--netns", action="store_true", help="tcp and tb5 rows across two network namespaces (root)")
p.add_argument("--sizes", action="store_true", help="every message size of every row")
p.add_argument("--losses", default="0,0.01,0.05", help="injected loss rates of the tb5 rows")
p.add_argument("--max", type=int, default=1 << 19, help="largest message, bytes")
p.add_argument("--busy-ms", type=int, default=0)
p.add_argument("--repeat", type=int, default=1, help="runs per row; each figure is the best of them (a shared "
               "machine's load only ever slows a run down)")
p.add_argument("--size-table", action="store_true", help="bench/tb5_sizes.py: per message size, 4 KiB to 4 MiB")
p.add_argument("--loss", action="store_true", help="--size-table: also 1%% and 5%% loss")
p.add_argument("--compare", default="", help="--size-table: the same rows from another build")
a = p.parse_args()
if a.size_table:
    import tb5_sizes
    sys.exit(tb5_sizes.main(a))
build = os.path.realpath(a.build)
bench = os.path.join(build, "bench", "bench_channel")
plugin = os.path.join(build, "lib", "openmpi")
sim = os.path.join(build, "lib", "libtb5_verbs_sim.so")
netns = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "transport", "tb5_netns.sh")
for f in (bench, os.path.join(plugin, "mca_btl_tb5.so")):
    if not os.path.exists(f):
        sys.exit(f"tb5_table: {f} is missing: build the targets bench_channel and mca_btl_tb5 first")
version = re.search(r"\(Open MPI\) ([\d.]+)", subprocess.run([a.mpirun, "--version"], capture_output=True,
                                                            text=True).stdout)
version = version.group(1) if version else "?"
osc = "rdma" if version[:1].isdigit() and int(version.split(".")[0]) >= 5 else "pt2pt"
ompi_dir = re.search(r"Pkglibdir: *(\S+)", subprocess.run(["ompi_info", "--path", "pkglibdir"],
                                                            capture_output=True, text=True).stdout).group(1)
losses = [float(x) for x in a.losses.split(",")]


def loss_args(kind, loss):
    if loss == 0:
        return []
    if kind == "udp":
        return [x for k in ("loss", "duplicate", "reorder") for x in ("--mca", f"btl_tb5_inject_{k}", str(loss))]
    return [x for k in ("LOSS", "DUPLICATE", "REORDER") for x in ("-x", f"TB5_SIM_{k}={loss}")]


def local(extra):
    return [a.mpirun, "-n", str(a.ranks), "--oversubscribe", *extra]


def across(backend, extra):  # two fake hosts, one rank each (tb5_netns.sh adds btl and osc)
    return ["sh", netns, backend, plugin, ompi_dir, sim, *extra]


tb5 = ["--mca", "mca_base_component_path", f"{plugin}:{ompi_dir}", "--mca", "btl", "self,tb5", "--mca", "osc", osc]
if not a.netns:  # ranks of one host are left to self and sm unless told (a testing option)
    tb5 += ["--mca", "btl_tb5_local_peers", "1"]
udp = ["--mca", "btl_tb5_backend", "udp", "--mca", "btl_tb5_if_include", "lo"]
verbs = ["--mca", "btl_tb5_backend", "verbs", "--mca", "btl_tb5_verbs_library", sim]
tcp = ["--mca", "btl", "self,tcp", "--mca", "osc", osc, "--mca", "btl_tcp_if_include", "lo"]
rows = [("shm (one host)", local([]))]
rows.append((f"tcp, osc/{osc}", across("tcp", []) if a.netns else local(tcp)))
for loss in losses:
    rows.append((f"tb5 udp, loss {loss:.0%}",
                 across("udp", loss_args("udp", loss)) if a.netns else local(tb5 + udp + loss_args("udp", loss))))
if os.path.exists(sim):
    for loss in losses:
        rows.append((f"tb5 verbs (sim), loss {loss:.0%}", across("verbs", loss_args("verbs", loss)) if a.netns
                     else local(tb5 + verbs + loss_args("verbs", loss))))
iters = "200" if a.quick else "1000"
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           PMIX_MCA_mca_base_component_show_load_errors="0")
line = re.compile(r"^\s*(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")
busy = re.compile(r"target computes \d+ ms outside MPI: ([\d.]+) ms")
results = []
for name, cmd in rows:
    cmd = cmd + [bench, "--min", "512", "--max", str(a.max), "--latency-iters", iters, "--busy-ms", str(a.busy_ms)]
    sizes, busy_ms = {}, None
    for _ in range(a.repeat):
        try:
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600).stdout
        except subprocess.TimeoutExpired:
            continue
        for m in filter(None, map(line.match, out.splitlines())):
            r = [float(m.group(i)) for i in range(2, 6)]  # rma us, rma GB/s, mpi us, mpi GB/s
            old = sizes.get(int(m.group(1)))
            sizes[int(m.group(1))] = r if not old else [min(old[0], r[0]), max(old[1], r[1]),
                                                        min(old[2], r[2]), max(old[3], r[3])]
        b = busy.search(out)
        if b:
            busy_ms = min(busy_ms, float(b.group(1))) if busy_ms is not None else float(b.group(1))
    results.append((name, sizes or None, busy_ms))
base = results[0][1]
where = "across two network namespaces (shm: one host)" if a.netns else "on one host"
print(f"bench_channel, Open MPI {version}, {2 if a.netns else a.ranks} ranks {where}; one-way us for 8 B and "
      f"512 B, GB/s at {a.max // 1024} KiB; x = ratio to shm")
print(f"{'transport':28s} {'rma 8B us':>10s} {'rma 512B us':>11s} {'rma GB/s':>9s} {'mpi 8B us':>10s} "
      f"{'mpi GB/s':>9s} {'lat x shm':>9s} {'bw x shm':>9s}" + (f" {'busy ms':>8s}" if a.busy_ms else ""))
for name, s, busy_ms in results:
    if not s or 8 not in s or a.max not in s:
        print(f"{name:28s} (failed or timed out)")
        continue
    small, kib, big = s[8], s.get(512, s[8]), s[a.max]
    lat_x = small[0] / base[8][0] if base and 8 in base else float("nan")
    bw_x = big[1] / base[a.max][1] if base and a.max in base else float("nan")
    print(f"{name:28s} {small[0]:10.1f} {kib[0]:11.1f} {big[1]:9.3f} {small[2]:10.1f} {big[3]:9.3f} {lat_x:9.1f}"
          f" {bw_x:9.3f}" + (f" {busy_ms:8.1f}" if a.busy_ms and busy_ms is not None else ""))
if a.sizes:
    print("\nper message size: one-way us / GB/s, RmaChannel then MPI send/recv")
    for name, s, _ in results:
        if s:
            print(f"\n{name}")
            for size in sorted(s):
                r = s[size]
                print(f"{size:>10d} B  rma {r[0]:9.1f} us {r[1]:7.3f} GB/s   mpi {r[2]:9.1f} us {r[3]:7.3f} GB/s")
