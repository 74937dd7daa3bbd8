"""Fixtures of the reference's self-test (`run_reference.py --self-test`).

Test-only code kept apart from the CLI and from the tests themselves: a minimal
safetensors writer, independent e4m3 / bf16 bit conversions, a small test
config, a random checkpoint writer (bf16 | fp8 | int4) that returns the
expected float64 tensors, a random in-memory model and a naive token-by-token
forward (a second reading of the math).  Used by reference_self_test.py.
"""

import json
import math
import os
import struct

import numpy as np

import deepseek_ref as ref


def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: (dtype, shape, raw bytes)} -> file (test-only writer)."""
    header, blobs, off = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    hb = json.dumps(header).encode()
    hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + b"".join(blobs))


def e4m3_scalar(b):
    """e4m3fn byte -> float, written independently of the table (ldexp)."""
    b = int(b)
    s, e, m = (b >> 7) & 1, (b >> 3) & 15, b & 7
    if e == 15 and m == 7:
        return float("nan")
    v = math.ldexp(m, -9) if e == 0 else math.ldexp(8 + m, e - 10)
    return -v if s else v


def f64_to_bf16_bits(x):
    """Round-to-nearest-even float64 -> bf16 bit patterns (via float32)."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = u + 0x7FFF + ((u >> 16) & 1)
    return (u >> 16).astype(np.uint16)


TEST_CONFIG = {
    "vocab_size": 97, "hidden_size": 32, "intermediate_size": 40, "num_hidden_layers": 3,
    "num_attention_heads": 3, "num_key_value_heads": 3, "q_lora_rank": 24, "kv_lora_rank": 16,
    "qk_nope_head_dim": 8, "qk_rope_head_dim": 6, "v_head_dim": 10, "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0, "first_k_dense_replace": 1, "moe_layer_freq": 1,
    "n_routed_experts": 12, "n_shared_experts": 1, "moe_intermediate_size": 16,
    "num_experts_per_tok": 3, "n_group": 4, "topk_group": 2, "norm_topk_prob": True,
    "routed_scaling_factor": 2.5, "topk_method": "noaux_tc", "scoring_func": "sigmoid",
    "num_nextn_predict_layers": 1,
    "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8,
                     "beta_fast": 32, "beta_slow": 1, "mscale": 0.9, "mscale_all_dim": 0.7},
}


def linear_shapes(c):
    """{prefix: (out, in, kind)} of every linear in the forward pass."""
    d, H = c["hidden_size"], c["num_attention_heads"]
    dn, dr, dv, r = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"], c["kv_lora_rank"]
    out = {"lm_head": (c["vocab_size"], d, "BF16")}
    for l in range(c["num_hidden_layers"]):
        a = "model.layers.%d.self_attn." % l
        if c.get("q_lora_rank"):
            out[a + "q_a_proj"] = (c["q_lora_rank"], d, "LIN")
            out[a + "q_b_proj"] = (H * (dn + dr), c["q_lora_rank"], "LIN")
        else:
            out[a + "q_proj"] = (H * (dn + dr), d, "LIN")
        out[a + "kv_a_proj_with_mqa"] = (r + dr, d, "LIN")
        out[a + "kv_b_proj"] = (H * (dn + dv), r, "LIN")
        out[a + "o_proj"] = (d, H * dv, "LIN")
        m = "model.layers.%d.mlp." % l
        if l >= c["first_k_dense_replace"] and l % c["moe_layer_freq"] == 0:
            out[m + "gate"] = (c["n_routed_experts"], d, "BF16")
            f = c["moe_intermediate_size"]
            for e in range(c["n_routed_experts"]):
                out[m + "experts.%d.gate_proj" % e] = (f, d, "EXP")
                out[m + "experts.%d.up_proj" % e] = (f, d, "EXP")
                out[m + "experts.%d.down_proj" % e] = (d, f, "EXP")
            fs = f * c["n_shared_experts"]
            out[m + "shared_experts.gate_proj"] = (fs, d, "LIN")
            out[m + "shared_experts.up_proj"] = (fs, d, "LIN")
            out[m + "shared_experts.down_proj"] = (d, fs, "LIN")
        else:
            f = c["intermediate_size"]
            out[m + "gate_proj"] = (f, d, "LIN")
            out[m + "up_proj"] = (f, d, "LIN")
            out[m + "down_proj"] = (d, f, "LIN")
    return out


def norm_shapes(c):
    d = c["hidden_size"]
    out = {"model.norm.weight": d}
    for l in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % l
        out[p + "input_layernorm.weight"] = d
        out[p + "post_attention_layernorm.weight"] = d
        if c.get("q_lora_rank"):
            out[p + "self_attn.q_a_layernorm.weight"] = c["q_lora_rank"]
        out[p + "self_attn.kv_a_layernorm.weight"] = c["kv_lora_rank"]
    return out


def make_checkpoint(c, fmt, directory, seed):
    """Random checkpoint of config c in fmt (bf16 | fp8 | int4) written to
    directory (two shards + index); returns the expected float64 tensors,
    computed from the quantized integers without the reader's decoders."""
    rng = np.random.default_rng(seed)
    store, expect = {}, {}

    def put_bf16(name, x):
        bits = f64_to_bf16_bits(x)
        store[name] = ("BF16", bits.shape, bits.astype("<u2").tobytes())
        expect[name] = np.asarray(bits, dtype=np.uint32).__lshift__(16).astype(np.uint32).view(np.float32).astype(np.float64)

    d = c["hidden_size"]
    put_bf16("model.embed_tokens.weight", rng.normal(size=(c["vocab_size"], d)))
    for name, n in norm_shapes(c).items():
        put_bf16(name, 1.0 + 0.2 * rng.normal(size=n))
    for l in range(c["num_hidden_layers"]):
        if l >= c["first_k_dense_replace"] and l % c["moe_layer_freq"] == 0:
            name = "model.layers.%d.mlp.gate.e_score_correction_bias" % l
            b = (0.3 * rng.normal(size=c["n_routed_experts"])).astype("<f4")
            store[name] = ("F32", b.shape, b.tobytes())
            expect[name] = b.astype(np.float64)
    for prefix, (o, i, kind) in linear_shapes(c).items():
        name = prefix + ".weight"
        if kind == "BF16" or (fmt == "bf16") or (fmt == "int4" and kind == "LIN"):
            put_bf16(name, rng.normal(size=(o, i)) / math.sqrt(i))
        elif fmt == "fp8":
            bits = rng.integers(0, 256, size=(o, i), dtype=np.uint8)
            bits[(bits & 0x7F) == 0x7F] = 0x38                      # no NaN
            bo, bi = -(-o // 128), -(-i // 128)
            sinv = (rng.uniform(0.5, 2.0, size=(bo, bi)) / (4.0 * math.sqrt(i))).astype("<f4")
            store[name] = ("F8_E4M3", bits.shape, bits.tobytes())
            store[prefix + ".weight_scale_inv"] = ("F32", sinv.shape, sinv.tobytes())
            vals = np.array([e4m3_scalar(b) for b in range(256)])[bits]
            expect[name] = vals * sinv.astype(np.float64)[np.arange(o)[:, None] // 128, np.arange(i)[None, :] // 128]
        else:                                                          # int4 routed expert
            q = rng.integers(-8, 8, size=(o, i))
            sbits = f64_to_bf16_bits(rng.uniform(0.5, 1.5, size=(o, i // 32)) / (4.0 * math.sqrt(i)))
            words = np.zeros((o, i // 8), dtype=np.uint32)
            for k in range(8):
                words |= ((q[:, k::8] + 8).astype(np.uint32) << (4 * k))
            store[prefix + ".weight_packed"] = ("I32", words.shape, words.view("<i4").tobytes())
            store[prefix + ".weight_scale"] = ("BF16", sbits.shape, sbits.astype("<u2").tobytes())
            store[prefix + ".weight_shape"] = ("I32", (2,), np.array([o, i], dtype="<i4").tobytes())
            s = sbits.astype(np.uint32).__lshift__(16).astype(np.uint32).view(np.float32).astype(np.float64)
            expect[name] = q * np.repeat(s, 32, axis=1)
    # an MTP layer full of NaN: must never be read
    L = c["num_hidden_layers"]
    nan = np.full(d, np.nan)
    put_bf16("model.layers.%d.input_layernorm.weight" % L, nan)
    put_bf16("model.layers.%d.enorm.weight" % L, nan)

    cfg = dict(c)
    if fmt == "fp8":
        cfg["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                      "weight_block_size": [128, 128]}
    elif fmt == "int4":
        cfg["quantization_config"] = {
            "quant_method": "compressed-tensors", "format": "pack-quantized",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                "num_bits": 4, "group_size": 32, "symmetric": True, "type": "int", "strategy": "group"}}},
            "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
                       "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"]}
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(cfg, f)
    names = sorted(store)
    shards = [names[0::2], names[1::2]]
    weight_map = {}
    for k, part in enumerate(shards):
        fname = "model-%05d-of-%05d.safetensors" % (k + 1, len(shards))
        write_safetensors(os.path.join(directory, fname), {n: store[n] for n in part}, {"format": "pt"})
        weight_map.update({n: fname for n in part})
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f)
    return expect


def random_dict_model(c, seed):
    rng = np.random.default_rng(seed)
    t = {"model.embed_tokens.weight": rng.normal(size=(c["vocab_size"], c["hidden_size"]))}
    for name, n in norm_shapes(c).items():
        t[name] = 1.0 + 0.2 * rng.normal(size=n)
    for prefix, (o, i, _) in linear_shapes(c).items():
        t[prefix + ".weight"] = rng.normal(size=(o, i)) / math.sqrt(i)
    for l in range(c["num_hidden_layers"]):
        t["model.layers.%d.mlp.gate.e_score_correction_bias" % l] = 0.3 * rng.normal(size=c["n_routed_experts"])
    return ref.Model(ref.Config(c), ref.DictWeights(t)), t


def naive_forward(c, t, ids):
    """Token-by-token, head-by-head forward with HF's rope formulation
    (de-interleave, rotate_half, cat(freqs, freqs)); a second reading of the math."""
    H = c["num_attention_heads"]
    dn, dr, dv, r = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"], c["kv_lora_rank"]
    eps = c["rms_norm_eps"]
    rs = c.get("rope_scaling")

    def norm(v, w):
        return v / math.sqrt(sum(a * a for a in v) / len(v) + eps) * w

    def mscale(s, m):
        return 1.0 if s <= 1 else 0.1 * m * math.log(s) + 1.0

    base = c["rope_theta"]
    inv = [base ** (-(2 * i) / dr) for i in range(dr // 2)]
    cs_scale, scale = 1.0, (dn + dr) ** -0.5
    if rs:
        fac, orig = rs["factor"], rs["original_max_position_embeddings"]

        def corr(rot):
            return dr * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))
        lo, hi = max(math.floor(corr(rs["beta_fast"])), 0), min(math.ceil(corr(rs["beta_slow"])), dr - 1)
        hi = hi + 0.001 if lo == hi else hi
        for i in range(dr // 2):
            ramp = min(max((i - lo) / (hi - lo), 0.0), 1.0)
            inv[i] = inv[i] / fac * ramp + inv[i] * (1 - ramp)
        cs_scale = mscale(fac, rs["mscale"]) / mscale(fac, rs["mscale_all_dim"])
        scale *= mscale(fac, rs["mscale_all_dim"]) ** 2

    def rope_hf(v, pos):
        v = np.concatenate([v[0::2], v[1::2]])                 # de-interleave
        f = np.array([pos * x for x in inv])
        cos = np.cos(np.concatenate([f, f])) * cs_scale
        sin = np.sin(np.concatenate([f, f])) * cs_scale
        half = np.concatenate([-v[dr // 2:], v[:dr // 2]])   # rotate_half
        return v * cos + half * sin

    def mlp(v, p):
        g, u, dn_ = t[p + "gate_proj.weight"], t[p + "up_proj.weight"], t[p + "down_proj.weight"]
        a, b = g @ v, u @ v
        return dn_ @ np.array([a[i] / (1 + math.exp(-a[i])) * b[i] for i in range(len(a))])

    xs = [t["model.embed_tokens.weight"][i].copy() for i in ids]
    T = len(ids)
    for l in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % l
        a = p + "self_attn."
        qs, cks, kps = [], [], []
        for pos in range(T):
            x = norm(xs[pos], t[p + "input_layernorm.weight"])
            q = t[a + "q_b_proj.weight"] @ norm(t[a + "q_a_proj.weight"] @ x, t[a + "q_a_layernorm.weight"]) \
                if c.get("q_lora_rank") else t[a + "q_proj.weight"] @ x
            qs.append([(q[h * (dn + dr):h * (dn + dr) + dn], rope_hf(q[h * (dn + dr) + dn:(h + 1) * (dn + dr)], pos))
                       for h in range(H)])
            kv = t[a + "kv_a_proj_with_mqa.weight"] @ x
            cks.append(norm(kv[:r], t[a + "kv_a_layernorm.weight"]))
            kps.append(rope_hf(kv[r:], pos))
        wkvb = t[a + "kv_b_proj.weight"]
        new = []
        for pos in range(T):
            heads = []
            for h in range(H):
                wk, wv = wkvb[h * (dn + dv):h * (dn + dv) + dn], wkvb[h * (dn + dv) + dn:(h + 1) * (dn + dv)]
                sc = [(float(qs[pos][h][0] @ (wk @ cks[s])) + float(qs[pos][h][1] @ kps[s])) * scale
                      for s in range(pos + 1)]
                m = max(sc)
                e = [math.exp(v - m) for v in sc]
                heads.append(sum(e[s] / sum(e) * (wv @ cks[s]) for s in range(pos + 1)))
            hid = xs[pos] + t[a + "o_proj.weight"] @ np.concatenate(heads)
            y = norm(hid, t[p + "post_attention_layernorm.weight"])
            m = p + "mlp."
            if l >= c["first_k_dense_replace"] and l % c["moe_layer_freq"] == 0:
                E, k, G = c["n_routed_experts"], c["num_experts_per_tok"], c["n_group"]
                s = [1 / (1 + math.exp(-float(v))) for v in t[m + "gate.weight"] @ y]
                bsc = [s[e] + t[m + "gate.e_score_correction_bias"][e] for e in range(E)]
                per = E // G
                gsc = [sum(sorted(bsc[g * per:(g + 1) * per], reverse=True)[:2]) for g in range(G)]
                kept = sorted(range(G), key=lambda g: (-gsc[g], g))[:c["topk_group"]]
                cand = [e for e in range(E) if e // per in kept]
                chosen = sorted(cand, key=lambda e: (-bsc[e], e))[:k]
                tot = sum(s[e] for e in chosen)
                out = mlp(y, m + "shared_experts.")
                for e in chosen:
                    out = out + s[e] / tot * c["routed_scaling_factor"] * mlp(y, m + "experts.%d." % e)
            else:
                out = mlp(y, m)
            new.append(hid + out)
        xs = new
    return np.array([t["lm_head.weight"] @ norm(x, t["model.norm.weight"]) for x in xs])


def rel_err(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))
