"""jobs/slurm/generate.sbatch outside Slurm (it is a bash script; sbatch
only reads its #SBATCH lines): with the Slurm variables set, mpirun as the
launcher and a stand-in `scontrol` that records its arguments, SIGUSR1 to the
batch shell (what --signal=B:USR1@T sends) stops the ranks cleanly after the
steps in flight and requeues the job; the requeued run (the same script,
again) resumes and finishes, every request exactly once.

The signal comes mid-run by construction, not by timing: rank 0 stops itself
half-way through writing its 5th result (TRILLION_FAULT=write:5), the
signal is sent, and rank 0 goes on once the signal waits for it. Every wait
has a deadline that only catches a hang (HANG)."""
import os
import signal
import subprocess
import time

from harness import (ROOT, parse_lines as read_jsonl, signal_pending, start, wait_rank0_stopped,
                     write_jsonl)

HANG = 300  # seconds: a deadline that only a hang reaches, never a figure

args, f, hf, model, case = start("slurm-script", mpiexec=True)
N = 600
reqs = [{"id": f"r{i}", "prompt_token_ids": [(i * 7 + j) % 500 + 2 for j in range(4)], "max_tokens": 48,
         "ignore_eos": True} for i in range(N)]
prompts, output = os.path.join(case, "prompts.jsonl"), os.path.join(case, "results.jsonl")
write_jsonl(prompts, reqs)
bindir = os.path.join(case, "bin")
os.makedirs(bindir)
calls = os.path.join(case, "scontrol.calls")
with open(os.path.join(bindir, "scontrol"), "w") as fp:
    fp.write(f'#!/bin/sh\necho "$@" >> {calls}\n')
os.chmod(os.path.join(bindir, "scontrol"), 0o755)
mpibin = os.path.dirname(args.mpiexec)
env = dict(os.environ, PATH=f"{bindir}:{mpibin}:{os.environ['PATH']}", SLURM_JOB_ID="42", SLURM_JOB_NUM_NODES="2",
           MODEL=model, PROMPTS=prompts, OUTPUT=output, TRILLION=args.trillion, LAUNCH="mpirun",
           MPIRUN_MAP="--oversubscribe", EXTRA="--threads 1 --max-batch 4")
script = os.path.join(ROOT, "jobs", "slurm", "generate.sbatch")

# First run: SIGUSR1 while rank 0 is stopped at its 5th result.
print("+ TRILLION_FAULT=write:5 bash", script, flush=True)
p = subprocess.Popen(["bash", script], env=dict(env, TRILLION_FAULT="write:5"), stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, text=True, start_new_session=True)
rank0 = wait_rank0_stopped(p, args.trillion, time.time() + HANG)
f.check(rank0 is not None, "the first run is still going when rank 0 writes its 5th result")
p.send_signal(signal.SIGUSR1)
if rank0 is not None:
    # The batch shell passes SIGUSR1 to mpirun, mpirun to the ranks: once it
    # waits for rank 0, rank 0 may go on (it stops after the steps in flight).
    deadline = time.time() + HANG
    while time.time() < deadline and p.poll() is None and not signal_pending(rank0, signal.SIGUSR1):
        time.sleep(0.02)
    f.check(signal_pending(rank0, signal.SIGUSR1), "SIGUSR1 reached rank 0 through the batch shell and mpirun")
    os.kill(rank0, signal.SIGCONT)
try:
    _, err = p.communicate(timeout=HANG)
except subprocess.TimeoutExpired:
    os.killpg(p.pid, signal.SIGKILL)
    _, err = p.communicate()
    f.check(False, f"the first run hung after SIGUSR1 ({HANG} s)")
first = read_jsonl(output)
f.check(p.returncode == 0, f"stopped and requeued: exit 0 ({p.returncode}): {err[-1500:]}")
f.check("requeueing job 42" in err, f"the script says it requeues: {err[-800:]}")
f.check(os.path.exists(calls) and open(calls).read().split() == ["requeue", "42"], "scontrol requeue 42, once")
f.check(0 < len(first) < N and all(r is not None for r in first), f"a clean partial result file ({len(first)} of {N})")

# The requeued job: the same script, no signal: it resumes and finishes.
os.remove(calls)
q = subprocess.run(["bash", script], env=dict(env, SLURM_RESTART_COUNT="1"), capture_output=True, text=True,
                   timeout=2 * HANG)
res = read_jsonl(output)
ids = [r["id"] for r in res if r]
f.check(q.returncode == 0 and "done" in q.stderr, f"the requeued run finishes: {q.stderr[-1500:]}")
f.check(not os.path.exists(calls), "no requeue when the run is done")
f.check(sorted(ids) == sorted(r["id"] for r in reqs), f"every request exactly once ({len(ids)} lines)")
f.check(all(r["usage"]["completion_tokens"] == 48 for r in res if r), "each generated its 48 tokens")
f.check(ids[:len(first)] == [r["id"] for r in first], "the first run's results were kept, not redone")

# Missing settings are named before anything runs.
bad = subprocess.run(["bash", script], env={k: v for k, v in env.items() if k != "MODEL"}, capture_output=True,
                     text=True, timeout=HANG)
f.check(bad.returncode != 0 and "set MODEL" in bad.stderr, f"MODEL missing: named ({bad.stderr.strip()})")
f.finish()
