"""Text prompts and chat messages through the model's real tokenizer and chat
template: the synthetic `demo` model has DeepSeek-V3's vocabulary, and its
directory gets DeepSeek-V3's tokenizer.json and tokenizer_config.json (chat
template inside). Expectations come from elsewhere: the chat prompt is
rendered by the real Jinja2 (python3-jinja2), ids by `trillion tokenize`
(itself checked against Hugging Face goldens), and a text or chat request
must generate exactly what the same request given as token ids generates."""
import json
import os

import jinja2

from harness import read_jsonl, run, start, write_jsonl

args, f, hf, model, case = start("text-prompts", demo_text=True)
T = args.trillion


def tokenize(text):
    src = os.path.join(case, "tok-in.jsonl")
    write_jsonl(src, [{"text": text}])
    out = run([T, "tokenize", "--model", model, "--input", src]).stdout
    return json.loads(out.splitlines()[0])["ids"]


config = json.load(open(os.path.join(model, "tokenizer_config.json")))  # the DeepSeek-V3 fixture, copied in by convert
bos = config["bos_token"]["content"] if isinstance(config["bos_token"], dict) else config["bos_token"]
eos = config["eos_token"]["content"] if isinstance(config["eos_token"], dict) else config["eos_token"]
env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name a prime number."}]
rendered = env.from_string(config["chat_template"]).render(messages=messages, add_generation_prompt=True,
                                                          bos_token=bos, eos_token=eos)
text = "The capital of France is"
bos_id = tokenize(bos)[0]
text_ids = [bos_id] + tokenize(text)        # tokenizer_config.json: add_bos_token true
chat_ids = tokenize(rendered)               # the template writes BOS itself
f.check(chat_ids[0] == bos_id and chat_ids.count(bos_id) == 1, "the rendered chat starts with one BOS")

reqs = [
    {"id": "text", "prompt": text, "max_tokens": 8},
    {"id": "text-ids", "prompt_token_ids": text_ids, "max_tokens": 8},
    {"id": "chat", "messages": messages, "max_tokens": 8},
    {"id": "chat-ids", "prompt_token_ids": chat_ids, "max_tokens": 8},
    {"custom_id": "oa-chat", "method": "POST", "url": "/v1/chat/completions",
     "body": {"messages": messages, "max_tokens": 8}},
]
prompts = os.path.join(case, "prompts.jsonl")
write_jsonl(prompts, reqs)
out = os.path.join(case, "out.jsonl")
run([T, "generate", "--model", model, "--prompts", prompts, "--output", out, "--restart"])
res = {r.get("id") if "custom_id" not in r else r["custom_id"]: r for r in read_jsonl(out)}
for a, b in (("text", "text-ids"), ("chat", "chat-ids")):
    ra, rb = res.get(a, {}), res.get(b, {})
    f.check("error" not in ra or ra["error"] is None, f"{a}: {ra.get('error')}")
    f.check(ra.get("token_ids") == rb.get("token_ids") and ra.get("token_ids"),
            f"{a} generates what {b} does: {ra.get('token_ids')} vs {rb.get('token_ids')}")
    f.check(ra.get("usage", {}).get("prompt_tokens") == len(text_ids if a == "text" else chat_ids),
            f"{a}: prompt_tokens {ra.get('usage')}")
oa = res.get("oa-chat", {})
body = (oa.get("response") or {}).get("body", {})
choice = (body.get("choices") or [{}])[0]
content = choice.get("message", {}).get("content")
f.check(isinstance(content, str), f"chat completion has text content: {choice}")
f.check(body.get("usage", {}).get("prompt_tokens") == len(chat_ids), "OpenAI chat usage.prompt_tokens")
# The returned text is the decoding of the generated ids (special tokens dropped).
if isinstance(content, str):
    ids = [t for t in res["chat"]["token_ids"] if t != tokenize(eos)[0]]
    src = os.path.join(case, "dec-in.jsonl")
    write_jsonl(src, [{"ids": ids}])
    decoded = json.loads(run([T, "tokenize", "--model", model, "--decode", "--input", src]).stdout)["text"]
    f.check(content == decoded, f"content {content!r} == decode(ids) {decoded!r}")
f.finish()
