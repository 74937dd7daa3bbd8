#!/usr/bin/env python3
"""bench_channel over btl/tb5 (udp, and verbs on the simulator) next to
btl/tcp and shared memory, with 0, 1 and 5% injected frame loss (plus as much
duplication and reordering): one-way latency of 8 B and 512 B messages and
bandwidth at 512 KiB, RmaChannel (notified put) and plain MPI send/recv, each
as a ratio to the shared-memory run.

    /usr/bin/python3 bench/tb5_table.py --build build [--ranks 2] [--quick]

Short by design (a few seconds per row; --quick: fewer iterations): the
machine is shared. The verbs rows measure the backend's code path over the
simulator's UDP sockets, not Thunderbolt (docs/tb5.md).
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
a = p.parse_args()
build = os.path.realpath(a.build)
bench = os.path.join(build, "bench", "bench_channel")
plugin = os.path.join(build, "lib", "openmpi")
sim = os.path.join(build, "lib", "libtb5_verbs_sim.so")
for f in (bench, os.path.join(plugin, "mca_btl_tb5.so")):
    if not os.path.exists(f):
        sys.exit(f"tb5_table: {f} is missing: build the targets bench_channel and mca_btl_tb5 first")
ompi_dir = "/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3"
tb5 = ["--mca", "mca_base_component_path", f"{plugin}:{ompi_dir}", "--mca", "btl", "self,tb5", "--mca", "osc", "pt2pt"]


def loss_args(kind, loss):
    if loss == 0:
        return []
    if kind == "udp":
        return [x for k in ("loss", "duplicate", "reorder") for x in ("--mca", f"btl_tb5_inject_{k}", str(loss))]
    return [x for k in ("LOSS", "DUPLICATE", "REORDER") for x in ("-x", f"TB5_SIM_{k}={loss}")]


rows = [("shm (osc/rdma)", [], 0), ("tcp lo (osc/pt2pt)", ["--mca", "btl", "self,tcp", "--mca", "osc", "pt2pt",
                                                          "--mca", "btl_tcp_if_include", "lo"], 0)]
for loss in (0, 0.01, 0.05):
    rows.append((f"tb5 udp lo, loss {loss:.0%}", tb5 + ["--mca", "btl_tb5_backend", "udp", "--mca",
                                                       "btl_tb5_if_include", "lo"] + loss_args("udp", loss), loss))
if os.path.exists(sim):
    for loss in (0, 0.01, 0.05):
        rows.append((f"tb5 verbs (sim), loss {loss:.0%}", tb5 + ["--mca", "btl_tb5_backend", "verbs", "--mca",
                                                                 "btl_tb5_verbs_library", sim] + loss_args("verbs", loss), loss))
iters = "200" if a.quick else "1000"
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
line = re.compile(r"^\s*(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")
results = []
for name, extra, loss in rows:
    cmd = [a.mpirun, "-n", str(a.ranks), "--oversubscribe", *extra, bench, "--min", "8", "--max", str(1 << 19),
           "--latency-iters", iters, "--busy-ms", "0"]
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300).stdout
    except subprocess.TimeoutExpired:
        results.append((name, None))
        continue
    sizes = {int(m.group(1)): [float(m.group(i)) for i in range(2, 6)] for m in map(line.match, out.splitlines()) if m}
    results.append((name, sizes))
base = results[0][1]
print(f"bench_channel, {a.ranks} ranks; one-way us for 8 B and 512 B, GB/s at 512 KiB; x = ratio to shm")
print(f"{'transport':28s} {'rma 8B us':>10s} {'rma 512B us':>10s} {'rma GB/s':>9s} {'mpi 8B us':>10s} {'mpi GB/s':>9s}"
      f" {'lat x shm':>9s} {'bw x shm':>9s}")
for name, s in results:
    if not s or 8 not in s or (1 << 19) not in s:
        print(f"{name:28s} (failed or timed out)")
        continue
    small, kib, big = s[8], s.get(512, s[8]), s[1 << 19]
    lat_x = small[0] / base[8][0] if base and 8 in base else float("nan")
    bw_x = big[1] / base[1 << 19][1] if base and (1 << 19) in base else float("nan")
    print(f"{name:28s} {small[0]:10.1f} {kib[0]:10.1f} {big[1]:9.3f} {small[2]:10.1f} {big[3]:9.3f} {lat_x:9.1f} {bw_x:9.3f}")
