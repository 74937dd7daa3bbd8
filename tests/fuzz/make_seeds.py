#!/usr/bin/env python3
"""Writes the seed corpora tests/fuzz/corpus/<target>/ from the tests' own
fixtures and strings (run from the repository root; idempotent). The shard
seed comes from the fuzz_shard binary itself (TRILLION_FUZZ_SHARD_SEED) and
the manifest seeds from a converted test model, so they are not made here."""
import json, os, shutil, struct

F = "tests/fuzz/corpus"


def put(target, name, data):
    os.makedirs(f"{F}/{target}", exist_ok=True)
    with open(f"{F}/{target}/{name}", "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def safetensors(tensors, metadata=None):
    header, body = {}, b""
    for name, dtype, shape, size in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(body), len(body) + size]}
        body += bytes(range(size % 256)) * (size // 256) + bytes(range(size % 256))
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + body


put("safetensors", "two_f32", safetensors([("a", "F32", [2, 3], 24), ("b", "BF16", [4], 8)], {"format": "pt"}))
put("safetensors", "all_dtypes", safetensors([(n, d, [2], 2 * s) for n, d, s in [
    ("f", "F32", 4), ("h", "F16", 2), ("b", "BF16", 2), ("e", "F8_E4M3", 1), ("i", "I32", 4), ("l", "I64", 8),
    ("u", "U8", 1), ("c", "I8", 1)]]))
put("safetensors", "empty", safetensors([]))
put("safetensors", "scalar_and_zero", safetensors([("s", "F32", [], 4), ("z", "F32", [0, 5], 0)]))

index = {"metadata": {"total_size": 36}, "weight_map": {"w1": "a.safetensors", "w2": "a.safetensors",
                                                        "w3": "b.safetensors"}}
put("hf_index", "full", json.dumps(index))
put("hf_index", "partial", json.dumps({"weight_map": {"w3": "b.safetensors"}}))
put("hf_index", "elsewhere", json.dumps({"weight_map": {"w1": "../a.safetensors"}}))

for name in ("deepseek-v3", "kimi-k2"):
    shutil.copy(f"tests/fixtures/configs/{name}.json", f"{F}/model_config/{name}.json")

requests = [
    '{"id": "a", "prompt_token_ids": [1, 2, 3], "max_tokens": 4, "temperature": 0.7, "top_p": 0.9, "seed": 5}',
    '{"id": "p", "prompt": "Hello", "stop": ["\\n", "x"], "logprobs": 2}',
    '{"id": 7, "messages": [{"role": "user", "content": "hi"}], "top_k": 3, "min_p": 0.1}',
    '{"id": "s", "token_ids": [5, 6, 7]}',
    '{"custom_id": "c1", "method": "POST", "url": "/v1/completions", "body": {"model": "m", "prompt": [1, 2],'
    ' "max_tokens": 5, "logprobs": 1}}',
    '{"custom_id": "c2", "method": "POST", "url": "/v1/chat/completions", "body": {"messages": [{"role": "user",'
    ' "content": "x"}], "max_completion_tokens": 3, "top_logprobs": 2, "logprobs": true}}',
]
put("request", "both_forms.jsonl", "\n".join(requests) + "\n")
put("request", "bad_lines.jsonl", '{"id": "a", "prompt": [1], "messages": []}\r\n\n{"id": "b", "tok\n[1]\n')

# A small tokenizer.json (the loading target; the full fixture is slow to mutate).
tok = json.load(open("tests/fuzz/data/tokenizer.json", encoding="utf-8"))
vocab = sorted(tok["model"]["vocab"].items(), key=lambda kv: kv[1])
tok["model"]["vocab"] = dict(vocab[:300] + vocab[-5:])
tok["model"]["merges"] = tok["model"]["merges"][:20]
put("tokenizer_json", "small.json", json.dumps(tok, ensure_ascii=False))
put("tokenizer_json", "gpt2_style.json", json.dumps({
    "normalizer": None, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
    "decoder": {"type": "ByteLevel"}, "added_tokens": [{"id": 3, "content": "<s>", "special": True}],
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "<s>": 3}, "merges": [["a", "b"]]}}))

lines = open("tests/fuzz/data/tiktoken.model").read().splitlines()
put("tiktoken", "ranks.model", "\n".join(lines[:300]) + "\n")
put("tiktoken", "crlf_gaps.model", "IQ== 0\r\nIg== 1\r\n\r\nIw== 5\r\n")

texts = [json.loads(l)["text"] for l in open("tests/tokenizer/golden/deepseek-v3.jsonl", encoding="utf-8")][:12]
texts += ["<｜User｜>hi<｜Assistant｜>", "[BOS]x<|im_end|>"]
for i, t in enumerate(texts):
    put("tokenize", f"text{i}", bytes([i % 8]) + t.encode())
put("tokenize", "ids", bytes([8]) + struct.pack("<8i", 0, 1, 200, 1000, 1760, 1761, 1765, 2000))

cfg = json.load(open("tests/fixtures/chat/deepseek-v3/tokenizer_config.json", encoding="utf-8"))
put("chat_template", "deepseek-v3.jinja", cfg["chat_template"])
for name in ("kimi-k2", "kimi-k2-thinking"):
    shutil.copy(f"tests/fixtures/chat/{name}/chat_template.jinja", f"{F}/chat_template/{name}.jinja")
for i, s in enumerate(json.load(open("tests/chat/golden/snippets.json", encoding="utf-8"))["snippets"]):
    put("chat_template", f"snippet{i}.jinja", s["template"])

for name in os.listdir("hostfiles"):
    shutil.copy(f"hostfiles/{name}", f"{F}/hostfile/{name}")
put("hostfile", "keys", "# comment\nnode1 slots=4 max_slots=8\nnode2   # no slots\nnode3 max-slots=2\n")

# A manifest in the form Manifest::to_json writes (docs/format.md).
manifest = {
    "format": "trillion-hdf5", "format_version": 1, "weight_format": "fp8", "experts_per_shard": 2,
    "source": {"path": "/hf/DeepSeek-V3"},
    "shards": [{"file": "embed.h5", "bytes": 12288, "role": "embed"},
               {"file": "layer-003-experts-000-001.h5", "bytes": 20480, "role": "experts", "layer": 3,
                "experts": [0, 1]}],
    "tensors": {
        "model.embed_tokens.weight": {"shard": "embed.h5", "dtype": "BF16", "shape": [16, 8], "offset": 4096,
                                      "nbytes": 256, "checksum": "xxh64:0123456789abcdef"},
        "model.layers.3.mlp.experts.0.up_proj.weight": {
            "shard": "layer-003-experts-000-001.h5", "dtype": "F8_E4M3", "shape": [8, 16], "offset": 4096,
            "nbytes": 128, "checksum": "xxh64:fedcba9876543210"},
        "model.layers.3.mlp.experts.1.up_proj.weight_packed": {
            "shard": "layer-003-experts-000-001.h5", "dtype": "I32", "shape": [8, 2], "offset": 8192,
            "nbytes": 64, "checksum": "xxh64:00000000000000ff", "weight_shape": [8, 16]}}}
put("manifest", "two_shards.json", json.dumps(manifest, indent=1))
manifest.update(weight_format="int8", quantized_from="bf16")
put("manifest", "requantized.json", json.dumps(manifest))
