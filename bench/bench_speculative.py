#!/usr/bin/env python3
"""MTP speculative decoding, measured: acceptance rate and decode speed-up
of `generate --speculative mtp` over plain decoding at batch 1 and 8.

Models (each a `--model NAME=DIR` of converted models, or the defaults):
  smoke  tools/train/train.py --arch smoke --steps 400 (KJV, DeepSeek-V3
         architecture with its MTP layer trained; ~30 s once), converted;
  bench  the synthetic `bench` preset (hidden 2048, 6 layers, 64 experts) in
         FP8 with an MTP layer (--nextn-layers 1): random weights, so nearly
         every draft is rejected; its speed-up (< 1) is the cost of a
         rejected draft: one more row per sequence in each step plus the MTP
         layer and a head row.
For the full trained model: `--model kjv=DIR` (a converted directory).

Per model and batch B: B requests decoded together (`--max-batch B`), plain
and speculative runs alternating `--repeat` times (the best of each kept:
other jobs share this machine's cores). Decode throughput is the generated
tokens after each request's first (which the prefill step yields) over the
seconds of the steps without prefill rows (--metrics seconds.decode_steps),
so the speed-up is decode's own. Greedy unless --temperature; prompts are
the same for both runs (text when the model has a tokenizer, else ids).

    /usr/bin/python3 bench/bench_speculative.py [--model NAME=DIR ...] [--tokens 64] [--json out.json]
"""
import argparse
import json
import os
import shutil

from bench_models import ROOT, sh, synthetic_model

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--build", default=os.path.join(ROOT, "build"))
ap.add_argument("--work", default=None, help="model cache (default BUILD/bench-work)")
ap.add_argument("--model", action="append", default=[], help="NAME=DIR of a converted model (default: smoke, bench)")
ap.add_argument("--smoke-steps", type=int, default=400, help="training steps of the default smoke model")
ap.add_argument("--batches", default="1,8")
ap.add_argument("--tokens", type=int, default=64, help="max_tokens of every request")
ap.add_argument("--temperature", type=float, default=0.0)
ap.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
ap.add_argument("--repeat", type=int, default=2)
ap.add_argument("--json", default=None, help="write every figure here")
args = ap.parse_args()
trillion = os.path.join(args.build, "trillion")
work = args.work or os.path.join(args.build, "bench-work")
os.makedirs(work, exist_ok=True)
PY = "/usr/bin/python3"

# English prompts for a model with a tokenizer (its text: the KJV).
TEXTS = ["In the beginning God created", "And the LORD said unto Moses,", "Blessed are the poor in spirit:",
         "The LORD is my shepherd;", "And it came to pass, when", "Now the serpent was more subtil",
         "Let not your heart be troubled:", "For God so loved the world,"]


def smoke_model():
    hf, model = os.path.join(work, f"hf-kjv-smoke-{args.smoke_steps}"), os.path.join(work, f"model-kjv-smoke-{args.smoke_steps}")
    if not os.path.exists(os.path.join(hf, "training.json")):
        print(f"  training the smoke model ({args.smoke_steps} steps) ...", flush=True)
        shutil.rmtree(hf, ignore_errors=True)
        sh([PY, os.path.join(ROOT, "tools/train/train.py"), "--arch", "smoke", "--steps", args.smoke_steps,
            "--output", hf])
    if not os.path.exists(os.path.join(model, "manifest.json")):
        shutil.rmtree(model, ignore_errors=True)
        sh([trillion, "convert", "--input", hf, "--output", model, "--quiet"])
    return model


def bench_model():
    return synthetic_model(trillion, work, "bench", "fp8", checkpoint_args=("--nextn-layers", 1), name="bench-fp8-mtp")


def requests(model, batch):
    cfg = json.load(open(os.path.join(model, "config.json")))
    text = os.path.exists(os.path.join(model, "tokenizer.json"))
    reqs = []
    for i in range(batch):
        r = {"id": f"r{i}", "max_tokens": args.tokens}
        if text:
            r["prompt"] = TEXTS[i % len(TEXTS)]
        else:  # a fixed pseudo-random prompt of 16 ids
            r["prompt_token_ids"] = [(7919 * (i * 16 + k) + 13) % (cfg["vocab_size"] - 2) + 2 for k in range(16)]
        if args.temperature > 0:
            r.update(temperature=args.temperature, seed=i)
        reqs.append(r)
    return reqs


def run(model, batch, spec, tag):
    d = os.path.join(work, "speculative-runs")
    os.makedirs(d, exist_ok=True)
    prompts, out, metrics = (os.path.join(d, f"{tag}.{x}") for x in ("in.jsonl", "out.jsonl", "metrics.json"))
    with open(prompts, "w") as fp:
        for r in requests(model, batch):
            fp.write(json.dumps(r) + "\n")
    sh([trillion, "generate", "--model", model, "--prompts", prompts, "--output", out, "--restart",
        "--max-batch", batch, "--threads", args.threads, "--metrics", metrics, "--metrics-interval", 0,
        *(["--speculative", "mtp"] if spec else [])])
    m = json.load(open(metrics))
    decode_tokens = m["tokens"]["generated"] - batch
    return {"decode_tokens_per_s": decode_tokens / m["seconds"]["decode_steps"] if m["seconds"]["decode_steps"] else 0,
            "generated": m["tokens"]["generated"], "steps": m["steps"], "speculative": m.get("speculative"),
            "tokens": {r["id"]: r["token_ids"] for r in map(json.loads, open(out))}}  # completion order differs


models = [tuple(x.split("=", 1)) for x in args.model] or [("smoke", smoke_model()), ("bench", bench_model())]
rows = []
for name, model in models:
    for batch in (int(b) for b in args.batches.split(",")):
        best = {}
        for rep in range(args.repeat):
            for spec in (False, True):
                r = run(model, batch, spec, f"{name}-b{batch}-{'spec' if spec else 'plain'}")
                if spec not in best or r["decode_tokens_per_s"] > best[spec]["decode_tokens_per_s"]:
                    best[spec] = r
        plain, spec = best[False], best[True]
        s = spec["speculative"]
        same = plain["tokens"] == spec["tokens"]
        rows.append({"model": name, "batch": batch, "temperature": args.temperature,
                     "plain_decode_tokens_per_s": plain["decode_tokens_per_s"],
                     "spec_decode_tokens_per_s": spec["decode_tokens_per_s"],
                     "speedup": spec["decode_tokens_per_s"] / plain["decode_tokens_per_s"],
                     "drafted": s["drafted"], "accepted": s["accepted"], "acceptance_rate": s["acceptance_rate"],
                     "steps_plain": plain["steps"], "steps_spec": spec["steps"],
                     "greedy_identical": same if args.temperature == 0 else None})

print(f"\nMTP speculative decoding ({args.threads} threads, {args.tokens} tokens per request, "
      f"{'greedy' if args.temperature == 0 else f'temperature {args.temperature}'}; best of {args.repeat})")
print(f"{'model':8} {'batch':>5} {'plain tok/s':>12} {'spec tok/s':>11} {'speed-up':>9} {'accepted':>14} "
      f"{'rate':>6} {'steps plain/spec':>17} {'same tokens':>12}")
for r in rows:
    print(f"{r['model']:8} {r['batch']:5d} {r['plain_decode_tokens_per_s']:12.1f} {r['spec_decode_tokens_per_s']:11.1f} "
          f"{r['speedup']:8.2f}x {r['accepted']:6d}/{r['drafted']:<7d} {100 * r['acceptance_rate']:5.1f}% "
          f"{r['steps_plain']:8d}/{r['steps_spec']:<8d} {str(r['greedy_identical']):>12}")
if args.json:
    with open(args.json, "w") as fp:
        json.dump({"threads": args.threads, "tokens": args.tokens, "rows": rows}, fp, indent=2)
