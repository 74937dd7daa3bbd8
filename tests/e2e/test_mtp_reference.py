"""The engine's MTP layer against the float64 numpy reference
(tests/reference/deepseek_ref.py Model.mtp_forward), for synthetic presets and
formats and the bundled trained model models/kjv (trained: its drafts are mostly
accepted, so both verification outcomes feed the MTP layer's cache).

`generate --speculative mtp` (greedy) with TRILLION_DUMP set writes, for every
step, the MTP layer's hidden states after shared_head.norm for the rows that
stood (the prompt's in the prefill, then each produced token's: the MTP layer
fills its own KV cache at each) and the draft logits of each step's last row.
Over the whole run the rows are the sequence's positions 0..K-1 in order,
each once, and must be within 1e-4 of the reference's scale (max |reference|),
the project's bar for logits; so must the draft logits, whose argmax is then the
reference's where its top-2 gap is clear."""
import json
import os
import sys

import numpy as np

from harness import (REFERENCE, Failures, arg_parser, converted, fresh_case, parse_args, read_jsonl, run,
                     bundled_trained, write_jsonl)

ap = arg_parser()
ap.add_argument("--cases", default="tiny:fp8,small:fp8,tiny-noqlora:bf16")
ap.add_argument("--no-trained", action="store_true", help="skip the bundled trained model (models/kjv)")
ap.add_argument("--tokens", type=int, default=8, help="tokens generated per prompt")
args = parse_args(parser=ap)
sys.path.insert(0, os.path.dirname(REFERENCE))
import deepseek_ref  # noqa: E402
import logit_rows  # noqa: E402

f = Failures()
models = [(c, *converted(args.trillion, args.work, *c.split(":"))) for c in args.cases.split(",")]
if not args.no_trained:
    models.append(("kjv", *bundled_trained(args.trillion, args.work)))
for name, hf, model in models:
    case = fresh_case(args.work, "mtp-reference-" + name.replace(":", "-"))
    cfg = json.load(open(os.path.join(hf, "config.json")))
    vocab, L = cfg["vocab_size"], cfg["num_hidden_layers"]
    rng = np.random.default_rng(5)
    prompts = [[int(t) for t in rng.integers(2, vocab, n)] for n in (1, 7, 23)]
    ref = deepseek_ref.load_model(hf)
    for i, ids in enumerate(prompts):
        dump = os.path.join(case, f"dump-{i}")
        reqs, out = os.path.join(case, f"req-{i}.jsonl"), os.path.join(case, f"out-{i}.jsonl")
        write_jsonl(reqs, [{"id": f"p{i}", "prompt_token_ids": ids, "max_tokens": args.tokens}])
        # --no-warmup: the dump must hold the request's steps only (a warm-up step is dumped too).
        # --activations f32: the exact path the float64 reference checks (auto takes int8 for an FP8 model that fits).
        run([args.trillion, "generate", "--model", model, "--prompts", reqs, "--output", out, "--threads", 1,
             "--speculative", "mtp", "--no-warmup", "--activations", "f32"], env={**os.environ, "TRILLION_DUMP": dump})
        seq = ids + read_jsonl(out)[0]["token_ids"]
        steps = sorted(d for d in os.listdir(dump) if os.path.exists(os.path.join(dump, d, f"layer-{L:03d}.mtp_out.npy")))
        hidden = [np.load(os.path.join(dump, s, f"layer-{L:03d}.mtp_out.npy")) for s in steps]
        logits = [np.load(os.path.join(dump, s, f"layer-{L:03d}.mtp_logits.npy")) for s in steps]
        K = sum(len(h) for h in hidden)
        what = f"{name} prompt of {len(ids)}"
        f.check(len(ids) <= K < len(seq), f"{what}: MTP rows {K} cover the prompt and the run positions")
        want_h, want_logits = ref.mtp_forward(seq[:K], seq[K])
        got = np.concatenate(hidden)
        err_h = float(np.max(np.abs(got - want_h)) / np.max(np.abs(want_h)))
        f.check(err_h <= 1e-4, f"{what}: MTP hidden states of {K} rows in {len(steps)} steps within 1e-4 "
                               f"(max rel {err_h:.2e})")
        end, worst = 0, 0.0
        for h, lg in zip(hidden, logits):
            end += len(h)
            problem, err = logit_rows.row_problem(lg[-1], want_logits[end - 1])
            worst = max(worst, err)
            f.check(problem is None and len(lg) == 1, f"{what}: draft logits at position {end - 1}: {problem or 'ok'}")
        print(f"{what}: {len(steps)} steps, {K} MTP rows: hidden {err_h:.2e}, draft logits {worst:.2e}")
f.finish()
