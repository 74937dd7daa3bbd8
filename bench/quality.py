#!/usr/bin/env python3
"""Quality of a fast path (--path: the integer-dot path, int8, or the bf16
path of FP8 weights, bf16) against the exact path, measured the way the
field does (llama.cpp's perplexity --kl-divergence): `trillion score` runs
the same sequences with --activations f32 and the fast path on the same
weights, and this prints, over every next-token distribution,

  - mean and 99th-percentile KL(p_f32 || p_fast), in nats;
  - top-1 agreement (the same most likely token);
  - perplexity of the sequences under each path, and their ratio.

Goals: int8 (issue: integer kernels) mean KL <= 0.01 nats, top-1 >= 97%;
bf16 (issue 45: bf16 keeps 8 bits of mantissa) mean KL <= 0.001 nats.

    /usr/bin/python3 bench/quality.py [--build build] [--path int8|bf16]
        [--model DIR | --preset small --format int4 | --quantize int8]
        [--versus DIR] [--text FILE | --token-ids JSONL] [--seqs 8] [--len 128] [--json out.json]

--versus DIR runs the fast side on another model directory: `convert
--quantize int8` of --model (an FP8 model quantized to int8 on disk, against
the FP8 weights on the exact path) rather than the same weights' run-time
int8 copy. --token-ids takes the sequences from a JSONL file of
{"token_ids": [...]} lines (models/kjv/heldout.jsonl), each cut to --len.

With --text and a model that has a tokenizer, the sequences are that text's
tokens (held-out text); otherwise random token ids (on a model with random
weights the figures say how much the path moves the distribution, not how
good the model is). Without --model it makes a synthetic checkpoint with
tools/synth and converts it (--quantize requantizes a bf16 one), kept in
BUILD/bench-work.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--build", default=os.path.join(ROOT, "build"))
ap.add_argument("--path", default="int8", choices=("int8", "bf16"), help="the fast path held to f32")
ap.add_argument("--work", default=None, help="model cache (default BUILD/bench-work)")
ap.add_argument("--model", help="a converted model directory (default: a synthetic one)")
ap.add_argument("--preset", default="small")
ap.add_argument("--format", default="int4")
ap.add_argument("--quantize", choices=("int8", "int4"), help="requantize a bf16 checkpoint of --preset")
ap.add_argument("--versus", help="score the fast path on this model directory instead of --model")
ap.add_argument("--text", help="held-out text to score (needs the model's tokenizer)")
ap.add_argument("--token-ids", help="JSONL of {\"token_ids\": [...]} sequences to score")
ap.add_argument("--seqs", type=int, default=8)
ap.add_argument("--len", type=int, default=128)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--json", help="also write the figures here")
args = ap.parse_args()

trillion = os.path.join(args.build, "trillion")
work = args.work or os.path.join(args.build, "bench-work")
os.makedirs(work, exist_ok=True)


def sh(cmd, stdin=None):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, input=stdin)
    if p.returncode:
        sys.exit(f"failed: {' '.join(map(str, cmd))}\n{p.stdout}\n{p.stderr}")
    return p.stdout


model = args.model
if not model:
    fmt = "bf16" if args.quantize else args.format
    hf = os.path.join(work, f"hf-{args.preset}-{fmt}")
    model = os.path.join(work, f"model-{args.preset}-{fmt}" + (f"-q{args.quantize}" if args.quantize else ""))
    if not os.path.exists(os.path.join(hf, "config.json")):
        print(f"making the {args.preset} checkpoint ({fmt}) ...", flush=True)
        sh(["/usr/bin/python3", os.path.join(ROOT, "tools/synth/make_checkpoint.py"), "--preset", args.preset,
            "--format", fmt, "--output", hf, "--quiet"])
    if not os.path.exists(os.path.join(model, "manifest.json")):
        shutil.rmtree(model, ignore_errors=True)
        sh([trillion, "convert", "--input", hf, "--output", model] + (["--quantize", args.quantize] if args.quantize else []))

vocab = json.load(open(os.path.join(model, "config.json")))["vocab_size"]
case = os.path.join(work, "quality")
shutil.rmtree(case, ignore_errors=True)
os.makedirs(case)
if args.token_ids:
    seqs = [json.loads(line)["token_ids"][:args.len] for line in open(args.token_ids) if line.strip()][:args.seqs]
    seqs = [s for s in seqs if len(s) > 1]
    source = f"{args.token_ids}: {sum(map(len, seqs))} tokens"
elif args.text:
    text = open(args.text, encoding="utf-8").read()
    ids = json.loads(sh([trillion, "tokenize", "--model", model], stdin=json.dumps({"text": text}) + "\n"))["ids"]
    seqs = [ids[i:i + args.len] for i in range(0, len(ids) - 1, args.len)][:args.seqs]
    seqs = [s for s in seqs if len(s) > 1]
    source = f"{args.text}: {sum(map(len, seqs))} tokens"
else:
    rng = np.random.default_rng(7)
    seqs = [[int(t) for t in rng.integers(0, vocab, args.len)] for _ in range(args.seqs)]
    source = f"random token ids, {args.seqs} x {args.len}"
with open(os.path.join(case, "in.jsonl"), "w") as f:
    for i, s in enumerate(seqs):
        f.write(json.dumps({"id": f"s{i}", "token_ids": s}) + "\n")

fast = args.path
logits = {}
for path in ("f32", fast):
    sh([trillion, "score", "--model", args.versus if path == fast and args.versus else model,
        "--input", os.path.join(case, "in.jsonl"),
        "--output", os.path.join(case, f"{path}.jsonl"), "--logits-out", os.path.join(case, path),
        "--activations", path, "--threads", args.threads, "--restart"])
    logits[path] = [np.load(os.path.join(case, path, f"s{i}.npy")).astype(np.float64) for i in range(len(seqs))]


def log_softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


kl, agree, nll = [], [], {"f32": [], fast: []}
for i, s in enumerate(seqs):
    lp = {p: log_softmax(logits[p][i]) for p in logits}
    pf = np.exp(lp["f32"])
    kl.extend(np.sum(pf * (lp["f32"] - lp[fast]), axis=-1))
    agree.extend(np.argmax(lp["f32"], axis=-1) == np.argmax(lp[fast], axis=-1))
    for p in lp:  # log p(token[t+1] | tokens[..t])
        nll[p].extend(-lp[p][np.arange(len(s) - 1), s[1:]])
kl = np.array(kl)
ppl = {p: float(np.exp(np.mean(v))) for p, v in nll.items()}
fig = {"model": model, "versus": args.versus, "source": source, "path": fast, "positions": int(kl.size),
       "kl_mean": float(kl.mean()), "kl_p99": float(np.percentile(kl, 99)), "kl_max": float(kl.max()),
       "top1_agreement": float(np.mean(agree)), "ppl_f32": ppl["f32"], f"ppl_{fast}": ppl[fast],
       "ppl_ratio": ppl[fast] / ppl["f32"]}
print(f"model {model}" + (f", {fast} path on {args.versus}" if args.versus else "") + f" ({source})")
print(f"{'positions':>10} {'KL mean':>10} {'KL p99':>10} {'KL max':>10} {'top-1':>8} {'ppl f32':>10} {'ppl ' + fast:>10} {'ratio':>8}")
print(f"{fig['positions']:>10} {fig['kl_mean']:>10.2e} {fig['kl_p99']:>10.2e} {fig['kl_max']:>10.2e} "
      f"{100 * fig['top1_agreement']:>7.2f}% {fig['ppl_f32']:>10.3f} {ppl[fast]:>10.3f} {fig['ppl_ratio']:>8.5f}")
if fast == "int8":
    print(f"goals: KL mean <= 0.01 nats ({'met' if fig['kl_mean'] <= 0.01 else 'missed'}), "
          f"top-1 >= 97% ({'met' if fig['top1_agreement'] >= 0.97 else 'missed'})")
else:
    print(f"goal: KL mean <= 0.001 nats ({'met' if fig['kl_mean'] <= 0.001 else 'missed'})")
if args.json:
    json.dump(fig, open(args.json, "w"), indent=2)
