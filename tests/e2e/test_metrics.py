"""--metrics FILE.json during and after a run: with a short --metrics-interval,
rank 0 rewrites the file atomically while generating or scoring ("final":
false, running totals, rank 0's own per-rank entry); at the end it holds the
complete per-rank figures ("final": true) in the trillion-metrics/1 schema.
Every read of the file, at any moment, parses (temp file + rename: never torn),
so a read that does not parse is a failure.

A running snapshot is seen by construction, not by a fast enough reader:
rank 0 stops itself half-way through writing its 3rd result
(TRILLION_FAULT=write:3), after the steps (or requests) before it have
written their snapshots, and the file is read while it is stopped. Every
wait has a deadline that only catches a hang (HANG)."""
import glob
import json
import os
import signal
import subprocess
import time

from harness import start, vocab_size, wait_rank0_stopped, write_jsonl

HANG = 300  # seconds: a deadline that only a hang reaches, never a figure
args, f, hf, model, case = start("metrics", mpiexec=True)
T = args.trillion
vocab = vocab_size(model)
# The interval is 1 ms: a running snapshot is written at the first step (or
# request) of the run, which comes more than 1 ms after the start, and every
# few steps after.
INTERVAL = "0.001"
FAULT = "write:3"
N = 400
reqs = [{"id": f"r{i}", "prompt_token_ids": [(i * 13 + j) % vocab for j in range(4 + i % 5)], "max_tokens": 32}
        for i in range(N)]
prompts = os.path.join(case, "prompts.jsonl")
write_jsonl(prompts, reqs)

GENERATE_KEYS = ["command", "requests", "steps", "tokens", "seconds", "tokens_per_second", "schema", "ranks",
                 "parallel", "threads_per_rank", "max_batch", "step_tokens", "micro_batches", "wall_seconds",
                 "per_rank"]
SCORE_KEYS = [k for k in GENERATE_KEYS if k != "steps"]
RANK_KEYS = ["rank", "host", "role", "busy_seconds", "wait_seconds", "bytes_sent", "messages_sent", "bytes_received",
             "messages_received", "weight_bytes", "kv_cache_bytes", "peak_rss_bytes", "rss_bytes",
             "weights_resident_bytes", "weights_huge_page_bytes"]


def read_metrics(metrics, snapshots, unreadable):
    """One read of the metrics file (once written it is only ever replaced, never missing)."""
    if not os.path.exists(metrics):
        return None
    try:
        with open(metrics) as fp:
            m = json.load(fp)
    except (ValueError, OSError) as e:
        unreadable.append(repr(e))
        return None
    snapshots.append(m)
    return m


def watch(cmd, metrics):
    """Runs cmd with rank 0 stopping at FAULT, reading `metrics` over and over
    meanwhile, and once while rank 0 is stopped (then lets it go on).
    -> (process, stderr, every snapshot read in order, the reads that failed,
    the snapshot read while rank 0 was stopped or None)."""
    print(f"+ TRILLION_FAULT={FAULT}", " ".join(cmd), flush=True)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                         env=dict(os.environ, TRILLION_FAULT=FAULT))
    snapshots, unreadable = [], []
    rank0 = wait_rank0_stopped(p, T, time.time() + HANG)
    paused = read_metrics(metrics, snapshots, unreadable) if rank0 else None
    if rank0:
        os.kill(rank0, signal.SIGCONT)
    deadline = time.time() + HANG
    while p.poll() is None and time.time() < deadline:
        read_metrics(metrics, snapshots, unreadable)
        time.sleep(0.001)
    try:
        _, err = p.communicate(timeout=max(1.0, deadline - time.time()))
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        _, err = p.communicate()
        err += f"\n(hung: killed after {HANG} s)"
    return p, err, snapshots, unreadable, paused


def check_run(tag, cmd, metrics, command, ranks, n_requests, keys):
    """Runs cmd under watch(); checks every snapshot and the final file. -> the final metrics."""
    p, err, snapshots, unreadable, paused = watch(cmd, metrics)
    f.check(p.returncode == 0, f"{tag}: {command} succeeded: {err[-2000:]}")
    f.check(not unreadable, f"{tag}: every read of the metrics file parsed ({len(unreadable)} did not: "
                            f"{unreadable[:3]})")
    running = [m for m in snapshots if m.get("final") is False]
    print(f"{tag}: {len(snapshots)} reads, {len(running)} running snapshots", flush=True)
    f.check(paused is not None and paused.get("final") is False,
            f"{tag}: mid-run (rank 0 stopped at {FAULT}) the file holds a running snapshot (\"final\": false): "
            f"{paused}")
    first_final = next((i for i, m in enumerate(snapshots) if m.get("final") is not False), len(snapshots))
    f.check(all(m.get("final") is True for m in snapshots[first_final:]),
            f"{tag}: after the final write nothing else (\"final\" is true or false, and stays true)")
    prev = -1
    for m in running:
        f.check(m.get("schema") == "trillion-metrics/1" and m.get("command") == command
                and len(m.get("per_rank", [])) == 1 and m["per_rank"][0].get("rank") == 0,
                f"{tag}: a running snapshot holds rank 0's figures: {m}")
        done = m.get("requests", {}).get("done", -1)
        f.check(0 <= done <= n_requests and done >= prev and m["requests"].get("to_run") == n_requests,
                f"{tag}: running done count {done} (previous {prev}) of {m.get('requests')}")
        rates = m.get("tokens_per_second") or {}
        f.check(rates and all(v >= 0 for v in rates.values()) and m.get("wall_seconds", 0) > 0,
                f"{tag}: running rates {rates}")
        prev = done
    left = glob.glob(metrics + ".partial-*") + glob.glob(metrics + ".tmp")
    f.check(not left, f"{tag}: no temp file left {left}")
    with open(metrics) as fp:
        final = json.load(fp)
    f.check(final.get("final") is True and final.get("command") == command, f"{tag}: the last write is final")
    f.check(all(k in final for k in keys), f"{tag}: final keys {sorted(final)} hold {keys}")
    f.check(final.get("schema") == "trillion-metrics/1", f"{tag}: schema")
    f.check(len(final.get("per_rank", [])) == ranks and all(all(k in r for k in RANK_KEYS) for r in final["per_rank"])
            and sorted(r["rank"] for r in final["per_rank"]) == list(range(ranks)), f"{tag}: per_rank complete")
    f.check(final.get("requests", {}).get("done") == n_requests, f"{tag}: final requests {final.get('requests')}")
    # Every rank maps its shards and ran steps on them: some of their pages
    # are resident, and the 2 MiB share of them (kernel-dependent) is a part.
    f.check(all(0 < r.get("weights_resident_bytes", 0) and 0 <= r.get("weights_huge_page_bytes", -1)
                <= r["weights_resident_bytes"] for r in final.get("per_rank", [])),
            f"{tag}: mapped weights resident, 2 MiB pages a part of them")
    return final


for ranks in (1, 2):
    tag = f"generate, {ranks} rank(s)"
    metrics = os.path.join(case, f"metrics-{ranks}.json")
    out = os.path.join(case, f"out-{ranks}.jsonl")
    cmd = [T, "generate", "--model", model, "--prompts", prompts, "--output", out, "--restart", "--max-batch", "2",
           "--threads", "1", "--metrics", metrics, "--metrics-interval", INTERVAL]
    if ranks > 1:
        cmd = [args.mpiexec, "--oversubscribe", "-np", str(ranks)] + cmd
    final = check_run(tag, cmd, metrics, "generate", ranks, N, GENERATE_KEYS)
    generated = sum(len(r["token_ids"]) for r in map(json.loads, open(out)))
    f.check(final.get("tokens", {}).get("generated") == generated, f"{tag}: final tokens {final.get('tokens')}")
    # The warm-up step is timed apart (outside the generation's seconds); the
    # first step is one of the run's steps, of at most --max-batch prompts' rows.
    sec = final.get("seconds", {})
    f.check(sec.get("warmup", 0) > 0 and 0 < sec.get("first_step", 0) <= sec.get("generation", 0) and
            sec["first_step"] <= sec.get("prefill_steps", 0) + sec.get("decode_steps", 0) + 1e-9,
            f"{tag}: warm-up and first step timed: {sec}")
    f.check(0 < final.get("first_step_rows", 0) <= final.get("tokens", {}).get("prefill", 0) + 2,
            f"{tag}: first step rows {final.get('first_step_rows')}")

# score: the same running updates, the final file in the same schema (no steps).
S = 400
score_in = os.path.join(case, "score.jsonl")
write_jsonl(score_in, [{"id": f"s{i}", "token_ids": [(i + j) % vocab for j in range(120)]} for i in range(S)])
metrics = os.path.join(case, "score-metrics.json")
cmd = [T, "score", "--model", model, "--input", score_in, "--output", os.path.join(case, "score-out.jsonl"),
       "--restart", "--threads", "1", "--metrics", metrics, "--metrics-interval", INTERVAL]
final = check_run("score", cmd, metrics, "score", 1, S, SCORE_KEYS)
f.check(final.get("tokens", {}).get("prefill") == S * 120, f"score: final tokens {final.get('tokens')}")
f.finish()
