"""ignore_eos and min_tokens through `generate` on a real (tiny) model:
sampling at a very high temperature makes every id about equally likely, so
EOS (id 1 in the tiny preset) turns up within a few hundred tokens. Without
the fields some requests end early at EOS; with min_tokens = max_tokens none
does and none of their tokens is EOS (it is masked from the choice); with
ignore_eos every request runs to max_tokens, EOS among its tokens or not."""
import json
import os

from harness import read_jsonl, run, start, write_jsonl

args, f, hf, model, case = start("min-tokens")
with open(os.path.join(model, "config.json")) as fp:
    cfg = json.load(fp)
eos = cfg["eos_token_id"]
N, MAX = 16, 300


def requests(**extra):
    return [{"id": f"r{i}", "prompt_token_ids": [3 + i, 14, 15, 92], "max_tokens": MAX, "temperature": 100.0,
             "seed": 1000 + i, **extra} for i in range(N)]


def generate(name, reqs, extra=()):
    p, out = os.path.join(case, f"{name}.jsonl"), os.path.join(case, f"{name}-out.jsonl")
    write_jsonl(p, reqs)
    run([args.trillion, "generate", "--model", model, "--prompts", p, "--output", out, "--restart",
         "--threads", "1", "--max-batch", "16", *extra])
    return {r["id"]: r for r in read_jsonl(out)}


plain = generate("plain", requests())
f.check(len(plain) == N and all("token_ids" in r for r in plain.values()), f"plain: {N} results")
stopped = [r for r in plain.values() if r["finish_reason"] == "stop"]
f.check(stopped and all(r["token_ids"][-1] == eos for r in stopped),
        f"without the fields, some requests end at EOS ({len(stopped)} of {N})")

masked = generate("min", requests(min_tokens=MAX))
f.check(all(r["finish_reason"] == "length" and len(r["token_ids"]) == MAX for r in masked.values()),
        "min_tokens = max_tokens: every request generates max_tokens")
f.check(all(eos not in r["token_ids"] for r in masked.values()), "min_tokens: EOS never chosen before the minimum")
# With MTP drafts (the tiny preset has an MTP layer): the verification's target is the masked one too.
spec = generate("min-spec", requests(min_tokens=MAX), ["--speculative", "mtp"])
f.check(all(r["finish_reason"] == "length" and len(r["token_ids"]) == MAX and eos not in r["token_ids"]
            for r in spec.values()), "min_tokens with --speculative mtp: max_tokens each, EOS never chosen")
ignored = generate("ignore", requests(ignore_eos=True))
f.check(all(r["finish_reason"] == "length" and len(r["token_ids"]) == MAX for r in ignored.values()),
        "ignore_eos: every request generates max_tokens")
f.check(any(eos in r["token_ids"] for r in ignored.values()), "ignore_eos: EOS is generated and does not stop")
# ignore_eos does not mask: its tokens are the plain run's, past the EOS too.
f.check(all(ignored[k]["token_ids"][:len(plain[k]["token_ids"])] == plain[k]["token_ids"] for k in plain),
        "ignore_eos: the same tokens as without it, up to where the plain run stopped")

write_jsonl(os.path.join(case, "bad.jsonl"), [{"id": "b", "prompt_token_ids": [3], "max_tokens": 4, "min_tokens": 5}])
run([args.trillion, "generate", "--model", model, "--prompts", os.path.join(case, "bad.jsonl"),
     "--output", os.path.join(case, "bad-out.jsonl"), "--restart"], check=False)
bad = read_jsonl(os.path.join(case, "bad-out.jsonl"))
f.check(bad and "must not exceed" in bad[0].get("error", {}).get("message", ""),
        f"min_tokens > max_tokens: an error record naming it ({bad})")
f.finish()
