"""trillion's logits and greedy tokens against the independent float64 numpy
reference (tests/reference), for one synthetic preset and weight format.

Checks, per request: max |logits - reference| <= 1e-4 * max |reference logits|;
greedy continuations of 16 tokens identical; prefill logits bit-identical to
decoding the same tokens one at a time (--step-tokens 1).

With --quantize int8|int4|fp8 the checkpoint is converted with `trillion
convert --quantize`, and the reference runs on the converted model directory
itself (read with h5py and dequantized in float64: tests/reference/hdf5_model.py),
so the bar is the same: only the engine's own arithmetic differs.

With --activations int8 the engine takes the integer-dot path and the
reference quantizes the same activations (--int8-activations); rows are held
by tests/reference/logit_rows.py's policy (1e-4, and one quantization step
from the first position near a rounding tie), and greedy tokens must agree
up to that position."""
import json
import os
import sys

import numpy as np

from harness import (PYTHON, REFERENCE, Failures, arg_parser, converted, fresh_case, parse_args, read_jsonl, run,
                     write_jsonl)

ap = arg_parser()
ap.add_argument("--preset", required=True)
ap.add_argument("--format", required=True)
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--greedy", type=int, default=16)
ap.add_argument("--quantize", help="int8, int4 or fp8: convert with --quantize (the checkpoint must be bf16)")
ap.add_argument("--activations", default="f32", choices=("f32", "int8"), help="the engine's compute path")
args = parse_args(parser=ap)
sys.path.insert(0, os.path.join(os.path.dirname(REFERENCE)))
import logit_rows  # noqa: E402  (the row policy, shared with tests/model/compare_reference.py)

f = Failures()
hf, model = converted(args.trillion, args.work, args.preset, args.format, args.seed, quantize=args.quantize)
qsuffix = f"-q{args.quantize}" if args.quantize else ""
case = fresh_case(args.work, f"{args.preset}-{args.format}-{args.seed}{qsuffix}-{args.activations}")  # results are resumed: start afresh

config = json.load(open(os.path.join(model, "config.json")))
vocab = config["vocab_size"]
rng = np.random.default_rng(1234 + args.seed)
lengths = [1, 5, 17, 40]
requests = [{"id": f"r{i}", "token_ids": [int(t) for t in rng.integers(0, vocab, n)]}
            for i, n in enumerate(lengths)]
write_jsonl(os.path.join(case, "score.jsonl"), requests)

def first_tie(rid):
    """int8: the reference's first position near a rounding tie (prompt and generated tokens), else None."""
    ties = json.load(open(os.path.join(ref_dir, rid + ".routing.json"))).get("quant_tie_positions", [])
    return min(ties) if ties else None


# Reference: logits of every prefix and greedy continuations.
ref_dir = os.path.join(case, "ref")
if args.quantize:
    manifest = json.load(open(os.path.join(model, "manifest.json")))
    f.check(manifest.get("weight_format") == args.quantize and manifest.get("quantized_from") == "bf16",
            f"manifest weight_format {manifest.get('weight_format')}, quantized_from {manifest.get('quantized_from')}")
run([PYTHON, REFERENCE, "--model", model if args.quantize else hf, "--requests", os.path.join(case, "score.jsonl"),
     "--out-dir", ref_dir, "--generate", args.greedy] + (["--int8-activations"] if args.activations == "int8" else []))

# trillion: prefill in one step, and one token per step (the decode path).
for name, step in (("prefill", 256), ("stepwise", 1)):
    run([args.trillion, "score", "--model", model, "--input", os.path.join(case, "score.jsonl"),
         "--output", os.path.join(case, f"{name}.jsonl"), "--logits-out", os.path.join(case, name),
         "--step-tokens", step, "--threads", 2, "--activations", args.activations])

for r in requests:
    rid = r["id"]
    ref = np.load(os.path.join(ref_dir, rid + ".npy")).astype(np.float64)
    got = np.load(os.path.join(case, "prefill", rid + ".npy")).astype(np.float64)
    step = np.load(os.path.join(case, "stepwise", rid + ".npy"))
    ok_shape = f.check(got.shape == ref.shape == (len(r["token_ids"]), vocab),
                       f"{rid}: logits shape {got.shape} vs reference {ref.shape}")
    if ok_shape:
        rows = logit_rows.RowCheck(args.activations)
        rows.request(rid, got, ref, first_tie(rid))
        for p in rows.finish():
            f.check(False, p)
        print(f"{rid}: len {len(r['token_ids'])}, {rows.summary()}")
    f.check(np.array_equal(np.load(os.path.join(case, "prefill", rid + ".npy")), step),
            f"{rid}: prefill logits differ from one-token-at-a-time logits")

# Greedy generation through the incremental decode path.
gen_requests = [{"id": r["id"], "prompt_token_ids": r["token_ids"], "max_tokens": args.greedy}
                for r in requests]
write_jsonl(os.path.join(case, "gen.jsonl"), gen_requests)
run([args.trillion, "generate", "--model", model, "--prompts", os.path.join(case, "gen.jsonl"),
     "--output", os.path.join(case, "gen.out.jsonl"), "--threads", 2, "--activations", args.activations])
results = {x["id"]: x for x in read_jsonl(os.path.join(case, "gen.out.jsonl"))}
eos = config["eos_token_id"]
eos = set(eos if isinstance(eos, list) else [eos])
for r in requests:
    rid = r["id"]
    want = json.load(open(os.path.join(ref_dir, rid + ".greedy.json")))["token_ids"]
    # The reference generates a fixed count; trillion stops at EOS (kept in token_ids).
    cut = next((i + 1 for i, t in enumerate(want) if t in eos), len(want))
    got = results.get(rid, {}).get("token_ids")
    tie = first_tie(rid) if args.activations == "int8" else None
    if tie is not None and got is not None:
        # Generated token i comes from the logits at position len(prompt) - 1 + i:
        # compare the tokens chosen before the first near tie.
        agree = max(0, min(cut, tie - len(r["token_ids"]) + 1))
        f.check(got[:agree] == want[:agree], f"{rid}: greedy tokens {got[:agree]} != reference {want[:agree]}")
        f.check(results[rid].get("usage", {}).get("completion_tokens") == len(got), f"{rid}: usage.completion_tokens")
        continue
    f.check(got == want[:cut], f"{rid}: greedy tokens {got} != reference {want[:cut]}")
    res = results.get(rid, {})
    f.check(res.get("usage", {}).get("completion_tokens") == len(got or []),
            f"{rid}: usage.completion_tokens")
    reason = "stop" if any(t in eos for t in want[:cut]) else "length"
    f.check(res.get("finish_reason") == reason, f"{rid}: finish_reason {res.get('finish_reason')} != {reason}")
f.finish()
