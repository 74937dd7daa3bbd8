#!/usr/bin/python3
"""Self-tests of the float64 reference: the TESTS list and `self_test()`.

Run by `run_reference.py --self-test` (the CTest `reference_self_test`), or
directly.  Kept apart from run_reference.py so the CLI stays small; the
fixtures the tests build on live in reference_fixtures.py.
"""

import argparse
import json
import math
import os
import struct
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import deepseek_ref as ref  # noqa: E402
from reference_fixtures import (TEST_CONFIG, e4m3_scalar, linear_shapes, make_checkpoint,  # noqa: E402
                                naive_forward, random_dict_model, rel_err, write_safetensors)
from run_reference import run  # noqa: E402
from safetensors_reader import (Checkpoint, SafetensorsError, SafetensorsFile,  # noqa: E402
                                bf16_bits_to_f64, e4m3_bits_to_f64)


class CheckFailed(Exception):
    pass


CHECKS = [0]  # checks made so far (a test that makes none fails: it tested nothing)


def check(ok, *what):
    """A check that holds under `python -O` too, where assert statements vanish."""
    CHECKS[0] += 1
    if not ok:
        raise CheckFailed(" ".join(str(w) for w in what) or "check failed")


def test_e4m3():
    cases = {0x00: 0.0, 0x80: -0.0, 0x38: 1.0, 0x3C: 1.5, 0x30: 0.5, 0x40: 2.0, 0xC0: -2.0,
             0x7E: 448.0, 0xFE: -448.0, 0x08: 2.0 ** -6, 0x01: 2.0 ** -9, 0x07: 7 * 2.0 ** -9,
             0x0F: 1.875 * 2.0 ** -6, 0x77: 240.0, 0x39: 1.125, 0xB3: -0.6875}
    got = e4m3_bits_to_f64(np.array(list(cases), dtype=np.uint8))
    check(np.array_equal(got, np.array(list(cases.values()))), got)
    check(np.signbit(got[1]))
    check(np.isnan(e4m3_bits_to_f64(np.array([0x7F, 0xFF], dtype=np.uint8))).all())
    table = e4m3_bits_to_f64(np.arange(256, dtype=np.uint8))
    indep = np.array([e4m3_scalar(b) for b in range(256)])
    check(np.array_equal(np.isnan(table), np.isnan(indep)))
    check(np.array_equal(table[~np.isnan(table)], indep[~np.isnan(indep)]))


def test_bf16():
    cases = {0x3F80: 1.0, 0xC000: -2.0, 0x3FC0: 1.5, 0x4049: 3.140625, 0x0001: 2.0 ** -133,
             0x7F80: np.inf, 0xFF80: -np.inf, 0x3E80: 0.25}
    got = bf16_bits_to_f64(np.array(list(cases), dtype=np.uint16))
    check(np.array_equal(got, np.array(list(cases.values()))), got)


def test_safetensors_bytes():
    """Hand-written file: header padded, offsets relative to header end."""
    header = b'{"__metadata__":{"format":"pt"},"b":{"dtype":"BF16","shape":[2],"data_offsets":[4,8]},' \
             b'"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},' \
             b'"c":{"dtype":"I64","shape":[1,1],"data_offsets":[8,16]},' \
             b'"d":{"dtype":"F16","shape":[],"data_offsets":[16,18]}}'
    header += b" " * (-len(header) % 8)
    data = struct.pack("<f", -0.75) + bytes([0x80, 0x3F, 0x40, 0xC0]) + struct.pack("<q", -5) \
        + bytes([0x00, 0x3C])
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "x.safetensors")
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(header)) + header + data)
        st = SafetensorsFile(path)
        check(st.metadata == {"format": "pt"})
        check(st.float64("a").tolist() == [-0.75])
        check(st.float64("b").tolist() == [1.0, -3.0])
        check(st.raw("c").tolist() == [[-5]])
        check(st.float64("d").shape == () and float(st.float64("d")) == 1.0)
        with open(path, "wb") as f:                                  # truncated
            f.write(struct.pack("<Q", len(header)) + header + data[:-1])
        try:
            SafetensorsFile(path)
            raise CheckFailed("truncated file accepted")
        except SafetensorsError as e:
            check("beyond end of file" in str(e))


def test_fp8_block_dequant():
    """[129, 130] weight, 128x128 blocks: partial last row/column blocks."""
    bits = np.full((129, 130), 0x38, dtype=np.uint8)                  # 1.0
    bits[0, 0], bits[127, 128], bits[128, 127], bits[128, 129] = 0x3C, 0xC0, 0x30, 0x7E
    sinv = np.array([[2.0, 3.0], [5.0, 7.0]], dtype="<f4")
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(tmp, exist_ok=True)
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}, f)
        write_safetensors(os.path.join(tmp, "model.safetensors"),
                          {"w.weight": ("F8_E4M3", bits.shape, bits.tobytes()),
                           "w.weight_scale_inv": ("F32", sinv.shape, sinv.tobytes())})
        W = ref.CheckpointWeights(Checkpoint(tmp)).linear("w")
    check(W.shape == (129, 130))
    check(W[0, 0] == 1.5 * 2 and W[5, 127] == 2.0 and W[5, 128] == 3.0 and W[5, 129] == 3.0)
    check(W[127, 128] == -2.0 * 3 and W[128, 127] == 0.5 * 5 and W[128, 129] == 448.0 * 7)
    check(W[128, 0] == 5.0 and W[128, 128] == 7.0)
    # non-square blocks [1, 2]: W[r][c] = e4m3 * scale_inv[r][c // 2]
    bits = np.array([[0x38, 0x40, 0x30], [0xC0, 0x3C, 0x38]], dtype=np.uint8)   # 1 2 .5 / -2 1.5 1
    sinv = np.array([[2.0, 3.0], [5.0, 7.0]])
    check(ref.dequant_fp8_block(bits, sinv, (1, 2)).tolist() == [[2.0, 4.0, 1.5], [-10.0, 7.5, 7.0]])
    check(W.sum() == (2.0 * (128 * 128 - 1) + 3 + 3.0 * (128 * 2 - 1) - 6 + 5.0 * 127 + 2.5
                      + 7.0 * 1 + 448 * 7))


def test_int4_dequant():
    """Two rows of 32 columns; words written by hand."""
    words = np.array([[0x76543210, 0xFEDCBA98, 0x88888888, 0x88888888],
                      [0x0000000F, 0x88888888, 0x88888888, 0xF888888F]], dtype=np.uint32)
    scale = np.array([[0x3F00], [0x4000]], dtype=np.uint16)           # 0.5, 2.0
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump({}, f)
        write_safetensors(os.path.join(tmp, "model.safetensors"),
                          {"e.weight_packed": ("I32", words.shape, words.view("<i4").tobytes()),
                           "e.weight_scale": ("BF16", scale.shape, scale.astype("<u2").tobytes()),
                           "e.weight_shape": ("I32", (2,), np.array([2, 32], dtype="<i4").tobytes())})
        W = ref.CheckpointWeights(Checkpoint(tmp)).linear("e")
    row0 = [(c - 8) * 0.5 for c in range(16)] + [0.0] * 16
    row1 = [14.0] + [-16.0] * 7 + [0.0] * 16 + [14.0] + [0.0] * 6 + [14.0]
    check(W.tolist() == [row0, row1], W)


def test_int8_dequant():
    """[2, 40]: a full group of 32 and a partial one of 8, scales written by hand."""
    q = np.zeros((2, 40), dtype=np.int8)
    q[0, 0], q[0, 31], q[0, 32], q[0, 39] = 127, -127, 1, -3
    q[1, 5], q[1, 33] = -1, 100
    scale = np.array([[0x3F00, 0x4000], [0x3C00, 0xBF80]], dtype=np.uint16)  # 0.5, 2; 2^-7, -1
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump({}, f)
        write_safetensors(os.path.join(tmp, "model.safetensors"),
                          {"e.weight": ("I8", q.shape, q.tobytes()),
                           "e.weight_scale": ("BF16", scale.shape, scale.astype("<u2").tobytes())})
        W = ref.CheckpointWeights(Checkpoint(tmp)).linear("e")
    want = np.zeros((2, 40))
    want[0, 0], want[0, 31], want[0, 32], want[0, 39] = 63.5, -63.5, 2.0, -6.0
    want[1, 5], want[1, 33] = -2.0 ** -7, -100.0
    check(W.tolist() == want.tolist(), W)


def test_yarn():
    base = {"vocab_size": 8, "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 1,
            "num_attention_heads": 1, "kv_lora_rank": 4, "qk_nope_head_dim": 4,
            "qk_rope_head_dim": 8, "v_head_dim": 4, "rope_theta": 10000.0}
    # corr_dim(32) = 8 ln(64/(64 pi)) / (2 ln 1e4) = -0.497 -> low 0; corr_dim(1) = 1.008 -> high 2
    # ramp [0, .5, 1, 1]; extra [1, .1, .01, .001]; inter = extra / 4
    cfg = ref.Config(dict(base, rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
                                              "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}))
    inv, ms = ref.rope_inv_freq(cfg)
    check(np.allclose(inv, [1.0, 0.0625, 0.0025, 0.00025], rtol=1e-14, atol=0), inv)
    check(ms == 1.0)
    m = 0.1 * math.log(4.0) + 1.0
    check(abs(ref.softmax_scale(cfg) - 12 ** -0.5 * m * m) < 1e-15)
    # low == high == 0 (beta_slow 32): high += 0.001, ramp [0, 1, 1, 1]
    cfg = ref.Config(dict(base, rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
                                              "beta_fast": 32, "beta_slow": 32, "mscale": 0.5, "mscale_all_dim": 0}))
    inv, ms = ref.rope_inv_freq(cfg)
    check(np.allclose(inv, [1.0, 0.025, 0.0025, 0.00025], rtol=1e-14, atol=0), inv)
    check(abs(ms - (0.05 * math.log(4.0) + 1.0)) < 1e-15)             # / get_mscale(4, 0) = 1
    check(ref.softmax_scale(cfg) == 12 ** -0.5)                        # mscale_all_dim 0: unscaled
    cfg = ref.Config(base)                                             # plain rope
    inv, ms = ref.rope_inv_freq(cfg)
    check(np.allclose(inv, [1.0, 0.1, 0.01, 0.001], rtol=1e-14, atol=0) and ms == 1.0)
    # DeepSeek-V3's own config: factor 40, dim 64, orig 4096: low = 10, high = 23
    cfg = ref.Config(dict(base, qk_rope_head_dim=64, rope_scaling={
        "type": "yarn", "factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32,
        "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}))
    inv, _ = ref.rope_inv_freq(cfg)
    extra = 10000.0 ** (-np.arange(0, 64, 2) / 64)
    check(np.allclose(inv[:10], extra[:10], rtol=1e-15) and np.allclose(inv[23:], extra[23:] / 40, rtol=1e-15))
    check(np.allclose(inv[16], extra[16] * (1 - 6 / 13) + extra[16] / 40 * 6 / 13, rtol=1e-15))


def test_rope_direction():
    cfg = ref.Config({"vocab_size": 8, "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 1,
                      "num_attention_heads": 1, "kv_lora_rank": 4, "qk_nope_head_dim": 4,
                      "qk_rope_head_dim": 4, "v_head_dim": 4, "rope_theta": 10000.0})
    m = ref.Model(cfg, None)
    cos, sin = m.rope_cos_sin([1])
    got = ref.apply_rope(np.array([[1.0, 0.0, 0.0, 2.0]]), cos, sin)
    want = [math.cos(1), math.sin(1), -2 * math.sin(0.01), 2 * math.cos(0.01)]
    check(np.allclose(got, [want], rtol=0, atol=1e-15), got)


def test_rms_norm():
    got = ref.rms_norm(np.array([3.0, 4.0]), np.array([1.0, 2.0]), 0.0)
    check(np.allclose(got, [3 / math.sqrt(12.5), 8 / math.sqrt(12.5)], rtol=1e-15))


def test_router():
    cfg = ref.Config({"vocab_size": 8, "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 2,
                      "num_attention_heads": 1, "kv_lora_rank": 4, "qk_nope_head_dim": 4,
                      "qk_rope_head_dim": 4, "v_head_dim": 4, "first_k_dense_replace": 1,
                      "n_routed_experts": 8, "n_shared_experts": 1, "moe_intermediate_size": 4,
                      "num_experts_per_tok": 2, "n_group": 4, "topk_group": 2, "norm_topk_prob": True,
                      "routed_scaling_factor": 3.0})
    # gate = identity on 8 dims: logits = x; scores s = sigmoid(x)
    s = np.array([[0.9, 0.1, 0.5, 0.45, 0.2, 0.95, 0.3, 0.3]])
    x = np.log(s / (1 - s))
    bias = np.array([0.0, 0.0, 0.0, 0.0, -0.5, 0.0, 0.0, 0.0])
    # biased: [.9 .1 | .5 .45 | -.3 .95 | .3 .3]; groups (top2 sums): 1.0, .95, .65, .6
    # kept groups 0, 1 -> expert 5 (0.95, dropped group) never chosen; top2 = 0, 2
    rt = ref.route(cfg, x, np.eye(8), bias)
    check(rt.groups.tolist() == [[0, 1]] and rt.experts.tolist() == [[0, 2]], (rt.groups, rt.experts))
    check(np.allclose(rt.weights, [[0.9 / 1.4 * 3, 0.5 / 1.4 * 3]], rtol=1e-14))
    check(abs(rt.expert_margin[0] - 0.05) < 1e-12 and abs(rt.group_margin[0] - 0.3) < 1e-12)
    check(abs(rt.min_chosen_biased[0] - 0.5) < 1e-12)
    # negative biased scores inside the kept groups are still chosen over dropped groups
    bias2 = np.array([-2.0, -2.0, -2.0, -2.0, 0.0, 0.0, 0.0, 0.0])
    s2 = np.array([[0.9, 0.8, 0.7, 0.6, 0.1, 0.2, 0.3, 0.4]])
    # biased [-1.1 -1.2 | -1.3 -1.4 | .1 .2 | .3 .4] groups: -2.3 -2.7 .3 .7 -> keep 3, 2
    rt = ref.route(cfg, np.log(s2 / (1 - s2)), np.eye(8), bias2)
    check(rt.groups.tolist() == [[3, 2]] and rt.experts.tolist() == [[7, 6]])
    cfg.num_experts_per_tok = 4                                        # -1.3 + ... : kept-group negatives
    rt = ref.route(cfg, np.log(s2 / (1 - s2)), np.eye(8), np.array([0.0] * 4 + [-0.3] * 4))
    # biased [.9 .8 .7 .6 | -.2 -.1 0 .1]; groups 1.7 1.3 -.3 .1 -> keep 0, 1 -> experts 0 1 2 3
    check(rt.experts.tolist() == [[0, 1, 2, 3]])
    bias3 = np.array([0.0, 0.0, 0.1, -1.55, -1.0, -1.0, -0.8, -0.9])
    # biased [.9 .8 | .8 -.95 | -.9 -.8 | -.5 -.5]; groups 1.7 -.15 -1.7 -1 -> keep 0, 1; the 4th
    # pick is expert 3 (-.95), never a dropped-group expert (6, 7 at -.5; HF's 0.0 fill would differ)
    rt = ref.route(cfg, np.log(s2 / (1 - s2)), np.eye(8), bias3)
    check(rt.groups.tolist() == [[0, 1]] and rt.experts.tolist() == [[0, 1, 2, 3]])
    check(abs(rt.min_chosen_biased[0] + 0.95) < 1e-12 and rt.expert_margin[0] == np.inf)
    cfg.num_experts_per_tok = 2
    cfg.topk_group = 1                                                 # 1 group, k 2: second-best competitor none
    rt = ref.route(cfg, np.log(s2 / (1 - s2)), np.eye(8), bias2)
    check(rt.experts.tolist() == [[7, 6]] and rt.expert_margin[0] == np.inf)
    # ties: lower index first (experts and groups)
    cfg.topk_group, cfg.n_group = 2, 1
    s3 = np.array([[0.5, 0.7, 0.7, 0.5, 0.7, 0.1, 0.1, 0.1]])
    rt = ref.route(cfg, np.log(s3 / (1 - s3)), np.eye(8), np.zeros(8))
    check(rt.experts.tolist() == [[1, 2]] and rt.expert_margin[0] < 1e-15 and rt.groups is None)
    check(np.allclose(rt.weights, [[1.5, 1.5]], rtol=1e-14))
    cfg.norm_topk_prob = False
    rt = ref.route(cfg, np.log(s3 / (1 - s3)), np.eye(8), np.zeros(8))
    check(np.allclose(rt.weights, [[2.1, 2.1]], rtol=1e-14))


def _test_configs():
    no_qlora = dict(TEST_CONFIG, q_lora_rank=None)
    plain_rope = dict(TEST_CONFIG, rope_scaling=None, n_group=1, topk_group=1)
    freq2 = dict(TEST_CONFIG, num_hidden_layers=4, moe_layer_freq=2, first_k_dense_replace=1)
    return [("yarn+q_lora+groups", TEST_CONFIG), ("q_proj", no_qlora), ("plain rope", plain_rope),
            ("moe_layer_freq 2", freq2)]


def test_absorbed_equals_plain():
    ids = np.random.default_rng(1).integers(0, TEST_CONFIG["vocab_size"], size=11)
    for name, c in _test_configs():
        model, _ = random_dict_model(c, 7)
        a, ra = model.forward(ids)
        b, rb = model.forward(ids, absorbed=True)
        check(rel_err(b, a) < 1e-12, (name, rel_err(b, a)))
        check(all(np.array_equal(x.experts, y.experts) for x, y in zip(ra, rb)))


def test_against_naive():
    ids = np.random.default_rng(2).integers(0, TEST_CONFIG["vocab_size"], size=7)
    for name, c in _test_configs():
        model, t = random_dict_model(c, 11)
        a, _ = model.forward(ids)
        b = naive_forward(c, t, list(ids))
        check(rel_err(a, b) < 1e-12, (name, rel_err(a, b)))


def test_layer_kinds():
    c = dict(TEST_CONFIG, num_hidden_layers=5, moe_layer_freq=2, first_k_dense_replace=1)
    cfg = ref.Config(c)
    check([cfg.is_moe_layer(l) for l in range(5)] == [False, False, True, False, True])
    model, _ = random_dict_model(c, 3)
    _, routing = model.forward([1, 2, 3])
    check([r.layer for r in routing] == [2, 4])


def test_kv_cache():
    ids = list(np.random.default_rng(3).integers(0, TEST_CONFIG["vocab_size"], size=10))
    model, _ = random_dict_model(TEST_CONFIG, 5)
    full, _ = model.forward(ids)
    for absorbed in (False, True):
        cache = ref.KVCache(TEST_CONFIG["num_hidden_layers"])
        parts = [model.forward(ids[:4], cache, absorbed)[0]]
        parts += [model.forward(ids[i:i + 1], cache, absorbed)[0] for i in range(4, 7)]
        parts.append(model.forward(ids[7:], cache, absorbed)[0])
        check(rel_err(np.concatenate(parts), full) < 1e-12)
    _, _, toks, gaps, _ = model.generate_greedy(ids, 4)
    seq = list(ids)
    for tok in toks:                                                   # recompute the full forward per step
        want = int(np.argmax(model.forward(seq)[0][-1]))
        check(tok == want)
        seq.append(want)
    check(len(gaps) == 4 and min(gaps) >= 0)


def test_checkpoint_formats():
    ids = np.random.default_rng(4).integers(0, TEST_CONFIG["vocab_size"], size=9)
    c = dict(TEST_CONFIG, hidden_size=64, moe_intermediate_size=32, intermediate_size=136)
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in ("bf16", "fp8", "int4"):
            d = os.path.join(tmp, fmt)
            expect = make_checkpoint(c, fmt, d, seed=21)
            model = ref.load_model(d)
            for name, want in expect.items():
                if ".layers.%d." % c["num_hidden_layers"] in name:
                    continue
                got = model.w.linear(name[:-len(".weight")]) if name.endswith(".weight") and \
                    name[:-len(".weight")] in linear_shapes(c) else model.w.tensor(name) \
                    if "embed_tokens" not in name else model.w.embedding_rows(np.arange(c["vocab_size"]))
                check(got.shape == want.shape and np.array_equal(got, want), (fmt, name))
            a, _ = model.forward(ids)
            b, _ = ref.Model(ref.Config(c), ref.DictWeights(expect)).forward(ids)
            check(np.isfinite(a).all() and np.array_equal(a, b), fmt)


def test_cli():
    with tempfile.TemporaryDirectory() as tmp:
        mdir = os.path.join(tmp, "m")
        make_checkpoint(TEST_CONFIG, "bf16", mdir, seed=5)
        req = os.path.join(tmp, "r.jsonl")
        with open(req, "w") as f:
            f.write('{"id": "a", "token_ids": [1, 2, 3, 4, 5]}\n\n{"id": "b", "token_ids": [7]}\n')
        out = os.path.join(tmp, "out")
        run(argparse.Namespace(model=mdir, requests=req, out_dir=out, generate=3, absorbed=False, float32=False,
                                quiet=True))
        la = np.load(os.path.join(out, "a.npy"))
        check(la.shape == (5, TEST_CONFIG["vocab_size"]) and la.dtype == np.float64)
        with open(os.path.join(out, "a.greedy.json")) as f:
            g = json.load(f)
        model = ref.load_model(mdir)
        seq = [1, 2, 3, 4, 5]
        for _ in range(3):
            seq.append(int(np.argmax(model.forward(seq)[0][-1])))
        check(g["token_ids"] == seq[5:])
        with open(os.path.join(out, "b.routing.json")) as f:
            r = json.load(f)
        check([l["layer"] for l in r["layers"]] == [1, 2] and len(r["layers"][0]["experts"]) == 1)


def test_activation_quantization():
    """The int8 activation path's rule by hand: absmax 127 gives d = 1, ties go
    to the even neighbour, an all-zero group stays 0, a partial last group
    uses its own absmax."""
    x = np.zeros((1, 70))
    x[0, :5] = [127.0, 2.5, 3.5, -0.5, -1.5]
    x[0, 64:66] = [2.0, -1.0]
    q = ref.quantize_activations(x)
    check(np.array_equal(q[0, :5], [127.0, 2.0, 4.0, -0.0, -2.0]), q[0, :5])
    check(np.all(q[0, 5:64] == 0))
    d = 2.0 / 127
    check(np.allclose(q[0, 64:66], [127 * d, np.rint(-1.0 / d) * d], rtol=0, atol=1e-15))
    check(q.shape == x.shape)


def test_activation_flips():
    """A flipped near tie rounds the other way and nothing else moves; the
    linears that read one input name one quantized input."""
    x = np.zeros((2, 32))
    x[:, 0] = 127.0                  # d = 1
    x[0, 1] = 2.51                   # 0.01 steps from the 2 / 3 tie: not near it
    x[0, 2] = 4.5 - 0.5 * ref.TIE_MARGIN   # within the margin: rounds to 4 (half-even would say 4 at the tie)
    x[1, 3] = 6.25                   # far from a tie
    q, near = ref.quantize_activations(x, with_ties=True)
    check(np.array_equal(near[0, :4], [False, False, True, False]) and not near[1].any(), near[:, :4])
    check(q[0, 2] == 4.0 and q[1, 3] == 6.0, q[:, :4])
    flip = np.ones_like(near)        # every activation marked: only near ties move
    qf = ref.quantize_activations(x, flip=flip)
    check(qf[0, 2] == 5.0, qf[0, 2])
    check(np.array_equal(np.delete(qf, 2, axis=1), np.delete(q, 2, axis=1)))
    names = [ref.quant_input("model.layers.3." + n) for n in
             ("self_attn.q_a_proj", "self_attn.kv_a_proj_with_mqa", "mlp.gate_proj", "mlp.experts.7.up_proj",
              "mlp.shared_experts.gate_proj", "mlp.experts.7.down_proj", "self_attn.o_proj")]
    check(names == ["model.layers.3.attn_in"] * 2 + ["model.layers.3.mlp_in"] * 3 +
          ["model.layers.3.mlp.experts.7.down_proj", "model.layers.3.self_attn.o_proj"], names)


def test_tie_resolution():
    """tie_resolution against planted engines, on an int4 model whose near-tie
    margin is widened so that near ties occur: the reference's own logits with
    one near tie flipped are matched by finding that flip; logits 2% off are
    not matched."""
    c = dict(TEST_CONFIG, hidden_size=64, moe_intermediate_size=32, intermediate_size=136)
    with tempfile.TemporaryDirectory() as tmp:
        d = os.path.join(tmp, "int4")
        make_checkpoint(c, "int4", d, seed=23)
        model = ref.load_model(d, int8_activations=True)
        ids = np.random.default_rng(5).integers(0, c["vocab_size"], size=12)
        planted_tie_found(model, ids, ref, 0.02)


def planted_tie_found(model, ids, module, margin):
    """tie_resolution.self_check with module.TIE_MARGIN widened to `margin`
    (so that near ties occur): a planted flip must be found."""
    import tie_resolution
    kept = module.TIE_MARGIN
    try:
        module.TIE_MARGIN = margin
        met, planted = tie_resolution.self_check(model, ids)
    finally:
        module.TIE_MARGIN = kept
    check(met > 0 and planted is not None, "near ties met", met, "planted", planted)


def test_bf16_path():
    """The bf16 path's model (bf16_path.py): its hand-computed roundings; on
    an FP8 model every FP8 linear but kv_b takes it and the logits move; and
    tie_resolution finds a planted flip of one of its near ties (margin widened so that near ties occur). (How far the
    logits move depends on the routing: a flipped expert choice moves them
    far; the engine's logits are held to this model in tests/model.)"""
    import bf16_path
    bf16_path.self_check()  # raises on a wrong rounding
    check(bf16_path.bf16_round(np.array([1.0 + 2.0 ** -8]))[0] == 1.0)
    c = dict(TEST_CONFIG, hidden_size=64, moe_intermediate_size=32, intermediate_size=136)
    with tempfile.TemporaryDirectory() as tmp:
        d = os.path.join(tmp, "fp8")
        make_checkpoint(c, "fp8", d, seed=29)
        ids = np.random.default_rng(7).integers(0, c["vocab_size"], size=10)
        exact, _ = ref.load_model(d).forward(ids)
        model = ref.load_model(d, bf16_activations=True)
        logits, _ = model.forward(ids)
        on = model.w.bf16
        check(any(p.endswith("q_a_proj") for p in on) and any(".experts." in p for p in on)
              and not any(p.endswith("kv_b_proj") for p in on), sorted(on))
        rel = np.abs(logits - exact).max() / np.abs(exact).max()
        check(rel > 1e-5, "bf16 against exact", rel)
        planted_tie_found(model, ids, bf16_path, 0.05)
    # EngineRows: a row that differs from the reference's rounding only at a
    # near tie is followed; one that differs where no float32 error reaches
    # (one step off, far from a tie) raises.
    with tempfile.TemporaryDirectory() as tmp:
        x = np.array([[1.0 + 2.0 ** -8 + 2.0 ** -20, 0.3, -2.0]])  # a near tie (rounds up to 1 + 2^-7), two far ones
        mine = bf16_path.bf16_round(x)
        engine = mine.copy()
        engine[0, 0] = 1.0                                     # the tie taken the other way
        np.save(os.path.join(tmp, "lin.npy"), engine.astype(np.float32))
        rows = bf16_path.EngineRows(tmp)
        check(np.array_equal(rows.follow("lin", x, mine), engine) and rows.followed == 1, rows.followed)
        engine[0, 1] = mine[0, 1] + 2.0 ** -10                 # one step off at 0.3, far from a tie
        np.save(os.path.join(tmp, "bad.npy"), engine.astype(np.float32))
        try:
            bf16_path.EngineRows(tmp).follow("bad", x, mine)
            check(False, "EngineRows followed a row one step off far from a tie")
        except AssertionError as e:
            check("round to" in str(e), e)


TESTS = [test_e4m3, test_bf16, test_safetensors_bytes, test_fp8_block_dequant, test_int4_dequant, test_int8_dequant,
         test_yarn, test_rope_direction, test_rms_norm, test_router, test_absorbed_equals_plain,
         test_against_naive, test_layer_kinds, test_kv_cache, test_checkpoint_formats, test_cli, test_activation_quantization,
         test_activation_flips, test_tie_resolution, test_bf16_path]


def self_test():
    passed = failed = 0
    for t in TESTS:
        t0, checks = time.time(), CHECKS[0]
        try:
            t()
            if CHECKS[0] == checks:
                raise CheckFailed("made no checks")
            passed += 1
            print("ok    %-28s %.2fs, %d checks" % (t.__name__, time.time() - t0, CHECKS[0] - checks))
        except Exception as e:  # report every failure, keep going
            failed += 1
            import traceback
            traceback.print_exc()
            print("FAIL  %-28s %r" % (t.__name__, e))
    if passed + failed == 0:
        print("FAIL  no tests ran")
        failed = 1
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(self_test())
