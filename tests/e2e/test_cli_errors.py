"""Bad inputs to the trillion CLI: each gets a clear error naming the problem
and the place (line, file, tensor); bad request lines do not stop the job."""
import json
import os
import shutil

from harness import USAGE_ERROR, checkpoint, read_jsonl, run, start, write_jsonl

args, f, hf, model, case = start("cli-errors")
T, work = args.trillion, args.work

# --- score: bad request lines become error records with their line numbers.
req = os.path.join(case, "score.jsonl")
with open(req, "w") as fp:
    fp.write(json.dumps({"id": "ok1", "token_ids": [1, 2, 3]}) + "\n")      # line 1
    fp.write('{"id": "broken", "token_ids": [1, 2\n')                         # line 2: bad JSON
    fp.write(json.dumps({"id": "oov", "token_ids": [1, 512]}) + "\n")       # line 3: vocab is 512
    fp.write("\n")                                                            # line 4: blank, skipped
    fp.write(json.dumps({"token_ids": [1]}) + "\n")                          # line 5: no id
    fp.write(json.dumps({"id": "ok1", "token_ids": [4]}) + "\n")             # line 6: duplicate id
    fp.write(json.dumps({"id": "empty", "token_ids": []}) + "\n")            # line 7: empty
    fp.write(json.dumps({"id": "neg", "token_ids": [-1]}) + "\n")            # line 8: negative
    fp.write(json.dumps({"id": "ok2", "token_ids": [7, 8]}) + "\n")          # line 9
out = os.path.join(case, "score.out.jsonl")
p = run([T, "score", "--model", model, "--input", req, "--output", out], check=False)
f.check(p.returncode == 0, f"score with bad lines should finish (exit {p.returncode}): {p.stderr}")
res = read_jsonl(out)
by_line = {r["error"]["line"]: r for r in res if "error" in r}
f.check(sorted(by_line) == [2, 3, 5, 6, 7, 8], f"error lines {sorted(by_line)}")
f.check("not valid JSON" in by_line.get(2, {}).get("error", {}).get("message", ""), "line 2 message")
f.check("outside the vocabulary" in by_line.get(3, {}).get("error", {}).get("message", ""), "line 3 message")
f.check("missing \"id\"" in by_line.get(5, {}).get("error", {}).get("message", ""), "line 5 message")
f.check("duplicate id" in by_line.get(6, {}).get("error", {}).get("message", ""), "line 6 message")
f.check("is empty" in by_line.get(7, {}).get("error", {}).get("message", ""), "line 7 message")
f.check("line 3" in p.stderr and req in p.stderr, "stderr names the file and line of a bad request")
ok = [r for r in res if "error" not in r]
f.check([r["id"] for r in ok] == ["ok1", "ok2"], f"scored ids {[r['id'] for r in ok]}")
f.check(all(len(r["token_logprobs"]) == r["num_tokens"] - 1 for r in ok), "token_logprobs length")

# --- generate: bad lines likewise.
req = os.path.join(case, "gen.jsonl")
write_jsonl(req, [{"id": "g1", "prompt_token_ids": [3, 4], "max_tokens": 2},
                  {"id": "g2", "prompt_token_ids": [3, 4], "max_tokens": "many"},
                  {"id": "g3", "prompt_token_ids": "hello"},
                  {"id": "g4", "prompt_token_ids": [5], "max_tokens": 0}])
out = os.path.join(case, "gen.out.jsonl")
p = run([T, "generate", "--model", model, "--prompts", req, "--output", out], check=False)
f.check(p.returncode == 0, f"generate with bad lines should finish: {p.stderr}")
res = {r.get("id"): r for r in read_jsonl(out)}
f.check(res.get("g1", {}).get("usage", {}).get("completion_tokens") == 2, "g1 generated 2 tokens")
f.check(res.get("g2", {}).get("error", {}).get("line") == 2, "g2 error on line 2")
f.check(res.get("g3", {}).get("error", {}).get("line") == 3, "g3 error on line 3")
f.check(res.get("g4", {}).get("token_ids") == [] and res["g4"]["finish_reason"] == "length", "max_tokens 0")

good = os.path.join(case, "good.jsonl")
write_jsonl(good, [{"id": "a", "token_ids": [1, 2, 3]}])

# Every error below must be a clean exit (1, an input error, unless code= says
# otherwise) naming the problem: a crash or a signal fails (harness.crash).
# --- missing files and flags.
f.expect_error([T, "score", "--model", os.path.join(case, "nope"), "--input", good, "--output", out],
               ["nope"], "missing model directory")
f.expect_error([T, "score", "--model", model, "--input", os.path.join(case, "missing.jsonl"), "--output", out],
               ["missing.jsonl"], "missing request file")
f.expect_error([T, "score", "--model", model, "--input", good], ["--output"], "missing --output", code=USAGE_ERROR)
f.expect_error([T, "score", "--model", model, "--input", good, "--output", out, "--bogus"], ["bogus"],
               "unknown flag", code=USAGE_ERROR)
f.expect_error([T, "frobnicate"], ["frobnicate"], "unknown command", code=USAGE_ERROR)
f.expect_error([T, "score", "--model", model, "--input", good, "--output", out, "--activations", "int9"],
               ["--activations", "int9", "auto, f32, int8 or bf16"], "unknown compute path")
f.expect_error([T, "plan", "--model", model, "--ranks", "2", "--activations", "fp4"],
               ["--activations", "fp4"], "unknown compute path (plan)")
# --head-split: a row count, on a pipeline of 2+ ranks, inside the vocabulary.
f.expect_error([T, "score", "--model", model, "--input", good, "--output", out, "--head-split", "12x"],
               ["--head-split", "12x"], "head split not a number")
f.expect_error([T, "score", "--model", model, "--input", good, "--output", out, "--head-split", "100"],
               ["--head-split", "2 or more ranks"], "head split on one rank")
f.expect_error([T, "plan", "--model", model, "--ranks", "2", "--head-split", "512"],
               ["--head-split 512", "[0, 512)"], "head split past the vocabulary (plan)")
f.expect_error([T, "plan", "--model", model, "--ranks", "2", "--head-split", "auto"],
               ["--head-split auto", "--stages auto"], "head split auto without --stages auto")

# --- damaged shards: a flipped byte inside a tensor, a truncated file.
manifest = json.load(open(os.path.join(model, "manifest.json")))
name = "model.layers.1.self_attn.kv_b_proj.weight"
info = manifest["tensors"][name]
bad = os.path.join(case, "flipped")
shutil.copytree(model, bad)
with open(os.path.join(bad, info["shard"]), "r+b") as fp:
    fp.seek(info["offset"] + info["nbytes"] // 2)
    b = fp.read(1)
    fp.seek(-1, 1)
    fp.write(bytes([b[0] ^ 0x55]))
f.expect_error([T, "score", "--model", bad, "--input", good, "--output", out], [info["shard"], name],
               "flipped byte in a shard")
trunc = os.path.join(case, "truncated")
shutil.copytree(model, trunc)
path = os.path.join(trunc, info["shard"])
os.truncate(path, os.path.getsize(path) // 2)
f.expect_error([T, "score", "--model", trunc, "--input", good, "--output", out], [info["shard"]],
               "truncated shard")
missing = os.path.join(case, "missing-shard")
shutil.copytree(model, missing)
os.remove(os.path.join(missing, info["shard"]))
f.expect_error([T, "score", "--model", missing, "--input", good, "--output", out], [info["shard"]],
               "missing shard file")

# --- convert --quantize: a bad format name, an fp8 input to a format other than int8 (nothing is written).
qout = os.path.join(case, "quantized")
f.expect_error([T, "convert", "--input", hf, "--output", qout, "--quantize", "int3"],
               ["--quantize", "int8, int4 or fp8", "'int3'"], "bad --quantize value", code=USAGE_ERROR)
f.check(not os.path.exists(qout), "bad --quantize value: nothing written")
hf_fp8 = checkpoint(work, "tiny", "fp8")
f.expect_error([T, "convert", "--input", hf_fp8, "--output", qout, "--quantize", "int4"],
               ["--quantize int4", "an fp8 checkpoint is quantized to int8 only", os.path.join(hf_fp8, "config.json")],
               "--quantize int4 of an fp8 checkpoint")
f.check(not os.path.exists(qout) and not os.path.exists(qout + ".partial"), "fp8 input: nothing written")
f.finish()
