"""Request files: the OpenAI Batch form next to the plain form, answered in
OpenAI's batch output form; bad lines become error records naming their line;
--strict aborts on the first bad line instead."""
import os

from harness import read_jsonl, run, start, write_jsonl

args, f, hf, model, case = start("request-files")
T = args.trillion


def batch(cid, url, body, method="POST"):
    return {"custom_id": cid, "method": method, "url": url, "body": body}


prompt = [3, 14, 15, 92, 65]
lines = [
    batch("c-greedy", "/v1/completions", {"model": "tiny", "prompt": prompt, "max_tokens": 6}),           # 1
    batch("c-sampled", "/v1/completions", {"prompt": prompt, "max_tokens": 6, "temperature": 0.9,
                                          "top_p": 0.9, "seed": 11, "logprobs": 2}),                   # 2
    batch("chat", "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}]}),           # 3
    batch("bad-url", "/v1/embeddings", {"input": "x"}),                                                  # 4
    batch("bad-temp", "/v1/completions", {"prompt": prompt, "temperature": -1}),                         # 5
    {"id": "plain", "prompt_token_ids": prompt, "max_tokens": 6},                                        # 6
    {"id": "plain-sampled", "prompt_token_ids": prompt, "max_tokens": 6, "temperature": 0.9, "top_p": 0.9,
     "seed": 11, "logprobs": 2},                                                                         # 7
    {"id": "plain-text", "prompt": "Once upon a time"},                                                  # 8
]
req = os.path.join(case, "batch.jsonl")
write_jsonl(req, lines)
with open(req, "a") as fp:
    fp.write('{"custom_id": "torn", "url": \n')                                                          # 9
out = os.path.join(case, "out.jsonl")
p = run([T, "generate", "--model", model, "--prompts", req, "--output", out], check=False)
f.check(p.returncode == 0, f"a batch file with bad lines runs to the end: {p.stderr[-500:]}")
recs = read_jsonl(out)
f.check(len(recs) == len(lines) + 1, f"one record per line: {len(recs)}")
oa = {r["custom_id"]: r for r in recs if "custom_id" in r and r["custom_id"] is not None}
plain = {r["id"]: r for r in recs if "custom_id" not in r}

g = oa.get("c-greedy", {})
body = (g.get("response") or {}).get("body", {})
f.check(g.get("error") is None and g.get("response", {}).get("status_code") == 200, "c-greedy: 200")
f.check(g.get("id", "").startswith("batch_req_") and g["response"].get("request_id", "").startswith("req_"), "ids")
f.check(body.get("object") == "text_completion" and body.get("model") == "tiny" and
        isinstance(body.get("created"), int), f"c-greedy body: {body}")
choice = (body.get("choices") or [{}])[0]
f.check(choice.get("token_ids") == plain.get("plain", {}).get("token_ids"), "OpenAI and plain forms agree (greedy)")
f.check(body.get("usage", {}).get("prompt_tokens") == len(prompt) and
        body["usage"]["completion_tokens"] == len(choice.get("token_ids", [])), "usage")
f.check(choice.get("finish_reason") in ("stop", "length") and choice.get("index") == 0, "finish_reason, index")

s = oa.get("c-sampled", {})
sc = (s.get("response") or {}).get("body", {}).get("choices", [{}])[0]
ps = plain.get("plain-sampled", {})
f.check(sc.get("token_ids") == ps.get("token_ids"), "the same seed samples the same tokens in either form")
lp = sc.get("logprobs") or {}
f.check(lp.get("token_logprobs") == ps.get("logprobs") and len(lp.get("top_logprobs", [])) == len(ps["token_ids"]) and
        all(len(a) == 2 for a in lp["top_logprobs"]), f"completion logprobs: {lp}")

errors = {r["error"]["line"]: r for r in recs if r.get("error")}
f.check(sorted(errors) == [3, 4, 5, 8, 9], f"error lines {sorted(errors)}")
for line, needle in [(3, "tokenizer"), (4, "url"), (5, "temperature"), (8, "tokenizer"), (9, "not valid JSON")]:
    e = errors.get(line, {})
    msg = e.get("error", {}).get("message", "")
    f.check(needle in msg, f"line {line}: message {msg!r} names {needle!r}")
    if line != 8:  # OpenAI form, also for the unparsable line 9 of an OpenAI file
        f.check(e.get("response", 0) is None and e["error"].get("code") and msg.startswith(f"line {line}:"),
                f"line {line}: OpenAI error record {e}")
f.check(errors.get(3, {}).get("custom_id") == "chat", "an error record keeps custom_id")
f.check("custom_id" not in errors.get(8, {}) and errors.get(8, {}).get("id") == "plain-text",
        "a plain line's error is plain")
f.check(f"{req} line 4" in p.stderr, "stderr names file and line")

# --strict: abort on the first bad line, naming it, before any work.
out2 = os.path.join(case, "strict.jsonl")
f.expect_error([T, "generate", "--model", model, "--prompts", req, "--output", out2, "--strict"],
               ["line 3", "--strict"], "--strict stops at the first bad line")
f.check(not os.path.exists(out2) or os.path.getsize(out2) == 0, "--strict wrote no results")
good = os.path.join(case, "good.jsonl")
write_jsonl(good, lines[:2])
p = run([T, "generate", "--model", model, "--prompts", good, "--output", out2, "--strict"], check=False)
f.check(p.returncode == 0 and len(read_jsonl(out2)) == 2, "--strict with a clean file runs")
f.finish()
