"""Layout independence: the same requests give bit-identical logits and
identical tokens on 1, 2, 3 and 4 ranks, in pipeline and expert mode, and
whatever else shares the batch.

Runs `trillion score --logits-out` and `trillion generate` under mpiexec for
every (ranks, mode) in --layouts and compares everything with the one-rank run."""
import filecmp
import json
import os

import numpy as np

from harness import Failures, arg_parser, converted, fresh_case, parse_args, read_jsonl, run, vocab_size, write_jsonl

ap = arg_parser(mpiexec=True)
ap.add_argument("--preset", default="tiny")
ap.add_argument("--format", default="fp8")
ap.add_argument("--layouts", default="2:pipeline,3:pipeline,4:pipeline,2:expert,3:expert,4:expert")
ap.add_argument("--mpi-args", default="", help="extra mpiexec arguments, e.g. the TCP transport")
ap.add_argument("--name", default="layouts")
ap.add_argument("--expect-btl", help="the transport the metrics must name, e.g. self,tb5")
ap.add_argument("--expect-hosts", type=int, help="distinct hosts the ranks of a multi-rank run must span")
ap.add_argument("--activations", help="the compute path of every run, baseline included (f32, int8 or bf16; default: "
                "generate's auto)")
ap.add_argument("--expect-faults", choices=["injected", "sim"],
                help="the multi-rank runs' tb5 counters (metrics per_rank.transport) must show these faults: btl/tb5's "
                     "injected ones or the verbs simulator's, and retransmissions (a misspelled option injects none)")
args = parse_args(parser=ap)

f = Failures()
hf, model = converted(args.trillion, args.work, args.preset, args.format)
case = fresh_case(args.work, f"{args.name}-{args.preset}-{args.format}")
vocab = vocab_size(model)
rng = np.random.default_rng(7)
score_reqs = [{"id": f"s{i}", "token_ids": [int(t) for t in rng.integers(0, vocab, n)]}
              for i, n in enumerate([3, 29, 11, 64])]
gen_reqs = [{"id": f"g{i}", "prompt_token_ids": [int(t) for t in rng.integers(0, vocab, n)], "max_tokens": m}
            for i, (n, m) in enumerate([(5, 12), (40, 9), (1, 16), (17, 3), (9, 20), (3, 7)])]
# Sampled requests: the random stream depends on (seed, position) only, so these
# too must match bit for bit across layouts, slot counts and batch company.
sampling = [{"temperature": 1.0, "seed": 1},
            {"temperature": 0.7, "top_k": 5, "seed": 2, "logprobs": 3},
            {"temperature": 1.3, "top_p": 0.8, "seed": 3, "logprobs": True},
            {"temperature": 0.9, "min_p": 0.2, "top_k": 40, "top_p": 0.95},  # seed from the id
            {"temperature": 0.0, "logprobs": 2}]
gen_reqs += [{"id": f"t{i}", "prompt_token_ids": gen_reqs[0]["prompt_token_ids"], "max_tokens": 12, **p}
             for i, p in enumerate(sampling)]
write_jsonl(os.path.join(case, "score.jsonl"), score_reqs)
write_jsonl(os.path.join(case, "gen.jsonl"), gen_reqs)
mpi = [args.mpiexec, "--oversubscribe", *args.mpi_args.split()]


def trillion_run(tag, ranks, mode, extra=(), gen_extra=()):
    out = os.path.join(case, tag)
    os.makedirs(out, exist_ok=True)
    launch = [*mpi, "-n", ranks, args.trillion]
    common = ["--model", model, "--parallel", mode, "--threads", 1, *extra]
    if args.activations:
        common += ["--activations", args.activations]
    run([*launch, "score", *common, "--input", os.path.join(case, "score.jsonl"),
         "--output", os.path.join(out, "score.jsonl"), "--logits-out", os.path.join(out, "logits"),
         "--step-tokens", 16, "--metrics", os.path.join(out, "score-metrics.json")], timeout=600)
    run([*launch, "generate", *common, "--prompts", os.path.join(case, "gen.jsonl"),
         "--output", os.path.join(out, "gen.jsonl"), "--step-tokens", 8,
         "--metrics", os.path.join(out, "gen-metrics.json"), *gen_extra], timeout=600)
    return out


def by_id(path):
    return {r["id"]: r for r in read_jsonl(path)}


# The baseline skips generate's warm-up step, every other run has it (one
# slot per KV pool: one in pipeline mode, one per rank in expert mode): its
# throwaway rows must change no request's bits.
base = trillion_run("1-base", 1, "pipeline", ["--max-batch", 4], ["--no-warmup"])
base_gen = by_id(os.path.join(base, "gen.jsonl"))
base_score = by_id(os.path.join(base, "score.jsonl"))
f.check(len(base_gen) == len(gen_reqs) and len(base_score) == len(score_reqs), "baseline produced every result")
# Sampling really samples: same prompt as g0, other tokens; greedy with logprobs is g0.
f.check(base_gen["t0"]["token_ids"] != base_gen["g0"]["token_ids"], "t0 (temperature 1) differs from greedy g0")
f.check(base_gen["t4"]["token_ids"][:len(base_gen["g0"]["token_ids"])] == base_gen["g0"]["token_ids"],
        "temperature 0 is greedy")
f.check(len(base_gen["t1"]["logprobs"]) == len(base_gen["t1"]["token_ids"]) and
        all(len(a) == 3 for a in base_gen["t1"]["top_logprobs"]), "t1 logprobs with 3 alternatives")
f.check("logprobs" in base_gen["t2"] and "top_logprobs" not in base_gen["t2"], "t2 logprobs only")

runs = [(int(r), m) for r, m in (x.split(":") for x in args.layouts.split(","))]
counters = {}  # tb5's counters summed over every rank of every multi-rank run
for ranks, mode in runs:
    tag = f"{ranks}-{mode}"
    # A different slot count too: which sequences share a step must not matter.
    # Three pipeline stages split by predicted time (--stages auto) rather than bytes.
    auto = ["--stages", "auto"] if (ranks, mode) == (3, "pipeline") else []
    # Two stages with lm_head's rows split between them (--head-split), at a
    # row count no kernel tile or FP8 block divides (--stages auto may choose
    # a split too).
    auto += ["--head-split", vocab // 3 + 5] if (ranks, mode) == (2, "pipeline") else []
    # Three expert ranks with each rank's rows in two groups (--micro-batches 2).
    auto += ["--micro-batches", 2] if (ranks, mode) == (3, "expert") else []
    out = trillion_run(tag, ranks, mode, ["--max-batch", 6 if ranks % 2 else 3, *auto])
    for r in score_reqs:
        a = os.path.join(base, "logits", r["id"] + ".npy")
        b = os.path.join(out, "logits", r["id"] + ".npy")
        f.check(os.path.exists(b) and filecmp.cmp(a, b, shallow=False), f"{tag}: logits of {r['id']} differ")
    got = by_id(os.path.join(out, "score.jsonl"))
    for rid, want in base_score.items():
        f.check(got.get(rid, {}).get("token_logprobs") == want["token_logprobs"], f"{tag}: logprobs of {rid}")
    got = by_id(os.path.join(out, "gen.jsonl"))
    for rid, want in base_gen.items():
        g = got.get(rid, {})
        f.check(g.get("token_ids") == want["token_ids"] and g.get("finish_reason") == want["finish_reason"],
                f"{tag}: generation of {rid}: {g.get('token_ids')} vs {want['token_ids']}")
        f.check(g.get("logprobs") == want.get("logprobs") and g.get("top_logprobs") == want.get("top_logprobs"),
                f"{tag}: logprobs of {rid}")
    m = json.load(open(os.path.join(out, "gen-metrics.json")))
    f.check(m.get("ranks") == ranks and len(m.get("per_rank", [])) == ranks, f"{tag}: metrics per rank")
    f.check(m.get("parallel") == mode, f"{tag}: metrics mode")
    # Expert mode names its row groups (default 2; the 3-rank run asks for 2 too).
    f.check(m.get("row_groups") == (2 if mode == "expert" else None), f"{tag}: row_groups {m.get('row_groups')}")
    if ranks > 1:
        f.check(all(p["bytes_sent"] > 0 for p in m["per_rank"]), f"{tag}: every rank sent bytes")
        if args.expect_btl:
            f.check(m.get("transport", {}).get("btl") == args.expect_btl, f"{tag}: transport {m.get('transport')}")
        if args.expect_faults:
            for metrics in (m, json.load(open(os.path.join(out, "score-metrics.json")))):
                for p in metrics["per_rank"]:
                    f.check("btl_tb5_retransmissions" in p.get("transport", {}),
                            f"{tag}: rank {p['rank']} reports no tb5 counters: {p.get('transport')}")
                    for k, v in p.get("transport", {}).items():
                        counters[k] = counters.get(k, 0) + v
        if args.expect_hosts:
            hosts = {p["host"] for p in m["per_rank"]}
            f.check(len(hosts) == args.expect_hosts, f"{tag}: ranks on {sorted(hosts)}")

if args.expect_faults:
    kinds = ["lost", "duplicated", "reordered"]
    need = [f"btl_tb5_{'injected' if args.expect_faults == 'injected' else 'sim'}_{k}" for k in kinds]
    print(f"{args.name}: tb5 counters over every multi-rank run: {counters}")
    for k in need + ["btl_tb5_retransmissions"]:
        f.check(counters.get(k, 0) > 0, f"no {k} in any run: the faults asked for did not happen")

# Batch composition: each request alone on one slot gives the same tokens.
for r in gen_reqs[:3] + gen_reqs[-4:-2]:
    alone = os.path.join(case, "alone-" + r["id"] + ".jsonl")
    write_jsonl(alone, [r])
    run([args.trillion, "generate", "--model", model, "--prompts", alone, "--output", alone + ".out",
         "--max-batch", 1, "--threads", 2, *(["--activations", args.activations] if args.activations else [])])
    g = read_jsonl(alone + ".out")[0]
    f.check(g["token_ids"] == base_gen[r["id"]]["token_ids"], f"{r['id']} alone vs batched")
f.finish()
