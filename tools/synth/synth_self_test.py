#!/usr/bin/python3
"""Self-test of the synthetic checkpoint generator (`make_checkpoint.py --self-test`,
the CTest `synth_self_test`, or run directly): the encoders against independent
ones, the safetensors writer, random streams, config.json against the real
configs, and whole checkpoints generated, verified and compared across formats.
Kept apart from the generator so that test code is not part of what it runs.
"""
import hashlib
import json
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import presets as P  # noqa: E402
import quantize as Q  # noqa: E402
import safetensors_writer as ST  # noqa: E402
from generator import draw, generate, stream  # noqa: E402
from readback import Checkpoint, verify  # noqa: E402

class _T:
    def __init__(self):
        self.passed = self.failed = 0

    def check(self, name, fn):
        try:
            t = time.time()
            fn()
            self.passed += 1
            print(f"PASS {name} ({time.time() - t:.1f}s)", flush=True)
        except Exception as e:  # noqa: BLE001
            self.failed += 1
            print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)


def _eq(a, b, what=""):
    if not (a == b):
        raise AssertionError(f"{what}: {a!r} != {b!r}")


def _bf16_ref(x):
    """Independent bf16 rounding: nearest of truncation and truncation+1 ulp in float64, ties even."""
    x = np.asarray(x, dtype=np.float32)
    u = x.view(np.uint32)
    lo = (u >> 16).astype(np.uint32)
    hi = lo + 1
    vlo = (lo << 16).view(np.float32).astype(np.float64)
    vhi = (hi << 16).astype(np.uint32).view(np.float32).astype(np.float64)
    vhi = np.where((hi & 0x7FFF) == 0x7F80, np.copysign(2.0 ** 128, vlo), vhi)   # overflow: next is 2^128
    xv = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        dlo, dhi = np.abs(xv - vlo), np.abs(vhi - xv)
    pick_hi = (dhi < dlo) | ((dhi == dlo) & (hi % 2 == 0))
    return np.where(pick_hi, hi, lo).astype(np.uint16)


def self_test():
    T = _T()
    rng = np.random.default_rng(12345)

    # ---- bf16
    def bf16_hand():
        cases = [(1.0, 0x3F80), (-2.0, 0xC000), (0.0, 0x0000), (-0.0, 0x8000),
                 (1 + 2 ** -8, 0x3F80),             # tie, even stays
                 (1 + 3 * 2 ** -8, 0x3F82),         # tie, rounds up to even
                 (1 + 2 ** -8 + 2 ** -20, 0x3F81),  # above the tie
                 (3.140625, 0x4049), (65504.0, 0x4780), (float("inf"), 0x7F80), (float("-inf"), 0xFF80),
                 (3.3895313892515355e38, 0x7F7F),   # largest finite bf16
                 (3.4028234663852886e38, 0x7F80)]   # max float32 rounds to inf (RNE)
        for v, bits in cases:
            _eq(int(Q.bf16_bits(np.float32(v))), bits, f"bf16({v})")
        _eq(int(Q.bf16_bits(np.float32("nan"))), 0x7FC0, "bf16(nan)")
        pats = np.array([0x00008000, 0x00018000, 0x00007FFF, 0x3F808000, 0x3F818000], dtype=np.uint32)
        _eq(list(Q.bf16_bits(pats.view(np.float32))), [0x0000, 0x0002, 0x0000, 0x3F80, 0x3F82], "bf16 tie patterns")
    T.check("bf16 hand-picked values and ties", bf16_hand)

    def bf16_all():
        bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
        f = Q.bf16_to_f32(bits)
        ok = ~np.isnan(f)
        _eq(bool(np.all(Q.bf16_bits(f)[ok] == bits[ok])), True, "bf16 -> f32 -> bf16 identity")
        _eq(bool(np.all(Q.bf16_bits(f[~ok]) & 0x7FFF == 0x7FC0)), True, "NaN stays NaN")
    T.check("bf16 all 65536 patterns round trip", bf16_all)

    def bf16_vs_ref():
        u = rng.integers(0, 0xFF800000, size=2_000_000, dtype=np.uint64).astype(np.uint32)
        u = u[(u & 0x7F800000) != 0x7F800000]     # finite only
        u = np.concatenate([u, (u & 0xFFFF0000) | 0x8000])   # exact ties
        x = u.view(np.float32)
        _eq(bool(np.array_equal(Q.bf16_bits(x), _bf16_ref(x))), True, "bf16 vs reference")
    T.check("bf16 vs independent rounding (4M values incl. ties)", bf16_vs_ref)

    # ---- fp8
    def fp8_table():
        d = Q.FP8_DECODE
        _eq(d[0x00], 0.0, "0x00"); _eq(d[0x01], 2.0 ** -9, "0x01"); _eq(d[0x07], 7 * 2.0 ** -9, "0x07")
        _eq(d[0x08], 2.0 ** -6, "0x08"); _eq(d[0x38], 1.0, "0x38"); _eq(d[0x39], 1.125, "0x39")
        _eq(d[0x7E], 448.0, "0x7e"); _eq(d[0xFE], -448.0, "0xfe"); _eq(d[0xB8], -1.0, "0xb8")
        _eq(bool(np.isnan(d[0x7F]) and np.isnan(d[0xFF])), True, "NaN codes")
        _eq(int(np.isnan(d).sum()), 2, "exactly 2 NaN codes")
        _eq(bool(np.signbit(d[0x80])), True, "0x80 is -0")
        pos = d[:0x7F]
        _eq(bool(np.all(np.diff(pos) > 0)), True, "monotonic")
    T.check("fp8 e4m3fn decode table", fp8_table)

    def fp8_codes():
        codes = np.array([c for c in range(256) if c not in (0x7F, 0xFF)], dtype=np.uint8)
        v = Q.fp8_decode(codes)
        _eq(bool(np.array_equal(Q.fp8_encode(v), codes)), True, "fast encoder")
        _eq(bool(np.array_equal(Q.fp8_encode_bits(v), codes)), True, "bit-arithmetic encoder")
        _eq(bool(np.array_equal(Q.fp8_encode_reference(v), codes)), True, "reference encoder")
        nan = Q.fp8_encode(np.array([np.nan, -np.nan], dtype=np.float32)) & 0x7F
        _eq(list(nan), [0x7F, 0x7F], "NaN encodes to NaN")
    T.check("fp8 all 254 non-NaN codes decode->encode identity", fp8_codes)

    def fp8_ties():
        cases = [(1.0625, 0x38), (1.1875, 0x3A), (-1.0625, 0xB8), (0.5 * 2 ** -9, 0x00), (1.5 * 2 ** -9, 0x02),
                 (2.5 * 2 ** -9, 0x02), (7.5 * 2 ** -9, 0x08), (2 ** -6 + 2 ** -10, 0x08), (2 ** -6 + 3 * 2 ** -10, 0x0A),
                 (432.0, 0x7E), (424.0, 0x7D), (440.0, 0x7E), (464.0, 0x7E), (1e6, 0x7E), (-1e6, 0xFE),
                 (0.25 * 2 ** -9, 0x00), (-0.25 * 2 ** -9, 0x80), (240.0, 0x77), (232.0, 0x76), (248.0, 0x78)]
        # 432: midpoint of 416 (0x7d) and 448 (0x7e) -> even 0x7e; 232: of 224 (0x76) and 240 -> 0x76;
        # 248: of 240 (0x77) and 256 (0x78) -> 0x78; 2^-6 + 2^-10: half an ulp above 0x08 -> 0x08
        x = np.array([c[0] for c in cases], dtype=np.float32)
        want = [c[1] for c in cases]
        got = list(Q.fp8_encode(x))
        ref = list(Q.fp8_encode_reference(x))
        bit = list(Q.fp8_encode_bits(x))
        for (v, _), g, r, b, wnt in zip(cases, got, ref, bit, want):
            _eq((g, r, b), (wnt, wnt, wnt), f"e4m3({v})")
    T.check("fp8 ties to even, subnormals, saturation", fp8_ties)

    def fp8_vs_ref():
        pos = Q.FP8_DECODE[:0x7F]
        mids = ((pos[:-1] + pos[1:]) / 2).astype(np.float32)
        mids = np.concatenate([mids, [np.float32(464.0)]])
        near = np.concatenate([mids, np.nextafter(mids, np.float32(0)), np.nextafter(mids, np.float32(1e9))])
        x = np.concatenate([near, -near, rng.standard_normal(1_000_000).astype(np.float32) * 100,
                            rng.standard_normal(200_000).astype(np.float32) * 0.01])
        sweep = np.arange(0, 0x43F00000, 97, dtype=np.uint32).view(np.float32)   # every 97th float32 in [0, 480)
        sweep2 = np.arange(0x3A000000, 0x3D000000, 7, dtype=np.uint32).view(np.float32)  # subnormal region
        for chunk in (x, sweep, -sweep, sweep2):
            b = Q.fp8_encode_reference(chunk)
            for enc in (Q.fp8_encode, Q.fp8_encode_bits):
                a = enc(chunk)
                bad = np.nonzero(a != b)[0]
                if len(bad):
                    i = bad[0]
                    raise AssertionError(f"{enc.__name__}: {len(bad)} mismatches, e.g. {chunk[i]!r}: "
                                         f"{a[i]:#x} vs {b[i]:#x}")
    T.check("fp8 table and bit encoders == searchsorted encoder (midpoints +-1ulp, 19M sweep)", fp8_vs_ref)

    def fp8_block():
        for shape in [(300, 200), (128, 128), (1, 5), (129, 257), (416, 320)]:
            w = (rng.standard_normal(shape) * rng.choice([1e-3, 1.0, 50.0])).astype(np.float32)
            w[:2, :3] = 0
            codes, scale = Q.fp8_block_quantize(w)
            _eq(scale.shape, (-(-shape[0] // 128), -(-shape[1] // 128)), "scale shape")
            _eq(scale.dtype, np.float32, "scale dtype")
            deq = Q.fp8_block_dequantize(codes, scale)
            full = np.repeat(np.repeat(scale.astype(np.float64), 128, 0)[:shape[0]], 128, 1)[:, :shape[1]]
            bound = full * np.maximum(np.abs(w) / full * 2.0 ** -4, 2.0 ** -10) * 1.0001
            _eq(bool(np.all(np.abs(deq - w) <= bound)), True, f"error bound {shape}")
            for i in range(scale.shape[0]):
                for j in range(scale.shape[1]):
                    blk = codes[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128]
                    amax = np.abs(w[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128]).max()
                    _eq(np.float32(scale[i, j]), np.float32(amax) / np.float32(448.0), "scale = amax/448")
                    _eq(bool(np.any((blk & 0x7F) == 0x7E)), True, "block max maps to 448")
        codes, scale = Q.fp8_block_quantize(np.zeros((130, 3), np.float32))
        _eq((int(codes.max()), float(scale.max())), (0, 1.0), "zero block")
    T.check("fp8 128x128 block quantization (partial blocks, scales, error bound)", fp8_block)

    # ---- int4
    def int4_layout():
        n = np.array([[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]], dtype=np.uint8)
        p = Q.int4_pack(n)
        _eq(p.dtype, np.int32, "packed dtype")
        _eq([int(v) & 0xFFFFFFFF for v in p[0]], [0x76543210, 0xFEDCBA98], "nibble order")
        _eq(bool(np.array_equal(Q.int4_unpack(p), n)), True, "unpack")
        r = rng.integers(0, 16, size=(37, 256)).astype(np.uint8)
        _eq(bool(np.array_equal(Q.int4_unpack(Q.int4_pack(r)), r)), True, "random pack/unpack identity")
    T.check("int4 pack/unpack layout and identity", int4_layout)

    def int4_quant():
        w = (rng.standard_normal((70, 320)) * 0.05).astype(np.float32)
        w[3, 32:64] = 0
        w[5, 0:32] = np.linspace(-1, 1, 32, dtype=np.float32)
        packed, sbits = Q.int4_group_quantize(w)
        _eq((packed.shape, sbits.shape), ((70, 40), (70, 10)), "shapes")
        s = Q.bf16_to_f32(sbits).astype(np.float64)
        amax = np.abs(w.reshape(70, 10, 32)).max(2)
        _eq(bool(np.array_equal(sbits, Q.bf16_bits(amax / np.float32(7)))), True, "scale = bf16(amax/7)")
        q = Q.int4_unpack(packed).astype(np.int64) - 8
        _eq((int(q.min()) >= -8, int(q.max()) <= 7), (True, True), "range")
        deq = Q.int4_group_dequantize(packed, sbits)
        err = np.abs(deq - w).reshape(70, 10, 32)
        _eq(bool(np.all(err <= s[:, :, None] * 0.5 * (1 + 1e-6) + 1e-30)), True, "error <= scale/2")
        qa = np.abs(q.reshape(70, 10, 32)).max(2)
        _eq(bool(np.all(qa[s > 0] == 7)), True, "amax maps to |q| = 7")
        _eq((float(s[3, 1]), bool(np.all(q[3, 32:64] == 0))), (0.0, True), "zero group")
        want = np.clip(np.rint(w[5, :32] / np.float32(s[5, 0])), -8, 7)
        _eq(bool(np.array_equal(q[5, :32], want)), True, "q = rint(w/scale)")
    T.check("int4 group-32 quantization (bf16 scale, clip, error bound)", int4_quant)

    # ---- safetensors + random streams
    def st_roundtrip():
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "x.safetensors")
            arrs = {"a": ("BF16", rng.integers(0, 65535, (3, 5)).astype(np.uint16)),
                    "b": ("F32", rng.standard_normal(7).astype(np.float32)),
                    "c": ("F8_E4M3", rng.integers(0, 255, (3, 3)).astype(np.uint8)),
                    "d": ("I32", np.array([4, 5], np.int32))}
            w = ST.SafetensorsWriter(p, [(k, v[0], v[1].shape) for k, v in arrs.items()])
            for k, (_, v) in arrs.items():
                w.append(k, v[:1]); w.append(k, v[1:])
            w.close()
            h, start = ST.read_header(p)
            _eq(start % 8, 0, "header padded to 8")
            _eq(h["__metadata__"], {"format": "pt"}, "metadata")
            order = [n for n, _ in sorted(((k, v) for k, v in h.items() if k != "__metadata__"),
                                          key=lambda kv: kv[1]["data_offsets"][0])]
            _eq(order, ["b", "d", "a", "c"], "data order (element size desc, name)")
            for k, (dt, v) in arrs.items():
                _eq(h[k]["dtype"], dt, k)
                _eq(bool(np.array_equal(ST.read_tensor(p, k), v)), True, k)
            _eq(os.path.getsize(p), start + 4 * 7 + 8 + 30 + 9, "file size")
            w = ST.SafetensorsWriter(os.path.join(d, "y.safetensors"), [("a", "F32", (2,))])
            w.append("a", np.zeros(1, np.float32))
            try:
                w.close()
                raise AssertionError("incomplete tensor accepted")
            except ValueError:
                w.abort()
            _eq(os.listdir(d), ["x.safetensors"], "no partial file left")
    T.check("safetensors writer/reader round trip", st_roundtrip)

    def chunks():
        a = draw(stream(3, "k"), ("normal", 0.5), (300, 17))
        r = stream(3, "k")
        b = np.concatenate([draw(r, ("normal", 0.5), (128, 17)), draw(r, ("normal", 0.5), (1, 17)),
                            draw(r, ("normal", 0.5), (171, 17))])
        _eq(bool(np.array_equal(a, b)), True, "chunked draws equal")
        _eq(bool(np.array_equal(a, draw(stream(4, "k"), ("normal", 0.5), (300, 17)))), False, "seed matters")
    T.check("random streams: chunk invariant, seed dependent", chunks)

    # ---- configs vs the real ones
    def configs():
        here = os.path.dirname(os.path.abspath(__file__))
        fx = os.path.join(here, "..", "..", "tests", "fixtures", "configs")
        real = {f: json.load(open(os.path.join(fx, f"{f}.json"))) for f in ("deepseek-v3", "kimi-k2")}
        ds = real["deepseek-v3"]

        def jtype(v):
            return type(v).__name__ if v is not None else "null"
        for name, p in P.PRESETS.items():
            for fmt in P.FORMATS:
                c = P.build_config(name, fmt)
                ref = real["kimi-k2" if p["family"] == "kimi" else "deepseek-v3"]
                _eq(sorted(set(c) - {"quantization_config"}), sorted(set(ds) - {"quantization_config"}),
                    f"{name} keys")
                for k in c:
                    if k in ref and not (k == "q_lora_rank" and c[k] is None):
                        _eq(jtype(c[k]), jtype(ref[k]), f"{name}.{k} type")
                for k in c["rope_scaling"]:
                    _eq(jtype(c["rope_scaling"][k]), jtype(ref["rope_scaling"][k]), f"{name}.rope_scaling.{k}")
                _eq(c["architectures"], ["DeepseekV3ForCausalLM"], "architectures")
                if fmt == "fp8":
                    _eq(c["quantization_config"], ds["quantization_config"], "fp8 quantization_config")
                elif fmt == "bf16":
                    _eq("quantization_config" in c, False, "bf16 has none")
                else:
                    _eq(c["quantization_config"]["quant_method"], "compressed-tensors", "int4")
    T.check("config.json: same keys and JSON types as the real configs", configs)

    # ---- whole checkpoints
    with tempfile.TemporaryDirectory() as root:
        made = {}

        def make(preset, fmt, seed=0, **kw):
            d = os.path.join(root, f"{preset}-{fmt}-{seed}-{len(kw)}")
            generate(preset, fmt, seed, d, **kw)
            made[(preset, fmt, seed, len(kw))] = d
            return d

        def tree_hash(d):
            h = hashlib.sha256()
            for f in sorted(os.listdir(d)):
                h.update(f.encode()); h.update(open(os.path.join(d, f), "rb").read())
            return h.hexdigest()

        combos = [("tiny", "bf16"), ("tiny", "fp8"), ("tiny", "int4"), ("tiny-noqlora", "fp8"),
                  ("tiny-kimi", "int4"), ("tiny-kimi", "bf16"), ("small", "bf16"), ("small", "fp8"), ("small", "int4")]
        for preset, fmt in combos:
            def one(preset=preset, fmt=fmt):
                d = make(preset, fmt)
                probs = verify(d)
                if probs:
                    raise AssertionError("; ".join(probs[:5]))
            T.check(f"generate + verify {preset} {fmt}", one)

        def determinism():
            for preset, fmt in [("tiny", "fp8"), ("small", "int4"), ("small", "bf16")]:
                a = tree_hash(made[(preset, fmt, 0, 0)])
                b = tree_hash(make(preset, fmt, chunk_elems=1000))   # other chunking, same bytes
                _eq(a, b, f"{preset} {fmt} bytes")
            _eq(tree_hash(make("tiny", "bf16", seed=1)) != tree_hash(made[("tiny", "bf16", 0, 0)]), True, "seed")
            d = make("tiny", "fp8", files=4)
            _eq(len([f for f in os.listdir(d) if f.endswith(".safetensors")]), 4, "--files 4")
            _eq(verify(d), [], "4 files verify")
        T.check("deterministic bytes (independent of chunking); seed and --files honoured", determinism)

        def cross_format():
            for preset in ("tiny", "small"):
                b = Checkpoint(made[(preset, "bf16", 0, 0)])
                f = Checkpoint(made[(preset, "fp8", 0, 0)])
                i = Checkpoint(made[(preset, "int4", 0, 0)])
                for src in P.tensor_sources(b.config):
                    wb = b.weight(src.name)
                    if src.kind in ("lin", "exp"):
                        wf = f.weight(src.name)
                        rel = np.abs(wf - wb).max() / np.abs(wb).max()
                        if rel > 0.08:
                            raise AssertionError(f"{src.name}: fp8 vs bf16 rel err {rel}")
                    else:
                        _eq(bool(np.array_equal(f.raw(src.name), b.raw(src.name))), True, src.name + " fp8")
                    if src.kind == "exp":
                        wi = i.weight(src.name)
                        rel = np.abs(wi - wb).max() / np.abs(wb).max()
                        if rel > 0.1:
                            raise AssertionError(f"{src.name}: int4 vs bf16 rel err {rel}")
                    else:
                        _eq(bool(np.array_equal(i.raw(src.name), b.raw(src.name))), True, src.name + " int4")
                L = b.config["num_hidden_layers"]
                _eq(bool(np.array_equal(b.raw("lm_head.weight"), b.raw(f"model.layers.{L}.shared_head.head.weight"))),
                    True, "MTP head = lm_head")
                _eq(bool(np.array_equal(b.raw("model.embed_tokens.weight"),
                                        b.raw(f"model.layers.{L}.embed_tokens.weight"))), True, "MTP embed")
        T.check("formats agree: fp8/int4 dequantized ~ bf16, unquantized tensors identical", cross_format)

        def routing():
            for key in [("tiny", "bf16", 0, 0), ("small", "bf16", 0, 0), ("tiny-kimi", "bf16", 0, 0)]:
                ck = Checkpoint(made[key])
                c = ck.config
                d, E, G = c["hidden_size"], c["n_routed_experts"], c["n_group"]
                for layer in range(c["first_k_dense_replace"], c["num_hidden_layers"] + c["num_nextn_predict_layers"]):
                    p = f"model.layers.{layer}."
                    x = np.random.default_rng(layer).standard_normal((512, d))
                    x /= np.sqrt((x * x).mean(1, keepdims=True))          # RMSNorm output
                    x *= ck.weight(p + "post_attention_layernorm.weight")
                    s = 1 / (1 + np.exp(-x @ ck.weight(p + "mlp.gate.weight").T))
                    bias = ck.weight(p + "mlp.gate.e_score_correction_bias")
                    if not (s.min() > 0.1 and s.max() < 0.9):
                        raise AssertionError(f"{key[0]} layer {layer}: scores in [{s.min():.3f}, {s.max():.3f}]")
                    if not (np.abs(bias).max() <= 0.05 and (s + bias).min() > 0):
                        raise AssertionError("biased scores not positive")
                    b = (s + bias).reshape(512, G, E // G)
                    gs = np.sort(b, axis=2)[:, :, -2:].sum(2) if G > 1 else b[:, :, 0]
                    keep = np.argsort(-gs, axis=1)[:, :c["topk_group"]]
                    mask = np.full((512, G), True)
                    np.put_along_axis(mask, keep, False, axis=1)
                    bb = np.where(np.repeat(mask, E // G, axis=1), -np.inf, s + bias)
                    top = np.sort(np.argsort(-bb, axis=1)[:, :c["num_experts_per_tok"]], axis=1)
                    distinct = len({tuple(t) for t in top})
                    used = len(set(top.ravel()))
                    if distinct < 100 or used < E * 0.9:
                        raise AssertionError(f"{key[0]} layer {layer}: routing too uniform ({distinct} sets, {used} experts)")
        T.check("routing: sigmoid scores in (0.1, 0.9), biased scores > 0, varied top-k", routing)

    print(f"{T.passed} passed, {T.failed} failed")
    if T.passed + T.failed == 0:
        print("FAIL no checks ran", flush=True)
    return T.failed == 0 and T.passed > 0


if __name__ == "__main__":
    sys.exit(0 if self_test() else 1)
