"""Shared prefixes (scheduler/prefix_cache.hpp): score and generate give
bit-identical results with sharing on and with --no-prefix-sharing, on every
synthetic preset and the bundled model, on 1 rank and on 2-4 ranks
(pipeline and expert), with a KV pool small enough that kept blocks are
evicted. The requests share contexts of several lengths (a block and a bit,
exactly two blocks, a long few-shot-like prefix), repeat one exactly, and
run with --step-tokens 48 so blocks complete across chunks. --metrics counts
the positions computed and read: they add up to the requests' positions and
the reuse is the one the token-granular rule predicts (computed here
independently from the requests, as longest common prefixes). Every run ends with the engine's own
check that every KV block returned to the pool (a leak fails the job)."""
import json
import os
import random

from harness import Failures, arg_parser, bundled_trained, converted, fresh_case, parse_args, read_jsonl, run, \
    write_jsonl

ap = arg_parser(mpiexec=True)
ap.add_argument("--presets", default="tiny:bf16,tiny-kimi:int4,tiny-noqlora:fp8,small:fp8")
ap.add_argument("--no-trained", action="store_true", help="skip the bundled trained model (models/kjv)")
args = parse_args(parser=ap)
f = Failures()
case = fresh_case(args.work, "prefix-sharing")
B = 64  # positions per KV block (KvPools::kBlockTokens)


def requests(vocab, seed):
    """Score and generate requests with shared contexts, in an order where the
    sharers come after the context's first request."""
    rnd = random.Random(seed)
    toks = lambda n: [rnd.randrange(vocab) for _ in range(n)]  # noqa: E731
    contexts = [toks(70), toks(128), toks(200), toks(20)]
    seqs = []
    for c in contexts:
        for _ in range(3):
            seqs.append(c + toks(rnd.randrange(1, 30)))
    seqs.append(contexts[1][:128])  # exactly two blocks: shares one (a row must remain to compute)
    seqs.append(list(seqs[0]))      # an exact repeat
    seqs.append(contexts[2][:130] + toks(5))  # a branch inside a shared context
    score = [{"id": f"s{i}", "token_ids": s} for i, s in enumerate(seqs)]
    gen = [{"id": f"g{i}", "prompt_token_ids": s, "max_tokens": 6,
            **({"temperature": 0.8, "seed": i} if i % 3 == 0 else {})} for i, s in enumerate(seqs)]
    return seqs, score, gen


def expected_reuse(seqs):
    """Score's reuse: one sequence at a time, each keeping all its blocks
    (the partial last one too), so a sequence reads its longest common
    prefix with any earlier sequence, less the last matched position, which
    it computes again for that position's log-prob of its own next token (no
    eviction: the default pool holds everything here)."""
    total = 0
    for i, s in enumerate(seqs):
        m = 0
        for e in seqs[:i]:
            n = 0
            while n < min(len(s), len(e)) and s[n] == e[n]:
                n += 1
            m = max(m, n)
        total += max(0, m - 1)
    return total


def job(model, cmd, reqs, name, ranks, mode, extra):
    inp = os.path.join(case, f"{name}-in.jsonl")
    out = os.path.join(case, f"{name}.jsonl")
    metrics = os.path.join(case, f"{name}-metrics.json")
    write_jsonl(inp, reqs)
    argv = [args.trillion, cmd, "--model", model, "--prompts" if cmd == "generate" else "--input", inp,
            "--output", out, "--restart", "--threads", "1", "--step-tokens", "48", "--metrics", metrics,
            "--metrics-interval", "0", *extra]
    if ranks > 1:
        argv = [args.mpiexec, "--oversubscribe", "--bind-to", "none", "-np", str(ranks), *argv, "--parallel", mode]
    run(argv, timeout=600)
    res = {r["id"]: r for r in read_jsonl(out)}
    for r in res.values():
        r.pop("created", None)
    return res, json.load(open(metrics))["tokens"]


def check_model(label, model, vocab, layouts, seed):
    seqs, score, gen = requests(vocab, seed)
    positions = sum(len(s) for s in seqs)
    ref_s, tok = job(model, "score", score, f"{label}-score-off", 1, "", ["--no-prefix-sharing"])
    f.check(tok["prefill_reused"] == 0 and tok["prefill"] == positions, f"{label}: off computes everything {tok}")
    ref_g, _ = job(model, "generate", gen, f"{label}-gen-off", 1, "", ["--no-prefix-sharing"])
    f.check(all("error" not in r for r in list(ref_s.values()) + list(ref_g.values())), f"{label}: no errors")
    want = expected_reuse(seqs)
    for ranks, mode in layouts:
        tag = f"{label} {ranks} {mode or 'rank'}"
        got, tok = job(model, "score", score, f"{label}-score-{ranks}{mode}", ranks, mode, [])
        f.check(got == ref_s, f"{tag} score: identical to --no-prefix-sharing on one rank")
        f.check(tok["prefill"] + tok["prefill_reused"] == positions and tok["prefill_reused"] == want,
                f"{tag} score: {tok['prefill_reused']} positions reused (predicted {want}), "
                f"{tok['prefill']} computed of {positions}")
        # Pools of 6 blocks (per rank): kept blocks must be evicted to admit the next sequences.
        got, tok = job(model, "score", score, f"{label}-score-small-{ranks}{mode}", ranks, mode,
                       ["--kv-cache-tokens", str(6 * B), "--max-batch", str(max(ranks, 2))])
        f.check(got == ref_s, f"{tag} score, 6-block pool: identical (eviction)")
        # Pools of 4 blocks, as large as the longest sequence: a request cannot
        # pin what it would read and still fit; it computes in full instead.
        got, _ = job(model, "score", score, f"{label}-score-tight-{ranks}{mode}", ranks, mode,
                     ["--kv-cache-tokens", str(4 * B), "--max-batch", str(max(ranks, 2))])
        f.check(got == ref_s, f"{tag} score, 4-block pool: identical")
        got, _ = job(model, "generate", gen, f"{label}-gen-tight-{ranks}{mode}", ranks, mode,
                     ["--kv-cache-tokens", str(4 * B), "--max-batch", "4"])
        f.check(got == ref_g, f"{tag} generate, 4-block pool: identical")
        got, tok = job(model, "generate", gen, f"{label}-gen-{ranks}{mode}", ranks, mode, ["--max-batch", "4"])
        f.check(got == ref_g, f"{tag} generate: identical to --no-prefix-sharing on one rank")
        f.check(tok["prefill_reused"] > 0, f"{tag} generate: prompt positions reused ({tok['prefill_reused']})")
        got, _ = job(model, "generate", gen, f"{label}-gen-small-{ranks}{mode}", ranks, mode,
                     ["--max-batch", "4", "--kv-cache-tokens", str(8 * B)])
        f.check(got == ref_g, f"{tag} generate, 8-block pools: identical (eviction)")


def check_siblings(label, model, vocab, layouts):
    """Eight generate requests arriving together with a 130-token prefix in
    common and --max-batch 8: all but the first of each pool wait for its
    blocks instead of computing them too, so each reads at least the two
    whole blocks of the prefix; the results equal --no-prefix-sharing's."""
    rnd = random.Random(5)
    prefix = [rnd.randrange(vocab) for _ in range(130)]
    gen = [{"id": f"w{i}", "prompt_token_ids": prefix + [rnd.randrange(vocab) for _ in range(3 + i)], "max_tokens": 4}
           for i in range(8)]
    ref, _ = job(model, "generate", gen, f"{label}-siblings-off", 1, "", ["--max-batch", "8", "--no-prefix-sharing"])
    for ranks, mode in layouts:
        got, tok = job(model, "generate", gen, f"{label}-siblings-{ranks}{mode}", ranks, mode, ["--max-batch", "8"])
        pools = ranks if mode == "expert" else 1
        f.check(got == ref, f"{label} {ranks} {mode or 'rank'} siblings: identical to --no-prefix-sharing")
        f.check(tok["prefill_reused"] >= (8 - pools) * 2 * B,
                f"{label} {ranks} {mode or 'rank'} siblings: {tok['prefill_reused']} positions reused "
                f"(at least {(8 - pools) * 2 * B})")


short = [(1, ""), (2, "pipeline"), (2, "expert")]
full = short + [(3, "pipeline"), (3, "expert"), (4, "expert")]  # 3 expert: 4 slots do not divide
for i, pf in enumerate(args.presets.split(",")):
    preset, fmt = pf.split(":")
    _, model = converted(args.trillion, args.work, preset, fmt)
    vocab = json.load(open(os.path.join(model, "config.json")))["vocab_size"]
    check_model(f"{preset}-{fmt}", model, vocab, full if i == 0 else short, seed=i)
    if i == 0:
        check_siblings(f"{preset}-{fmt}", model, vocab, short)
if not args.no_trained:
    _, kjv = bundled_trained(args.trillion, args.work)
    check_model("kjv", kjv, 4096, full, seed=99)
    check_siblings("kjv", kjv, 4096, short)
f.finish()
