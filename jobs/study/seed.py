"""The seed cluster, projected: `trillion plan` for the models this project
exists for (DeepSeek-V3 FP8, Kimi K2 Thinking INT4, native formats) on four
Mac Studios over Thunderbolt 5 RDMA, from the shipped profiles (estimated
from published figures, not measured by us: profiles/*.json say where each
comes from). The study's report shows it beside the emulated measurements,
so a reader sees what the same model of a step, given estimated profiles,
predicts for the hardware the study is about."""
import json
import os
import subprocess

from .paths import PROFILES

MODELS = [("DeepSeek-V3 FP8", "models/deepseek-v3.json"),
          ("Kimi K2 Thinking INT4", "models/kimi-k2-thinking.json")]
CLUSTERS = [("4x M2 Ultra 192 GB", "mac-studio-m2-ultra-192g.json"),
            ("4x M3 Ultra 512 GB", "mac-studio-m3-ultra-512g.json")]
LINK = "tb5-rdma.json"
RANKS = 4
BATCHES = (1, 8, 32, 128)


def rows_from_plan(model, cluster, plan):
    """One row per mode from `trillion plan --json`: fits, decode tokens/s per
    batch, prefill tokens/s, and what bounds batch 1."""
    rows = []
    for mode in ("pipeline", "expert"):
        preds = [p for p in plan.get("predictions", []) if p.get("mode") == mode]
        if not preds:
            continue
        decode = {int(p["batch"]): p for p in preds if p.get("phase") == "decode"}
        prefill = next((p for p in preds if p.get("phase") == "prefill"), None)
        rows.append({"model": model, "cluster": cluster, "mode": mode, "fits": bool(plan.get("fits")),
                     "decode": {b: decode[b]["tokens_per_s"] for b in BATCHES if b in decode},
                     "prefill": prefill["tokens_per_s"] if prefill else None,
                     "bound_b1": decode[1]["bound"] if 1 in decode else None})
    return rows


def project(trillion, log=lambda s: None):
    """(rows, problems): every model on every cluster; a plan that fails is a
    problem line, not an exception (the study's measurements still report)."""
    rows, problems = [], []
    for model, config in MODELS:
        for cluster, profile in CLUSTERS:
            cmd = [trillion, "plan", "--config", os.path.join(PROFILES, config), "--ranks", str(RANKS),
                   "--profile", os.path.join(PROFILES, profile), "--link-profile", os.path.join(PROFILES, LINK),
                   "--json"]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            try:  # a plan that does not fit still prints its JSON (and exits 1)
                plan = json.loads(proc.stdout)
            except json.JSONDecodeError:
                plan = None
            if plan is None:
                why = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
                problems.append(f"{model} on {cluster}: trillion plan failed: {why}")
                log(problems[-1])
                continue
            rows.extend(rows_from_plan(model, cluster, plan))
    return rows, problems
