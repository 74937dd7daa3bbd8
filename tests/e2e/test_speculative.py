"""MTP speculative decoding (`generate --speculative mtp`, issue 13 item 3):

  - greedy: token-for-token (and logprob-for-logprob) identical to plain
    decoding, on 1-4 ranks in pipeline and expert mode, with other slot counts;
  - sampled: the same tokens on every layout and slot count as on one rank
    (the random numbers are keyed by request seed, position and purpose), and
    the same distribution as plain sampling: a two-sample chi-square over many
    seeds of the tokens after the first (every one of them went through a draft);
  - --metrics reports drafts and acceptance; on a trained model drafts are
    accepted, on random weights they are mostly rejected (both paths run);
  - a bad --speculative value, or a model without an MTP layer, is an input error.

Models: the synthetic `small` FP8 preset (4 layers, MTP layer, random weights)
and, unless --no-trained, the bundled trained model (models/kjv, converted
once into work/; no torch needed)."""
import json
import os

from scipy.stats import chi2_contingency

from harness import Failures, arg_parser, converted, fresh_case, parse_args, read_jsonl, run, bundled_trained, write_jsonl

ap = arg_parser(mpiexec=True)
ap.add_argument("--preset", default="small")
ap.add_argument("--format", default="fp8")
ap.add_argument("--layouts", default="2:pipeline,3:pipeline,4:pipeline,2:expert,3:expert,4:expert")
ap.add_argument("--no-trained", action="store_true", help="skip the bundled trained model (models/kjv)")
ap.add_argument("--draws", type=int, default=400, help="seeds of the distribution check")
args = parse_args(parser=ap)
f = Failures()
case = fresh_case(args.work, "speculative")
mpi = [args.mpiexec, "--oversubscribe"]


def generate(model, name, reqs, ranks=1, mode="pipeline", spec=True, extra=()):
    prompts, out = os.path.join(case, name + ".in.jsonl"), os.path.join(case, name + ".jsonl")
    write_jsonl(prompts, reqs)
    metrics = os.path.join(case, name + ".metrics.json")
    cmd = [args.trillion, "generate", "--model", model, "--prompts", prompts, "--output", out, "--threads", 1,
           "--parallel", mode, "--metrics", metrics, *(["--speculative", "mtp"] if spec else []), *extra]
    run([*mpi, "-n", ranks, *cmd] if ranks > 1 else cmd, timeout=600)
    return {r["id"]: r for r in read_jsonl(out)}, json.load(open(metrics))


def requests(vocab, lengths):
    import numpy as np
    rng = np.random.default_rng(11)
    reqs = [{"id": f"g{i}", "prompt_token_ids": [int(t) for t in rng.integers(2, vocab, n)], "max_tokens": m}
            for i, (n, m) in enumerate(lengths)]
    sampled = [{"temperature": 1.0, "seed": 1, "logprobs": 2},
               {"temperature": 0.7, "top_k": 5, "seed": 2},
               {"temperature": 1.2, "top_p": 0.9, "min_p": 0.05}]  # seed from the id
    reqs += [{"id": f"t{i}", "prompt_token_ids": reqs[i]["prompt_token_ids"], "max_tokens": 14, **p}
             for i, p in enumerate(sampled)]
    reqs.append({"id": "lp", "prompt_token_ids": reqs[0]["prompt_token_ids"], "max_tokens": 10, "logprobs": 3})
    return reqs


def check_model(label, model, vocab, layouts, lengths):
    reqs = requests(vocab, lengths)
    plain, _ = generate(model, f"{label}-plain", reqs, spec=False, extra=["--max-batch", 4])
    spec1, m1 = generate(model, f"{label}-spec-1", reqs, extra=["--max-batch", 4])
    greedy = [r["id"] for r in reqs if "temperature" not in r]
    for i in greedy:
        f.check(spec1[i]["token_ids"] == plain[i]["token_ids"], f"{label} {i}: speculative greedy == plain greedy")
    f.check(spec1["lp"]["logprobs"] == plain["lp"]["logprobs"] and
            spec1["lp"]["top_logprobs"] == plain["lp"]["top_logprobs"],
            f"{label}: speculative greedy logprobs and alternatives == plain ones")
    s = m1.get("speculative", {})
    f.check(s.get("drafted", 0) > 0 and 0 <= s.get("accepted", -1) <= s["drafted"] and
            abs(s["acceptance_rate"] - s["accepted"] / s["drafted"]) < 1e-12,
            f"{label}: --metrics speculative {s}")
    f.check(all(len(spec1[r["id"]]["token_ids"]) == r["max_tokens"] or spec1[r["id"]]["finish_reason"] == "stop"
                for r in reqs), f"{label}: every request ran to max_tokens or a stop")
    # The warm-up step (on by default) fills and releases a slot before the
    # run, MTP layer's cache included: without it every token, draft and
    # acceptance is the same.
    cold, mc = generate(model, f"{label}-spec-1-no-warmup", reqs, extra=["--max-batch", 4, "--no-warmup"])
    f.check(all(cold[r["id"]]["token_ids"] == spec1[r["id"]]["token_ids"] for r in reqs) and
            mc["speculative"]["drafted"] == s["drafted"] and mc["speculative"]["accepted"] == s["accepted"],
            f"{label}: speculative with and without the warm-up step: the same tokens, drafts and acceptances")
    # Expert mode also with its rows in two groups (--micro-batches 2).
    runs = [(ranks, mode, []) for ranks, mode in layouts]
    runs += [(ranks, mode, ["--micro-batches", 2]) for ranks, mode in layouts[:] if mode == "expert"][:1]
    for ranks, mode, more in runs:
        got, m = generate(model, f"{label}-spec-{ranks}-{mode}{'-groups' if more else ''}", reqs, ranks, mode,
                          extra=["--max-batch", 6 if ranks % 2 else 3, *more])
        mode = mode + (" in groups" if more else "")
        for i in greedy:
            f.check(got[i]["token_ids"] == plain[i]["token_ids"], f"{label} {ranks} {mode} {i}: greedy == plain")
        for r in reqs:
            if "temperature" in r:
                f.check(got[r["id"]]["token_ids"] == spec1[r["id"]]["token_ids"],
                        f"{label} {ranks} {mode} {r['id']}: sampled == one rank's speculative")
        f.check(m["speculative"]["drafted"] == s["drafted"] and m["speculative"]["accepted"] == s["accepted"],
                f"{label} {ranks} {mode}: the same drafts and acceptances as one rank")
    return s


layouts = [(int(r), m) for r, m in (x.split(":") for x in args.layouts.split(","))]
hf, synth = converted(args.trillion, args.work, args.preset, args.format)
vocab = json.load(open(os.path.join(synth, "config.json")))["vocab_size"]
s = check_model(args.preset, synth, vocab, layouts, [(5, 12), (40, 9), (1, 16), (17, 3), (9, 20)])
print(f"{args.preset} (random weights): {s['accepted']} of {s['drafted']} drafts accepted")

if not args.no_trained:
    _, kjv = bundled_trained(args.trillion, args.work)
    # models/kjv: 4 layers, 16 experts, vocabulary 4096.
    s = check_model("kjv", kjv, 4096, [(2, "pipeline"), (4, "pipeline"), (2, "expert"), (4, "expert")],
                    [(8, 30), (20, 24), (3, 30)])
    f.check(s["accepted"] > 0, f"kjv (trained): some drafts accepted ({s['accepted']} of {s['drafted']})")
    print(f"kjv (trained): {s['accepted']} of {s['drafted']} drafts accepted")

# The distribution: one prompt, many seeds, plain vs speculative. Token 2 of
# every request is a verified draft (accepted, or resampled from the residual);
# token 3 one too, or the target's own draw after an accepted draft.
prompt = requests(vocab, [(6, 1), (6, 1), (6, 1)])[0]["prompt_token_ids"]
draws = [{"id": f"d{i}", "prompt_token_ids": prompt, "max_tokens": 3, "temperature": 1.0, "top_k": 6, "seed": i}
         for i in range(args.draws)]
plain, _ = generate(synth, "dist-plain", draws, spec=False, extra=["--max-batch", 16])
spec, m = generate(synth, "dist-spec", draws, extra=["--max-batch", 16])
f.check(m["speculative"]["drafted"] >= args.draws, "every request verified drafts")
f.check(any(plain[d["id"]]["token_ids"] != spec[d["id"]]["token_ids"] for d in draws),
        "speculative sampling draws its own numbers (not plain sampling's realization)")
f.check(all(plain[d["id"]]["token_ids"][0] == spec[d["id"]]["token_ids"][0] for d in draws),
        "the first token (no draft yet) is plain sampling's")
for k in (1, 2):
    keys = sorted({r["token_ids"][k] for r in list(plain.values()) + list(spec.values())})
    table = [[sum(1 for r in side.values() if r["token_ids"][k] == t) for t in keys] for side in (plain, spec)]
    # Pool tokens seen fewer than 5 times on both sides (chi-square's rule of thumb).
    rare = [j for j in range(len(keys)) if table[0][j] + table[1][j] < 10]
    table = [[row[j] for j in range(len(keys)) if j not in rare] + [sum(row[j] for j in rare)] for row in table]
    table = [[c for c, keep in zip(row, [a + b > 0 for a, b in zip(*table)]) if keep] for row in table]
    _, pvalue, dof, _ = chi2_contingency(table)
    print(f"token {k + 1}: chi-square two-sample test over {dof + 1} categories: p = {pvalue:.3f}")
    f.check(pvalue > 0.001, f"token {k + 1}: speculative and plain sampling agree in distribution (p = {pvalue:.4f})")

# Input errors, before anything is loaded.
reqs = os.path.join(case, "errors.jsonl")
write_jsonl(reqs, [{"id": "a", "prompt_token_ids": [3, 4], "max_tokens": 2}])
out = os.path.join(case, "errors.out.jsonl")
f.expect_error([args.trillion, "generate", "--model", synth, "--prompts", reqs, "--output", out,
                "--speculative", "eagle"], ["--speculative must be mtp", "eagle"], "bad --speculative")
_, nomtp = converted(args.trillion, args.work, "tiny-kimi", "bf16")
f.expect_error([args.trillion, "generate", "--model", nomtp, "--prompts", reqs, "--output", out,
                "--speculative", "mtp"], ["has no MTP layer", "num_nextn_predict_layers is 0"], "model without MTP")
f.finish()
