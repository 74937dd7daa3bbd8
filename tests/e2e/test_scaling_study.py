"""jobs/scaling-study end to end: a two-point study (2 ranks, pipeline and
expert, batch 2) on two emulated hosts (network namespaces, 1 Gbit/s tbf
links). Checks that the CSV, plots and report exist and agree with the
points' metrics files, that the ranks ran in their own namespaces (their
hostnames) and exchanged bytes, that every request generated exactly the
tokens it asked for (ignore_eos, min_tokens), that a rerun skips the measured
points, and that no namespace is left behind. Skipped (exit 77) where
network namespaces cannot be made."""
import csv
import json
import os
import subprocess
import sys

from harness import ROOT, read_jsonl, start

sys.path.insert(0, os.path.join(ROOT, "jobs"))
from study import cluster  # noqa: E402

why = cluster.available()
if why:
    if os.environ.get("CI") == "true":  # CI runs as root on a real machine: a skip there hides a broken test
        sys.exit(f"FAIL: network namespaces are not available here ({why}), and CI=true")
    print(f"SKIPPED: network namespaces are not available here ({why}); the emulated cluster needs root on Linux")
    sys.exit(77)

args, f, hf, model, case = start("scaling-study")
NAME = f"e{os.getpid() % 100000}"  # its own namespaces: other tests or studies may run at once
study = os.path.join(case, "study")
TOKENS, BATCH = 8, 2
cmd = [sys.executable, os.path.join(ROOT, "jobs", "scaling-study"), "--model", model, "--trillion", args.trillion,
       "--out", study, "--ranks", "2", "--modes", "pipeline,expert", "--batches", str(BATCH),
       "--links", os.path.join(ROOT, "profiles", "emulated-1gbit.json"), "--tokens", str(TOKENS),
       "--prompt-tokens", "4", "--stages", "bytes", "--name", NAME, "--point-timeout", "90"]
print("+", " ".join(cmd), flush=True)
p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
f.check(p.returncode == 0, f"the study ran: {p.stderr[-3000:]}")
f.check(not cluster.namespaces(NAME), f"no namespace left: {cluster.namespaces(NAME)}")

ids = ["r2-pipeline-b2-kauto-emulated-1gbit", "r2-expert-b2-kauto-emulated-1gbit"]
with open(os.path.join(study, "study.csv"), newline="") as fp:
    rows = {r["point"]: r for r in csv.DictReader(fp)}
f.check(sorted(rows) == sorted(ids), f"the CSV has the two points: {sorted(rows)}")
for pid in ids:
    d = os.path.join(study, "points", pid)
    with open(os.path.join(d, "metrics.json")) as fp:
        m = json.load(fp)
    r = rows.get(pid, {})
    f.check(m["final"] is True and m["ranks"] == 2 and m["parallel"] == pid.split("-")[1], f"{pid}: metrics")
    f.check(r.get("metrics.tokens.generated") == str(m["tokens"]["generated"]) and
            r.get("metrics.per_rank.1.bytes_sent") == str(m["per_rank"][1]["bytes_sent"]) and
            r.get("metrics.seconds.generation") == str(m["seconds"]["generation"]), f"{pid}: CSV = metrics file")
    f.check(abs(float(r.get("measured_tokens_per_s") or 0) - m["tokens"]["generated"] / m["seconds"]["generation"])
            < 1e-6 * m["tokens"]["generated"] / m["seconds"]["generation"], f"{pid}: measured tokens/s")
    hosts = sorted(x["host"] for x in m["per_rank"])
    f.check(hosts == [f"{NAME}-h0", f"{NAME}-h1"], f"{pid}: each rank on its own emulated host: {hosts}")
    f.check(all(x["bytes_sent"] > 0 for x in m["per_rank"]), f"{pid}: both ranks sent bytes over the link")
    res = read_jsonl(os.path.join(d, "results.jsonl"))
    f.check(len(res) == BATCH and all(x and x.get("usage", {}).get("completion_tokens") == TOKENS and
                                      x.get("finish_reason") == "length" for x in res),
            f"{pid}: every request generated exactly {TOKENS} tokens: {res}")
    f.check(m["tokens"]["generated"] == BATCH * TOKENS, f"{pid}: metrics count {BATCH * TOKENS} generated tokens")
    f.check(r.get("error") == "" or r.get("predicted_tokens_per_s"), f"{pid}: prediction columns consistent")

report_path = os.path.join(study, "report.md")
text = open(report_path).read() if os.path.exists(report_path) else ""
for png in ("throughput_vs_ranks.png", "per_rank_step_time.png", "bytes_exchanged.png", "predicted_vs_measured.png"):
    path = os.path.join(study, "figures", png)
    ok = os.path.exists(path) and open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    f.check(ok and f"(figures/{png})" in text, f"{png}: a PNG, shown in the report")
for pid in ids:
    tok = float(rows.get(pid, {}).get("measured_tokens_per_s") or 0)
    f.check(f"| {pid} |" in text and f"| {tok:.1f} |" in text, f"the report lists {pid} at {tok:.1f} tok/s")

# The seed cluster, projected by plan beside the measurements: both models on
# both Mac Studio clusters, both modes.
for model in ("DeepSeek-V3 FP8", "Kimi K2 Thinking INT4"):
    for hosts in ("4x M2 Ultra 192 GB", "4x M3 Ultra 512 GB"):
        for mode in ("pipeline", "expert"):
            f.check(f"| {model} | {hosts} | {mode} | yes |" in text,
                    f"the report projects {model} on {hosts} in {mode} mode")

# A rerun measures nothing again: the metrics files stay as they were.
before = {pid: os.stat(os.path.join(study, "points", pid, "metrics.json")).st_mtime_ns for pid in ids}
p2 = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
after = {pid: os.stat(os.path.join(study, "points", pid, "metrics.json")).st_mtime_ns for pid in ids}
f.check(p2.returncode == 0 and "2 point(s) already measured: skipped" in p2.stderr and before == after,
        f"a rerun skips the measured points: {p2.stderr[-1500:]}")
# More rounds: a rerun with --repeats 2 measures round 2 only; the CSV has
# every run, and the report each point's median run with the runs' range.
p5 = subprocess.run(cmd + ["--repeats", "2"], capture_output=True, text=True, timeout=300)
again = {pid: os.stat(os.path.join(study, "points", pid, "metrics.json")).st_mtime_ns for pid in ids}
with open(os.path.join(study, "study.csv"), newline="") as fp:
    runs = sorted((r["point"], r["rep"]) for r in csv.DictReader(fp))
f.check(p5.returncode == 0 and "2 point(s) already measured: skipped" in p5.stderr and again == before and
        runs == sorted([(pid, "1") for pid in ids] + [(pid, "2") for pid in ids]) and
        all(os.path.exists(os.path.join(study, "points", f"{pid}-rep2", "metrics.json")) for pid in ids),
        f"--repeats 2 adds round 2 only: {runs} {p5.stderr[-1500:]}")
text2 = open(report_path).read() if os.path.exists(report_path) else ""
f.check(all(text2.count(f"| {pid} |") == 1 for pid in ids) and text2.count(", 2 runs) |") == 2,
        "the report has one row per point, its median of 2 runs")
# A rerun with another workload is refused, naming what differs.
p3 = subprocess.run(cmd[:-4] + ["--tokens", "9", "--name", NAME], capture_output=True, text=True, timeout=60)
f.check(p3.returncode == 1 and "tokens 8 (now 9)" in p3.stderr, f"a mismatched rerun is refused: {p3.stderr[-800:]}")
f.check(not cluster.namespaces(NAME), "no namespace left after the reruns")

# A point that overruns --point-timeout fails alone: it is stopped (its ranks
# too), logged, left unmeasured; the study exits 1 after reporting the rest.
slow = cmd[:cmd.index("--batches")] + ["--batches", "2,3"] + cmd[cmd.index("--batches") + 2:]
slow[slow.index("--point-timeout") + 1] = "3"
# The new points hang for sure, whatever the machine's speed: rank 0 stops
# itself (SIGSTOP) once the model is open (the fault hook, common/fault.hpp).
p4 = subprocess.run(slow, capture_output=True, text=True, timeout=300, env=dict(os.environ, TRILLION_FAULT="load"))
f.check(p4.returncode == 1 and "no result within --point-timeout 3.0 s" in p4.stderr and
        "2 point(s) failed" in p4.stderr, f"overrunning points fail alone: {p4.stderr[-1500:]}")
left = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
f.check(study not in left, "no process of the study is left running")
f.check(not cluster.namespaces(NAME), "no namespace left after the failed points")
with open(os.path.join(study, "study.csv"), newline="") as fp:
    f.check(sorted(r["point"] for r in csv.DictReader(fp)) == sorted(ids), "the CSV keeps the measured points only")

# Set-up and tear-down are idempotent: up over a standing cluster rebuilds it, down twice is fine.
link = cluster.load_link(os.path.join(ROOT, "profiles", "emulated-1gbit.json"))
cluster.up(3, link, NAME)
cluster.up(2, link, NAME)
f.check(sorted(cluster.namespaces(NAME)) == [f"{NAME}-h0", f"{NAME}-h1", f"{NAME}-sw"],
        f"up twice: the second cluster only ({cluster.namespaces(NAME)})")
qdisc = subprocess.run(["ip", "netns", "exec", f"{NAME}-h1", "tc", "qdisc", "show", "dev", "eth0"],
                       capture_output=True, text=True).stdout
f.check("tbf" in qdisc and "rate 1Gbit" in qdisc, f"the link is rate-limited to the profile: {qdisc.strip()}")
cluster.down(NAME)
cluster.down(NAME)
f.check(not cluster.namespaces(NAME), "down twice: nothing left")
f.check(not os.path.exists(f"/run/lock/trillion-cluster-{NAME}.lock") and
        not os.path.exists(f"/tmp/trillion-cluster-{NAME}.lock"), "the study's cluster lock file is gone")
f.finish()
