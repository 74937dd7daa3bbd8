"""jobs/slurm/generate.sbatch outside Slurm (it is a bash script; sbatch
only reads its #SBATCH lines): with the Slurm variables set, mpirun as the
launcher and a stand-in `scontrol` that records its arguments, SIGUSR1 to the
batch shell (what --signal=B:USR1@T sends) stops the ranks cleanly after the
steps in flight and requeues the job; the requeued run (the same script,
again) resumes and finishes, every request exactly once."""
import os
import signal
import subprocess
import time

from harness import ROOT, parse_lines as read_jsonl, start, write_jsonl

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

# First run: SIGUSR1 once results begin to appear.
print("+ bash", script, flush=True)
p = subprocess.Popen(["bash", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
t0 = time.time()
while time.time() - t0 < 120 and p.poll() is None and len(read_jsonl(output)) < 5:
    time.sleep(0.05)
f.check(p.poll() is None, "the first run is still going when results appear")
p.send_signal(signal.SIGUSR1)
_, err = p.communicate(timeout=120)
first = read_jsonl(output)
f.check(p.returncode == 0, f"stopped and requeued: exit 0 ({p.returncode}): {err[-1500:]}")
f.check("requeueing job 42" in err, f"the script says it requeues: {err[-800:]}")
f.check(os.path.exists(calls) and open(calls).read().split() == ["requeue", "42"], "scontrol requeue 42, once")
f.check(0 < len(first) < N and all(r is not None for r in first), f"a clean partial result file ({len(first)} of {N})")

# The requeued job: the same script, no signal: it resumes and finishes.
os.remove(calls)
q = subprocess.run(["bash", script], env=dict(env, SLURM_RESTART_COUNT="1"), capture_output=True, text=True,
                   timeout=300)
res = read_jsonl(output)
ids = [r["id"] for r in res if r]
f.check(q.returncode == 0 and "done" in q.stderr, f"the requeued run finishes: {q.stderr[-1500:]}")
f.check(not os.path.exists(calls), "no requeue when the run is done")
f.check(sorted(ids) == sorted(r["id"] for r in reqs), f"every request exactly once ({len(ids)} lines)")
f.check(all(r["usage"]["completion_tokens"] == 48 for r in res if r), "each generated its 48 tokens")
f.check(ids[:len(first)] == [r["id"] for r in first], "the first run's results were kept, not redone")

# Missing settings are named before anything runs.
bad = subprocess.run(["bash", script], env={k: v for k, v in env.items() if k != "MODEL"}, capture_output=True,
                     text=True, timeout=30)
f.check(bad.returncode != 0 and "set MODEL" in bad.stderr, f"MODEL missing: named ({bad.stderr.strip()})")
f.finish()
