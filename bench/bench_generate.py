#!/usr/bin/env python3
"""`trillion generate` against `bench_model` at the same batch: how much of
the model's step rate a real batch job keeps (the scheduler, sampling,
detokenizing and writing results on top of the steps). --seqs requests (default
32) of --prompt tokens each, all submitted at once, each generating --tokens
tokens (ignore_eos, greedy), --max-batch = --seqs; then `bench_model` decode
steps at batch --seqs with the same context. Alternated --repeat times; the
medians are printed with their ratio (the goal: generate's decode rate within
15% of bench_model's).

generate's decode rate is its --metrics `tokens_per_second.decode` (steps
with no prefill row: every sequence decoding); its whole-job rate
(`generated`, from the first step to the last result written) is printed too.

    /usr/bin/python3 bench/bench_generate.py [--format int8] [--seqs 32] [--repeat 3] [--json out.json]
"""
import argparse
import json
import os
import statistics
import tempfile

from bench_models import ROOT, sh, synthetic_model

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--build", default=os.path.join(ROOT, "build"))
ap.add_argument("--work", default=None, help="model cache (default BUILD/bench-work)")
ap.add_argument("--format", default="int8", help="bench preset format: int8, int4 or fp8")
ap.add_argument("--activations", default="int8")
ap.add_argument("--seqs", type=int, default=32)
ap.add_argument("--prompt", type=int, default=32, help="prompt tokens (bench_model's --context)")
ap.add_argument("--tokens", type=int, default=64, help="tokens generated per request")
ap.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
ap.add_argument("--repeat", type=int, default=3)
ap.add_argument("--json", default=None, help="write every figure here")
args = ap.parse_args()
trillion = os.path.join(args.build, "trillion")
work = args.work or os.path.join(args.build, "bench-work")
os.makedirs(work, exist_ok=True)
# INT8 and INT4 are bf16 quantized by `convert --quantize` (as run_all.py makes them), FP8 native.
model = (synthetic_model(trillion, work, "bench", "bf16", quantize=args.format, name=f"bench-{args.format}")
         if args.format in ("int8", "int4") else synthetic_model(trillion, work, "bench", args.format))


def generate():
    with tempfile.TemporaryDirectory(dir=work) as d:
        inp, out, metrics = (os.path.join(d, x) for x in ("in.jsonl", "out.jsonl", "metrics.json"))
        with open(inp, "w") as fp:
            for i in range(args.seqs):  # distinct prompts: no shared prefix to reuse
                ids = [2 + (i * 7919 + j * 104729) % 5000 for j in range(args.prompt)]
                fp.write(json.dumps({"id": f"r{i}", "prompt_token_ids": ids, "max_tokens": args.tokens,
                                     "ignore_eos": True, "temperature": 0}) + "\n")
        sh([trillion, "generate", "--model", model, "--prompts", inp, "--output", out, "--threads", args.threads,
            "--max-batch", args.seqs, "--activations", args.activations, "--metrics", metrics,
            "--metrics-interval", "0", "--no-verify"])
        m = json.load(open(metrics))
        return m["tokens_per_second"]["decode"], m["tokens_per_second"]["generated"]


def bench_model():
    with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
        sh([os.path.join(args.build, "bench", "bench_model"), "--model", model, "--threads", args.threads,
            "--batches", args.seqs, "--context", args.prompt, "--steps", args.tokens // 2, "--activations",
            args.activations, "--json", tmp.name])
        m = json.load(open(tmp.name))
    return m["decode"][0]["tokens_per_s"]


rows = []
for i in range(args.repeat):
    dec, whole = generate()
    ref = bench_model()
    rows.append({"generate_decode": dec, "generate_whole": whole, "bench_model": ref})
    print(f"run {i + 1}: generate decode {dec:.1f} tokens/s (whole job {whole:.1f}), bench_model {ref:.1f}: "
          f"{dec / ref:.2f}", flush=True)
med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
ratios = [r["generate_decode"] / r["bench_model"] for r in rows]
print(f"{args.format} bench model, {args.seqs} sequences, {args.threads} threads, {args.activations} path: generate "
      f"decode {med['generate_decode']:.1f} tokens/s, bench_model {med['bench_model']:.1f}; ratio median "
      f"{statistics.median(ratios):.2f} (per run {', '.join(f'{x:.2f}' for x in ratios)}; goal >= 0.85)")
if args.json:
    json.dump({"runs": rows, "median": med, "ratios": ratios, "args": vars(args)}, open(args.json, "w"), indent=1)
