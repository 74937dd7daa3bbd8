#!/usr/bin/env python3
"""A slow core costs its share, not the step: the bench model's decode with
one core taken half away by a competing process, the thread pool's blocks
claimed dynamically (the default, about 4 per thread) against a static split
(one block per thread, TRILLION_POOL_BLOCKS=1).

An efficiency core on Apple Silicon, or a core another job preempts, is the
case: with a static split every matmul waits for the slow thread's whole
half; with dynamic blocks the fast thread takes more of them. Each setting
runs `bench_model` (median step) with and without a busy loop pinned to the
last core, the four runs alternated `--rounds` times (machines are noisy:
compare ratios measured in one run). Prints tokens/s and the slowdown the
competitor causes per setting.

    /usr/bin/python3 bench/bench_slow_core.py [--model DIR] [--batches 1,16] [--rounds 2]

--model defaults to the INT8 bench model run_all.py converts
(build/bench-work/model-bench-int8).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--build", default=os.path.join(ROOT, "build"))
ap.add_argument("--model", default=None)
ap.add_argument("--batches", default="1,16")
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--rounds", type=int, default=2)
ap.add_argument("--steps", type=int, default=12)
args = ap.parse_args()

model = args.model or os.path.join(args.build, "bench-work", "model-bench-int8")
if not os.path.exists(os.path.join(model, "manifest.json")):
    sys.exit(f"bench_slow_core: no converted model at {model} (run bench/run_all.py once, or pass --model)")
cores = os.cpu_count() or 1
if cores < 2 or args.threads < 2:
    sys.exit("bench_slow_core: needs 2+ cores and 2+ threads (one core is slowed, the other is not)")


def bench(blocks, competitor):
    env = dict(os.environ, TRILLION_POOL_BLOCKS=str(blocks))
    busy = None
    if competitor:  # a pure busy loop on the last core: that core runs our thread half the time
        busy = subprocess.Popen(["taskset", "-c", str(cores - 1), sys.executable, "-c", "while True: pass"])
    try:
        with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
            p = subprocess.run([os.path.join(args.build, "bench", "bench_model"), "--model", model, "--threads",
                                str(args.threads), "--batches", args.batches, "--prefill-seqs", "0", "--context", "16",
                                "--steps", str(args.steps), "--reps", "2", "--json", tmp.name],
                               capture_output=True, text=True, env=env)
            if p.returncode:
                sys.exit(f"bench_model failed:\n{p.stdout}\n{p.stderr}")
            return {d["batch"]: d["tokens_per_s"] for d in json.load(open(tmp.name))["decode"]}
    finally:
        if busy:
            busy.kill()
            busy.wait()


settings = [(4, False), (4, True), (1, False), (1, True)]
runs = {s: [] for s in settings}
for r in range(args.rounds):
    for s in (settings if r % 2 == 0 else settings[::-1]):
        runs[s].append(bench(*s))
        print(f"round {r + 1}: blocks/thread {s[0]}, competitor {'on ' if s[1] else 'off'}: " +
              ", ".join(f"b{b} {v:.1f}" for b, v in runs[s][-1].items()), flush=True)

batches = [int(b) for b in args.batches.split(",")]
med = {s: {b: statistics.median(x[b] for x in runs[s]) for b in batches} for s in settings}
print(f"\n{args.threads} threads, tokens/s (median of {args.rounds}); competitor: a busy loop on core {cores - 1}")
print(f"{'split':24} " + " ".join(f"{'b%d quiet' % b:>10} {'b%d slowed' % b:>10} {'kept':>6}" for b in batches))
for blocks, name in ((4, "dynamic (4 per thread)"), (1, "static (1 per thread)")):
    cells = []
    for b in batches:
        q, s = med[(blocks, False)][b], med[(blocks, True)][b]
        cells.append(f"{q:10.1f} {s:10.1f} {s / q:6.0%}")
    print(f"{name:24} " + " ".join(cells))
print("(kept: slowed / quiet. With one of two cores at half speed the ideal is 75%, a static split's floor 50%.)")
