#!/usr/bin/env python3
"""Parallel runtime benchmark: pipeline efficiency and expert vs pipeline.

Runs `trillion generate` on the bench-sized synthetic model under mpirun and
prints, from each run's --metrics, generated tokens/s and its ratio to the
one-rank run of the same batch, the per-rank busy/wait split, and bytes
exchanged per generated token; with the machine's measured memory bandwidth
(bench_memory) for scale. Figures are measured in one run: compare ratios.

    /usr/bin/python3 bench/bench_parallel.py [--build build] [--preset bench] [--format fp8]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ap = argparse.ArgumentParser()
ap.add_argument("--build", default=os.path.join(ROOT, "build"))
ap.add_argument("--work", default=None, help="model cache (default BUILD/bench-work)")
ap.add_argument("--preset", default="bench")
ap.add_argument("--format", default="fp8")
ap.add_argument("--prompt-len", type=int, default=16)
ap.add_argument("--max-tokens", type=int, default=24)
ap.add_argument("--batches", default="1,8,32")
ap.add_argument("--efficiency-batch", type=int, default=8)
ap.add_argument("--mpirun", default="mpirun")
ap.add_argument("--mpi-args", default="", help="extra mpirun arguments (e.g. the TCP transport)")
ap.add_argument("--profile", default=None, help="host profile JSON (trillion calibrate) for --stages auto "
                "(default: the built-in one)")
ap.add_argument("--json", default=None, help="also write the table here")
args = ap.parse_args()

trillion = os.path.join(args.build, "trillion")
work = args.work or os.path.join(args.build, "bench-work")
os.makedirs(work, exist_ok=True)
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def sh(cmd, **kw):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, **kw)
    if p.returncode:
        sys.exit(f"failed: {' '.join(map(str, cmd))}\n{p.stdout}\n{p.stderr}")
    return p.stdout


hf = os.path.join(work, f"hf-{args.preset}-{args.format}")
model = os.path.join(work, f"model-{args.preset}-{args.format}")
if not os.path.exists(os.path.join(hf, "config.json")):
    print(f"making the {args.preset} checkpoint ({args.format}) ...", flush=True)
    sh(["/usr/bin/python3", os.path.join(ROOT, "tools/synth/make_checkpoint.py"), "--preset", args.preset,
        "--format", args.format, "--output", hf, "--quiet"])
if not os.path.exists(os.path.join(model, "manifest.json")):
    shutil.rmtree(model, ignore_errors=True)
    sh([trillion, "convert", "--input", hf, "--output", model])
limits = json.loads(sh([os.path.join(args.build, "bench", "bench_memory"), "--json", "--mib", 1024]))
print(f"machine: read {limits['read_gbps_1']:.1f} GB/s (1 thread), {limits['read_gbps_all']:.1f} GB/s "
      f"({limits['threads']} threads); FMA {limits['fma_gflops_1']:.0f} / {limits['fma_gflops_all']:.0f} GFLOP/s")
vocab = json.load(open(os.path.join(model, "config.json")))["vocab_size"]


def prompts(batch):
    path = os.path.join(work, f"prompts-{batch}.jsonl")
    with open(path, "w") as f:
        for i in range(batch):
            ids = [(i * 7919 + j * 104729) % vocab for j in range(args.prompt_len)]
            f.write(json.dumps({"id": f"r{i}", "prompt_token_ids": ids, "max_tokens": args.max_tokens}) + "\n")
    return path


def run(ranks, mode, batch, threads=1, stages=None):
    out = os.path.join(work, f"out-{ranks}-{mode}-{batch}{'-' + stages if stages else ''}.jsonl")
    metrics = out + ".metrics.json"
    # Default binding (one core per rank) fits ranks x 1 thread on this box.
    cmd = [args.mpirun, "-n", ranks, *args.mpi_args.split(), trillion, "generate",
           "--model", model, "--prompts", prompts(batch), "--output", out, "--metrics", metrics,
           "--parallel", mode, "--threads", threads, "--max-batch", batch, "--max-len", 256, "--no-verify",
           "--restart", *(["--stages", stages] if stages else []),
           *(["--profile", args.profile] if stages == "auto" and args.profile else [])]
    sh(cmd)
    m = json.load(open(metrics))
    gen = m["tokens"]["generated"]
    row = {"ranks": ranks, "mode": mode, "batch": batch, "threads_per_rank": threads, "stages": stages or "bytes",
           "roles": [r["role"] for r in m["per_rank"]],
           "generated_tokens_per_s": m["tokens_per_second"]["generated"],
           "busy": [round(r["busy_seconds"], 3) for r in m["per_rank"]],
           "wait": [round(r["wait_seconds"], 3) for r in m["per_rank"]],
           "bytes_per_token": sum(r["bytes_sent"] for r in m["per_rank"]) / max(gen, 1),
           "weight_gib_per_rank": [round(r["weight_bytes"] / 2**30, 3) for r in m["per_rank"]]}
    return row


rows = []
def show(row, base):
    ratio = row["generated_tokens_per_s"] / base["generated_tokens_per_s"] if base else 1.0
    row["ratio_to_1_rank"] = ratio
    rows.append(row)
    mode = row["mode"] + (" auto" if row["stages"] == "auto" else "")
    print(f"{row['ranks']:>5} {mode:>14} {row['batch']:>5} {row['generated_tokens_per_s']:>10.1f} "
          f"{ratio:>7.2f}x  busy {row['busy']} wait {row['wait']}  "
          f"{row['bytes_per_token'] / 1024:.0f} KiB/token  weights/rank {row['weight_gib_per_rank']} GiB", flush=True)


print(f"\n{'ranks':>5} {'mode':>14} {'batch':>5} {'tokens/s':>10} {'vs 1 rank':>8}")
b = args.efficiency_batch
base = run(1, "pipeline", b)
show(base, None)
pipe2 = run(2, "pipeline", b)
show(pipe2, base)
# --stages auto: layers by predicted time (--profile, or the built-in one) and
# lm_head's rows split between the two stages.
auto2 = run(2, "pipeline", b, stages="auto")
show(auto2, base)
print(f"  auto: {' | '.join(auto2['roles'])}")
print(f"pipeline efficiency (2 ranks x 1 thread / 1 rank x 1 thread, batch {b}): "
      f"{pipe2['generated_tokens_per_s'] / base['generated_tokens_per_s']:.2f} split by bytes, "
      f"{auto2['generated_tokens_per_s'] / base['generated_tokens_per_s']:.2f} by --stages auto (aim >= 1.7)\n")
for batch in [int(x) for x in args.batches.split(",")]:
    one = run(1, "pipeline", batch)
    show(one, None)
    p = run(2, "pipeline", batch)
    show(p, one)
    e = run(2, "expert", batch)
    show(e, one)
    print(f"batch {batch}: expert / pipeline = {e['generated_tokens_per_s'] / p['generated_tokens_per_s']:.2f}\n")
if args.json:
    json.dump({"limits": limits, "runs": rows}, open(args.json, "w"), indent=2)
