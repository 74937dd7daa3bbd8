"""tb5_table.py --sizes: bench_channel per message size (4 KiB to 4 MiB) over
btl/tcp, tb5 udp and tb5 on the verbs simulator, 2 ranks on this host.

Each row runs --repeat times, rows alternating so that a burst of load on
the shared machine hits every row alike; the median of the runs is printed.
With --compare DIR the same tb5 rows run from another build too (before and
after a change, in one alternation). tb5 rows on one host need the testing
option btl_tb5_local_peers where the plugin has it (ranks of one host are
otherwise left to btl/self and sm).
"""
import os
import re
import statistics
import subprocess



def _ompi():
    """Open MPI's own component directory and the osc that runs windows over a
    send/receive BTL: pt2pt on 4.1, rdma (active messages) on 5.0."""
    info = subprocess.run(["ompi_info", "--path", "pkglibdir"], capture_output=True, text=True).stdout
    version = re.search(r"\(Open MPI\) (\d+)", subprocess.run(["mpirun", "--version"], capture_output=True,
                                                              text=True).stdout)
    osc = "rdma" if version and int(version.group(1)) >= 5 else "pt2pt"
    return re.search(r"Pkglibdir: *(\S+)", info).group(1), osc


OMPI_DIR, OSC = _ompi()
LINE = re.compile(r"^\s*(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")
SIZES = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20]


def tb5_rows(build, label):
    build = os.path.realpath(build)
    plugin = os.path.join(build, "lib", "openmpi")
    so = os.path.join(plugin, "mca_btl_tb5.so")
    sim = os.path.join(build, "lib", "libtb5_verbs_sim.so")
    base = ["--mca", "mca_base_component_path", f"{plugin}:{OMPI_DIR}", "--mca", "btl", "self,tb5",
            "--mca", "osc", OSC]
    with open(so, "rb") as f:
        if b"local_peers" in f.read():
            base += ["--mca", "btl_tb5_local_peers", "1"]
    udp = base + ["--mca", "btl_tb5_backend", "udp", "--mca", "btl_tb5_if_include", "lo"]
    verbs = base + ["--mca", "btl_tb5_backend", "verbs", "--mca", "btl_tb5_verbs_library", sim]
    return os.path.join(build, "bench", "bench_channel"), label, udp, verbs


def loss_args(kind, loss):
    if loss == 0:
        return []
    if kind == "udp":
        return ["--mca", "btl_tb5_inject_loss", str(loss)]
    return ["-x", f"TB5_SIM_LOSS={loss}"]


def run(mpirun, bench, extra, iters):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = [mpirun, "-n", "2", "--oversubscribe", *extra, bench, "--min", str(SIZES[0]), "--max", str(SIZES[-1]),
           "--latency-iters", str(iters), "--busy-ms", "0"]
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600).stdout
    except subprocess.TimeoutExpired:
        return None
    got = {int(m.group(1)): [float(m.group(i)) for i in range(2, 6)] for m in map(LINE.match, out.splitlines()) if m}
    return got if all(s in got for s in SIZES) else None


def main(a):
    builds = [tb5_rows(a.build, "")]
    if a.compare:
        builds = [tb5_rows(a.compare, "before "), tb5_rows(a.build, "after ")]
    rows = [("tcp lo", builds[-1][0], ["--mca", "btl", "self,tcp", "--mca", "osc", OSC,
                                       "--mca", "btl_tcp_if_include", "lo"], 1000)]
    losses = (0, 0.01, 0.05) if a.loss else (0,)
    for bench, label, udp, verbs in builds:
        for loss in losses:  # the same round trips in every row, so rows compare
            rows.append((f"{label}tb5 udp loss {loss:.0%}", bench, udp + loss_args("udp", loss), 1000))
            rows.append((f"{label}tb5 sim loss {loss:.0%}", bench, verbs + loss_args("verbs", loss), 1000))
    runs = {name: [] for name, *_ in rows}
    for rep in range(a.repeat):
        for name, bench, extra, iters in rows:
            got = run(a.mpirun, bench, extra, iters)
            runs[name].append(got)
            print(f"# run {rep + 1}/{a.repeat} {name}: {'ok' if got else 'failed'}", flush=True)

    def med(name, size, col):
        v = [r[size][col] for r in runs[name] if r]
        return statistics.median(v) if v else float("nan")

    head = "".join(f"{s >> 10:>9d}K" for s in SIZES)
    for title, col in (("MPI send/recv one-way us", 2), ("MPI send/recv GB/s", 3), ("RmaChannel GB/s", 1)):
        print(f"\n{title} (median of {a.repeat})\n{'transport':28s}{head}")
        for name, *_ in rows:
            fmt = "{:10.1f}" if col == 2 else "{:10.3f}"
            print(f"{name:28s}" + "".join(fmt.format(med(name, s, col)) for s in SIZES))
    return 0
