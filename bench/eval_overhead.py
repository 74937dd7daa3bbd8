#!/usr/bin/env python3
"""The harness-side overhead of `--model trillion` (python/trillion_lm_eval):
the time an evaluation spends in the backend outside trillion's jobs
(tokenizing through `trillion tokenize`, writing request files, reading and
mapping results back, progress) as a fraction of the evaluation's wall time.
Goal: under 5%.

The model is the benches' `bench` preset (hidden 2048, 6 layers, 64 experts,
1.26 B parameters, FP8; made in BUILD/bench-work as bench/run_all.py makes
it) seen through a directory that adds the bundled model's tokenizer
(models/kjv: 4096 ids, inside the preset's 32000), since the synthetic
checkpoint has none; the tasks are tests/eval/tasks (cloze, perplexity,
generation: all three request types). Run under the bench lock:

    flock /work/notes/bench.lock build/eval-venv/bin/python bench/eval_overhead.py [--model DIR] [--np 1]

(with /usr/bin/python3 it makes build/eval-venv through tools/eval-venv.sh
and runs itself there)."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ap = argparse.ArgumentParser()
ap.add_argument("--build", default=os.path.join(ROOT, "build"))
ap.add_argument("--model", help="a converted model (default: the bench preset in FP8, BUILD/bench-work)")
ap.add_argument("--np", type=int, default=1)
ap.add_argument("--max-batch", type=int, default=8)
ap.add_argument("--max-length", type=int, default=256)
ap.add_argument("--threads", type=int, default=0)
ap.add_argument("--json", help="write the figures here too")
args = ap.parse_args()

try:
    import lm_eval  # noqa: F401
except ImportError:  # run in the eval venv, made if need be
    venv = os.path.join(args.build, "eval-venv")
    subprocess.run(["bash", os.path.join(ROOT, "tools", "eval-venv.sh"), venv], check=True)
    os.execv(os.path.join(venv, "bin", "python"), [os.path.join(venv, "bin", "python"), *sys.argv])

from lm_eval import simple_evaluate  # noqa: E402
from lm_eval.tasks import TaskManager  # noqa: E402

from trillion_lm_eval import TrillionLM  # noqa: E402

trillion = os.path.join(args.build, "trillion")
work = os.path.join(args.build, "bench-work")


def sh(cmd):
    subprocess.run([str(c) for c in cmd], check=True)


def bench_model():
    hf, model = os.path.join(work, "hf-bench-fp8"), os.path.join(work, "model-bench-fp8")
    if not os.path.exists(os.path.join(hf, "config.json")):
        print("making the bench checkpoint (fp8) ...", flush=True)
        sh(["/usr/bin/python3", os.path.join(ROOT, "tools/synth/make_checkpoint.py"), "--preset", "bench",
            "--format", "fp8", "--output", hf, "--quiet"])
    if not os.path.exists(os.path.join(model, "manifest.json")):
        print("converting it ...", flush=True)
        shutil.rmtree(model, ignore_errors=True)
        sh([trillion, "convert", "--input", hf, "--output", model, "--quiet"])
    return model


def with_tokenizer(model):
    """model's files (symlinked) plus models/kjv's tokenizer, when it has none."""
    if os.path.exists(os.path.join(model, "tokenizer.json")):
        return model
    view = os.path.join(work, "eval-view-" + os.path.basename(model.rstrip("/")))
    shutil.rmtree(view, ignore_errors=True)
    os.makedirs(view)
    for n in os.listdir(model):
        os.symlink(os.path.join(model, n), os.path.join(view, n))
    for n in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(ROOT, "models", "kjv", n), view)
    return view


model = with_tokenizer(os.path.abspath(args.model) if args.model else bench_model())
evalwork = os.path.join(work, "eval-overhead")
shutil.rmtree(evalwork, ignore_errors=True)  # a fresh run: no result to resume
lm = TrillionLM(model=model, binary=trillion, workdir=evalwork, np=args.np, max_batch=args.max_batch,
                max_length=args.max_length, threads=args.threads)

# Time spent inside the backend's three methods, around trillion's jobs.
in_lm = {"s": 0.0}
for name in ("loglikelihood", "loglikelihood_rolling", "generate_until"):
    def timed(self, requests, disable_tqdm=False, _f=getattr(TrillionLM, name)):
        t = time.perf_counter()
        try:
            return _f(self, requests, disable_tqdm=disable_tqdm)
        finally:
            in_lm["s"] += time.perf_counter() - t
    setattr(TrillionLM, name, timed)

t0 = time.perf_counter()
res = simple_evaluate(model=lm, tasks=["kjv_cloze", "kjv_ppl", "kjv_gen"],
                      task_manager=TaskManager(include_path=os.path.join(ROOT, "tests", "eval", "tasks"),
                                               include_defaults=False))
wall = time.perf_counter() - t0
st = lm.launcher.stats
ours = in_lm["s"] - st["job_s"]
fig = {"model": model, "np": args.np, "max_batch": args.max_batch, "max_length": args.max_length,
       "wall_s": wall, "backend_s": in_lm["s"], "jobs_s": st["job_s"], "jobs": st["jobs"],
       "tokenize_s": st["tokenize_s"], "overhead_s": ours, "overhead_fraction": ours / wall,
       "lm_eval_s": wall - in_lm["s"]}
print(f"evaluation wall time            {wall:8.2f} s")
print(f"  trillion score/generate jobs  {st['job_s']:8.2f} s ({st['jobs']} jobs)")
print(f"  backend outside the jobs      {ours:8.2f} s = {100 * ours / wall:.2f}% of the wall time (goal < 5%)")
print(f"    of which trillion tokenize  {st['tokenize_s']:8.2f} s")
print(f"  lm-eval itself (tasks, metrics) {wall - in_lm['s']:6.2f} s")
for task, m in sorted(res["results"].items()):
    print(f"  {task}: " + ", ".join(f"{k.split(',')[0]} {v:.4f}" for k, v in sorted(m.items())
                                    if isinstance(v, float) and "stderr" not in k))
if args.json:
    with open(args.json, "w") as f:
        json.dump(fig, f, indent=1)
