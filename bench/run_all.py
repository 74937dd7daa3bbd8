#!/usr/bin/env python3
"""One benchmark command: this machine's limits, each kernel format, and the
bench-sized model end to end, as one table (and JSON).

  limits   bench_memory: read bandwidth (STREAM-like), FP32 FMA peak and the
           int8 multiply-add peak of the integer path in use (vpmaddubsw +
           vpmaddwd on AVX2, vpdpbusd with VNNI, SDOT/SMMLA on arm64)
  kernels  bench_matmul: per format, weight GB/s at n=1 (fraction of the
           bandwidth) and GFLOP/s at n=32 (fraction of the FP32 peak; the
           xQ8 rows, whose products are int8 dot products, also of the int8
           peak)
  model    bench_model on the bench preset (hidden 2048, 6 layers, 64 experts,
           1.26 B parameters) in FP8 (DeepSeek's layout), INT8 and INT4 (every
           linear requantized by `convert --quantize int8|int4` from the bf16
           checkpoint, as llama.cpp's q8_0 / q4_0 quantize every linear) and
           kimi-int4 (Kimi K2's native layout: routed experts INT4, the rest
           BF16): prefill of one 512-token prompt and decode tokens/s at each batch, with
           weight bytes touched per step / step time / bandwidth, and FLOP/s /
           peak (the int8 path's rows: of the int8 peak); FP8, INT4 and INT8
           once per compute path (rows int4 / int4xq8: --activations f32 / int8;
           fp8xbf16: FP8 on --activations bf16).
  targets  the integer-kernels issue's goals next to what was measured:
           batch 1 at >= 85% of the bandwidth (INT8, INT4), 32 sequences at
           >= 265 / 310 tokens/s (INT8 / INT4), a 512-token prefill at
           >= 300 / 345, FP8 at least as fast as INT8 at every batch (judged
           in one process, decode steps of the two in turn: bench_model
           --versus; with INT8 against a copy of itself as the control).
  attention bench_attention: MLA decode attention over 4k and 16k cached
           positions (16 and 128 heads): cache GB/s of the bandwidth
Targets are printed next to their goal, never asserted.
Everything runs on one machine in one go: compare ratios, not absolute
figures, when other jobs share the cores.

    /usr/bin/python3 bench/run_all.py [--quick] [--json out.json] [--threads 2]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--build", default=os.path.join(ROOT, "build"))
ap.add_argument("--work", default=None, help="model cache (default BUILD/bench-work)")
ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
ap.add_argument("--formats", default="fp8,int8,int4,kimi-int4")
ap.add_argument("--activations", default="both", choices=("both", "f32", "int8", "bf16"),
                help="compute paths of the model bench for FP8/INT4/INT8 (both: f32 and int8 each, as rows 'int4' and 'int4xq8', and FP8 on bf16 too, 'fp8xbf16')")
ap.add_argument("--batches", default="1,4,16,32,64")
ap.add_argument("--quick", action="store_true", help="fewer steps, shorter prompts (about a third of the time)")
ap.add_argument("--skip-kernels", action="store_true")
ap.add_argument("--skip-attention", action="store_true", help="skip the long-context attention bench")
ap.add_argument("--bandwidth", type=float, help="use this read GB/s as the limit instead of the measured one")
ap.add_argument("--peak", type=float, help="use this FMA GFLOP/s as the limit instead of the measured one")
ap.add_argument("--int8-peak", type=float,
                help="use this int8 G ops/s (a multiply-add is 2) as the integer path's limit instead of the measured one")
ap.add_argument("--json", default=None, help="write every figure here")
args = ap.parse_args()

bench_dir = os.path.join(args.build, "bench")
trillion = os.path.join(args.build, "trillion")
work = args.work or os.path.join(args.build, "bench-work")
os.makedirs(work, exist_ok=True)


def sh(cmd, check=True):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if check and p.returncode:
        sys.exit(f"failed: {' '.join(map(str, cmd))}\n{p.stdout}\n{p.stderr}")
    return p


def hf_checkpoint(fmt):
    """The bench preset's HF checkpoint in `fmt`, generated once (deterministic bytes)."""
    hf = os.path.join(work, f"hf-bench-{fmt}")
    if not os.path.exists(os.path.join(hf, "config.json")):
        print(f"  making the bench checkpoint ({fmt}) ...", flush=True)
        shutil.rmtree(hf, ignore_errors=True)
        sh(["/usr/bin/python3", os.path.join(ROOT, "tools/synth/make_checkpoint.py"), "--preset", "bench",
            "--format", fmt, "--output", hf, "--quiet"])
    return hf


dropped = set()


def drop_from_page_cache(model):
    """Once a run, before a model's first row: its shards leave the page cache, so
    the row reads them in afresh on 2 MiB pages wherever they were cached before
    (a cached model keeps the page sizes of whatever read it in first, and they
    moved batch 1 by up to 1.4x: docs/kernels.md, "Memory")."""
    if model in dropped or not hasattr(os, "posix_fadvise"):  # macOS has no such advice
        return
    dropped.add(model)
    for name in sorted(os.listdir(model)):
        if name.endswith(".h5"):
            fd = os.open(os.path.join(model, name), os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def converted(fmt):
    """The converted model for `fmt`, or None when this build cannot make it."""
    model = os.path.join(work, f"model-bench-{fmt}")
    if os.path.exists(os.path.join(model, "manifest.json")):
        drop_from_page_cache(model)
        return model
    if fmt in ("int8", "int4"):
        if "--quantize" not in sh([trillion, "convert", "--help"], check=False).stdout:
            return None
        src, extra = hf_checkpoint("bf16"), ["--quantize", fmt]
    else:
        src, extra = hf_checkpoint({"kimi-int4": "int4"}.get(fmt, fmt)), []
    print(f"  converting {fmt} ...", flush=True)
    shutil.rmtree(model, ignore_errors=True)
    sh([trillion, "convert", "--input", src, "--output", model, "--quiet", *extra])
    dropped.add(model)  # convert has dropped its shards itself
    return model


def pct(x):
    return "-" if x is None else f"{100 * x:.0f}%"


result = {"threads": args.threads, "quick": args.quick}

# ---- limits
lim = json.loads(sh([os.path.join(bench_dir, "bench_memory"), "--json", "--mib", 512 if args.quick else 1024]).stdout)
bw, peak = args.bandwidth or lim["read_gbps_all"], args.peak or lim["fma_gflops_all"]
# The integer path's limit: its own int8 dot-product instruction at full rate
# (bench_memory names it; an older bench_memory or a CPU without an integer
# path has none, and then no int8 fraction is printed).
ipeak = args.int8_peak or lim.get("int8_gops_all")
result["limits"] = dict(lim, used_gbps=bw, used_gflops=peak, used_int8_gops=ipeak)
print(f"machine limits ({lim['threads']} threads): read {bw:.1f} GB/s ({lim['read_gbps_1']:.1f} on 1 thread), "
      f"FMA peak {lim['fma_gflops_all']:.0f} GFLOP/s ({lim['fma_gflops_1']:.0f} on 1 thread)", flush=True)
if "int8_gops_all" in lim:
    print(f"int8 peak of the integer path ({lim['int8_instruction']}): {lim['int8_gops_all']:.0f} G ops/s "
          f"({lim['int8_gops_1']:.0f} on 1 thread)", flush=True)
if args.bandwidth or args.peak or args.int8_peak:
    print(f"fractions below use {bw:.1f} GB/s, {peak:.0f} GFLOP/s" +
          (f" and {ipeak:.0f} int8 G ops/s" if ipeak else "") + " (given or measured)")
print(flush=True)

# ---- kernels: bench_matmul's text table (its columns are "n=K GB/s|Gw/s|GFLOP/s"),
# parsed by header so new columns or formats do not break this.
if not args.skip_kernels:
    # Three distinct copies of each matrix, cycled: one INT4 8192 x 8192 is 36 MiB, barely
    # past a 32 MiB last-level cache, and streamed again and again it partly hits there
    # (measured: INT4xQ8 n=1 at 65 GB/s from one copy, 43 from three, against a 51 GB/s
    # probe), which would raise the limit every fraction below is taken of.
    dims = ["8192", "8192"]
    text = sh([os.path.join(bench_dir, "bench_matmul"), *dims, args.threads, "f32,bf16,fp8,int4,int8", 3]).stdout
    lines = text.splitlines()
    header = next(i for i, l in enumerate(lines) if l.startswith("format"))
    cols = re.findall(r"n=(\d+) (GB/s|Gw/s|GFLOP/s)", lines[header])
    kernels = []
    for line in lines[header + 1:]:
        parts = line.split()
        if len(parts) != len(cols) + 1:
            continue
        row = {"format": parts[0]}
        for (n, unit), v in zip(cols, parts[1:]):
            row[f"n{n}_{unit.replace('/', 'p').lower()}"] = float(v)
        kernels.append(row)
    # The memory delivered at least what the fastest kernel streamed: when one
    # beats the probe (the machine's bandwidth drifts over a run here), that is
    # the limit every fraction below is taken of.
    fastest = max((r.get("n1_gbps") or 0 for r in kernels), default=0)
    if not args.bandwidth and fastest > bw:
        print(f"limit raised to {fastest:.1f} GB/s: a kernel streamed faster than the probe measured", flush=True)
        bw = fastest
        result["limits"]["used_gbps"] = bw
        result["limits"]["raised_to_fastest_kernel"] = True
    big = max((int(n) for n, u in cols if u == "GFLOP/s"), default=None)
    for row in kernels:
        gbps = row.get("n1_gbps")
        gflops = row.get(f"n{big}_gflopps") if big else None
        row["matvec_bandwidth_fraction"] = gbps / bw if gbps else None
        row["matmul_n"] = big
        row["matmul_peak_fraction"] = gflops / peak if gflops else None
        # The xQ8 formats multiply int8 activations by int8/int4 weights: int8 dot products.
        if row["format"].endswith("xQ8") and ipeak:
            row["matmul_int8_peak_fraction"] = gflops / ipeak if gflops else None
    result["kernels"] = {"matrix": f"{dims[0]}x{dims[1]}", "copies": 3, "rows": kernels}
    print(f"kernels ({dims[0]}x{dims[1]}, 3 copies, {args.threads} threads): matrix-vector weight GB/s and matrix-matrix GFLOP/s")
    print(f"{'format':10} {'n=1 GB/s':>9} {'of BW':>6} {'n=%s GFLOP/s' % big:>14} {'of peak':>8} {'of int8 pk':>10}")
    for r in kernels:
        g = r.get(f"n{r['matmul_n']}_gflopps")
        print(f"{r['format']:10} {r.get('n1_gbps', 0):9.1f} {pct(r['matvec_bandwidth_fraction']):>6} "
              f"{g if g is not None else 0:14.1f} {pct(r['matmul_peak_fraction']):>8} "
              f"{pct(r.get('matmul_int8_peak_fraction')):>10}")
    print(flush=True)

# ---- the bench model end to end
model_args = (["--prefill-seqs", 1, "--prefill-len", 256, "--context", 16, "--steps", 6, "--reps", 2] if args.quick
              else ["--prefill-seqs", 1, "--prefill-len", 512, "--context", 32, "--steps", 16, "--reps", 3])
result["model"] = {}
print(f"bench model end to end ({args.threads} threads): tokens/s; weights touched per step; "
      f"their GB/s and fraction of {bw:.1f} GB/s; GFLOP/s and fraction of {peak:.0f}" +
      (f"; the int8 path's rows (xq8) also of the int8 peak {ipeak:.0f}" if ipeak else ""))
print(f"{'row':12} {'step':12} {'tokens/s':>9} {'MB/step':>8} {'GB/s':>6} {'of BW':>6} {'GFLOP/s':>8} {'of pk':>6} "
      f"{'of i8pk':>7}")
def model_runs():
    """(row name, format, compute path) of every model bench: BF16 on the
    exact path; FP8, INT4 and INT8 on each path --activations asks for (FP8
    on the int8 path: its linears requantized to int8 groups at load)."""
    for fmt in args.formats.split(","):
        paths = ["f32", "int8"] if args.activations == "both" else [args.activations]
        if fmt == "fp8" and args.activations == "both":
            paths.append("bf16")  # FP8 read in place on bf16 dot products
        if fmt not in ("int4", "int8", "fp8", "kimi-int4"):
            paths = ["f32"]
        if fmt != "fp8":
            paths = [p for p in paths if p != "bf16"] or ["f32"]
        for act in paths:
            yield (fmt if act == "f32" else fmt + ("xbf16" if act == "bf16" else "xq8")), fmt, act


for key, fmt, act in model_runs():
    model = converted(fmt)
    if model is None:
        result["model"][key] = "unavailable"
        print(f"{key:12} unavailable (this build's `trillion convert` has no --quantize)", flush=True)
        continue
    with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
        sh([os.path.join(bench_dir, "bench_model"), "--model", model, "--threads", args.threads, "--batches",
            args.batches, "--bandwidth", bw, "--peak", peak, "--json", tmp.name, "--floor", "--phases", "--read-probe",
            "--activations", act,
            *model_args])
        m = json.load(open(tmp.name))
    m["activations"] = act
    runs = [("prefill %dx%d" % (m["prefill"]["sequences"], m["prefill"]["prompt_len"]), m["prefill"])]
    runs += [(f"decode b={d['batch']}", d) for d in m["decode"]]
    for name, r in runs:
        # On the int8 path every linear's products are int8 dot products (attention's
        # are not: a small share at these contexts), so its GFLOP/s is held to the int8 peak.
        if act == "int8" and ipeak and r.get("gflops"):
            r["int8_peak_fraction"] = r["gflops"] / ipeak
        print(f"{key:12} {name:12} {r['tokens_per_s']:9.1f} {r['weight_bytes_per_step'] / 1e6:8.0f} "
              f"{r['weight_gbps']:6.1f} {pct(r.get('bandwidth_fraction')):>6} {r['gflops']:8.1f} "
              f"{pct(r.get('peak_fraction')):>6} {pct(r.get('int8_peak_fraction')):>7}", flush=True)
    print(f"        pool dispatch {m['dispatch_us']:.1f} us; experts/head/busy per step: " + ", ".join(
        f"{n.split()[1] if n.startswith('decode') else 'prefill'} {r['expert_share']:.0%}/{r['head_share']:.0%}/"
        f"{r['cpu_busy']:.0%}" for n, r in runs) + (
        f"; mapped weights on 2 MiB pages {m['weights_huge_mb']:.0f} of {m['weights_resident_mb']:.0f} MB"
        if m.get("weights_resident_mb") else ""))
    dec = {d["batch"]: d for d in m["decode"]}
    if "b1_floor" in m and 1 in dec:  # the same matrices timed alone: what the model adds to its kernels
        f = m["b1_floor"]
        print(f"        batch-1 step {dec[1]['step_ms_median']:.1f} ms = {dec[1]['step_ms_median'] / f['ms']:.2f} x its "
              f"kernels alone ({f['ms']:.1f} ms: " + ", ".join(f"{k} {v:.1f}" for k, v in f["parts_ms"].items()) + ")")
    if 1 in dec and "phases_ms" in dec[1]:  # where the batch-1 step's time goes (means over its steps)
        p = dec[1]["phases_ms"]
        order = ["attention projections", "W_UK/W_UV", "attend", "router", "experts", "dense mlp", "head"]
        keys = [k for k in order if k in p] + sorted(k for k in p if k not in order)  # the step's order
        print(f"        batch-1 step by phase (ms, mean of {dec[1]['steps']}): " + ", ".join(
            f"{k} {p[k]:.2f}" for k in keys) + f", other {dec[1]['step_ms_mean'] - sum(p.values()):.2f} "
            f"(of {dec[1]['step_ms_mean']:.2f})")
    if 1 in dec and dec[1].get("read_alternated"):  # does the step follow the machine's moment? (alternate_read.hpp)
        r = dec[1]["read_alternated"]
        print(f"        batch-1 step over a read right after it: {r['step_over_read_median']:.0%} (median of "
              f"{r['reads']}; the reads {r['read_gbps_median']:.1f} GB/s median, {r['read_gbps_min']:.1f}-"
              f"{r['read_gbps_max']:.1f}; correlation of step and read {r['step_read_correlation']:.2f})")
    checks = {"prefill_tokens_per_s": m["prefill"]["tokens_per_s"],
              "prefill_peak_fraction": m["prefill"].get("peak_fraction"),
              "prefill_int8_peak_fraction": m["prefill"].get("int8_peak_fraction")}
    if 1 in dec:
        checks["b1_bandwidth_fraction"] = dec[1].get("bandwidth_fraction")
        checks["b1_tokens_per_s"] = dec[1]["tokens_per_s"]
    for b in (32, 64):
        if b in dec:
            checks[f"b{b}_int8_peak_fraction"] = dec[b].get("int8_peak_fraction")
    if 32 in dec:
        checks["b32_tokens_per_s"] = dec[32]["tokens_per_s"]
        # The most 32 sequences could give on the float path: its FLOP per token at the
        # FP32 FMA peak. (The integer path is not bound by it: with VNNI a multiply-add
        # costs less than an FP32 fma.)
        if dec[32].get("gflops") and act == "f32":
            checks["b32_at_peak"] = float(peak) / (dec[32]["gflops"] / dec[32]["tokens_per_s"])
    m["targets"] = checks
    result["model"][key] = m

# ---- decode attention at long context (bench_attention): the compressed cache streamed
# per second for the bench model's 16 heads and DeepSeek-V3's 128, with the roofline's verdict
if not args.skip_attention:
    result["attention"] = []
    ctxs, bats = ("4096", "1") if args.quick else ("4096,16384", "1,8")
    print(f"\ndecode attention at long context ({args.threads} threads): cache GB/s and fraction of {bw:.1f} GB/s "
          f"(goal 70%), GFLOP/s and fraction of {peak:.0f}")
    print(f"{'heads':>5} {'context':>8} {'batch':>5} {'kernel':8} {'ms/layer':>9} {'GB/s':>6} {'of BW':>6} "
          f"{'GFLOP/s':>8} {'of pk':>6} {'ceiling':>8}")
    for heads in (16, 128):
        out = sh([os.path.join(bench_dir, "bench_attention"), "--heads", heads, "--contexts", ctxs, "--batches",
                  "1" if heads == 128 else bats, "--threads", args.threads, "--reps", 2 if args.quick else 3,
                  "--read-gbps", bw, "--peak-gflops", peak, "--json"]).stdout
        for line in out.splitlines():
            r = json.loads(line)
            # Compute-bound above the ridge: the most of the bandwidth this step can use.
            intensity = heads * (4 * 512 + 2 * 64) / (4 * (512 + 64))
            r["bandwidth_ceiling"] = min(1.0, peak / bw / intensity)
            result["attention"].append(r)
            print(f"{heads:5} {r['context']:8} {r['batch']:5} {r['kernel']:8} {r['seconds'] * 1e3:9.2f} "
                  f"{r['gbps']:6.1f} {pct(r['of_bandwidth']):>6} {r['gflops']:8.1f} {pct(r['of_peak']):>6} "
                  f"{pct(r['bandwidth_ceiling']):>8}", flush=True)
    print("(ceiling: the share of the bandwidth the step can reach at the FMA peak, its FLOP per cache byte being "
          "H(4r+2rope)/(4(r+rope)): 15.1 at 16 heads, 121 at 128)")

# ---- the integer-kernels issue's targets, measured next to their goals
GOALS = {"int8": (265, 300), "int4": (310, 345)}  # 32 sequences, 512-token prefill (tokens/s)
print("\ntargets (measured / goal; the goals are the integer-kernels issue's, 2 threads):")
print(f"{'row':12} {'b1 of BW':>12} {'32 seqs tok/s':>14} {'(at FMA peak)':>14} {'prefill tok/s':>14} "
      f"{'of int8 peak: 32 / 64 seqs / prefill':>37}")
for key, m in result["model"].items():
    if m == "unavailable":
        continue
    t, fmt = m["targets"], key.removesuffix("xq8")
    b32, pre = GOALS.get(fmt, (None, None))
    def cell(v, goal, fmt_v="{:.1f}"):
        return ("-" if v is None else fmt_v.format(v)) + (f" / {goal}" if goal else "")
    i8 = " / ".join(pct(t.get(k)) for k in ("b32_int8_peak_fraction", "b64_int8_peak_fraction",
                                            "prefill_int8_peak_fraction"))
    print(f"{key:12} {cell(t.get('b1_bandwidth_fraction'), '85%' if fmt in GOALS else None, '{:.0%}'):>12} "
          f"{cell(t.get('b32_tokens_per_s'), b32):>14} "
          f"{('<= %.0f' % t['b32_at_peak']) if t.get('b32_at_peak') else '-':>14} "
          f"{cell(t.get('prefill_tokens_per_s'), pre):>14} "
          f"{(i8 + ' (goal 50%)') if key.endswith('xq8') and fmt in GOALS else '-':>37}")
print("(at FMA peak: the most 32 sequences could give on the float path, its FLOP per token at the FP32 FMA peak;\n"
      " none for the integer path, whose multiply-adds are not FP32 fmas: its rows are held to the int8 peak,\n"
      " the batch-peak issue's goal being half of it for INT8 and INT4 at 32 and 64 sequences and a 512-token prefill)")

def best(fmt, batch):
    """The faster of a format's two paths at one batch (None when not measured)."""
    rates = [d["tokens_per_s"] for k in (fmt, fmt + "xq8") if isinstance(result["model"].get(k), dict)
             for d in result["model"][k]["decode"] if d["batch"] == batch]
    return max(rates) if rates else None


if all(isinstance(result["model"].get(k), dict) for k in ("fp8", "int8")):
    cmp = []
    for batch in (d["batch"] for d in result["model"]["fp8"]["decode"]):
        f, i = best("fp8", batch), best("int8", batch)
        if f and i:
            cmp.append(f"b{batch} {f:.1f} vs {i:.1f} ({f / i:.2f}x)")
    result["fp8_over_int8"] = cmp
    print("FP8 vs INT8 in the table's runs, each on its faster path: " + ", ".join(cmp))


# ---- FP8 against INT8, step by step: the table runs each model once, minutes
# apart, and this machine's bandwidth drifts by a third within minutes (the
# two ran 0.81-1.40x of each other from one run to the next at the same
# batch), so the goal is judged in one process, decode steps of the two
# models taken in turn on the int8 path (the default for both, and the
# faster): bench_model --versus, the median of the per-pair ratios with their
# quartiles. Then the same for INT8 against a copy of itself held where an
# FP8 model's int8 copy is held (anonymous memory, not the mapped shards):
# what the placement of the weights alone does (bench/arena_copy.hpp).
if all(isinstance(result["model"].get(k), dict) for k in ("fp8xq8", "int8xq8")):
    vs_args = ["--batches", args.batches, "--threads", args.threads, "--activations", "int8",
               *(["--context", 16, "--steps", 8] if args.quick else ["--context", 32, "--steps", 48])]
    alt = {}
    for key, a, b, extra in (("fp8_over_int8", "fp8", "int8", []), ("int8_over_its_copy", "int8", "int8", ["--copy-versus"])):
        with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
            sh([os.path.join(bench_dir, "bench_model"), "--model", converted(a), "--versus", converted(b), *extra,
                "--json", tmp.name, *vs_args])
            alt[key] = {d["batch"]: {"median": d["a_over_b_median"], "q1": d["a_over_b_q1"], "q3": d["a_over_b_q3"],
                                     "a_tokens_per_s": d["a_tokens_per_s"], "b_tokens_per_s": d["b_tokens_per_s"]}
                        for d in json.load(open(tmp.name))["decode"]}
    result["fp8_over_int8_alternated"] = {"pairs": vs_args[-1], **alt}
    print(f"FP8 over INT8, decode steps in turn (int8 path; goal >= 1.00x): " + ", ".join(
        f"b{b} {a['median']:.2f}x ({a['q1']:.2f}-{a['q3']:.2f})" for b, a in alt["fp8_over_int8"].items()))
    print(f"INT8 over a copy of itself in anonymous memory (where FP8's int8 copy lives): " + ", ".join(
        f"b{b} {a['median']:.2f}x ({a['q1']:.2f}-{a['q3']:.2f})" for b, a in alt["int8_over_its_copy"].items()))
if args.json:
    with open(args.json, "w") as f:
        json.dump(result, f, indent=2)
    print(f"\nwrote {args.json}")
