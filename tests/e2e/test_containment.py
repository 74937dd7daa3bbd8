"""Issue 10's overnight failure, end to end: the `demo` model has DeepSeek-V3's
129280 lm_head rows and its real 128815-entry tokenizer, as the real
checkpoints pad theirs. Ids past the tokenizer have no text: `generate` must
never choose them, sampled or greedy, nor list them among top_logprobs (the
job used to stop at the first such id), and `score` reports a request that
holds one (unknown_token_positions) and never picks one greedily.

The tokenizer's size comes from its tokenizer.json, read here. With random
weights a padding id is among a row's 20 most likely about 7% of the time,
so the 256 rows below would show one thousands of times over if unmasked."""
import json
import os

from harness import read_jsonl, run, start, write_jsonl

args, f, hf, model, case = start("containment", demo_text=True, mpiexec=True)
T = args.trillion

tok = json.load(open(os.path.join(model, "tokenizer.json")))
ids = list(tok["model"]["vocab"].values()) + [t["id"] for t in tok.get("added_tokens", [])]
limit = max(ids) + 1
vocab = json.load(open(os.path.join(model, "config.json")))["vocab_size"]
f.check(limit < vocab, f"the demo model pads lm_head past the tokenizer ({limit} < {vocab})")

reqs = [{"id": f"s{i}", "prompt": f"Number {i} is", "max_tokens": 16, "temperature": 1.5, "seed": i,
         "logprobs": True, "top_logprobs": 20} for i in range(8)]
reqs += [{"id": f"g{i}", "prompt": f"Greedy {i}", "max_tokens": 16, "top_logprobs": 20} for i in range(8)]
src, out = os.path.join(case, "req.jsonl"), os.path.join(case, "out.jsonl")
write_jsonl(src, reqs)
mpi = [args.mpiexec, "-n", "2"] if args.mpiexec else []
p = run(mpi + [T, "generate", "--model", model, "--prompts", src, "--output", out, "--parallel", "expert"],
        check=False)
f.check(p.returncode == 0, f"generate finished: exit {p.returncode}, {p.stderr[-600:]!r}")
recs = {r["id"]: r for r in read_jsonl(out)} if os.path.exists(out) else {}
f.check(sorted(recs) == sorted(r["id"] for r in reqs), f"every request has a result ({len(recs)})")
chosen = [t for r in recs.values() for t in r.get("token_ids", [])]
alts = [a["token_id"] for r in recs.values() for row in r.get("top_logprobs", []) for a in row]
f.check(len(chosen) == 16 * 16 and len(alts) == 20 * len(chosen), f"{len(chosen)} tokens, {len(alts)} alternatives")
f.check(all(0 <= t < limit for t in chosen), f"no chosen id past the tokenizer: max {max(chosen, default=-1)}")
f.check(all(0 <= t < limit for t in alts), f"no top_logprobs id past the tokenizer: max {max(alts, default=-1)}")
f.check(all(isinstance(r.get("text"), str) for r in recs.values()), "every result has its text")

# score: a padding id in the request is scored and reported; greedy ids stay in the tokenizer.
score_in, score_out = os.path.join(case, "score.jsonl"), os.path.join(case, "score-out.jsonl")
write_jsonl(score_in, [{"id": "pad", "token_ids": [0, 100, vocab - 1, 200, limit]},
                       {"id": "plain", "token_ids": list(range(300, 340))}])
p = run([T, "score", "--model", model, "--input", score_in, "--output", score_out], check=False)
f.check(p.returncode == 0, f"score finished: exit {p.returncode}, {p.stderr[-600:]!r}")
got = {r["id"]: r for r in read_jsonl(score_out)} if os.path.exists(score_out) else {}
f.check(got.get("pad", {}).get("unknown_token_positions") == [2, 4], f"unknown positions {got.get('pad')}")
f.check("unknown_token_positions" not in got.get("plain", {"unknown_token_positions": 1}), "none in a clean request")
greedy = [t for r in got.values() for t in r.get("greedy_token_ids", [])]
f.check(len(greedy) == 45 and all(0 <= t < limit for t in greedy), f"greedy ids within the tokenizer: {greedy[:8]}")
f.check(len(got.get("pad", {}).get("token_logprobs", [])) == 4, "the padded request is scored")

# A logits file that cannot be written (a directory in its way, an id that
# cannot name a file) fails its request only; the others get theirs.
logits = os.path.join(case, "logits")
os.makedirs(os.path.join(logits, "blocked.npy"))
write_jsonl(score_in, [{"id": "ok", "token_ids": [5, 6, 7]}, {"id": "blocked", "token_ids": [5, 6]},
                       {"id": "../escape", "token_ids": [5, 6]}, {"id": "ok2", "token_ids": [8, 9]}])
p = run([T, "score", "--model", model, "--input", score_in, "--output", score_out, "--restart",
         "--logits-out", logits], check=False)
f.check(p.returncode == 0, f"score with unwritable logits finished: exit {p.returncode}, {p.stderr[-600:]!r}")
got = {r.get("id"): r for r in read_jsonl(score_out)} if os.path.exists(score_out) else {}
f.check(sorted(got) == ["../escape", "blocked", "ok", "ok2"], f"one record each: {sorted(got)}")
f.check(all("error" in got.get(k, {}) for k in ("blocked", "../escape")), "the two failed requests have errors")
f.check(all("token_logprobs" in got.get(k, {}) for k in ("ok", "ok2")), "the others were scored")
f.check(os.path.exists(os.path.join(logits, "ok2.npy")) and not os.path.exists(os.path.join(case, "escape.npy")),
        "logits written for the good ids only, nothing outside --logits-out")
f.check("failed" in p.stderr, "stderr names the failed requests")
f.finish()
