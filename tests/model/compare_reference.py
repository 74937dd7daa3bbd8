#!/usr/bin/python3
"""Engine logits vs the float64 numpy reference on synthetic checkpoints.

    compare_reference.py --hf-logits BUILD/tests/model/hf_logits --preset tiny --format bf16 [--keep DIR]

Writes a checkpoint with tools/synth/make_checkpoint.py, runs
tests/reference/run_reference.py and hf_logits on the same requests (hf_logits
also checks batched prefill == lone decode, bit for bit), and requires every
logit row to match by tests/reference/logit_rows.py's policy: max|engine -
ref| <= 1e-4 * max|ref| (the project's bar) and the same argmax where the
reference's top-2 gap is clear; with --activations int8, against the
reference that quantizes the same activations, its near rounding ties
rounded as the engine's logits show (tests/reference/tie_resolution.py), at
the same bar; with --activations bf16, against the reference that rounds
the same activations to bf16, following the roundings hf_logits records
where float32 error can explain them (tests/reference/bf16_path.py,
EngineRows), at the same bar.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
import logit_rows  # noqa: E402  (the row policy, shared with tests/e2e/test_reference.py)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hf-logits", required=True)
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--format", default="bf16")
    ap.add_argument("--seed", default="0")
    ap.add_argument("--keep", help="work directory to keep (default: a temporary one)")
    ap.add_argument("--activations", default="f32", choices=("f32", "int8", "bf16"),
                    help="the engine's compute path; int8 and bf16 compare with the reference that rounds the "
                         "same operands")
    ap.add_argument("--bf16-family", choices=("x86", "arm"),
                    help="bf16: the family whose definition hf_logits runs (default the build's; the other in "
                         "scalar code)")
    args = ap.parse_args()
    logit_rows.self_check()
    work = args.keep or tempfile.mkdtemp(prefix="trillion-ref-")
    os.makedirs(work, exist_ok=True)
    model, ref_out, eng_out = (os.path.join(work, s) for s in ("model", "ref", "engine"))
    for d in (ref_out, eng_out):
        os.makedirs(d, exist_ok=True)
    py = sys.executable
    subprocess.run([py, os.path.join(ROOT, "tools/synth/make_checkpoint.py"), "--preset", args.preset,
                    "--format", args.format, "--seed", args.seed, "--output", model, "--quiet"], check=True)
    vocab = json.load(open(os.path.join(model, "config.json")))["vocab_size"]
    rng = np.random.default_rng(1)
    reqs = [{"id": "r%d" % i, "token_ids": [int(t) for t in rng.integers(0, vocab, n)]}
            for i, n in enumerate((13, 1, 7, 20))]
    req_path = os.path.join(work, "requests.jsonl")
    with open(req_path, "w") as f:
        for r in reqs:
            f.write(json.dumps(r) + "\n")
    # The engine first: on the int8 path the reference rounds its near ties as the engine's logits show.
    # bf16: hf_logits records its rounded activations, which the reference follows where it
    # meets a near tie (each checked to be one: bf16_path.EngineRows).
    rows = os.path.join(work, "engine-rows")
    os.makedirs(rows, exist_ok=True)
    subprocess.run([args.hf_logits, model, req_path, eng_out, "2", args.activations] +
                   ([rows] if args.activations == "bf16" else []) +
                   ([args.bf16_family] if args.activations == "bf16" and args.bf16_family else []), check=True)
    subprocess.run([py, os.path.join(ROOT, "tests/reference/run_reference.py"), "--model", model,
                    "--requests", req_path, "--out-dir", ref_out] +
                   (["--int8-activations", "--match-logits", eng_out] if args.activations == "int8" else
                    ["--bf16-activations", "--engine-rows", rows] if args.activations == "bf16" else []),
                   check=True, stdout=subprocess.DEVNULL)
    check = logit_rows.RowCheck()
    failures = []
    for r in reqs:
        ref = np.load(os.path.join(ref_out, r["id"] + ".npy"))
        eng = np.load(os.path.join(eng_out, r["id"] + ".npy")).astype(np.float64)
        if ref.shape != eng.shape:
            failures.append("%s: engine logits %s, reference %s" % (r["id"], eng.shape, ref.shape))
            continue
        routing = json.load(open(os.path.join(ref_out, r["id"] + ".routing.json")))
        check.request(r["id"], eng, ref, len(routing.get("tie_flips", [])))
    failures += check.finish()
    for p in failures:
        print(p)
    followed = ""
    if args.activations == "bf16":  # cumulative over the requests: the last one's count
        last = json.load(open(os.path.join(ref_out, reqs[-1]["id"] + ".routing.json")))
        followed = "; %d activations near a tie rounded as the engine did" % last.get("bf16_followed", 0)
    print("%s %s %s%s: %s%s%s" % (args.preset, args.format, args.activations,
                                  " (%s definition)" % args.bf16_family if args.bf16_family else "", check.summary(), followed,
                                ", %d problems" % len(failures) if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
