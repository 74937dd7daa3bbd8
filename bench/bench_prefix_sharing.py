#!/usr/bin/env python3
"""Shared prefixes, measured: `trillion score` of two evaluation-shaped
request files with prefix sharing (the default) and with --no-prefix-sharing,
alternating --repeat times (the best wall time of each kept: other jobs share
this machine's cores). Per shape: requests, prefill positions computed and
read from shared prefixes (--metrics), wall time of the job, requests/s, and
whether every log-prob is bit-identical between the two.

Shapes (the way lm-evaluation-harness's loglikelihood requests look):
  hellaswag  --contexts contexts of ~190 tokens, 4 endings of 15-30 tokens each
             (a request per ending: context + ending);
  mmlu       a 5-shot prompt of ~640 tokens shared by every question, then
             --questions questions of ~60 tokens, 4 one-token answers each.

Model: the synthetic `bench` preset (hidden 2048, 6 layers, 64 experts) in
bf16, converted with --quantize int8 (the integer path), or --model DIR.

    /usr/bin/python3 bench/bench_prefix_sharing.py [--model DIR] [--repeat 2] [--json out.json]
"""
import argparse
import json
import os
import random
import time

from bench_models import ROOT, sh, synthetic_model

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--build", default=os.path.join(ROOT, "build"))
ap.add_argument("--work", default=None, help="model cache (default BUILD/bench-work)")
ap.add_argument("--model", default=None, help="a converted model directory (default: the bench preset, int8)")
ap.add_argument("--contexts", type=int, default=8)
ap.add_argument("--questions", type=int, default=6)
ap.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
ap.add_argument("--repeat", type=int, default=2)
ap.add_argument("--json", default=None, help="write every figure here")
args = ap.parse_args()
trillion = os.path.join(args.build, "trillion")
work = args.work or os.path.join(args.build, "bench-work")
os.makedirs(work, exist_ok=True)


def shapes(vocab):
    rnd = random.Random(7)
    toks = lambda n: [rnd.randrange(2, vocab) for _ in range(n)]  # noqa: E731
    hella = []
    for c in range(args.contexts):
        ctx = toks(rnd.randrange(170, 210))
        hella += [{"id": f"h{c}-{e}", "token_ids": ctx + toks(rnd.randrange(15, 31))} for e in range(4)]
    shots = toks(640)
    answers = toks(4)
    mmlu = []
    for q in range(args.questions):
        question = toks(rnd.randrange(45, 75))
        mmlu += [{"id": f"m{q}-{a}", "token_ids": shots + question + [answers[a]]} for a in range(4)]
    return {"hellaswag": hella, "mmlu": mmlu}


def run(model, name, reqs, sharing):
    d = os.path.join(work, "prefix-sharing-runs")
    os.makedirs(d, exist_ok=True)
    tag = f"{name}-{'on' if sharing else 'off'}"
    inp, out, metrics = (os.path.join(d, f"{tag}.{x}") for x in ("in.jsonl", "out.jsonl", "metrics.json"))
    with open(inp, "w") as fp:
        fp.writelines(json.dumps(r) + "\n" for r in reqs)
    cmd = [trillion, "score", "--model", model, "--input", inp, "--output", out, "--restart", "--threads",
           args.threads, "--metrics", metrics, "--metrics-interval", "0", "--no-verify"]
    if not sharing:
        cmd.append("--no-prefix-sharing")
    t0 = time.perf_counter()
    sh(cmd)
    wall = time.perf_counter() - t0
    tok = json.load(open(metrics))["tokens"]
    res = {}
    for line in open(out):
        r = json.loads(line)
        res[r["id"]] = r
    return {"wall": wall, "computed": tok["prefill"], "reused": tok.get("prefill_reused", 0)}, res


model = args.model or synthetic_model(trillion, work, "bench", "bf16", quantize="int8")
vocab = json.load(open(os.path.join(model, "config.json")))["vocab_size"]
print(f"model {model}, {args.threads} threads, best of {args.repeat} alternating runs")
figures = {}
for name, reqs in shapes(vocab).items():
    best = {True: None, False: None}
    results = {}
    for _ in range(args.repeat):
        for sharing in (False, True):
            fig, res = run(model, name, reqs, sharing)
            results[sharing] = res
            if best[sharing] is None or fig["wall"] < best[sharing]["wall"]:
                best[sharing] = fig
    same = all(results[True][k].get("token_logprobs") == results[False][k].get("token_logprobs") and
               results[True][k].get("greedy_token_ids") == results[False][k].get("greedy_token_ids")
               for k in results[False])
    on, off = best[True], best[False]
    n = len(reqs)
    row = {"requests": n, "positions": sum(len(r["token_ids"]) for r in reqs),
           "off": {**off, "requests_per_second": n / off["wall"]}, "on": {**on, "requests_per_second": n / on["wall"]},
           "prefill_ratio": off["computed"] / max(1, on["computed"]),
           "speedup": off["wall"] / on["wall"], "bit_identical": same}
    figures[name] = row
    print(f"{name}: {n} requests, {row['positions']} positions")
    print(f"  --no-prefix-sharing: {off['computed']} computed, {off['wall']:.2f} s, {n / off['wall']:.2f} requests/s")
    print(f"  prefix sharing:      {on['computed']} computed, {on['reused']} read, {on['wall']:.2f} s, "
          f"{n / on['wall']:.2f} requests/s")
    print(f"  {row['prefill_ratio']:.2f}x fewer prefill positions, {row['speedup']:.2f}x requests/s, "
          f"log-probs {'bit-identical' if same else 'DIFFER'}")
if args.json:
    json.dump(figures, open(args.json, "w"), indent=1)
