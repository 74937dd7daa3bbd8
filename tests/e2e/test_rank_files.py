"""A rank maps only what it holds, and a failing rank ends the whole job.

- `trillion plan --json` lists the shard files of each rank; each rank gets a
  model directory holding only those (MPMD launch), and the results equal the
  one-rank run's, in pipeline and expert mode.
- A corrupted shard on rank 1 ends the job with rank 1's message naming the
  file and tensor; a rank killed mid-run ends the job too (no hang)."""
import argparse
import json
import os
import shutil
import signal
import subprocess
import time

from harness import Failures, converted, read_jsonl, run, write_jsonl

ap = argparse.ArgumentParser()
ap.add_argument("--trillion", required=True)
ap.add_argument("--mpiexec", required=True)
ap.add_argument("--work", required=True)
args = ap.parse_args()
T = args.trillion
f = Failures()
work = os.path.abspath(args.work)
# Small expert shards, so expert parallel ranks need different files.
hf, model = converted(T, work, "tiny", "bf16")
_, model4 = converted(T, work, "tiny", "bf16", extra=["--experts-per-shard", 4], variant="eps4")
case = os.path.join(work, "case", "rank-files")
shutil.rmtree(case, ignore_errors=True)
os.makedirs(case)
prompts = os.path.join(case, "gen.jsonl")
write_jsonl(prompts, [{"id": f"g{i}", "prompt_token_ids": [3 + i, 7, 11 * i % 512], "max_tokens": 10}
                      for i in range(5)])
base_out = os.path.join(case, "base.jsonl")
run([T, "generate", "--model", model4, "--prompts", prompts, "--output", base_out])
base = {r["id"]: r["token_ids"] for r in read_jsonl(base_out)}
mpi = [args.mpiexec, "--oversubscribe"]


def rank_dirs(mode, ranks, tag):
    plan = json.loads(run([T, "plan", "--model", model4, "--ranks", ranks, "--parallel", mode, "--json"]).stdout)
    dirs = []
    for r in plan["per_rank"]:
        d = os.path.join(case, f"{tag}-rank{r['rank']}")
        os.makedirs(d)
        for name in os.listdir(model4):
            if not name.endswith(".h5"):
                shutil.copy(os.path.join(model4, name), d)
        for name in r["files"]:
            shutil.copy(os.path.join(model4, name), d)
        dirs.append(d)
    return plan, dirs


def mpmd(dirs, mode, out, extra=()):
    cmd = [*mpi]
    for i, d in enumerate(dirs):
        if i:
            cmd.append(":")
        cmd += ["-n", 1, T, "generate", "--model", d, "--prompts", prompts, "--output", out, "--parallel", mode,
                *extra]
    return cmd


for mode in ("pipeline", "expert"):
    plan, dirs = rank_dirs(mode, 2, mode)
    all_h5 = {n for n in os.listdir(model4) if n.endswith(".h5")}
    per = [set(r["files"]) for r in plan["per_rank"]]
    f.check(per[0] != all_h5 and per[1] != all_h5, f"{mode}: each rank needs only part of the shards")
    out = os.path.join(case, f"{mode}.jsonl")
    p = run(mpmd(dirs, mode, out), check=False, timeout=300)
    f.check(p.returncode == 0, f"{mode}: run with per-rank shard subsets failed: {p.stderr[-2000:]}")
    if p.returncode == 0:
        got = {r["id"]: r["token_ids"] for r in read_jsonl(out)}
        f.check(got == base, f"{mode}: per-rank subsets give the one-rank tokens")

# A corrupted shard on rank 1: the job ends with rank 1's message.
plan, dirs = rank_dirs("pipeline", 2, "bad")
manifest = json.load(open(os.path.join(model4, "manifest.json")))
victim = next(n for n, t in manifest["tensors"].items() if t["shard"] in plan["per_rank"][1]["files"]
              and t["nbytes"] > 64)
info = manifest["tensors"][victim]
with open(os.path.join(dirs[1], info["shard"]), "r+b") as fp:
    fp.seek(info["offset"] + 5)
    b = fp.read(1)
    fp.seek(-1, 1)
    fp.write(bytes([b[0] ^ 0xFF]))
t0 = time.time()
p = run(mpmd(dirs, "pipeline", os.path.join(case, "bad.jsonl")), check=False, timeout=300)
f.check(p.returncode != 0, "corrupted shard on rank 1 must fail the job")
f.check("rank 1" in p.stderr and info["shard"] in p.stderr and victim in p.stderr,
        f"message names rank 1, file and tensor: {p.stderr[-1500:]}")
print(f"failing job ended in {time.time() - t0:.1f} s")

# A rank killed mid-run: mpirun ends the job instead of hanging.
long_prompts = os.path.join(case, "long.jsonl")
write_jsonl(long_prompts, [{"id": f"l{i}", "prompt_token_ids": [5, 6, 7 + i % 100], "max_tokens": 500}
                           for i in range(400)])
cmd = [str(c) for c in [*mpi, "-n", 2, T, "generate", "--model", model4, "--prompts", long_prompts, "--output",
                        os.path.join(case, "killed.jsonl"), "--max-len", 512, "--threads", 1]]
proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
victim_pid = None
for _ in range(200):
    time.sleep(0.1)
    ps = subprocess.run(["pgrep", "-f", "-s", str(proc.pid), "trillion generate"], capture_output=True, text=True)
    pids = sorted(int(x) for x in ps.stdout.split())
    if len(pids) >= 2:
        victim_pid = pids[-1]
        break
f.check(victim_pid is not None, "found the rank processes")
if victim_pid:
    time.sleep(0.5)
    try:
        os.kill(victim_pid, signal.SIGKILL)
    except ProcessLookupError:
        f.check(False, "the long job ended before a rank could be killed")
    try:
        _, err = proc.communicate(timeout=120)
        f.check(proc.returncode != 0, f"killed rank: job exit code {proc.returncode}")
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        f.check(False, "killed rank: the job hung")
else:
    os.killpg(proc.pid, signal.SIGKILL)
f.finish()
