"""Issue 10 items 2 and 6 at the CLI: sizes from config.json and flags are
checked before anything is allocated or any thread started (a clean error
naming the field or flag and the limit, within seconds, under a memory
limit so that a regression fails instead of eating the machine), and names
in a checkpoint's index or a model's manifest cannot lead out of their
directory. Run as e2e_cli_errors_bounds (ctest -R e2e_cli_errors)."""
import json
import os
import resource
import shutil
import subprocess

from harness import run, start, write_jsonl

args, f, hf, model, case = start("cli-bounds")
T, work = args.trillion, args.work
LIMIT_SECONDS = 60
ADDRESS_SPACE = 8 << 30  # far above what these runs need; far below this machine's memory + swap


def limit_memory():  # in the child, before exec
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def bounded_error(cmd, needles, what, **kw):
    """expect_error, with the child's address space capped and a deadline:
    code that allocates or starts threads as the input says fails fast
    (out of memory, or no more threads) instead of running on."""
    if os.path.exists(out):  # a result file from an earlier case would make a run resume instead
        os.remove(out)
    try:
        return f.expect_error(cmd, needles, what, timeout=LIMIT_SECONDS, preexec_fn=limit_memory, **kw)
    except subprocess.TimeoutExpired:
        f.check(False, f"{what}: no answer within {LIMIT_SECONDS} s")


def copy_of(src, name):
    dst = os.path.join(case, name)
    shutil.copytree(src, dst, symlinks=True)
    return dst


def edit_json(path, edit):
    with open(path) as fp:
        j = json.load(fp)
    edit(j)
    with open(path, "w") as fp:
        json.dump(j, fp)


good = os.path.join(case, "good.jsonl")
write_jsonl(good, [{"id": "a", "token_ids": [1, 2, 3]}])
prompts = os.path.join(case, "prompts.jsonl")
write_jsonl(prompts, [{"id": "g", "prompt_token_ids": [3, 4], "max_tokens": 2}])
out = os.path.join(case, "out.jsonl")

# --- config.json that claims more than the checkpoint holds. Today's code
# built a table of num_hidden_layers x experts first: 1e9 layers allocated
# until the kernel killed convert (exit 137).
huge = copy_of(hf, "hf-billion-layers")
edit_json(os.path.join(huge, "config.json"), lambda c: c.update(num_hidden_layers=1000000000))
bounded_error([T, "convert", "--input", huge, "--output", os.path.join(case, "never")],
              ["config.json", "num_hidden_layers", "must be <= 65536", "1000000000"],
              "convert: num_hidden_layers 1e9")
more = copy_of(hf, "hf-5000-layers")
edit_json(os.path.join(more, "config.json"), lambda c: c.update(num_hidden_layers=5000))
bounded_error([T, "convert", "--input", more, "--output", os.path.join(case, "never")],
              ["num_hidden_layers is 5000", "no tensor 'model.layers.4.input_layernorm.weight'",
               "model.safetensors.index.json", "layers 0-3"],  # 3 layers + the MTP layer
              "convert: num_hidden_layers beyond the checkpoint")
f.check(not os.path.exists(os.path.join(case, "never")) and not os.path.exists(os.path.join(case, "never.partial")),
        "convert: nothing written after a config error")
edited = copy_of(model, "model-5000-layers")
edit_json(os.path.join(edited, "config.json"), lambda c: c.update(num_hidden_layers=5000))
bounded_error([T, "score", "--model", edited, "--input", good, "--output", out],
              [os.path.join(edited, "config.json"), "num_hidden_layers is 5000", "manifest.json"],
              "score: a model whose config.json claims more layers than its manifest")

# --- flags against the machine. --threads 100000 did not return within 60 s.
bounded_error([T, "generate", "--model", model, "--prompts", prompts, "--output", out, "--threads", "100000"],
              ["--threads 100000", "exceeds the limit of", "threads per rank"], "generate --threads 100000")
bounded_error([T, "convert", "--input", hf, "--output", os.path.join(case, "never"), "--threads", "100000"],
              ["--threads 100000", "exceeds the limit of"], "convert --threads 100000")
bounded_error([T, "score", "--model", model, "--input", good, "--output", out, "--kv-cache-tokens", "100000000000"],
              ["--kv-cache-tokens 100000000000", "the KV cache needs", "GB", "of memory this rank has", "at most"],
              "score --kv-cache-tokens beyond memory")
bounded_error([T, "generate", "--model", model, "--prompts", prompts, "--output", out, "--max-batch", "2000000000",
               "--kv-cache-tokens", "64"],
              ["--max-batch 2000000000", "rows of activations need"], "generate --max-batch beyond memory")
# A step holds at most every slot's context (here 100000 x 512 positions):
# buffers are sized by that, and that is what must fit.
bounded_error([T, "score", "--model", model, "--input", good, "--output", out, "--step-tokens", "1000000000000",
               "--max-batch", "100000", "--max-len", "512", "--kv-cache-tokens", "64"],
              ["--step-tokens 1000000000000 with --max-batch 100000", "51300000 rows of activations need",
               "step tokens + slots fit"],
              "score --step-tokens beyond memory")
p = run([T, "score", "--model", model, "--input", good, "--output", os.path.join(case, "steps.jsonl"),
         "--step-tokens", "1000000000000"], check=False)
f.check(p.returncode == 0, f"--step-tokens larger than any step can hold is only a budget: {p.stderr[-300:]}")
bounded_error([T, "generate", "--model", model, "--prompts", prompts, "--output", out, "--micro-batches", "100"],
              ["--micro-batches 100 exceeds --max-batch 8"], "generate --micro-batches above --max-batch")
bounded_error([T, "generate", "--model", model, "--prompts", prompts, "--output", out, "--parallel", "expert",
               "--micro-batches", "65", "--max-batch", "100"],
              ["--micro-batches 65", "at most 64 groups"], "generate --parallel expert --micro-batches above 64")

# --- a model directory is data: names in it cannot lead out of it.
outside = os.path.join(case, "outside")
os.makedirs(outside)
with open(os.path.join(hf, "model.safetensors.index.json")) as fp:
    weight_map = json.load(fp)["weight_map"]
tensor, st_file = sorted(weight_map.items())[0]
linked = copy_of(hf, "hf-symlink-out")
shutil.move(os.path.join(linked, st_file), os.path.join(outside, st_file))
os.symlink(os.path.join(outside, st_file), os.path.join(linked, st_file))
bounded_error([T, "convert", "--input", linked, "--output", os.path.join(case, "never")],
              ["model.safetensors.index.json", tensor, st_file, "is a symlink to", "outside"],
              "convert: an index entry that is a symlink out of the checkpoint")
absolute = copy_of(hf, "hf-absolute")
edit_json(os.path.join(absolute, "model.safetensors.index.json"),
          lambda j: j["weight_map"].update({tensor: os.path.join(hf, st_file)}))
bounded_error([T, "convert", "--input", absolute, "--output", os.path.join(case, "never")],
              ["model.safetensors.index.json", tensor, "is an absolute path"],
              "convert: an absolute path in the index")

shard = sorted(json.load(open(os.path.join(model, "manifest.json")))["shards"], key=lambda s: s["file"])[0]["file"]
linked_model = copy_of(model, "model-symlink-out")
shutil.move(os.path.join(linked_model, shard), os.path.join(outside, shard))
os.symlink(os.path.join(outside, shard), os.path.join(linked_model, shard))
bounded_error([T, "score", "--model", linked_model, "--input", good, "--output", out],
              ["manifest.json", f"shard '{shard}'", "is a symlink to", "outside"],
              "score: a manifest shard that is a symlink out of the model")
dotdot = copy_of(model, "model-dotdot")
edit_json(os.path.join(dotdot, "manifest.json"), lambda j: j["shards"][0].update(file="../" + j["shards"][0]["file"]))
bounded_error([T, "score", "--model", dotdot, "--input", good, "--output", out],
              ["manifest.json", "has a '..' component"], "score: a '..' shard name in the manifest")

# --- score's logits files appear whole under their name, written beside it
# and renamed: a symlink already at the name is replaced, never written through.
logits = os.path.join(case, "logits")
os.makedirs(logits)
victim = os.path.join(outside, "victim.txt")
with open(victim, "w") as fp:
    fp.write("keep")
os.symlink(victim, os.path.join(logits, "a.npy"))
p = run([T, "score", "--model", model, "--input", good, "--output", os.path.join(case, "logits.jsonl"),
         "--logits-out", logits], check=False)
f.check(p.returncode == 0, f"score --logits-out: exit {p.returncode}: {p.stderr[-500:]}")
f.check(open(victim, "rb").read() == b"keep", "score --logits-out wrote through a symlink at the logits file's name")
f.check(sorted(os.listdir(logits)) == ["a.npy"] and not os.path.islink(os.path.join(logits, "a.npy")),
        f"score --logits-out: files {sorted(os.listdir(logits))}")
f.check(os.path.getsize(os.path.join(logits, "a.npy")) == 128 + 3 * 512 * 4, "logits file size")
f.finish()
