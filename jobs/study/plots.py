"""The study's PNG plots, drawn with matplotlib (Debian's python3-matplotlib)
from the CSV rows (collect.row), so a plot shows exactly what the CSV says."""
import os

import matplotlib

matplotlib.use("Agg")  # files only: no display here or in CI
import matplotlib.pyplot as plt  # noqa: E402

FILES = {
    "throughput": "throughput_vs_ranks.png",
    "step_time": "per_rank_step_time.png",
    "bytes": "bytes_exchanged.png",
    "predicted": "predicted_vs_measured.png",
}


STYLE = {"pipeline": "-o", "expert": "--s"}


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def links_of(rows):
    return sorted({r["link"] for r in rows if r["link"] != "none"}) or ["none"]


def series(rows, link, mode, batch, k, y, stages="bytes"):
    """(ranks, y) of one line: the 1-rank baseline, then mode's points on link
    (pipeline: those with k micro-batches and that split)."""
    pts = [(int(r["ranks"]), num(y(r))) for r in rows
           if int(r["batch"]) == batch and
           (int(r["ranks"]) == 1 or (r["link"] == link and r["mode"] == mode and int(r["micro_batches"]) == k
                                     and (r.get("stages") or "bytes") == stages))]
    pts = sorted((x, v) for x, v in pts if v is not None)
    return [x for x, _ in pts], [v for _, v in pts]


def lines(rows):
    """(mode, k, stages, batch, label) of every line to draw."""
    out = []
    for mode in ("pipeline", "expert"):
        ks = sorted({int(r["micro_batches"]) for r in rows if r["mode"] == mode}) or [0]
        splits = sorted({r.get("stages") or "bytes" for r in rows if r["mode"] == mode}) or ["bytes"]
        for k in ks:
            for st in splits:
                for batch in sorted({int(r["batch"]) for r in rows}):
                    kl = "" if len(ks) == 1 else f", {k or 'auto'} micro-batches"
                    sl = "" if len(splits) == 1 else f", stages {st}"
                    out.append((mode, k, st, batch, f"{mode}, batch {batch}{kl}{sl}"))
    return out


def per_link(rows, path, field, title, ylabel, scale=1.0):
    """One panel per link: `field` against ranks, a line per (mode, micro-batches, batch)."""
    links = links_of(rows)
    fig, axes = plt.subplots(1, len(links), figsize=(5.5 * len(links), 4), squeeze=False)
    for ax, link in zip(axes[0], links):
        for mode, k, st, batch, label in lines(rows):
            xs, ys = series(rows, link, mode, batch, k, lambda r: r.get(field), st)
            if len(xs) > 1 or (xs and all(int(r["ranks"]) == 1 for r in rows)):
                ax.plot(xs, [y * scale for y in ys], STYLE[mode], label=label)
        ax.set_title(f"{title}, link {link}")
        ax.set_xlabel("ranks (emulated hosts)")
        ax.set_ylabel(ylabel)
        ax.set_xticks(sorted({int(r["ranks"]) for r in rows}))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def throughput(rows, path):
    per_link(rows, path, "measured_tokens_per_s", "throughput", "generated tokens/s (wall time)")


def step_time(rows, path):
    """Stacked bars per rank of each multi-rank point at the largest batch."""
    multi = [r for r in rows if int(r["ranks"]) > 1]
    pick = multi or rows
    top = max(int(r["batch"]) for r in pick)
    pick = [r for r in pick if int(r["batch"]) == top]
    labels, busy, wait, other = [], [], [], []
    for r in pick:
        for i in range(int(r["ranks"])):
            labels.append(f"{r['point']}\nrank {i}")
            busy.append(1e3 * (num(r.get(f"step.{i}.busy_seconds")) or 0))
            wait.append(1e3 * (num(r.get(f"step.{i}.wait_seconds")) or 0))
            other.append(1e3 * (num(r.get(f"step.{i}.other_seconds")) or 0))
    fig, ax = plt.subplots(figsize=(max(6, 0.55 * len(labels) + 2), 4.5))
    xs = range(len(labels))
    ax.bar(xs, busy, label="busy (compute)")
    ax.bar(xs, wait, bottom=busy, label="wait (blocked on a peer)")
    ax.bar(xs, other, bottom=[b + w for b, w in zip(busy, wait)], label="other (exchange, MPI, scheduling)")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, rotation=90, fontsize=6)
    ax.set_ylabel("ms per step")
    ax.set_title(f"per-rank time per step, batch {top}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def bytes_exchanged(rows, path):
    per_link(rows, path, "bytes_sent_per_token", "bytes sent per generated token", "KiB per token (all ranks)",
             1 / 1024)


def predicted(rows, path):
    pts = [(num(r.get("measured_tokens_per_s")), num(r.get("predicted_tokens_per_s")), r) for r in rows]
    pts = [(m, p, r) for m, p, r in pts if m is not None and p is not None]
    fig, ax = plt.subplots(figsize=(5, 5))
    if not pts:
        ax.text(0.5, 0.5, "no prediction\n(trillion plan gave none)", ha="center", va="center",
                transform=ax.transAxes)
    else:
        for mode, marker in (("single", "^"), ("pipeline", "o"), ("expert", "s")):
            sel = [(m, p) for m, p, r in pts if r["mode"] == mode]
            if sel:
                ax.scatter([m for m, _ in sel], [p for _, p in sel], marker=marker, label=mode)
        hi = max(max(m, p) for m, p, _ in pts) * 1.1
        ax.plot([0, hi], [0, hi], "k-", lw=0.8, label="exact")
        ax.plot([0, hi], [0, 1.25 * hi], "k:", lw=0.8, label="±25%")
        ax.plot([0, hi], [0, 0.75 * hi], "k:", lw=0.8)
        ax.set_xlim(0, hi)
        ax.set_ylim(0, hi)
        ax.legend(fontsize=7)
    ax.set_xlabel("measured generated tokens/s")
    ax.set_ylabel("predicted generated tokens/s")
    ax.set_title("trillion plan: predicted vs measured")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def draw(rows, out_dir):
    """Every plot into out_dir. -> {kind: path}."""
    os.makedirs(out_dir, exist_ok=True)
    paths = {k: os.path.join(out_dir, f) for k, f in FILES.items()}
    throughput(rows, paths["throughput"])
    step_time(rows, paths["step_time"])
    bytes_exchanged(rows, paths["bytes"])
    predicted(rows, paths["predicted"])
    return paths
