#!/usr/bin/env python3
"""Start-up against the KV pool: `trillion generate` of one short request at
each --max-batch (default 8, 32, 128; the pool is max-batch x max-len
positions), alternating --repeat times with the best of each kept (other jobs
share this machine's cores). Per --max-batch: the pool's size, the time from
the process's start to its first step (--metrics
seconds.start_to_first_step), the job's wall time and the rank's peak
resident set. --before BIN runs an older trillion beside it, alternated
(its wall time and resident set; a build without the metric shows "-").

Model: the synthetic `bench` preset in fp8 (the flagship's format), or
--model DIR. Checksum verification is on (as a user runs) unless --no-verify.

    /usr/bin/python3 bench/bench_startup.py [--before OLD/trillion] [--repeat 3] [--json out.json]
"""
import argparse
import json
import os
import time

from bench_models import ROOT, sh, synthetic_model

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--build", default=os.path.join(ROOT, "build"))
ap.add_argument("--work", default=None, help="model cache (default BUILD/bench-work)")
ap.add_argument("--model", default=None, help="a converted model directory (default: the bench preset, fp8)")
ap.add_argument("--before", default=None, help="an older trillion binary to compare with")
ap.add_argument("--max-batch", default="8,32,128")
ap.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
ap.add_argument("--repeat", type=int, default=3)
ap.add_argument("--no-verify", action="store_true")
ap.add_argument("--json", default=None, help="write every figure here")
args = ap.parse_args()
trillion = os.path.join(args.build, "trillion")
work = args.work or os.path.join(args.build, "bench-work")
runs = os.path.join(work, "startup-runs")
os.makedirs(runs, exist_ok=True)


def run(binary, tag, model, max_batch):
    inp, out, metrics = (os.path.join(runs, f"{tag}.{x}") for x in ("in.jsonl", "out.jsonl", "metrics.json"))
    with open(inp, "w") as fp:
        fp.write(json.dumps({"id": "a", "prompt_token_ids": list(range(2, 34)), "max_tokens": 1}) + "\n")
    cmd = [binary, "generate", "--model", model, "--prompts", inp, "--output", out, "--restart", "--threads",
           args.threads, "--max-batch", max_batch, "--metrics", metrics, "--metrics-interval", "0"]
    if args.no_verify:
        cmd.append("--no-verify")
    t0 = time.perf_counter()
    sh(cmd)
    wall = time.perf_counter() - t0
    m = json.load(open(metrics))
    return {"wall": wall, "start_to_first_step": m["seconds"].get("start_to_first_step"),
            "peak_rss_bytes": m["per_rank"][0]["peak_rss_bytes"], "kv_cache_blocks": m["kv_cache_blocks"],
            "kv_block_tokens": m["kv_block_tokens"]}


def best(a, b):
    if a is None:
        return b
    return {k: (min(a[k], b[k]) if k in ("wall", "start_to_first_step") and b[k] is not None else a[k]) for k in a}


model = args.model or synthetic_model(trillion, work, "bench", "fp8")
cfg = json.load(open(os.path.join(model, "config.json")))
pos_bytes = 4 * (cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]) * cfg["num_hidden_layers"]
builds = {"after": trillion, **({"before": args.before} if args.before else {})}
print(f"model {model}, {args.threads} threads, best of {args.repeat} alternating runs"
      f"{'' if args.no_verify else ', checksums verified'}")
figures = {}
for mb in [int(x) for x in args.max_batch.split(",")]:
    kept = {name: None for name in builds}
    for _ in range(args.repeat):
        for name, binary in builds.items():
            kept[name] = best(kept[name], run(binary, f"{name}-{mb}", model, mb))
    figures[mb] = kept
    pool = kept["after"]["kv_cache_blocks"] * kept["after"]["kv_block_tokens"]
    line = f"--max-batch {mb:4d}: pool {pool} positions ({pool * pos_bytes / 2**30:.2f} GiB)"
    for name, f in kept.items():
        s = "-" if f["start_to_first_step"] is None else f"{f['start_to_first_step']:.2f} s"
        line += (f" | {name}: start to first step {s}, wall {f['wall']:.2f} s, "
                 f"peak RSS {f['peak_rss_bytes'] / 2**30:.2f} GiB")
    print(line)
first, last = figures[min(figures)]["after"], figures[max(figures)]["after"]
if first["start_to_first_step"]:
    print(f"start to first step at --max-batch {max(figures)} / {min(figures)}: "
          f"{last['start_to_first_step'] / first['start_to_first_step']:.2f}x")
if args.json:
    json.dump(figures, open(args.json, "w"), indent=1)
