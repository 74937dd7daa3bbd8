"""`trillion convert --quantize int8|int4|fp8` against an independent numpy
quantizer: every byte trillion wrote (read back with h5py) and every error
figure of its report (quantization.json) must equal what numpy computes from
the synthetic bf16 checkpoint with the rounding rules of docs/format.md
"Quantized models". A case `preset:int8:fp8` starts from the synthetic fp8
checkpoint instead (DeepSeek-V3's format): each weight's value is its e4m3
code times its 128x128 block's scale_inv (lm_head: its bf16 value), the
scale_inv tensors are gone from the result, and the MTP layer is kept. The `small` preset has widths that are not multiples of
128 or 32 (partial fp8 blocks, partial int8 groups); `tiny` has a q_b_proj
with in_features 48, which int4 keeps in bf16.

Also: the tensors that are not linear layers are stored unchanged, the model
passes `trillion inspect --verify`, and the printed table names every role."""
import json
import os
import shutil
import sys

import numpy as np

from harness import ROOT, Failures, arg_parser, checkpoint, parse_args, run

sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
from safetensors_reader import Checkpoint, e4m3_bits_to_f64  # noqa: E402

ap = arg_parser()
ap.add_argument("--cases", default="small:int8,small:fp8,small:int4,tiny:int4,tiny:int8,small:int8:fp8")
args = parse_args(parser=ap)
T = args.trillion
f = Failures()
work = args.work


# --------------------------------------------------------------------------- numpy quantizers

def bf16_bits_of(x):
    """float64 values exactly representable in bf16 -> bit patterns."""
    return (np.asarray(x, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def bf16_value(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def bf16_ceil(x):
    """The smallest bf16 >= x (x > 0), by frexp: x = m 2^e, m in [0.5, 1) -> ceil(m 2^8) 2^(e-8)."""
    m, e = np.frexp(x)
    return np.ldexp(np.ceil(m * 256.0), e - 8)


def quantize_groups(w, qmax):
    """-> q int [rows, cols], scale bits uint16 [rows, ceil(cols/32)], dequantized float64."""
    rows, cols = w.shape
    g = -(-cols // 32)
    padded = np.zeros((rows, g * 32))
    padded[:, :cols] = w
    amax = np.abs(padded.reshape(rows, g, 32)).max(axis=2)
    scale = np.where(amax > 0, bf16_ceil(np.where(amax > 0, amax, 1.0) / qmax), 0.0)
    if not np.all(bf16_value(bf16_bits_of(scale)) == scale):
        raise SystemExit("FAILED: the oracle's group scales are not bf16 values")
    full = np.repeat(scale, 32, axis=1)[:, :cols]
    with np.errstate(invalid="ignore", divide="ignore"):
        q = np.where(full > 0, np.rint(w / np.where(full > 0, full, 1.0)), 0.0)
    if not np.abs(q).max() <= qmax:  # the scale is rounded up: nothing to clip
        raise SystemExit(f"FAILED: the oracle's codes exceed {qmax}")
    return q.astype(np.int64), bf16_bits_of(scale), q * full


E4M3 = np.array([(1.0 + (c & 7) / 8.0) * 2.0 ** (((c >> 3) & 15) - 7) if (c >> 3) & 15 else (c & 7) * 2.0 ** -9
                 for c in range(127)])  # codes 0..126: the finite non-negative values, ascending


def e4m3_encode(v):
    """float32 -> e4m3fn codes: nearest of the 127 magnitudes, ties to the even code, saturating."""
    a = np.minimum(np.abs(v.astype(np.float64)), 448.0)
    hi = np.minimum(np.searchsorted(E4M3, a, side="left"), 126)
    lo = np.maximum(hi - 1, 0)
    dlo, dhi = a - E4M3[lo], E4M3[hi] - a
    code = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(lo % 2 == 0, lo, hi)))
    return (code | np.where(np.signbit(v), 0x80, 0)).astype(np.uint8)


def quantize_fp8(w):
    rows, cols = w.shape
    rb, cb = -(-rows // 128), -(-cols // 128)
    padded = np.zeros((rb * 128, cb * 128))
    padded[:rows, :cols] = np.abs(w)
    amax = padded.reshape(rb, 128, cb, 128).max(axis=(1, 3)).astype(np.float32)
    scale = amax / np.float32(448.0)
    scale = np.where(scale == 0, np.float32(1.0), scale).astype(np.float32)
    full = np.repeat(np.repeat(scale, 128, axis=0), 128, axis=1)[:rows, :cols]
    codes = e4m3_encode(w.astype(np.float32) / full)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    return codes, scale, sign * E4M3[codes & 0x7F] * full.astype(np.float64)


def pack_int4(q):
    rows, cols = q.shape
    nib = (q + 8).astype(np.uint32).reshape(rows, cols // 8, 8)
    return (nib << (4 * np.arange(8, dtype=np.uint32))).sum(axis=2, dtype=np.uint32).view(np.int32)


# --------------------------------------------------------------------------- the model's matrices

def linear_matrices(c):
    """{prefix: role} of every linear layer of the main model, and lm_head."""
    out = {"lm_head": "lm_head"}
    for l in range(c["num_hidden_layers"]):
        a = f"model.layers.{l}.self_attn."
        names = ["q_a_proj", "q_b_proj"] if c.get("q_lora_rank") else ["q_proj"]
        for n in names + ["kv_a_proj_with_mqa", "kv_b_proj", "o_proj"]:
            out[a + n] = "attention"
        m = f"model.layers.{l}.mlp."
        moe = l >= c["first_k_dense_replace"] and l % c.get("moe_layer_freq", 1) == 0
        for p in ("gate_proj", "up_proj", "down_proj"):
            if not moe:
                out[m + p] = "dense_mlp"
                continue
            if c.get("n_shared_experts"):
                out[m + "shared_experts." + p] = "shared_experts"
            for e in range(c["n_routed_experts"]):
                out[m + f"experts.{e}." + p] = "routed_experts"
    return out


def source_values(ck, prefix):
    """float64 values of a linear layer's matrix in the checkpoint: bf16 bits,
    or (fp8) e4m3 code x the f32 scale_inv of its 128x128 block (exact)."""
    name = prefix + ".weight"
    if ck.dtype(name) != "F8_E4M3":
        return bf16_value(ck.raw(name))
    codes = ck.raw(name)
    rows, cols = codes.shape
    scale = np.asarray(ck.raw(prefix + ".weight_scale_inv"), dtype=np.float32).astype(np.float64)
    if scale.shape != (-(-rows // 128), -(-cols // 128)):
        raise SystemExit(f"FAILED: {prefix}: scale_inv shape {scale.shape}")
    return e4m3_bits_to_f64(codes) * np.repeat(np.repeat(scale, 128, axis=0), 128, axis=1)[:rows, :cols]


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)


# --------------------------------------------------------------------------- one case

def check_case(preset, fmt, source="bf16"):
    import h5py
    hf = checkpoint(work, preset, source)
    out = os.path.join(work, "model", f"quantize-{preset}-{fmt}-from-{source}")
    shutil.rmtree(out, ignore_errors=True)
    p = run([T, "convert", "--input", hf, "--output", out, "--quantize", fmt, "--experts-per-shard", 8, "--quiet"],
            check=False)
    if not f.check(p.returncode == 0, f"{preset} {fmt}: convert exit {p.returncode}: {p.stderr}"):
        return
    print(p.stdout)
    ck = Checkpoint(hf)
    cfg = ck.config
    mats = linear_matrices(cfg)
    manifest = json.load(open(os.path.join(out, "manifest.json")))
    tensors = manifest["tensors"]
    qj = json.load(open(os.path.join(out, "quantization.json")))
    conf = json.load(open(os.path.join(out, "config.json")))
    qc = conf.get("quantization_config", {})
    f.check(manifest["weight_format"] == fmt and manifest.get("quantized_from") == source,
            f"{preset} {fmt}: manifest weight_format/quantized_from")
    f.check(qc.get("quant_method") == "trillion" and qc.get("weight_format") == fmt
            and qc.get("quantized_from") == source and qj.get("quantized_from") == source,
            f"{preset} {fmt}: config.json quantization_config {qc}")
    f.check({k: v for k, v in conf.items() if k != "quantization_config"} ==
            {k: v for k, v in cfg.items() if k != "quantization_config"},
            f"{preset} {fmt}: config.json otherwise unchanged")
    files = {}

    def dataset(name):
        info = tensors[name]
        if info["shard"] not in files:
            files[info["shard"]] = h5py.File(os.path.join(out, info["shard"]), "r")
        return files[info["shard"]][name]

    roles = {}
    kept = []
    bad_bytes = []
    bad_stats = []
    for prefix, role in mats.items():
        w_bits = ck.raw(prefix + ".weight")
        w = source_values(ck, prefix)
        rows, cols = w.shape
        if fmt == "int4" and cols % 32:
            kept.append(prefix)
            if not (prefix + ".weight" in tensors and np.array_equal(dataset(prefix + ".weight")[()], w_bits)):
                bad_bytes.append(prefix + " (kept bf16)")
            continue
        if fmt == "int8":
            q, sbits, deq = quantize_groups(w, 127.0)
            want = {prefix + ".weight": q.astype(np.int8), prefix + ".weight_scale": sbits}
        elif fmt == "int4":
            q, sbits, deq = quantize_groups(w, 7.0)
            want = {prefix + ".weight_packed": pack_int4(q), prefix + ".weight_scale": sbits}
        else:
            codes, scale, deq = quantize_fp8(w)
            want = {prefix + ".weight": codes, prefix + ".weight_scale_inv": scale}
        for name, arr in want.items():
            got = dataset(name)[()] if name in tensors else None
            if got is None or got.dtype != arr.dtype or not np.array_equal(got, arr):
                bad_bytes.append(name)
        if fmt == "int4":
            ws = dataset(prefix + ".weight_packed").attrs.get("weight_shape")
            if ws is None or list(ws) != [rows, cols]:
                bad_bytes.append(prefix + ".weight_packed weight_shape attribute")
        err = w - deq
        s = {"sum_sq_error": float(np.sum(err * err)), "sum_sq": float(np.sum(w * w)),
             "max_abs_error": float(np.max(np.abs(err))), "parameters": rows * cols}
        r = roles.setdefault(role, {"sum_sq_error": 0.0, "sum_sq": 0.0, "max_abs_error": 0.0, "matrices": 0,
                                    "parameters": 0})
        r["sum_sq_error"] += s["sum_sq_error"]
        r["sum_sq"] += s["sum_sq"]
        r["max_abs_error"] = max(r["max_abs_error"], s["max_abs_error"])
        r["matrices"] += 1
        r["parameters"] += rows * cols
        got = qj["matrices"].get(prefix)
        rel = np.sqrt(s["sum_sq_error"] / s["sum_sq"])
        if (got is None or got["role"] != role or got["max_abs_error"] != s["max_abs_error"]
                or not close(got["sum_sq_error"], s["sum_sq_error"]) or not close(got["sum_sq"], s["sum_sq"])
                or not close(got["rel_rms_error"], rel)):
            bad_stats.append((prefix, got, s))
    f.check(not bad_bytes, f"{preset} {fmt}: {len(bad_bytes)} tensors differ from numpy: {bad_bytes[:5]}")
    f.check(not bad_stats, f"{preset} {fmt}: {len(bad_stats)} matrices' error figures differ: {bad_stats[:2]}")
    f.check(sorted(qj["kept_bf16"]) == sorted(kept), f"{preset} {fmt}: kept_bf16 {qj['kept_bf16']} != {kept}")
    f.check(set(qj["matrices"]) == set(mats) - set(kept), f"{preset} {fmt}: matrices listed in quantization.json")
    if kept:
        f.check("kept bf16" in p.stdout and kept[0] in p.stdout, f"{preset} {fmt}: the table names kept matrices")

    # Per role and overall, as printed and as written.
    total = {"sum_sq_error": 0.0, "sum_sq": 0.0, "max_abs_error": 0.0}
    for role, r in roles.items():
        got = qj["roles"].get(role, {})
        rel = np.sqrt(r["sum_sq_error"] / r["sum_sq"])
        f.check(got.get("matrices") == r["matrices"] and got.get("parameters") == r["parameters"]
                and close(got.get("rel_rms_error", -1), rel) and got.get("max_abs_error") == r["max_abs_error"],
                f"{preset} {fmt}: role {role}: {got} vs numpy rel {rel:.6e} max {r['max_abs_error']:.6e}")
        f.check(role in p.stdout and f"{got.get('rel_rms_error', -1):.3e}" in p.stdout,
                f"{preset} {fmt}: table row of {role}")
        print(f"  {preset} {fmt} {role:15s} numpy rel RMS {rel:.4e}  max {r['max_abs_error']:.4e}  "
              f"bits/weight {got.get('bits_per_weight', 0):.3f}")
        for k in total:
            total[k] = max(total[k], r[k]) if k == "max_abs_error" else total[k] + r[k]
    f.check(set(qj["roles"]) == set(roles), f"{preset} {fmt}: roles {sorted(qj['roles'])}")
    rel = np.sqrt(total["sum_sq_error"] / total["sum_sq"])
    f.check(close(qj["overall"]["rel_rms_error"], rel) and qj["overall"]["max_abs_error"] == total["max_abs_error"],
            f"{preset} {fmt}: overall {qj['overall']} vs numpy rel {rel:.6e}")
    f.check("overall" in p.stdout and f"{qj['overall']['rel_rms_error']:.3e}" in p.stdout,
            f"{preset} {fmt}: table row overall")
    # Bounds the rounding rules imply: int8 |err| <= scale/2 <= absmax/254 (x bf16 rounding up: < 1/127).
    bound = {"int8": 1 / 127, "int4": 1 / 7, "fp8": 1 / 8}[fmt]
    f.check(rel < bound, f"{preset} {fmt}: relative RMS error {rel:.3e} >= {bound:.3e}")
    if fmt == "int8":
        f.check(abs(qj["overall"]["bits_per_weight"] - 8.5) < 0.2, f"int8 bits/weight {qj['overall']['bits_per_weight']}")

    # Everything else: the checkpoint's bytes, unchanged.
    quantized_names = {n for n in tensors if any(n.startswith(p + ".weight") for p in mats)}
    others = [n for n in ck.weight_map if not any(n.startswith(p + ".weight") for p in mats)
              and not n.startswith(f"model.layers.{cfg['num_hidden_layers']}.")]
    changed = [n for n in others if n not in tensors or not np.array_equal(dataset(n)[()], ck.raw(n))]
    if fmt != "fp8":  # from fp8: the int8 groups carry their own scales
        left = [n for n in tensors if n.endswith("_scale_inv") and any(n.startswith(p + ".weight") for p in mats)]
        f.check(not left, f"{preset} {fmt}: scale_inv of quantized matrices left in the model: {left[:3]}")
    f.check(not changed, f"{preset} {fmt}: non-linear tensors changed: {changed[:5]}")
    main = [n for n in tensors if not n.startswith(f"model.layers.{cfg['num_hidden_layers']}.")]
    f.check(set(main) == quantized_names | set(others), f"{preset} {fmt}: unexpected datasets "
            f"{sorted(set(main) - quantized_names - set(others))[:5]}")
    for h in files.values():
        h.close()

    p = run([T, "inspect", out, "--verify"], check=False)
    f.check(p.returncode == 0 and f"{fmt} weights (quantized from {source}" in p.stdout and "quantization error" in p.stdout,
            f"{preset} {fmt}: inspect --verify: exit {p.returncode}\n{p.stdout}\n{p.stderr}")


for case in args.cases.split(","):
    check_case(*case.split(":"))
f.finish()
