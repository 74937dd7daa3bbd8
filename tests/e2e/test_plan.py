"""`trillion plan` before the download and with profiles: a plan from the HF
checkpoint's config.json holds exactly what the converted model's does
(weight bytes and shard files per rank, both modes); DeepSeek-V3's real
config fits on four 192 GB hosts and is refused, with the shortfall, on
four 100 GB ones; predictions cover both modes, decode batches and prefill;
bad flags and profiles are clear errors; `trillion calibrate` writes a
profile `plan` reads. `--quantize int8` of an FP8 config plans what
`convert --quantize int8` writes, and DeepSeek-V3 so fits four 192 GB hosts
on the int8 path, where its FP8 weights with their int8 copy do not, so
`--activations auto` takes bf16 (where the profile's kernel rates say it
beats f32) or f32 for it, and bf16 or int8 for a small FP8 model."""
import json
import os

from harness import ROOT, run, start

args, f, hf, model, case = start("plan", preset="tiny", fmt="fp8")
T = args.trillion
PROFILES = os.path.join(ROOT, "profiles")


def plan(*extra, check=True):
    p = run([T, "plan", *extra, "--json"], check=check)
    return json.loads(p.stdout) if p.returncode == 0 else p


# 1. --config (the HF directory) plans what the conversion holds.
for mode in ("pipeline", "expert"):
    a = plan("--model", model, "--ranks", "2", "--parallel", mode)
    b = plan("--config", hf, "--ranks", "2", "--parallel", mode)
    for ra, rb in zip(a["per_rank"], b["per_rank"]):
        f.check(ra["weight_bytes"] == rb["weight_bytes"] and ra["files"] == rb["files"],
                f"{mode} rank {ra['rank']}: --config {rb['weight_bytes']} bytes {len(rb['files'])} files, "
                f"--model {ra['weight_bytes']} bytes {len(ra['files'])} files")
    f.check(a["bytes_per_token"] == b["bytes_per_token"], f"{mode}: bytes per token agree")
# The same for an FP8 checkpoint converted to int8.
q8 = os.path.join(case, "model-int8-from-fp8")
run([T, "convert", "--input", hf, "--output", q8, "--quantize", "int8", "--force", "--quiet"])
a = plan("--model", q8, "--ranks", "2")
b = plan("--config", hf, "--ranks", "2", "--quantize", "int8")
f.check(a["weight_format"] == b["weight_format"] == "int8", f"fp8 -> int8: {a['weight_format']}, {b['weight_format']}")
f.check([(r["weight_bytes"], r["files"]) for r in a["per_rank"]] ==
        [(r["weight_bytes"], r["files"]) for r in b["per_rank"]],
        "fp8 -> int8: --config --quantize int8 plans the bytes and files convert --quantize int8 wrote")

# 2. The real DeepSeek-V3 config on four Mac Studios.
ds = os.path.join(PROFILES, "models", "deepseek-v3.json")
m2 = ["--profile", os.path.join(PROFILES, "mac-studio-m2-ultra-192g.json"),
      "--link-profile", os.path.join(PROFILES, "tb5-rdma.json")]
j = plan("--config", ds, "--ranks", "4", *m2)
f.check(j["fits"] and len(j["per_host"]) == 4, "DeepSeek-V3 FP8 fits on four 192 GB hosts")
f.check(abs(sum(r["weight_bytes"] for r in j["per_rank"]) / 1e9 - 680) < 15, "about 680 GB of FP8 weights")
keys = {(p["mode"], p["phase"], p["batch"]) for p in j["predictions"]}
want = {(m, "decode", b) for m in ("pipeline", "expert") for b in (1, 8, 32, 128)} | \
       {(m, "prefill", 256) for m in ("pipeline", "expert")}
f.check(keys == want, f"predictions for both modes, batches and prefill: {sorted(keys)}")
f.check(all(p["tokens_per_s"] > 0 and p["bound"] in ("memory", "compute", "link") for p in j["predictions"]),
        "every prediction has a rate and a bound")
rate = {(p["mode"], p["batch"]): p["tokens_per_s"] for p in j["predictions"] if p["phase"] == "decode"}
f.check(rate[("pipeline", 128)] > 4 * rate[("pipeline", 1)], "batching raises pipeline throughput")
# --stages auto: the split by predicted time, named in the JSON and used for
# the layout; at 32 sequences (4 groups of 8) its slowest stage, and so the
# pipeline's rate, is no worse than the byte-balanced split's.
by_time = plan("--config", ds, "--ranks", "4", "--max-batch", "32", "--batch", "32", "--stages", "auto", *m2)
by_bytes = plan("--config", ds, "--ranks", "4", "--max-batch", "32", "--batch", "32", *m2)
st = [tuple(int(x) for x in part.split("-")) for part in by_time.get("stages", "").split(",") if part]
f.check(len(st) == 4 and st[0][0] == 0 and st[-1][1] == 60 and
        all(a[1] + 1 == b[0] for a, b in zip(st, st[1:])), f"--stages auto: four contiguous stages ({st})")
f.check([tuple(r["layers"]) for r in by_time["per_rank"]] == st, "the layout is the stages auto chose")
rate_of = lambda j: next(p["tokens_per_s"] for p in j["predictions"]
                         if (p["mode"], p["phase"], p["batch"]) == ("pipeline", "decode", 32))
f.check(rate_of(by_time) >= 0.999 * rate_of(by_bytes),
        f"--stages auto predicts no slower than bytes: {rate_of(by_time):.2f} vs {rate_of(by_bytes):.2f} tokens/s")
# Its head split: the JSON's head_split is where the first stage's lm_head
# rows end and the last stage's begin, and the stages between hold none.
hs = by_time.get("head_split", -1)
rows = [tuple(r["head_rows"]) for r in by_time["per_rank"]]
f.check(0 <= hs < 129280 and hs % 128 == 0 and rows[0] == (0, hs) and rows[-1] == (hs, 129280) and
        all(r[0] == r[1] for r in rows[1:-1]), f"--stages auto's head split {hs}: rows {rows}")
f.expect_error([T, "plan", "--config", ds, "--ranks", "2", "--parallel", "expert", "--stages", "auto"],
               ["--stages", "pipeline"], "--stages auto in expert mode")
small = run([T, "plan", "--config", ds, "--ranks", "4", "--host-memory", "100G", *m2], check=False)
f.check(small.returncode == 1 and "DOES NOT FIT" in small.stdout and "short" in small.stdout,
        f"four 100 GB hosts are refused with the shortfall (exit {small.returncode})")
j = plan("--config", ds, "--ranks", "4", "--host-memory", "100G", *m2)
f.check(not j["fits"] and all(h["shortfall_bytes"] > 0 for h in j["per_host"]), "--json says fits: false")
# The int8 path: FP8 weights with an int8 copy do not fit; converted to int8 they do, with no copy.
copy = plan("--config", ds, "--ranks", "4", "--activations", "int8", *m2)
conv = plan("--config", ds, "--ranks", "4", "--activations", "int8", "--quantize", "int8", *m2)
f.check(not copy["fits"] and all(r["int8_copy_bytes"] > 0 for r in copy["per_rank"]),
        "DeepSeek-V3 FP8 + its int8 copy does not fit four 192 GB hosts")
f.check(conv["fits"] and conv["weight_format"] == "int8" and all(r["int8_copy_bytes"] == 0 for r in conv["per_rank"]),
        "DeepSeek-V3 converted to int8 fits four 192 GB hosts, no copy")
# --activations auto on FP8 picks by the same rule as a run: bf16 where the
# profile's fp8/bf16 rate at batch 32 beats fp8/f32's, else int8 where the
# plan with the int8 copy fits every host, else f32. Profiles of our own,
# so the shipped figures may change.
shipped = json.load(open(os.path.join(PROFILES, "mac-studio-m2-ultra-192g.json")))
def profile(name, bf16_factor):
    prof = json.loads(json.dumps(shipped))
    kernels = prof["host"]["kernels"]
    kernels.pop("fp8/bf16", None)
    (prof["host"].get("kernels_streaming") or {}).pop("fp8/bf16", None)
    if bf16_factor:
        kernels["fp8/bf16"] = {b: r * bf16_factor for b, r in kernels["fp8/f32"].items()}
    path = os.path.join(case, name)
    with open(path, "w") as fp:
        json.dump(prof, fp)
    return path
fast = profile("m2-fast-bf16.json", 1.5)
plain = profile("m2-no-bf16.json", 0)
link = ["--link-profile", os.path.join(PROFILES, "tb5-rdma.json")]
j = plan("--config", ds, "--ranks", "4", "--profile", fast, *link)
f.check(j["activations"] == "bf16" and j["fits"] and all(r["int8_copy_bytes"] == 0 for r in j["per_rank"]),
        f"auto, DeepSeek-V3 FP8 on 4 x 192 GB with a faster fp8/bf16: bf16 ({j['activations']})")
f.check("exceeds" in j["activations_reason"], f"the reason names the rates: {j['activations_reason']}")
j = plan("--config", ds, "--ranks", "4", "--profile", plain, *link)
f.check(j["activations"] == "f32" and j["fits"] and "no fp8/bf16" in j["activations_reason"] and
        "int8 copy" in j["activations_reason"],
        f"auto, DeepSeek-V3 FP8, a profile without fp8/bf16: f32 ({j['activations']}: {j['activations_reason']})")
j = plan("--model", model, "--ranks", "2", "--profile", plain)
f.check(j["activations"] == "int8" and all(r["int8_copy_bytes"] > 0 for r in j["per_rank"]) and
        "fits" in j["activations_reason"], f"auto, a small FP8 model that fits, no fp8/bf16: int8 ({j['activations']})")
j = plan("--model", model, "--ranks", "2", "--profile", fast)
f.check(j["activations"] == "bf16" and all(r["int8_copy_bytes"] == 0 for r in j["per_rank"]),
        f"auto, a small FP8 model, a faster fp8/bf16: bf16 first, no copy ({j['activations']})")
j = plan("--config", ds, "--ranks", "4", "--profile", plain, "--activations", "int8", *link)
f.check(j["activations"] == "int8" and j["activations_reason"] == "--activations int8", "an explicit path is kept")
text = run([T, "plan", "--config", ds, "--ranks", "4", "--profile", fast, *link])
f.check("compute path bf16: auto: the host profile's fp8/bf16 rate" in text.stdout, "the text plan says which path and why")

# 3. Errors name the flag or the field.
f.expect_error([T, "plan", "--config", ds, "--ranks", "4", "--host-memory", "12X"], ["--host-memory", "12X"],
               "a bad size")
f.expect_error([T, "plan", "--config", ds, "--ranks", "4", "--ranks-per-host", "1", "--host-memory", "1G,2G"], ["--host-memory", "4 hosts"],
               "one memory per host")
f.expect_error([T, "plan", "--config", ds, "--ranks", "2", "--batch", "1,0"], ["--batch", "\"0\""], "a zero batch")
bad = os.path.join(case, "bad-profile.json")
with open(bad, "w") as fp:
    json.dump({"host": {"name": "x", "memory_bytes": 1e9, "cores": 2, "vector_flops_per_core": 1e9,
                        "kernels": {"fp8/f32": {"1": 1e9}}}}, fp)
f.expect_error([T, "plan", "--config", ds, "--ranks", "2", "--profile", bad], [bad, "bandwidth_bytes_per_s"],
               "a profile without bandwidth")
f.expect_error([T, "plan", "--config", ds, "--model", model, "--ranks", "2"], ["--model", "--config"],
               "--model and --config together")
f.expect_error([T, "plan", "--config", ds, "--ranks", "2", "--quantize", "int4"],
               ["--quantize int4", "an fp8 checkpoint is quantized to int8 only"], "--quantize int4 of an FP8 config")

# 4. calibrate writes a profile plan reads.
prof = os.path.join(case, "this-host.json")
run([T, "calibrate", "--quick", "--mib", "16", "--output", prof, "--name", "e2e-host"])
p = json.load(open(prof))
f.check(p["host"]["name"] == "e2e-host" and "fp8/f32" in p["host"]["kernels"] and
        all(v.startswith("measured") for v in p["host"]["sources"].values()), "calibrate: labelled measured figures")
j = plan("--model", model, "--ranks", "2", "--profile", prof)
f.check(j["host_profile"]["name"] == "e2e-host" and j["predictions"], "plan reads the calibrated profile")
f.finish()
