"""The study's markdown report: what was run, every point's measured and
predicted throughput with the prediction's error, the pipeline efficiency
(2 ranks over 1 on the same batch), and the plots."""
import os

from .plots import num
from .seed import BATCHES as SEED_BATCHES

ERROR_BAR = 0.25  # issue 11: every point's prediction within 25% of the measurement


def fmt(v, spec):
    x = num(v)
    return "—" if x is None else format(x, spec)


def throughput_cell(r):
    """The row's tok/s; for a point run more than once, its median run's
    and the range over the runs."""
    cell = fmt(r.get("measured_tokens_per_s"), ".1f")
    n = int(num(r.get("repeats")) or 1)
    if n > 1 and num(r.get("measured_min")) is not None:
        cell += f" ({fmt(r['measured_min'], '.1f')}–{fmt(r['measured_max'], '.1f')}, {n} runs)"
    return cell


def efficiency(rows):
    """[(link, batch, k, stages, 2-rank pipeline tok/s, 1-rank tok/s, ratio)]."""
    base = {int(r["batch"]): num(r.get("measured_tokens_per_s")) for r in rows if int(r["ranks"]) == 1}
    out = []
    for r in rows:
        if int(r["ranks"]) == 2 and r["mode"] == "pipeline":
            b = int(r["batch"])
            two, one = num(r.get("measured_tokens_per_s")), base.get(b)
            if two and one:
                out.append((r["link"], b, int(r["micro_batches"]), r.get("stages") or "bytes", two, one, two / one))
    return out


def seed_section(L, rows, problems):
    """`seed.project`'s rows: the seed cluster, projected by the same model."""
    L.append("## The seed cluster, projected")
    L.append("")
    L.append("`trillion plan` for four Mac Studios over Thunderbolt 5 RDMA, native formats, from the shipped "
             "profiles (`profiles/`: estimated from published figures, not measured by us), 4 ranks:")
    L.append("")
    if rows:
        L.append("| model | cluster | mode | fits | " + " | ".join(f"b={b}" for b in SEED_BATCHES) + " | prefill | b=1 bound |")
        L.append("|---|---|---|---|" + "---|" * len(SEED_BATCHES) + "---|---|")
        for r in rows:
            d = r["decode"]
            cells = " | ".join(fmt(d.get(b), ".1f") for b in SEED_BATCHES)
            L.append(f"| {r['model']} | {r['cluster']} | {r['mode']} | {'yes' if r['fits'] else 'no'} | {cells} | "
                     f"{fmt(r['prefill'], '.0f')} | {r['bound_b1'] or '—'} |")
        L.append("")
    for p in problems:
        L.append(f"- {p}")
    if problems:
        L.append("")


def write(path, rows, cfg, plots, command, missing=(), seed=None):
    here = os.path.dirname(os.path.abspath(path))
    rel = {k: os.path.relpath(v, here) for k, v in plots.items()}
    errors = [num(r.get("error")) for r in rows]
    have = [e for e in errors if e is not None]
    L = ["# Scaling study", ""]
    L.append(f"Model `{os.path.basename(cfg['model'].rstrip('/'))}`; {cfg['prompt_tokens']} prompt tokens and exactly {cfg['tokens']} generated "
             f"tokens per request (`ignore_eos`, `min_tokens`), one request per batch slot; "
             f"{cfg['threads']} thread(s) per rank; {len(rows)} point(s).")
    L.append("")
    L.append(f"Command: `{command}`")
    L.append("")
    L.append("## How the cluster is emulated")
    L.append("")
    L.append(f"Each rank is a host: a network namespace on a bridge, its link rate-limited by `tc tbf` in both "
             f"directions to the link profile's bandwidth. The kernel has no `netem`, so no latency is added: a "
             f"link's latency is the namespaces' own (a small notified put takes ~0.1 ms), which the profiles "
             f"state as measured. Host i is pinned to core i mod {cfg['cores']} (this machine has {cfg['cores']}): "
             f"with more ranks than cores, ranks share cores, so the 4-rank figures measure time-slicing as much "
             f"as the links, and ranks' busy time includes waiting for a core.")
    L.append("")
    for name, link in sorted(cfg["links"].items()):
        bw = link["rate_bytes_per_s"]
        L.append(f"- link `{name}`: " + (f"tbf {bw / 1e6:.0f} MB/s" if bw else "no rate limit (veth, ~1 GB/s)") +
                 f", latency {link['latency_s'] * 1e3:.2f} ms (measured, not injected)")
    prof = cfg.get("host_profile")
    L.append("")
    L.append("Predictions: `trillion plan --emulated` (every host a namespace of this machine: ranks share its "
             "cores, host i pinned to core i mod cores, and its bandwidth) with host profile "
             + (f"`{os.path.relpath(prof, cfg['study']) if os.path.dirname(os.path.abspath(prof)) == os.path.abspath(cfg['study']) else prof}`"
                if prof else "the built-in default") + "; `trillion calibrate` measured it unless given.")
    own = sum(1 for r in rows if r.get("profile") == "point")
    if own:
        L.append("")
        L.append(f"{own} of {len(rows)} point(s) were predicted from a calibration of their own, run just before "
                 f"the point (`--recalibrate`: `points/<point>/profile.json`), so that the machine's drift "
                 f"between points is not counted as the model's error.")
    L.append("")
    L.append("## Points")
    L.append("")
    L.append("Load: the machine's 1-minute load average before and after the point (other jobs share its "
             f"{cfg['cores']} cores; a load above the core count slows every rank).")
    L.append("")
    L.append("Throughput is generated tokens over the generation's wall time (prefill included); the "
             "prediction is the plan's prefill and decode rates applied to the same workload, and the error is "
             "predicted / measured − 1. Micro-batches: as asked (the metrics file says how many ran).")
    L.append("")
    runs = max((int(num(r.get("repeats")) or 1) for r in rows), default=1)
    if runs > 1:
        L.append(f"Each point ran up to {runs} times, in rounds (the whole grid once per round, so a point's runs "
                 "are minutes apart, in whatever phases the machine's speed drifts through): each row is the "
                 "point's median run, with the range of its runs' throughput; the error, load and prediction are "
                 "that run's.")
        L.append("")
    L.append("| point | ranks | mode | batch | micro-batches | link | tok/s | metrics prefill tok/s | predicted "
             "tok/s | error | decode bound | load before / after |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        e = num(r.get("error"))
        err = "no prediction" if e is None else f"{e * 100:+.1f}%" + (" **over 25%**" if abs(e) > ERROR_BAR else "")
        L.append(f"| {r['point']} | {r['ranks']} | {r['mode']} | {r['batch']} | {r['micro_batches'] or 'auto'} | "
                 f"{r['link']} | {throughput_cell(r)} | "
                 f"{fmt(r.get('metrics.tokens_per_second.prefill'), '.1f')} | "
                 f"{fmt(r.get('predicted_tokens_per_s'), '.1f')} | {err} | "
                 f"{r.get('predicted_decode_bound') or '—'} | "
                 f"{fmt(r.get('load_before'), '.1f')} / {fmt(r.get('load_after'), '.1f')} |")
    L.append("")
    if missing:
        L.append(f"Not measured yet ({len(missing)}): " + ", ".join(f"`{m}`" for m in missing) +
                 " — rerun the command to measure them.")
        L.append("")
    if have:
        within = sum(abs(e) <= ERROR_BAR for e in have)
        L.append(f"Prediction error (predicted / measured − 1): {within} of {len(have)} predicted point(s) within "
                 f"±25%; largest |error| {max(abs(e) for e in have) * 100:.1f}%."
                 + (f" {len(rows) - len(have)} point(s) have no prediction." if len(have) < len(rows) else ""))
    else:
        L.append("No prediction: `trillion plan` gave no `predictions` for these points, so the predicted "
                 "columns are empty.")
    L.append("")
    L.append("## Pipeline efficiency")
    L.append("")
    eff = efficiency(rows)
    if eff:
        L.append("Throughput of 2 pipeline ranks over 1 rank, same batch and threads per rank:")
        L.append("")
        L.append("| link | batch | micro-batches | stages | 2 ranks tok/s | 1 rank tok/s | ratio |")
        L.append("|---|---|---|---|---|---|---|")
        for link, b, k, st, two, one, ratio in eff:
            L.append(f"| {link} | {b} | {k or 'auto'} | {st} | {two:.1f} | {one:.1f} | {ratio:.2f} |")
    else:
        L.append("Not measured (the study has no 1-rank and 2-rank pipeline points of the same batch).")
    L.append("")
    if seed is not None:
        seed_section(L, *seed)
    L.append("## Plots")
    L.append("")
    titles = {"throughput": "Throughput vs ranks, per mode",
              "step_time": "Per-rank busy / wait / other time per step",
              "bytes": "Bytes exchanged per generated token",
              "predicted": "Predicted vs measured throughput"}
    for k, t in titles.items():
        L.append(f"### {t}")
        L.append("")
        L.append(f"![{t}]({rel[k]})")
        L.append("")
    with open(path + ".tmp", "w") as fp:
        fp.write("\n".join(L))
    os.replace(path + ".tmp", path)
