"""Independent float64 reference of the DeepSeek-V3 architecture (numpy only).

Written from the math of Hugging Face `modeling_deepseek.py` and DeepSeek's
`inference/model.py`; it is the test oracle for the C++ engine. Every weight
is dequantized exactly to float64 (bf16, DeepSeek fp8 e4m3 with 128x128
block scales, Kimi K2 compressed-tensors int4 pack-quantized, trillion's
int8 with a bf16 scale per 32 columns) and the whole forward pass runs in
float64. Reads a HF checkpoint (safetensors) or a converted trillion model
directory (HDF5, via h5py: hdf5_model.py).

    ckpt  = Checkpoint(hf_dir)                      # safetensors_reader
    model = Model(Config(ckpt.config), CheckpointWeights(ckpt))
    logits, routing = model.forward(token_ids)     # [T, vocab], per MoE layer

Shapes: T new tokens, S cached+new positions, d hidden, H heads,
dn qk_nope_head_dim, dr qk_rope_head_dim, dv v_head_dim, r kv_lora_rank.
"""

import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_reader import Checkpoint, to_float64, e4m3_bits_to_f64  # noqa: E402
import bf16_path  # noqa: E402
from ref_config import (ConfigError, Config, yarn_get_mscale, yarn_correction_dim,  # noqa: E402,F401
                        rope_inv_freq, softmax_scale, apply_rope)


# ----------------------------------------------------------------------------- ops

def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


# An activation whose x / d lies within this many quantization steps of a
# rounding tie (k + 1/2) may round the other way in the float32 engine, whose
# activations differ from these float64 ones by ~1e-6 relative (<= 127e-6
# steps at |x / d| <= 127): such rows are "near a tie" (see TIE_MARGIN's use
# in tests/model/compare_reference.py).
TIE_MARGIN = 2e-4


def quantize_activations(x, group=32, with_ties=False, flip=None, distances=False):
    """The engine's int8 activation path (--activations int8), in float64:
    each row's columns in groups of `group`, d = absmax / 127, q =
    round-half-even(x / d) (0 where d == 0), returned as q * d. with_ties:
    also a [T, n] mask of the activations within TIE_MARGIN steps of a
    rounding tie. flip [T, n] (optional): those of the near-tie activations
    it marks round the other way (the engine's float32 value may lie on the
    other side of the tie: tests/reference/tie_resolution.py). distances:
    the mask holds each near tie's distance from the tie in steps instead
    (inf where not near)."""
    x = np.asarray(x, dtype=np.float64)
    T, n = x.shape
    pad = (-n) % group
    xp = np.concatenate([x, np.zeros((T, pad))], axis=1).reshape(T, -1, group)
    d = np.max(np.abs(xp), axis=2, keepdims=True) / 127.0
    u = xp / np.where(d > 0, d, 1.0)
    q = np.where(d > 0, np.rint(u), 0.0)
    below = np.floor(u)
    near = (d > 0) & (np.abs(np.abs(u - below) - 0.5) < TIE_MARGIN)
    if flip is not None:
        fp = np.concatenate([np.asarray(flip, dtype=bool), np.zeros((T, pad), dtype=bool)], axis=1).reshape(T, -1, group)
        q = np.where(fp & near, np.where(q == below, below + 1.0, below), q)
    xq = (q * d).reshape(T, -1)[:, :n]
    if not with_ties:
        return xq
    if distances:
        return xq, np.where(near, np.abs(np.abs(u - below) - 0.5), np.inf).reshape(T, -1)[:, :n]
    return xq, near.reshape(T, -1)[:, :n]


# The engine quantizes an input row once for every linear that reads it
# (attention's q_a and kv_a; an MLP's gate and up, and in an MoE layer every
# routed and shared expert's): a rounding there is one decision for all of
# them. A near tie is named by its input, position and column.
_SHARED_INPUT = re.compile(r"^(model\.layers\.\d+\.)(?:self_attn\.(?:q_a_proj|q_proj|kv_a_proj_with_mqa)|"
                           r"mlp\.(?:experts\.\d+\.|shared_experts\.)?(?:gate_proj|up_proj))$")


def quant_input(prefix):
    """The name of the quantized input a linear reads: its layer's attention or
    MLP input where several linears share one (_SHARED_INPUT), else its own."""
    m = _SHARED_INPUT.match(prefix)
    if not m:
        return prefix
    return m.group(1) + ("attn_in" if "self_attn" in prefix else "mlp_in")


# ----------------------------------------------------------------------------- routing

class Routing:
    """One MoE layer's decisions for T tokens.

    experts [T, k] chosen experts by descending biased score; weights [T, k];
    expert_margin [T]: k-th minus (k+1)-th biased score among eligible experts
    (inf when there is no (k+1)-th); group_margin [T]: topk_group-th minus
    (topk_group+1)-th group score (inf when no group is dropped);
    groups [T, topk_group] kept groups (None without grouping);
    min_chosen_biased [T]: the k-th biased score. When it is negative, HF
    modeling_deepseek.py (which masks dropped groups with 0.0, not -inf)
    would pick a dropped-group expert instead: the two readings differ there."""

    def __init__(self, layer, experts, weights, expert_margin, group_margin, groups, min_chosen_biased):
        self.layer = layer
        self.experts = experts
        self.weights = weights
        self.expert_margin = expert_margin
        self.group_margin = group_margin
        self.groups = groups
        self.min_chosen_biased = min_chosen_biased


def route(cfg, x, gate_w, bias, layer=-1):
    """noaux_tc sigmoid routing: x [T, d], gate_w [E, d], bias [E]."""
    T = x.shape[0]
    E, k = cfg.n_routed_experts, cfg.num_experts_per_tok
    s = sigmoid(x @ gate_w.T)                       # [T, E] unbiased scores
    biased = s + bias                               # [T, E] selection scores
    choice = biased
    group_margin = np.full(T, np.inf)
    groups = None
    if cfg.n_group > 1:
        G, per = cfg.n_group, E // cfg.n_group
        by_group = -np.sort(-biased.reshape(T, G, per), axis=-1)
        gscore = by_group[:, :, :min(2, per)].sum(axis=-1)          # [T, G]
        gorder = np.argsort(-gscore, axis=-1, kind="stable")         # ties: lower group first
        groups = gorder[:, :cfg.topk_group]
        keep = np.zeros((T, G), dtype=bool)
        np.put_along_axis(keep, groups, True, axis=-1)
        choice = np.where(np.repeat(keep, per, axis=1), biased, -np.inf)
        if cfg.topk_group < G:
            gs = np.take_along_axis(gscore, gorder, axis=-1)
            group_margin = gs[:, cfg.topk_group - 1] - gs[:, cfg.topk_group]
    order = np.argsort(-choice, axis=-1, kind="stable")             # ties: lower expert first
    experts = order[:, :k]
    ranked = np.take_along_axis(choice, order, axis=-1)
    if k < E:
        expert_margin = np.where(np.isfinite(ranked[:, k]), ranked[:, k - 1] - ranked[:, k], np.inf)
    else:
        expert_margin = np.full(T, np.inf)
    w = np.take_along_axis(s, experts, axis=-1)
    if cfg.norm_topk_prob:
        w = w / np.sum(w, axis=-1, keepdims=True)
    w = w * cfg.routed_scaling_factor
    return Routing(layer, experts, w, expert_margin, group_margin, groups, ranked[:, k - 1])


# ----------------------------------------------------------------------------- weights

def dequant_fp8_block(bits, scale_inv, block=(128, 128)):
    """W[r][c] = e4m3(bits[r][c]) * scale_inv[r // b0][c // b1]; bits [out, in] uint8."""
    out, inn = bits.shape
    b0, b1 = block
    want = (-(-out // b0), -(-inn // b1))
    if tuple(scale_inv.shape) != want:
        raise ConfigError("fp8 weight %s needs weight_scale_inv %s, got %s"
                          % (bits.shape, want, tuple(scale_inv.shape)))
    scale = np.repeat(np.repeat(scale_inv, b0, axis=0)[:out], b1, axis=1)[:, :inn]
    return e4m3_bits_to_f64(bits) * scale


def dequant_int4_packed(packed, scale, shape, group=32):
    """compressed-tensors pack-quantized int4: packed [out, in/8] int32, column
    8j+i in bits 4i..4i+3 of word j as q+8; scale [out, in/group]."""
    out, inn = int(shape[0]), int(shape[1])
    if inn % group or tuple(packed.shape) != (out, inn // 8) or tuple(scale.shape) != (out, inn // group):
        raise ConfigError("int4 weight %s: weight_packed %s / weight_scale %s do not fit (group %d)"
                          % ((out, inn), tuple(packed.shape), tuple(scale.shape), group))
    words = np.ascontiguousarray(packed).view(np.uint32)
    shifts = np.arange(8, dtype=np.uint32) * 4
    nib = (words[:, :, None] >> shifts) & 0xF                     # [out, in/8, 8]
    q = nib.reshape(out, inn).astype(np.float64) - 8.0
    return q * np.repeat(scale, group, axis=1)


def dequant_int8_group(q, scale, group=32):
    """trillion int8 (`convert --quantize int8`): q [out, in] int8, scale [out, ceil(in/group)]
    float; W[r][c] = q[r][c] * scale[r][c // group] (the last group may be partial)."""
    out, inn = q.shape
    if tuple(scale.shape) != (out, -(-inn // group)):
        raise ConfigError("int8 weight %s needs weight_scale %s, got %s"
                          % (q.shape, (out, -(-inn // group)), tuple(scale.shape)))
    return q.astype(np.float64) * np.repeat(scale, group, axis=1)[:, :inn]


def requantize_int8_groups(w, group=32):
    """The engine's FP8 weights on the integer-dot path (store/int8_source.hpp):
    W [out, in] float64 (the exact FP8 values) requantized as `convert
    --quantize int8` does: per row and group of `group` columns, s = the
    smallest bf16 >= absmax / 127 (frexp: m 2^e -> ceil(m 2^8) 2^(e-8)),
    q = round-half-even(W / s) (nothing to clip: s is rounded up); -> q * s."""
    rows, cols = w.shape
    g = -(-cols // group)
    padded = np.zeros((rows, g * group))
    padded[:, :cols] = w
    amax = np.abs(padded.reshape(rows, g, group)).max(axis=2)
    m, e = np.frexp(np.where(amax > 0, amax, 1.0) / 127.0)
    scale = np.where(amax > 0, np.ldexp(np.ceil(m * 256.0), e - 8), 0.0)
    full = np.repeat(scale, group, axis=1)[:, :cols]
    q = np.where(full > 0, np.rint(w / np.where(full > 0, full, 1.0)), 0.0)
    return q * full


class DictWeights:
    """In-memory float64 weights keyed by HF names (`<prefix>.weight` for linears)."""

    def __init__(self, tensors):
        self.tensors = tensors

    def tensor(self, name):
        return self.tensors[name]

    def has(self, name):
        return name in self.tensors

    def linear(self, prefix):
        return self.tensors[prefix + ".weight"]

    def apply(self, x, prefix, positions=None):
        return x @ self.linear(prefix).T

    def embedding_rows(self, ids):
        return self.tensors["model.embed_tokens.weight"][ids]


class CheckpointWeights:
    """float64 weights dequantized from a HF checkpoint, cached per process.
    The stored form decides the format: `.weight_packed` -> int4, F8_E4M3
    `.weight` -> fp8 block scaled, I8 `.weight` -> int8 group scaled, a float
    `.weight` -> plain."""

    def __init__(self, ckpt, int8_activations=False, bf16_activations=False):
        self.ckpt = ckpt
        self.cache = {}
        self.integer = set()  # linears stored as int4 / int8 (the engine's integer-dot formats)
        self.int8_activations = int8_activations
        self.bf16_activations = bf16_activations
        self.bf16 = set()     # linears on the bf16 path (FP8 ones, kv_b excepted)
        self.engine_rows = None  # bf16_path.EngineRows: the engine's rounded rows to follow
        self.tie_positions = set()  # positions whose quantized activations met a near tie
        self.tie_keys = {}          # (quant_input, position, column) of each near tie met -> its distance (steps)
        self.flips = set()          # near ties (keys as above) to round the other way
        q = ckpt.config.get("quantization_config") or {}
        self.fp8_block = tuple(q.get("weight_block_size", (128, 128)))
        self.int4_group = 32
        self.int8_group = 32
        # DeepSeek's FP8 (or convert --quantize fp8): on the integer path the
        # engine requantizes its FP8 linears and a BF16 lm_head to int8 groups.
        self.fp8_model = q.get("quant_method") == "fp8" or (
            q.get("quant_method") == "trillion" and q.get("weight_format") == "fp8")
        if q.get("quant_method") == "trillion" and "group_size" in q:  # convert --quantize int8/int4
            self.int4_group = self.int8_group = int(q["group_size"])
        for g in (q.get("config_groups") or {}).values():
            wq = g.get("weights") or {}
            if wq.get("num_bits") == 4:
                if not wq.get("symmetric", True):
                    raise ConfigError("asymmetric int4 not implemented")
                self.int4_group = int(wq.get("group_size", 32))

    def tensor(self, name):
        if name not in self.cache:
            self.cache[name] = self.ckpt.float64(name)
        return self.cache[name]

    def has(self, name):
        return name in self.ckpt

    def linear(self, prefix):
        if prefix in self.cache:
            return self.cache[prefix]
        c = self.ckpt
        if prefix + ".weight_packed" in c:
            w = dequant_int4_packed(c.raw(prefix + ".weight_packed"),
                                    c.float64(prefix + ".weight_scale"),
                                    c.raw(prefix + ".weight_shape"), self.int4_group)
            self.integer.add(prefix)
        elif c.dtype(prefix + ".weight") == "I8":
            w = dequant_int8_group(c.raw(prefix + ".weight"), c.float64(prefix + ".weight_scale"),
                                   self.int8_group)
            self.integer.add(prefix)
        elif c.dtype(prefix + ".weight") == "F8_E4M3":
            if prefix + ".weight_scale_inv" not in c:
                raise ConfigError("%s: fp8 weight without weight_scale_inv" % prefix)
            w = dequant_fp8_block(c.raw(prefix + ".weight"), c.float64(prefix + ".weight_scale_inv"),
                                  self.fp8_block)
            if self.bf16_activations and not prefix.endswith("kv_b_proj"):
                self.bf16.add(prefix)  # the bf16 path: exact weights, activations rounded (kv_b exact, as on int8)
            elif self.int8_activations and not prefix.endswith("kv_b_proj"):
                # The engine's integer path runs FP8 linears as int8 groups (kv_b stays exact).
                w = requantize_int8_groups(w, self.int8_group)
                self.integer.add(prefix)
        else:
            w = c.float64(prefix + ".weight")
            if self.int8_activations and self.fp8_model and prefix == "lm_head":
                w = requantize_int8_groups(w, self.int8_group)
                self.integer.add(prefix)
        self.cache[prefix] = w
        return w

    def apply(self, x, prefix, positions=None):
        """x @ W.T, with x quantized as the engine's int8 path does when that
        path is on and W is stored as int4 / int8 (the router and kv_b are
        never applied through here: the engine keeps them exact). positions
        [T]: the sequence positions of x's rows, recorded in tie_positions
        when a row is near a rounding tie."""
        W = self.linear(prefix)
        if prefix in self.bf16 or (self.int8_activations and prefix in self.integer):
            src = quant_input(prefix)
            pos = None if positions is None else np.asarray(positions)
            flip = None
            if self.flips and pos is not None:
                flip = np.zeros(x.shape, dtype=bool)
                for (name, p, c) in self.flips:
                    if name == src:
                        flip[pos == p, c] = True
            if prefix in self.bf16 and self.engine_rows is not None:
                return self.engine_rows.follow(prefix, x, bf16_path.bf16_round(x)) @ W.T
            if prefix in self.bf16:
                x, dist = bf16_path.round_activations(x, flip=flip, distances=True)
            else:
                x, dist = quantize_activations(x, with_ties=True, flip=flip, distances=True)
            if pos is not None:
                for r, c in zip(*np.nonzero(np.isfinite(dist))):
                    self.tie_positions.add(int(pos[r]))
                    self.tie_keys[(src, int(pos[r]), int(c))] = float(dist[r, c])
        return x @ W.T

    def embedding_rows(self, ids):
        name = "model.embed_tokens.weight"
        return to_float64(self.ckpt.dtype(name), self.ckpt.raw(name)[ids])


# ----------------------------------------------------------------------------- model

class KVCache:
    """Per layer: normalized latent c_kv [S, r] and rotated shared key k_pe [S, dr]."""

    def __init__(self, n_layers):
        self.c_kv = [None] * n_layers
        self.k_pe = [None] * n_layers
        self.length = 0


class Model:
    def __init__(self, cfg, weights):
        self.cfg = cfg
        self.w = weights
        self.inv_freq, self.rope_mscale = rope_inv_freq(cfg)
        self.softmax_scale = softmax_scale(cfg)

    def rope_cos_sin(self, positions):
        ang = np.asarray(positions, dtype=np.float64)[:, None] * self.inv_freq[None, :]  # [T, dr/2]
        return np.cos(ang) * self.rope_mscale, np.sin(ang) * self.rope_mscale

    def attention(self, l, x, start, cache, absorbed):
        """MLA over x [T, d] at positions start..start+T-1; appends to cache."""
        cfg, w, p = self.cfg, self.w, "model.layers.%d.self_attn." % l
        T = x.shape[0]
        pos = start + np.arange(T)                                    # [T] sequence positions
        H, dn, dr, dv, r = (cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim,
                            cfg.v_head_dim, cfg.kv_lora_rank)
        if cfg.q_lora_rank is not None:
            q = w.apply(rms_norm(w.apply(x, p + "q_a_proj", pos), w.tensor(p + "q_a_layernorm.weight"),
                                 cfg.rms_norm_eps), p + "q_b_proj", pos)
        else:
            q = w.apply(x, p + "q_proj", pos)
        q = q.reshape(T, H, dn + dr)
        q_nope, q_pe = q[:, :, :dn], q[:, :, dn:]                     # [T, H, dn], [T, H, dr]
        kv = w.apply(x, p + "kv_a_proj_with_mqa", pos)                # [T, r + dr]
        c_kv = rms_norm(kv[:, :r], w.tensor(p + "kv_a_layernorm.weight"), cfg.rms_norm_eps)
        cos, sin = self.rope_cos_sin(np.arange(start, start + T))
        q_pe = apply_rope(q_pe, cos[:, None, :], sin[:, None, :])
        k_pe = apply_rope(kv[:, r:], cos, sin)                        # [T, dr], shared by heads
        if cache is not None:
            if cache.c_kv[l] is not None:
                c_kv = np.concatenate([cache.c_kv[l], c_kv])
                k_pe = np.concatenate([cache.k_pe[l], k_pe])
            cache.c_kv[l], cache.k_pe[l] = c_kv, k_pe
        S = c_kv.shape[0]                                             # c_kv [S, r], k_pe [S, dr]
        wkv_b = w.linear(p + "kv_b_proj").reshape(H, dn + dv, r)
        w_k, w_v = wkv_b[:, :dn, :], wkv_b[:, dn:, :]                 # [H, dn, r], [H, dv, r]
        if absorbed:
            q_lat = np.einsum("thd,hdc->htc", q_nope, w_k)            # [H, T, r]
            scores = q_lat @ c_kv.T                                   # [H, T, S]
        else:
            k_nope = np.einsum("sc,hdc->hsd", c_kv, w_k)              # [H, S, dn]
            scores = q_nope.transpose(1, 0, 2) @ k_nope.transpose(0, 2, 1)
        scores = scores + np.einsum("thr,sr->hts", q_pe, k_pe)
        scores = scores * self.softmax_scale
        visible = np.arange(S)[None, :] <= (S - T + np.arange(T))[:, None]   # [T, S] causal
        probs = softmax(np.where(visible[None], scores, -np.inf))    # [H, T, S]
        if absorbed:
            ctx = probs @ c_kv                                        # [H, T, r]
            o = np.einsum("htc,hdc->thd", ctx, w_v)                   # [T, H, dv]
        else:
            v = np.einsum("sc,hdc->hsd", c_kv, w_v)                   # [H, S, dv]
            o = (probs @ v).transpose(1, 0, 2)                        # [T, H, dv]
        return w.apply(o.reshape(T, H * dv), p + "o_proj", pos)

    def swiglu(self, x, prefix, pos):
        """The SwiGLU MLP of `prefix` (gate_proj, up_proj, down_proj) on x [T, d] at positions pos [T]."""
        w = self.w
        h = silu(w.apply(x, prefix + "gate_proj", pos)) * w.apply(x, prefix + "up_proj", pos)
        return w.apply(h, prefix + "down_proj", pos)

    def mlp(self, l, x, pos):
        """Dense SwiGLU or MoE; returns (out [T, d], Routing or None)."""
        cfg, w, p = self.cfg, self.w, "model.layers.%d.mlp." % l
        if not cfg.is_moe_layer(l):
            return self.swiglu(x, p, pos), None
        rt = route(cfg, x, w.linear(p + "gate"), w.tensor(p + "gate.e_score_correction_bias"), l)
        out = np.zeros_like(x)
        for e in np.unique(rt.experts):
            t, slot = np.nonzero(rt.experts == e)                     # each token picks e at most once
            pe = p + "experts.%d." % e
            y = self.swiglu(x[t], pe, pos[t])
            out[t] += rt.weights[t, slot][:, None] * y
        if cfg.n_shared_experts:
            ps = p + "shared_experts."
            out += self.swiglu(x, ps, pos)
        return out, rt

    def forward(self, token_ids, cache=None, absorbed=False):
        """Logits [T, vocab] after each of token_ids (continuing cache if given)
        and the list of Routing decisions of the MoE layers."""
        cfg, w = self.cfg, self.w
        ids = np.asarray(token_ids, dtype=np.int64)
        if ids.ndim != 1 or ids.size == 0 or ids.min() < 0 or ids.max() >= cfg.vocab_size:
            raise ValueError("token ids must be a non-empty list in [0, %d)" % cfg.vocab_size)
        start = cache.length if cache is not None else 0
        x = w.embedding_rows(ids)                                     # [T, d]
        pos = start + np.arange(len(ids))                             # [T] sequence positions
        routing = []
        for l in range(cfg.num_hidden_layers):                        # MTP layer excluded
            p = "model.layers.%d." % l
            h = x + self.attention(l, rms_norm(x, w.tensor(p + "input_layernorm.weight"),
                                               cfg.rms_norm_eps), start, cache, absorbed)
            m, rt = self.mlp(l, rms_norm(h, w.tensor(p + "post_attention_layernorm.weight"),
                                         cfg.rms_norm_eps), pos)
            x = h + m
            if rt is not None:
                routing.append(rt)
        if cache is not None:
            cache.length += len(ids)
        x = rms_norm(x, w.tensor("model.norm.weight"), cfg.rms_norm_eps)
        return w.apply(x, "lm_head", pos), routing

    def mtp_forward(self, token_ids, next_token):
        """The MTP layer (index num_hidden_layers, DeepSeek-V3's depth-1 module)
        over a whole sequence: row i joins the main model's final normed hidden
        state h_i with the embedding of token i+1 (next_token after the last),
        eh_proj(concat(enorm(emb), hnorm(h))) -> one decoder layer (its own
        attention over these rows, MoE) -> shared_head.norm. Returns (hidden
        [T, d] after shared_head.norm, logits [T, vocab] through the main
        lm_head; row i predicts token i+2). The embedding is the layer's own
        copy when the checkpoint has it, else the main one."""
        cfg, w, L, eps = self.cfg, self.w, self.cfg.num_hidden_layers, self.cfg.rms_norm_eps
        ids = np.asarray(token_ids, dtype=np.int64)
        pos = np.arange(len(ids))
        x = w.embedding_rows(ids)
        for l in range(L + 1):
            if l == L:  # the main stack is done: h, then the MTP layer's input
                h = rms_norm(x, w.tensor("model.norm.weight"), eps)
                p = "model.layers.%d." % L
                nxt = np.concatenate([ids[1:], [int(next_token)]])
                own = p + "embed_tokens.weight"
                emb = w.tensor(own)[nxt] if w.has(own) else w.embedding_rows(nxt)
                x = w.apply(np.concatenate([rms_norm(emb, w.tensor(p + "enorm.weight"), eps),
                                            rms_norm(h, w.tensor(p + "hnorm.weight"), eps)], axis=1),
                            p + "eh_proj", pos)
            p = "model.layers.%d." % l
            x = x + self.attention(l, rms_norm(x, w.tensor(p + "input_layernorm.weight"), eps), 0, None, False)
            x = x + self.mlp(l, rms_norm(x, w.tensor(p + "post_attention_layernorm.weight"), eps), pos)[0]
        out = rms_norm(x, w.tensor("model.layers.%d.shared_head.norm.weight" % L), eps)
        return out, w.apply(out, "lm_head", pos)

    def generate_greedy(self, token_ids, n, absorbed=False):
        """Prompt logits, prompt routing, and n greedy tokens (float64 KV cache);
        also per generated token the top1-top2 logit gap and the step routing."""
        cache = KVCache(self.cfg.num_hidden_layers)
        logits, routing = self.forward(token_ids, cache, absorbed)
        last = logits[-1]
        tokens, gaps, step_routing = [], [], []
        for i in range(n):
            tok = int(np.argmax(last))                                # ties: lowest id
            top2 = np.sort(last)[-2:] if last.size > 1 else np.array([-np.inf, last[0]])
            tokens.append(tok)
            gaps.append(float(top2[1] - top2[0]))
            if i + 1 < n:
                step_logits, rts = self.forward([tok], cache, absorbed)
                last = step_logits[-1]
                step_routing.append(rts)
        return logits, routing, tokens, gaps, step_routing


def load_model(model_dir, int8_activations=False, bf16_activations=False):
    """Model over a HF checkpoint directory (config.json + safetensors) or a
    converted trillion model directory (config.json + manifest.json + HDF5).
    int8_activations: model the engine's --activations int8 path;
    bf16_activations: its --activations bf16 path (tests/reference/bf16_path.py)."""
    from hdf5_model import ModelDirectory, is_model_directory
    ckpt = ModelDirectory(model_dir) if is_model_directory(model_dir) else Checkpoint(model_dir)
    return Model(Config(ckpt.config), CheckpointWeights(ckpt, int8_activations, bf16_activations))
