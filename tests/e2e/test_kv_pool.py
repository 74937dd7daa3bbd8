"""The paged KV cache's pool (--kv-cache-tokens): with a pool far smaller than
--max-batch x --max-len, requests wait for blocks, and every result is
bit-identical to a run with the default pool, on 1 rank and on 2 ranks
(pipeline, expert). A request that cannot fit even in an empty pool gets an
error record naming its line. `trillion plan` and --metrics report the
pool's bytes."""
import json
import os

from harness import read_jsonl, run, start, write_jsonl

args, f, hf, model, case = start("kv-pool", mpiexec=True)
T = args.trillion
cfg = json.load(open(os.path.join(model, "config.json")))
vocab = cfg["vocab_size"]
N = 24
reqs = [{"id": f"r{i}", "prompt_token_ids": [(i * 17 + j * 3) % vocab for j in range(5 + (i * 7) % 60)],
         "max_tokens": 10 + (i * 5) % 40, **({"temperature": 0.7, "seed": i} if i % 4 == 0 else {})} for i in range(N)]
reqs.append({"id": "too-big", "prompt_token_ids": [1] * 100, "max_tokens": 100})  # 200 positions > 192
prompts = os.path.join(case, "prompts.jsonl")
write_jsonl(prompts, reqs)


def generate(name, extra, ranks=1):
    out = os.path.join(case, name + ".jsonl")
    metrics = os.path.join(case, name + "-metrics.json")
    cmd = [T, "generate", "--model", model, "--prompts", prompts, "--output", out, "--restart", "--threads", "1",
           "--max-len", "256", "--step-tokens", "32", "--metrics", metrics] + extra
    if ranks > 1:
        cmd = [args.mpiexec, "--oversubscribe", "-np", str(ranks)] + cmd
    run(cmd, timeout=600)
    return {r["id"]: r for r in read_jsonl(out)}, json.load(open(metrics))


ref, _ = generate("default", ["--max-batch", "8"])
f.check("error" not in ref["too-big"], "default pool (8 x 256 positions): the large request runs")
for name, extra, ranks in (("pool-1", [], 1), ("pool-pipeline", ["--parallel", "pipeline"], 2),
                           ("pool-expert", ["--parallel", "expert"], 2)):
    got, metrics = generate(name, ["--max-batch", "8", "--kv-cache-tokens", "192"] + extra, ranks)
    for r in reqs[:N]:
        a, b = got.get(r["id"], {}), ref[r["id"]]
        f.check(a.get("token_ids") == b["token_ids"] and a.get("finish_reason") == b["finish_reason"],
                f"{name}: {r['id']} equals the default pool's result")
    err = got.get("too-big", {}).get("error") or {}
    f.check(err.get("line") == N + 1 and "--kv-cache-tokens" in err.get("message", ""), f"{name}: too-big: {err}")
    f.check(metrics.get("kv_cache_blocks") == 3 and metrics.get("kv_block_tokens") == 64, f"{name}: metrics pool")
    per_pos = 4 * (cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"])
    for r in metrics.get("per_rank", []):
        layers = cfg["num_hidden_layers"] if ranks == 1 or "expert" in name else None
        if layers:
            f.check(r["kv_cache_bytes"] == per_pos * layers * 192, f"{name}: rank {r['rank']} kv_cache_bytes")
# score: one sequence at a time holds blocks; one longer than the pool is an error record.
score_in = os.path.join(case, "score.jsonl")
write_jsonl(score_in, [{"id": f"s{i}", "token_ids": [(i * 11 + j) % vocab for j in range(20 + 30 * i)]} for i in range(3)]
            + [{"id": "s-long", "token_ids": [3] * 100}])
scores = {}
for name, extra in (("default", []), ("pool", ["--kv-cache-tokens", "64", "--max-batch", "4"])):
    out = os.path.join(case, f"score-{name}.jsonl")
    run([T, "score", "--model", model, "--input", score_in, "--output", out, "--restart", "--threads", "1",
         "--step-tokens", "16"] + extra)
    scores[name] = {r["id"]: r for r in read_jsonl(out)}
for i in range(2):  # 20 and 50 tokens fit in 64 positions
    f.check(scores["pool"][f"s{i}"].get("token_logprobs") == scores["default"][f"s{i}"]["token_logprobs"],
            f"score s{i}: the small pool gives the same logprobs")
for sid in ("s2", "s-long"):  # 80 and 100 tokens do not
    err = scores["pool"][sid].get("error") or {}
    f.check("--kv-cache-tokens" in err.get("message", ""), f"score {sid} longer than the pool: {err}")
plan = json.loads(run([T, "plan", "--model", model, "--ranks", "2", "--kv-cache-tokens", "192", "--json"]).stdout)
f.check(sum(r["kv_cache_bytes"] for r in plan["per_rank"]) == 4 * (cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"])
        * cfg["num_hidden_layers"] * 192, f"plan: pipeline kv bytes over the stages {plan['per_rank']}")
f.finish()
