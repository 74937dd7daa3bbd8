"""`stop` strings on the demo model (DeepSeek-V3's tokenizer): a request with
stop strings must return exactly the text of the same request without them,
cut right before the first occurrence, and never the stop string itself; its
token_ids are a prefix of the unstopped run's (ending with the token that
completed the stop string). Without a tokenizer, `stop` is an error record."""
import os

from harness import read_jsonl, run, start, write_jsonl

# The demo text model is shared with test_text_prompts.py (same lock).
args, f, hf, model, case = start(
    "stop-strings", demo_text=True, mpiexec=True,
    mpiexec_help="also run the stopped requests on 2 pipeline ranks (matching runs on rank 0)")
T = args.trillion


def generate(reqs, name, model_dir=model, ranks=1):
    prompts = os.path.join(case, name + ".jsonl")
    write_jsonl(prompts, reqs)
    out = os.path.join(case, name + "-out.jsonl")
    launch = [args.mpiexec, "--oversubscribe", "-np", str(ranks)] if ranks > 1 else []
    run(launch + [T, "generate", "--model", model_dir, "--prompts", prompts, "--output", out, "--restart",
                  "--max-batch", "3", "--step-tokens", "16"])
    return {r.get("custom_id") or r.get("id"): r for r in read_jsonl(out)}


base = [
    {"id": "greedy", "prompt": "The capital of France is", "max_tokens": 24},
    {"id": "sampled", "prompt": "Once upon a time", "max_tokens": 24, "temperature": 0.9, "seed": 3},
    {"id": "chat", "messages": [{"role": "user", "content": "Name a prime number."}], "max_tokens": 24},
]
ref = generate(base, "reference")


def pick(text, start, n):
    """text[i:i+n] for the first i >= start without U+FFFD: that stands for
    bytes that are not UTF-8 (random weights make such token runs), which
    stop strings, matched on the raw bytes, cannot name."""
    for i in range(start, len(text) - n + 1):
        if "\ufffd" not in text[i:i + n]:
            return text[i:i + n]
    raise SystemExit(f"no clean {n}-character window in {text!r}")


def cut(text, stops):
    hits = [text.find(s) for s in stops if s in text]
    return text[:min(hits)] if hits else text


stopped = []
for b in base:
    r = ref[b["id"]]
    text = r["text"]
    f.check(len(text) >= 12, f"{b['id']}: enough text to pick stop strings from: {text!r}")
    # a stop string from the middle (likely spanning tokens), one from the start, one absent;
    # "several": text[2:5] (the first clean window there) ends no later than any earlier-starting occurrence of the
    # 4-character `mid`, so the first completed stop is also the first occurring one
    mid = pick(text, len(text) // 2, 4)
    variants = {"mid": [mid], "first": [pick(text, 0, 2)], "several": ["\u2603never\u2603", mid, pick(text, 2, 3)],
                "absent": ["\u2603never\u2603"]}
    for name, stops in variants.items():
        stopped.append((b["id"], name, stops, dict(b, id=f"{b['id']}-{name}", stop=stops)))
# The OpenAI forms: "stop" as one string, and as a list of up to 4.
g = ref["greedy"]["text"]
oa = [{"custom_id": "oa-one", "method": "POST", "url": "/v1/completions",
       "body": {"prompt": base[0]["prompt"], "max_tokens": 24, "stop": pick(g, 5, 3)}},
      {"custom_id": "oa-list", "method": "POST", "url": "/v1/chat/completions",
       "body": {"messages": base[2]["messages"], "max_tokens": 24, "stop": ["\u2603", pick(ref["chat"]["text"], 6, 3), "zz"]}},
      {"custom_id": "oa-five", "method": "POST", "url": "/v1/completions",
       "body": {"prompt": "x", "stop": ["a", "b", "c", "d", "e"]}}]
res = generate([s[3] for s in stopped] + oa, "stopped")
for src, name, stops, req in stopped:
    want, got = ref[src], res.get(req["id"], {})
    f.check(got.get("error") is None, f"{req['id']}: {got.get('error')}")
    text = got.get("text", "")
    expected = cut(want["text"], stops)  # the unstopped run's text, cut before the first stop string
    f.check(not any(s in text for s in stops), f"{req['id']}: text {text!r} contains a stop string {stops}")
    f.check(text == expected, f"{req['id']}: {text!r} == cut of {want['text']!r} at {stops}: {expected!r}")
    ids = got.get("token_ids", [])
    f.check(ids == want["token_ids"][:len(ids)], f"{req['id']}: token_ids are a prefix of the unstopped run's")
    f.check(got.get("usage", {}).get("completion_tokens") == len(ids), f"{req['id']}: completion_tokens")
    hit = any(s in want["text"] for s in stops)
    f.check(got.get("finish_reason") == ("stop" if hit else want["finish_reason"]),
            f"{req['id']}: finish_reason {got.get('finish_reason')}")
    if name == "first" and want["text"].startswith(stops[0]):
        f.check(expected == "" and text == "" and len(ids) >= 1,
                f"{req['id']}: a stop string the text starts with leaves no text: {text!r}")

one = res.get("oa-one", {}).get("response", {}).get("body", {}).get("choices", [{}])[0]
f.check(one.get("text") == cut(g, [pick(g, 5, 3)]) and one.get("finish_reason") == "stop", f"oa-one: {one}")
lst = res.get("oa-list", {}).get("response", {}).get("body", {}).get("choices", [{}])[0]
chat_stops = ["\u2603", pick(ref["chat"]["text"], 6, 3), "zz"]
f.check(lst.get("message", {}).get("content") == cut(ref["chat"]["text"], chat_stops), f"oa-list: {lst}")
five = res.get("oa-five", {}).get("error") or {}
f.check("up to 4" in five.get("message", ""), f"oa-five: {five}")

if not args.mpiexec:
    print("SKIPPED: the 2-rank run of the stopped requests (no --mpiexec)", flush=True)
else:
    two = generate([s[3] for s in stopped] + oa, "stopped-2ranks", ranks=2)
    for k, r in res.items():
        a, b = dict(r), dict(two.get(k, {}))
        for rec in (a, b):  # response bodies carry the creation time
            if rec.get("response"):
                rec["response"]["body"].pop("created", None)
        f.check(a == b, f"{k}: 2 pipeline ranks give the same stopped result")

# A model directory without a tokenizer: `stop` cannot be matched -> an error record naming the line.
bare = os.path.join(case, "bare-model")
os.makedirs(bare)
for name in os.listdir(model):
    if not name.startswith("tokenizer"):
        os.symlink(os.path.join(model, name), os.path.join(bare, name))
res = generate([{"id": "ids", "prompt_token_ids": [1, 2, 3], "max_tokens": 2},
                {"id": "ids-stop", "prompt_token_ids": [1, 2, 3], "max_tokens": 2, "stop": "x"}], "bare", bare)
f.check(res.get("ids", {}).get("error") is None, f"ids without stop runs: {res.get('ids')}")
err = res.get("ids-stop", {}).get("error") or {}
f.check(err.get("line") == 2 and "tokenizer" in err.get("message", ""), f"stop without a tokenizer: {err}")
f.finish()
