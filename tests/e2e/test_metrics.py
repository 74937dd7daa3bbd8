"""--metrics FILE.json during and after a run: with a short --metrics-interval,
rank 0 rewrites the file atomically while generating ("final": false, running
totals, rank 0's own per-rank entry); at the end it holds the complete
per-rank figures ("final": true) in the trillion-metrics/1 schema. Every read
of the file, at any moment, parses (temp file + rename: never torn)."""
import json
import os
import subprocess
import time

from harness import Failures, converted, fresh_case, parse_args, vocab_size, write_jsonl

args = parse_args(mpiexec=True)
f = Failures()
work = args.work
T = args.trillion
hf, model = converted(T, work, "tiny", "bf16")
case = fresh_case(work, "metrics")
vocab = vocab_size(model)
N = 120
reqs = [{"id": f"r{i}", "prompt_token_ids": [(i * 13 + j) % vocab for j in range(4 + i % 5)], "max_tokens": 32}
        for i in range(N)]
prompts = os.path.join(case, "prompts.jsonl")
write_jsonl(prompts, reqs)

FINAL_KEYS = ["command", "requests", "steps", "tokens", "seconds", "tokens_per_second", "schema", "ranks",
              "parallel", "threads_per_rank", "max_batch", "step_tokens", "micro_batches", "wall_seconds", "per_rank"]
RANK_KEYS = ["rank", "host", "role", "busy_seconds", "wait_seconds", "bytes_sent", "messages_sent", "bytes_received",
             "messages_received", "weight_bytes", "kv_cache_bytes", "peak_rss_bytes"]

for ranks in (1, 2):
    tag = f"{ranks} rank(s)"
    metrics = os.path.join(case, f"metrics-{ranks}.json")
    cmd = [T, "generate", "--model", model, "--prompts", prompts, "--output", os.path.join(case, f"out-{ranks}.jsonl"),
           "--restart", "--max-batch", "4", "--threads", "1", "--metrics", metrics, "--metrics-interval", "0.05"]
    if ranks > 1:
        cmd = [args.mpiexec, "--oversubscribe", "-np", str(ranks)] + cmd
    print("+", " ".join(cmd), flush=True)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    running, torn = [], 0
    while p.poll() is None:
        if os.path.exists(metrics):
            try:
                m = json.load(open(metrics))
                if m.get("final") is False:
                    running.append(m)
            except (ValueError, OSError):
                torn += 1
        time.sleep(0.01)
    out, err = p.communicate()
    f.check(p.returncode == 0, f"{tag}: generate succeeded: {err[-2000:]}")
    f.check(torn == 0, f"{tag}: every read of the metrics file parsed ({torn} did not)")
    f.check(not os.path.exists(metrics + ".tmp"), f"{tag}: no temp file left")
    final = json.load(open(metrics))
    f.check(final.get("final") is True, f"{tag}: the last write is final")
    f.check(all(k in final for k in FINAL_KEYS), f"{tag}: final keys {sorted(final)}")
    f.check(final.get("schema") == "trillion-metrics/1", f"{tag}: schema")
    f.check(len(final.get("per_rank", [])) == ranks and all(all(k in r for k in RANK_KEYS) for r in final["per_rank"]),
            f"{tag}: per_rank complete")
    generated = sum(len(r["token_ids"]) for r in map(json.loads, open(os.path.join(case, f"out-{ranks}.jsonl"))))
    f.check(final["requests"].get("done") == N and final["tokens"].get("generated") == generated,
            f"{tag}: final totals {final['requests']} {final['tokens']}")
    print(f"{tag}: {len(running)} running snapshots seen", flush=True)
    f.check(len(running) > 0, f"{tag}: at least one running update was seen mid-run")
    prev = -1
    for m in running:
        f.check(m.get("schema") == "trillion-metrics/1" and len(m.get("per_rank", [])) == 1
                and m["per_rank"][0].get("rank") == 0, f"{tag}: running update holds rank 0's figures")
        done = m["requests"]["done"]
        f.check(0 <= done <= N and done >= prev, f"{tag}: running done count {done} (previous {prev})")
        f.check(m["tokens_per_second"]["generated"] >= 0 and m["seconds"]["generation"] > 0, f"{tag}: running rates")
        prev = done
# score: the same running updates, the final file unchanged in schema.
score_in = os.path.join(case, "score.jsonl")
write_jsonl(score_in, [{"id": f"s{i}", "token_ids": [(i + j) % vocab for j in range(40)]} for i in range(60)])
metrics = os.path.join(case, "score-metrics.json")
cmd = [T, "score", "--model", model, "--input", score_in, "--output", os.path.join(case, "score-out.jsonl"),
       "--restart", "--threads", "1", "--metrics", metrics, "--metrics-interval", "0.02"]
print("+", " ".join(cmd), flush=True)
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
running = 0
while p.poll() is None:
    try:
        m = json.load(open(metrics))
        running += m.get("final") is False and m["requests"]["done"] <= 60
    except (ValueError, OSError):
        pass
    time.sleep(0.005)
out, err = p.communicate()
f.check(p.returncode == 0, f"score succeeded: {err[-2000:]}")
final = json.load(open(metrics))
f.check(final.get("final") is True and final.get("command") == "score" and final["requests"].get("done") == 60
        and len(final.get("per_rank", [])) == 1, f"score: final metrics {final.get('requests')}")
print(f"score: {running} running snapshots seen", flush=True)
f.finish()
