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
reference quantizes the same activations (--int8-activations), its near
rounding ties rounded as the engine's logits show (--match-logits,
tests/reference/tie_resolution.py): every row at the same 1e-4. With
--activations bf16 (FP8 checkpoints) the reference rounds the same
activations to bf16, following the roundings tests/model/hf_logits records
on the checkpoint (--engine-rows: each checked to be one float32 error
explains), and trillion's logits must be hf_logits', bit for bit. Greedy
tokens are checked over the whole sequence: trillion scores prompt +
generated tokens, every row is held to the resolved reference at 1e-4, and
each generated token must be the argmax of trillion's own logits and of the
reference's where its top-2 gap is clear."""
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
ap.add_argument("--activations", default="f32", choices=("f32", "int8", "bf16"), help="the engine's compute path")
ap.add_argument("--hf-logits", help="bf16: tests/model/hf_logits, whose rounded activations the reference follows "
                                    "(its logits must be trillion's, bit for bit)")
args = parse_args(parser=ap)
sys.path.insert(0, os.path.join(os.path.dirname(REFERENCE)))
import logit_rows  # noqa: E402  (the row policy, shared with tests/model/compare_reference.py)

f = Failures()
hf, model = converted(args.trillion, args.work, args.preset, args.format, args.seed, quantize=args.quantize)
qsuffix = f"-q{args.quantize}" if args.quantize else ""
# A path that rounds activations (int8, bf16): its reference resolves near ties toward the engine.
rounded = args.activations in ("int8", "bf16")
case = fresh_case(args.work, f"{args.preset}-{args.format}-{args.seed}{qsuffix}-{args.activations}")  # results are resumed: start afresh

config = json.load(open(os.path.join(model, "config.json")))
vocab = config["vocab_size"]
rng = np.random.default_rng(1234 + args.seed)
lengths = [1, 5, 17, 40]
requests = [{"id": f"r{i}", "token_ids": [int(t) for t in rng.integers(0, vocab, n)]}
            for i, n in enumerate(lengths)]
write_jsonl(os.path.join(case, "score.jsonl"), requests)

# trillion: prefill in one step, and one token per step (the decode path).
for name, step in (("prefill", 256), ("stepwise", 1)):
    run([args.trillion, "score", "--model", model, "--input", os.path.join(case, "score.jsonl"),
         "--output", os.path.join(case, f"{name}.jsonl"), "--logits-out", os.path.join(case, name),
         "--step-tokens", step, "--threads", 2, "--activations", args.activations])

ref_model = model if args.quantize else hf
if args.quantize:
    manifest = json.load(open(os.path.join(model, "manifest.json")))
    f.check(manifest.get("weight_format") == args.quantize and manifest.get("quantized_from") == "bf16",
            f"manifest weight_format {manifest.get('weight_format')}, quantized_from {manifest.get('quantized_from')}")


def reference(requests_file, out_dir, engine_logits, generate=0, engine_rows=None):
    """The float64 reference's logits of every prefix (and, f32, greedy continuations); int8:
    its near rounding ties rounded as the engine's logits show (tests/reference/tie_resolution.py);
    bf16: following the engine's rounded activations (tests/reference/bf16_path.py, EngineRows)."""
    run([PYTHON, REFERENCE, "--model", ref_model, "--requests", requests_file, "--out-dir", out_dir] +
        (["--bf16-activations", "--engine-rows", engine_rows] if engine_rows else
         ["--%s-activations" % args.activations, "--match-logits", engine_logits] if rounded else
         ["--generate", generate] if generate else []))


def check_rows(rid, got, ref_dir, rows):
    ref = np.load(os.path.join(ref_dir, rid + ".npy")).astype(np.float64)
    if not f.check(got.shape == ref.shape == (got.shape[0], vocab), f"{rid}: logits shape {got.shape} vs reference {ref.shape}"):
        return None
    routing = json.load(open(os.path.join(ref_dir, rid + ".routing.json")))
    rows.request(rid, got, ref, len(routing.get("tie_flips", [])))
    return ref


# Reference (f32): logits of every prefix, and greedy continuations. int8 holds
# the prompts' rows to the reference below, with the generated tokens' (one
# resolution of its near ties per request covers both).
ref_dir = os.path.join(case, "ref")
if not rounded:
    reference(os.path.join(case, "score.jsonl"), ref_dir, os.path.join(case, "prefill"), args.greedy)
for r in requests:
    rid = r["id"]
    got = np.load(os.path.join(case, "prefill", rid + ".npy")).astype(np.float64)
    step = np.load(os.path.join(case, "stepwise", rid + ".npy"))
    f.check(got.shape[0] == len(r["token_ids"]), f"{rid}: {got.shape[0]} logit rows for {len(r['token_ids'])} tokens")
    if not rounded:
        rows = logit_rows.RowCheck()
        check_rows(rid, got, ref_dir, rows)
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
    res = results.get(r["id"], {})
    got = res.get("token_ids")
    f.check(got is not None and res.get("usage", {}).get("completion_tokens") == len(got),
            f"{r['id']}: token_ids and usage.completion_tokens")

if rounded:
    # The whole sequence, prompt and generated tokens, scored by trillion and
    # held to the reference with its near ties resolved: every row at 1e-4
    # (the prompt's rows are the prompt-only score's, checked bit for bit),
    # and every generated token is the engine's argmax there and the
    # reference's where its top-2 gap is clear (logit_rows.row_problem).
    full = [{"id": r["id"], "token_ids": r["token_ids"] + results[r["id"]]["token_ids"]} for r in requests
            if results.get(r["id"], {}).get("token_ids") is not None]
    write_jsonl(os.path.join(case, "full.jsonl"), full)
    run([args.trillion, "score", "--model", model, "--input", os.path.join(case, "full.jsonl"),
         "--output", os.path.join(case, "full.out.jsonl"), "--logits-out", os.path.join(case, "full"),
         "--threads", 2, "--activations", args.activations])
    engine_rows = None
    if args.activations == "bf16":
        # hf_logits on the checkpoint records the rounded activations the
        # reference follows; its logits are trillion's, bit for bit.
        if not args.hf_logits or args.quantize:
            sys.exit("test_reference: --activations bf16 needs --hf-logits and an FP8 checkpoint as given")
        engine_rows = os.path.join(case, "engine-rows")
        os.makedirs(engine_rows, exist_ok=True)
        os.makedirs(os.path.join(case, "hf-full"), exist_ok=True)
        run([args.hf_logits, hf, os.path.join(case, "full.jsonl"), os.path.join(case, "hf-full"), 2, "bf16",
             engine_rows])
        for fr in full:
            f.check(np.array_equal(np.load(os.path.join(case, "hf-full", fr["id"] + ".npy")),
                                   np.load(os.path.join(case, "full", fr["id"] + ".npy"))),
                    f"{fr['id']}: trillion's bf16 logits differ from hf_logits' on the checkpoint")
    reference(os.path.join(case, "full.jsonl"), os.path.join(case, "ref-full"), os.path.join(case, "full"),
              engine_rows=engine_rows)
    for r, fr in zip(requests, full):
        rid, n = r["id"], len(r["token_ids"])
        got_full = np.load(os.path.join(case, "full", rid + ".npy"))
        f.check(np.array_equal(got_full[:n], np.load(os.path.join(case, "prefill", rid + ".npy"))),
                f"{rid}: the prompt's logits differ between the prompt alone and the whole sequence")
        gen = results[rid]["token_ids"]
        chosen = [int(np.argmax(got_full[n - 1 + i])) for i in range(len(gen))]
        f.check(chosen == gen, f"{rid}: generated {gen}, the argmax of trillion's own logits {chosen}")
        rows = logit_rows.RowCheck()
        ref = check_rows(rid, got_full.astype(np.float64), os.path.join(case, "ref-full"), rows)
        for p in rows.finish():
            f.check(False, p)
        if ref is not None:
            same = sum(int(np.argmax(ref[n - 1 + i])) == t for i, t in enumerate(gen))
            print(f"{rid}: {len(gen)} generated tokens, {same} the reference's argmax; whole sequence: {rows.summary()}")
    f.finish()
    sys.exit(0)

for r in requests:
    rid = r["id"]
    want = json.load(open(os.path.join(ref_dir, rid + ".greedy.json")))["token_ids"]
    # The reference generates a fixed count; trillion stops at EOS (kept in token_ids).
    cut = next((i + 1 for i, t in enumerate(want) if t in eos), len(want))
    got = results.get(rid, {}).get("token_ids")
    f.check(got == want[:cut], f"{rid}: greedy tokens {got} != reference {want[:cut]}")
    res = results.get(rid, {})
    reason = "stop" if any(t in eos for t in want[:cut]) else "length"
    f.check(res.get("finish_reason") == reason, f"{rid}: finish_reason {res.get('finish_reason')} != {reason}")
f.finish()
