"""One CSV row per measured run of a point (its repeat in "rep"): its parameters, every field of its
metrics file flattened under "metrics." (nested keys joined by ".", per-rank
entries as metrics.per_rank.<i>.<field>), derived figures, and the plan's
prediction for the point (empty columns when there is none).

The throughput compared with the prediction is the one a user sees: generated
tokens over the generation's wall time (metrics tokens.generated /
seconds.generation). metrics' tokens_per_second.decode divides by the summed
submit-to-result time of decode steps, which counts each of M pipeline steps
in flight separately, so it is not the pipeline's throughput. The plan's
prediction is turned into the same quantity for the point's workload: B
requests of P prompt tokens and T generated tokens take B*P / prefill tok/s
(their first tokens come out of prefill) plus (T - 1) decode steps at batch B,
B*(T-1) / decode tok/s."""
import csv
import json
import os

from .points import base_id, point_id
from .sweep import read_json

PARAMS = ["point", "rep", "ranks", "mode", "batch", "micro_batches", "stages", "link", "load_before", "load_after",
          "profile"]
PREDICTED = ["measured_tokens_per_s", "predicted_tokens_per_s", "error", "predicted_decode_tokens_per_s",
             "predicted_decode_step_seconds", "predicted_decode_bound", "predicted_prefill_tokens_per_s"]


def flatten(value, prefix=""):
    """{"a": {"b": 1}, "l": [{"x": 2}]} -> {"a.b": 1, "l.0.x": 2}."""
    out = {}
    if isinstance(value, dict):
        for k in sorted(value):
            out.update(flatten(value[k], f"{prefix}{k}."))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.update(flatten(v, f"{prefix}{i}."))
    else:
        out[prefix[:-1]] = value
    return out


def prediction(plan, p):
    """The plan's decode and prefill entries for the point's mode and batch."""
    found = {}
    if not plan:
        return found
    mode = "pipeline" if p.mode == "single" else p.mode
    for e in plan.get("predictions", []):
        # A decode entry per batch; the prefill entry's "batch" is its step's prompt tokens.
        if not isinstance(e, dict) or (e.get("phase") == "decode" and e.get("batch") != p.batch):
            continue
        if e.get("mode") not in (None, mode):
            continue
        if e.get("phase") in ("decode", "prefill") and e.get("phase") not in found:
            found[e["phase"]] = e
    return found


def per_step(metrics):
    """Per-rank seconds per step: busy (computing), wait (blocked on a peer)
    and other (generation time neither: sending, MPI progress, scheduling)."""
    steps = max(1, int(metrics.get("steps") or 0))
    gen = float(metrics.get("seconds", {}).get("generation") or 0)
    out = {}
    for r in metrics.get("per_rank", []):
        i = r.get("rank", 0)
        busy, wait = float(r.get("busy_seconds") or 0), float(r.get("wait_seconds") or 0)
        out[f"step.{i}.busy_seconds"] = busy / steps
        out[f"step.{i}.wait_seconds"] = wait / steps
        out[f"step.{i}.other_seconds"] = max(0.0, gen - busy - wait) / steps
    return out


def positive(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0


def predicted_workload(pred, batch, prompt_tokens, tokens):
    """Generated tokens/s the plan predicts for the point's workload (see the top), or None."""
    dec = pred.get("decode", {}).get("tokens_per_s")
    pre = pred.get("prefill", {}).get("tokens_per_s")
    if not positive(dec) or (not positive(pre) and prompt_tokens > 0):
        return None
    seconds = (batch * prompt_tokens / pre if prompt_tokens else 0) + batch * (tokens - 1) / dec
    return batch * tokens / seconds if seconds > 0 else None


def row(p, metrics, plan, prompt_tokens, tokens, load=None):
    r = {"point": base_id(p), "rep": p.rep, "ranks": p.ranks, "mode": p.mode, "batch": p.batch,
         "micro_batches": p.micro_batches, "stages": p.stages, "link": p.link}
    # The machine's 1-minute load average around the run (sweep.py): other jobs on the cores slow a point.
    r["load_before"] = (load or {}).get("loadavg_1min_before", "")
    r["load_after"] = (load or {}).get("loadavg_1min_after", "")
    # Which host profile predicted it: the point's own calibration (--recalibrate) or the study's.
    r["profile"] = "point" if (load or {}).get("own_profile") else "study"
    r.update(flatten(metrics, "metrics."))
    r.update(per_step(metrics))
    generated = int(metrics.get("tokens", {}).get("generated") or 0)
    wall = float(metrics.get("seconds", {}).get("generation") or 0)
    r["measured_tokens_per_s"] = generated / wall if wall > 0 else ""
    r["bytes_sent_per_token"] = (sum(int(x.get("bytes_sent") or 0) for x in metrics.get("per_rank", [])) /
                                 max(1, generated))
    pred = prediction(plan, p)
    for k in PREDICTED[1:]:
        r[k] = ""
    if "decode" in pred:
        d = pred["decode"]
        r["predicted_decode_tokens_per_s"] = d.get("tokens_per_s", "")
        r["predicted_decode_step_seconds"] = d.get("step_seconds", "")
        r["predicted_decode_bound"] = d.get("bound", "")
    if "prefill" in pred:
        r["predicted_prefill_tokens_per_s"] = pred["prefill"].get("tokens_per_s", "")
    w = predicted_workload(pred, p.batch, prompt_tokens, tokens)
    if w is not None:
        r["predicted_tokens_per_s"] = w
        if positive(r["measured_tokens_per_s"]):
            r["error"] = w / r["measured_tokens_per_s"] - 1
    return r


def medians(rows):
    """One row per point over its repeats (rows of one point share "point"),
    in first-seen order: the run whose throughput is the median (the lower
    of the two middle ones for an even count, so always a real run, whose
    every figure and prediction belong together), plus repeats and the
    throughput's min and max over the runs."""
    groups = {}
    for r in rows:
        groups.setdefault(r["point"], []).append(r)
    out = []
    for runs in groups.values():
        rated = sorted((r for r in runs if positive(r.get("measured_tokens_per_s"))),
                       key=lambda r: r["measured_tokens_per_s"])
        pick = dict(rated[(len(rated) - 1) // 2] if rated else runs[0])
        pick["repeats"] = len(runs)
        pick["measured_min"] = rated[0]["measured_tokens_per_s"] if rated else ""
        pick["measured_max"] = rated[-1]["measured_tokens_per_s"] if rated else ""
        out.append(pick)
    return out


def load(study, points):
    """(point, metrics, plan, load) of every measured point, in study order
    (load: load.json's figures, and own_profile: whether --recalibrate gave
    the point a profile of its own)."""
    out = []
    for p in points:
        d = os.path.join(study, "points", point_id(p))
        try:
            with open(os.path.join(d, "metrics.json")) as fp:
                m = json.load(fp)
        except (OSError, ValueError):
            continue
        if m.get("final") is not True:
            continue
        plan = read_json(os.path.join(d, "plan.json"))
        load = read_json(os.path.join(d, "load.json"))
        load = dict(load) if isinstance(load, dict) else {}
        load["own_profile"] = os.path.exists(os.path.join(d, "profile.json"))
        out.append((p, m, plan, load))
    return out


def write_csv(path, rows):
    """Columns: the parameters, then every other field in sorted order (a field
    missing from a row, e.g. per_rank.3.* at 2 ranks, is empty)."""
    keys = set()
    for r in rows:
        keys.update(r)
    rest = sorted(k for k in keys if k not in PARAMS and k not in PREDICTED)
    columns = PARAMS + PREDICTED + rest
    with open(path + ".tmp", "w", newline="") as fp:
        w = csv.DictWriter(fp, fieldnames=columns, restval="")
        w.writeheader()
        for r in rows:
            w.writerow(r)
    os.replace(path + ".tmp", path)
    return columns
