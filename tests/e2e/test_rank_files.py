"""A rank maps only what it holds, and a failing rank ends the whole job.

- `trillion plan --json` lists the shard files of each rank; each rank gets a
  model directory holding only those (one launch in which each rank picks its
  own directory, as each host of a cluster has its own), and the results
  equal the one-rank run's, in pipeline and expert mode.
- A corrupted shard on rank 1 ends the job with rank 1's message naming the
  file and tensor; a rank killed mid-run ends the job too (no hang)."""
import json
import os
import shutil
import signal
import subprocess
import time

from harness import converted, rank_processes, read_jsonl, run, start, write_jsonl

args, f, hf, model, case = start("rank-files", mpiexec=True)
T, work = args.trillion, args.work
# Small expert shards, so expert parallel ranks need different files.
_, model4 = converted(T, work, "tiny", "bf16", extra=["--experts-per-shard", 4], variant="eps4")
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


def launch_per_rank(dirs, mode, out, extra=()):
    """Rank r runs on dirs[r]. Not an MPMD launch (`-n 1 A : -n 1 B`):
    Debian's and Ubuntu's Open MPI 5 mpirun segfaults on any (open-mpi/ompi
    issue 13303), so each rank picks its directory from its rank number."""
    pick = "".join(f'[ "$OMPI_COMM_WORLD_RANK" = {r} ] && d="{d}"; ' for r, d in enumerate(dirs))
    run_one = pick + 'exec "$0" generate --model "$d" "$@"'
    return [*mpi, "-n", len(dirs), "sh", "-c", run_one, T, "--prompts", prompts, "--output", out,
            "--parallel", mode, *extra]


for mode in ("pipeline", "expert"):
    plan, dirs = rank_dirs(mode, 2, mode)
    all_h5 = {n for n in os.listdir(model4) if n.endswith(".h5")}
    per = [set(r["files"]) for r in plan["per_rank"]]
    f.check(per[0] != all_h5 and per[1] != all_h5, f"{mode}: each rank needs only part of the shards")
    out = os.path.join(case, f"{mode}.jsonl")
    p = run(launch_per_rank(dirs, mode, out), check=False, timeout=300)
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
f.expect_error(launch_per_rank(dirs, "pipeline", os.path.join(case, "bad.jsonl")), ["rank 1", info["shard"], victim],
               "corrupted shard on rank 1: the job fails cleanly with rank 1's message naming file and tensor",
               timeout=300)
print(f"failing job ended in {time.time() - t0:.1f} s")


# A rank killed mid-run: mpirun ends the job instead of hanging.
long_prompts = os.path.join(case, "long.jsonl")
write_jsonl(long_prompts, [{"id": f"l{i}", "prompt_token_ids": [5, 6, 7 + i % 100], "max_tokens": 500}
                           for i in range(400)])
killed_out = os.path.join(case, "killed.jsonl")
cmd = [str(c) for c in [*mpi, "-n", 2, T, "generate", "--model", model4, "--prompts", long_prompts, "--output",
                        killed_out, "--max-len", 512, "--threads", 1]]
print("+", " ".join(cmd), "(rank 1 to be killed)", flush=True)
proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
victim_pid = None
deadline = time.time() + 300  # only a hang takes this long
while time.time() < deadline and proc.poll() is None:
    # Mid-run: both ranks up and the first results written.
    ranks = rank_processes(proc.pid, os.path.realpath(T))
    if len(ranks) == 2 and os.path.exists(killed_out) and os.path.getsize(killed_out) > 0:
        victim_pid = ranks[1]
        break
    time.sleep(0.05)
f.check(victim_pid is not None, "found both rank processes mid-run")
if victim_pid:
    f.check(victim_pid != proc.pid, "the victim is a rank, not mpiexec")
    try:
        os.kill(victim_pid, signal.SIGKILL)
    except ProcessLookupError:
        f.check(False, "the long job ended before a rank could be killed")
    try:
        _, err = proc.communicate(timeout=300)  # only a hang takes this long
        # mpirun itself must end by itself, reporting the rank's death (exit
        # 128 + 9 is its way of passing the signal on), not die of one.
        f.check(proc.returncode > 0, f"killed rank: mpiexec exit code {proc.returncode}")
        f.check("rank 1" in err and "signal 9" in err, "killed rank: mpiexec names the rank and its signal")
        with open(killed_out) as fp:
            f.check(sum(1 for _ in fp) < 400, "killed rank: the job did not run to the end")
        print(f"killed rank: mpiexec exit {proc.returncode}: {err.strip()[-500:]}")
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        f.check(False, "killed rank: the job hung")
else:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
f.finish()
