#!/usr/bin/env python3
"""How good is `trillion plan`'s prediction on this machine?

Measures the host (and the RMA link between 2 local ranks) with `trillion
calibrate`, then runs short `trillion generate` jobs on a converted model
(1 and 2 ranks, pipeline and expert, a few batch sizes, plus a prefill run)
and prints, for each, the figure `--metrics` reports (tokens_per_second.decode
or .prefill) next to what `trillion plan --json` predicts for the same shape
(its metrics_tokens_per_s), and the error. The machine is shared: calibrate
and the runs see the same load only roughly, so expect noise.

    /usr/bin/python3 bench/plan_check.py --model build/bench-work/bench-fp8 [--batches 1,8,32] [--ranks 1,2]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ap = argparse.ArgumentParser()
ap.add_argument("--build", default=os.path.join(ROOT, "build"))
ap.add_argument("--model", required=True)
ap.add_argument("--profile", default=None, help="use this profile instead of calibrating now")
ap.add_argument("--batches", default="1,8,32")
ap.add_argument("--ranks", default="1,2")
ap.add_argument("--modes", default="pipeline,expert")
ap.add_argument("--prompt-len", type=int, default=16)
ap.add_argument("--max-tokens", type=int, default=32)
ap.add_argument("--prefill-len", type=int, default=256)
ap.add_argument("--mpirun", default="mpirun")
ap.add_argument("--json", default=None, help="also write the rows here")
args = ap.parse_args()

trillion = os.path.join(args.build, "trillion")
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
tmp = tempfile.mkdtemp(prefix="plan_check_")


def sh(cmd):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
    if p.returncode:
        sys.exit(f"failed: {' '.join(map(str, cmd))}\n{p.stdout}\n{p.stderr}")
    return p.stdout


def launcher(ranks):
    return [args.mpirun, "-np", ranks, "--oversubscribe", "--mca", "osc", "sm"] if ranks > 1 else []


profile = args.profile
if not profile:
    profile = os.path.join(tmp, "profile.json")
    # Wall-clock kernel rates: the runs share the machine's load, so should the profile.
    sh(launcher(2) + [trillion, "calibrate", "--output", profile, "--mib", 512, "--wall-clock"])
prof = json.load(open(profile))
h = prof["host"]
print(f"host: {h['bandwidth_bytes_per_s'] / 1e9:.1f} GB/s all cores, {h['bandwidth_per_core_bytes_per_s'] / 1e9:.1f} "
      f"one core; link {prof.get('link', {}).get('latency_s', 0) * 1e6:.1f} us, "
      f"{prof.get('link', {}).get('bandwidth_bytes_per_s', 0) / 1e9:.2f} GB/s")
vocab = json.load(open(os.path.join(args.model, "config.json")))["vocab_size"]


def prompts(n, length, max_tokens):
    path = os.path.join(tmp, f"p{n}_{length}_{max_tokens}.jsonl")
    with open(path, "w") as f:
        for i in range(n):
            ids = [(7 * i + 13 * j + 1) % vocab for j in range(length)]
            f.write(json.dumps({"id": f"r{i}", "prompt_token_ids": ids, "max_tokens": max_tokens}) + "\n")
    return path


def measure(ranks, mode, batch, phase):
    if phase == "decode":
        req, slots = prompts(batch, args.prompt_len, args.max_tokens), batch
    else:
        req, slots = prompts(2, args.prefill_len, 1), 1
    out, met = os.path.join(tmp, "out.jsonl"), os.path.join(tmp, "metrics.json")
    for f in (out, met):
        if os.path.exists(f):
            os.remove(f)
    sh(launcher(ranks) + [trillion, "generate", "--model", args.model, "--prompts", req, "--output", out,
                          "--metrics", met, "--max-batch", slots, "--parallel", mode, "--no-verify",
                          "--max-len", 512])
    return json.load(open(met))["tokens_per_second"][phase]


def predict(ranks, mode, batch):
    ctx = args.prompt_len + args.max_tokens // 2
    j = json.loads(sh([trillion, "plan", "--model", args.model, "--ranks", ranks, "--parallel", mode, "--profile",
                       profile, "--batch", batch, "--context", ctx, "--step-tokens", args.prefill_len,
                       "--max-batch", batch, "--max-len", 512, "--json"]))
    return {(p["mode"], p["phase"]): p for p in j["predictions"]}


rows = []
print(f"{'ranks':>5} {'mode':9} {'phase':8} {'batch':>5} {'measured':>10} {'predicted':>10} {'error':>7}  bound")
for ranks in [int(r) for r in args.ranks.split(",")]:
    for mode in args.modes.split(","):
        if ranks == 1 and mode == "expert":
            continue  # one rank: the same run as pipeline
        cases = [("decode", int(b)) for b in args.batches.split(",")] + [("prefill", args.prefill_len)]
        for phase, batch in cases:
            pred = predict(ranks, mode, batch if phase == "decode" else 1)[(mode, phase)]
            got = measure(ranks, mode, batch, phase)
            err = pred["metrics_tokens_per_s"] / got - 1
            rows.append({"ranks": ranks, "mode": mode, "phase": phase, "batch": batch, "measured": got,
                         "predicted": pred["metrics_tokens_per_s"], "error": err, "bound": pred["bound"]})
            print(f"{ranks:5} {mode:9} {phase:8} {batch:5} {got:10.1f} {pred['metrics_tokens_per_s']:10.1f} "
                  f"{err * 100:+6.0f}%  {pred['bound']}", flush=True)
within = sum(abs(r["error"]) <= 0.25 for r in rows)
print(f"{within} of {len(rows)} within 25%")
if args.json:
    with open(args.json, "w") as f:
        json.dump({"profile": prof, "rows": rows}, f, indent=2)
