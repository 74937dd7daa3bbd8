#!/usr/bin/python3
"""CLI of the float64 DeepSeek-V3 reference.

  /usr/bin/python3 tests/reference/run_reference.py --model HF_DIR --requests REQ.jsonl \
      --out-dir DIR [--generate N] [--absorbed] [--float32]
  /usr/bin/python3 tests/reference/run_reference.py --self-test

Each request line is {"id": "...", "token_ids": [...]}. Writes per request:
  DIR/<id>.npy           logits [len(token_ids), vocab] (float64; float32 with --float32),
                         row t = logits after token t (one causal forward over the sequence)
  DIR/<id>.routing.json  per MoE layer: min expert / group margins (and the token
                         where each occurs) and the chosen experts of every token
  With --int8-activations (or --bf16-activations) --match-logits ENGINE_DIR: the near rounding ties are
  rounded as the engine's logits ENGINE_DIR/<id>.npy show (tie_resolution.py), and
  routing.json adds "tie_flips", "tie_forwards" and "tie_matched".
  DIR/<id>.greedy.json   with --generate N: {"token_ids": [N greedy tokens],
                         "logit_gaps": [top1 - top2 per step], "min_expert_margin",
                         "min_group_margin"} (float64 KV cache)
Margins are biased-score differences: k-th minus (k+1)-th eligible expert, and
topk_group-th minus (topk_group+1)-th group; null = no competitor.
"""

import argparse
import json
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import deepseek_ref as ref  # noqa: E402
import tie_resolution  # noqa: E402
from safetensors_reader import SafetensorsError  # noqa: E402


# ----------------------------------------------------------------------------- CLI

def _finite_or_none(v):
    v = float(v)
    return v if math.isfinite(v) else None


def _min_with_token(values):
    values = np.asarray(values, dtype=np.float64)
    t = int(np.argmin(values))
    return _finite_or_none(values[t]), t


def routing_summary(routing):
    layers = []
    for rt in routing:
        em, et = _min_with_token(rt.expert_margin)
        gm, gt = _min_with_token(rt.group_margin)
        layers.append({"layer": rt.layer, "min_expert_margin": em, "min_expert_margin_token": et,
                       "min_group_margin": gm, "min_group_margin_token": gt,
                       "min_chosen_biased": float(np.min(rt.min_chosen_biased)),
                       "experts": rt.experts.tolist(),
                       "groups": rt.groups.tolist() if rt.groups is not None else None})
    return layers


def _overall_min(values):
    vals = [v for v in values if v is not None]
    return min(vals) if vals else None


def read_requests(path):
    reqs = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
                rid, ids = str(r["id"]), [int(t) for t in r["token_ids"]]
            except (ValueError, KeyError, TypeError) as e:
                raise SystemExit("%s:%d: bad request line (%s)" % (path, n, e))
            if not rid or "/" in rid or rid.startswith("."):
                raise SystemExit("%s:%d: id %r cannot name a file" % (path, n, rid))
            if not ids:
                raise SystemExit("%s:%d: empty token_ids" % (path, n))
            reqs.append((rid, ids))
    return reqs


def run(args):
    t0 = time.time()
    match = getattr(args, "match_logits", None)
    if match and not (getattr(args, "int8_activations", False) or getattr(args, "bf16_activations", False)):
        raise SystemExit("--match-logits resolves the int8 or bf16 path's near ties: it needs --int8-activations "
                         "or --bf16-activations")
    if getattr(args, "int8_activations", False) and getattr(args, "bf16_activations", False):
        raise SystemExit("--int8-activations and --bf16-activations: one compute path at a time")
    model = ref.load_model(args.model, getattr(args, "int8_activations", False),
                           getattr(args, "bf16_activations", False))
    if getattr(args, "engine_rows", None):
        if not getattr(args, "bf16_activations", False) or match:
            raise SystemExit("--engine-rows follows the bf16 path's roundings: it needs --bf16-activations "
                             "and no --match-logits")
        import bf16_path
        model.w.engine_rows = bf16_path.EngineRows(args.engine_rows)
    vocab = model.cfg.vocab_size
    reqs = read_requests(args.requests)
    for rid, ids in reqs:
        bad = [t for t in ids if not 0 <= t < vocab]
        if bad:
            raise SystemExit("request %s: token ids %s outside [0, %d)" % (rid, bad[:5], vocab))
    os.makedirs(args.out_dir, exist_ok=True)
    for rid, ids in reqs:
        t1 = time.time()
        model.w.tie_positions = set()
        resolution = {}
        if match:
            # The near rounding ties rounded as the engine's logits show (tie_resolution.py).
            eng = np.load(os.path.join(match, rid + ".npy")).astype(np.float64)
            if eng.shape != (len(ids), vocab):
                raise SystemExit("--match-logits %s: %s.npy has shape %s, not %s" % (match, rid, eng.shape,
                                                                                       (len(ids), vocab)))
            res = tie_resolution.resolve(model, ids, eng, absorbed=args.absorbed)
            logits, routing = res.logits, res.routing
            model.w.tie_positions = res.tie_positions  # the resolved forward's, for routing.json
            resolution = {"tie_flips": [list(k) for k in res.flips], "tie_forwards": res.forwards,
                          "tie_matched": res.matched}
        elif args.generate:
            logits, routing, tokens, gaps, steps = model.generate_greedy(ids, args.generate, args.absorbed)
        else:
            logits, routing = model.forward(ids, absorbed=args.absorbed)
        np.save(os.path.join(args.out_dir, rid + ".npy"),
                logits.astype(np.float32) if args.float32 else logits)
        layers = routing_summary(routing)
        with open(os.path.join(args.out_dir, rid + ".routing.json"), "w") as f:
            json.dump({"id": rid,
                       "min_expert_margin": _overall_min(l["min_expert_margin"] for l in layers),
                       "min_group_margin": _overall_min(l["min_group_margin"] for l in layers),
                       # --int8-activations or --bf16-activations: the positions whose rounded activations met
                       # a near rounding tie (deepseek_ref.TIE_MARGIN, bf16_path.TIE_MARGIN)
                       "quant_tie_positions": sorted(model.w.tie_positions),
                       # --match-logits: the near ties rounded the other way, as
                       # [quantized input, position, column]
                       **resolution,
                       # --engine-rows: the activations taken the other way so far (cumulative)
                       **({"bf16_followed": model.w.engine_rows.followed} if model.w.engine_rows else {}),
                       "layers": layers}, f)
        if args.generate and not match:
            step_layers = [l for rts in steps for l in routing_summary(rts)]
            with open(os.path.join(args.out_dir, rid + ".greedy.json"), "w") as f:
                json.dump({"token_ids": tokens, "logit_gaps": gaps,
                           "min_expert_margin": _overall_min(l["min_expert_margin"] for l in step_layers),
                           "min_group_margin": _overall_min(l["min_group_margin"] for l in step_layers)}, f)
        if not getattr(args, "quiet", False):
            print("%s: %d tokens%s in %.2fs" % (rid, len(ids), " + %d generated" % args.generate
                                               if args.generate else "", time.time() - t1), file=sys.stderr)
    if not getattr(args, "quiet", False):
        print("%d requests in %.2fs" % (len(reqs), time.time() - t0), file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="Hugging Face checkpoint directory")
    ap.add_argument("--requests", help="JSONL of {\"id\", \"token_ids\"}")
    ap.add_argument("--out-dir", help="output directory")
    ap.add_argument("--generate", type=int, default=0, metavar="N", help="also N greedy tokens")
    ap.add_argument("--absorbed", action="store_true", help="absorbed MLA form (same result)")
    ap.add_argument("--float32", action="store_true", help="save logits as float32")
    ap.add_argument("--int8-activations", action="store_true",
                    help="model the engine's --activations int8 path (int4/int8 linears see quantized inputs)")
    ap.add_argument("--bf16-activations", action="store_true",
                    help="model the engine's --activations bf16 path (FP8 linears see their inputs rounded "
                         "to bf16; the weights stay exact)")
    ap.add_argument("--engine-rows", metavar="DIR",
                    help="with --bf16-activations: follow the engine's rounded activations recorded by "
                         "tests/model/hf_logits (DIR/<linear>.npy), each checked to differ from the "
                         "reference's only by ties taken the other way (bf16_path.EngineRows)")
    ap.add_argument("--match-logits", metavar="DIR",
                    help="with --int8-activations or --bf16-activations: round the near ties as the engine did, read from its logits "
                         "DIR/<id>.npy [len, vocab] (tie_resolution.py); routing.json lists the flips")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        import reference_self_test  # the tests and their fixtures, kept out of the CLI
        return reference_self_test.self_test()
    if not (args.model and args.requests and args.out_dir):
        ap.error("--model, --requests and --out-dir are required (or --self-test)")
    if args.generate < 0:
        ap.error("--generate must be >= 0")
    try:
        run(args)
    except (SafetensorsError, ref.ConfigError) as e:
        print("error: %s" % e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
