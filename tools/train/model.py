"""The DeepSeek-V3 architecture in PyTorch, for training: the same math as
tests/reference/deepseek_ref.py (the float64 oracle trillion matches), with
module names that are the Hugging Face checkpoint's tensor names, so
`state_dict()` is the checkpoint (export.py adds the MTP layer's copies of the
shared embedding and head).

Shapes: B batch, T positions, d hidden, H heads, dn qk_nope_head_dim,
dr qk_rope_head_dim, dv v_head_dim, r kv_lora_rank, E routed experts, k
experts per token."""
import math

import torch
from torch import nn
import torch.nn.functional as F


def yarn_mscale(scale, mscale):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def rope_tables(cfg, positions):
    """(cos, sin) [T, dr/2] of YaRN rope (HF applies it at every length), scaled by its mscale."""
    dim, base, rs = cfg["qk_rope_head_dim"], float(cfg["rope_theta"]), cfg["rope_scaling"]
    idx = torch.arange(0, dim, 2, dtype=torch.float64) / dim
    extra = 1.0 / base ** idx
    factor, orig = float(rs["factor"]), float(rs["original_max_position_embeddings"])
    corr = lambda rot: dim * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))
    low = max(math.floor(corr(float(rs["beta_fast"]))), 0)
    high = min(math.ceil(corr(float(rs["beta_slow"]))), dim - 1)
    high = high + 0.001 if low == high else high
    keep = 1.0 - torch.clamp((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low), 0.0, 1.0)
    inv_freq = extra / factor * (1.0 - keep) + extra * keep
    m = yarn_mscale(factor, float(rs["mscale"])) / yarn_mscale(factor, float(rs["mscale_all_dim"]))
    ang = positions.to(torch.float64)[:, None] * inv_freq[None, :]
    return torch.cos(ang) * m, torch.sin(ang) * m


def apply_rope(x, cos, sin):
    """Rotate adjacent pairs (x[2i], x[2i+1]) (the HF checkpoints' layout): x [..., T, dr]."""
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, b * cos + a * sin), dim=-1).flatten(-2)


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def linear(i, o):
    return nn.Linear(i, o, bias=False)


class Attention(nn.Module):
    """MLA with a q LoRA; the training form (k_nope and v expanded from c_kv)."""

    def __init__(self, cfg):
        super().__init__()
        d, H, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["rms_norm_eps"]
        self.H, self.dn, self.dr, self.dv = H, cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
        self.r = cfg["kv_lora_rank"]
        self.q_a_proj = linear(d, cfg["q_lora_rank"])
        self.q_a_layernorm = RMSNorm(cfg["q_lora_rank"], eps)
        self.q_b_proj = linear(cfg["q_lora_rank"], H * (self.dn + self.dr))
        self.kv_a_proj_with_mqa = linear(d, self.r + self.dr)
        self.kv_a_layernorm = RMSNorm(self.r, eps)
        self.kv_b_proj = linear(self.r, H * (self.dn + self.dv))
        self.o_proj = linear(H * self.dv, d)
        rs = cfg["rope_scaling"]
        m = yarn_mscale(float(rs["factor"]), float(rs["mscale_all_dim"]))
        self.scale = (self.dn + self.dr) ** -0.5 * m * m

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        H, dn, dr, dv = self.H, self.dn, self.dr, self.dv
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x))).view(B, T, H, dn + dr).transpose(1, 2)
        q_nope, q_pe = q[..., :dn], apply_rope(q[..., dn:], cos, sin)        # [B, H, T, dn], [B, H, T, dr]
        kv = self.kv_a_proj_with_mqa(x)                                       # [B, T, r + dr]
        c_kv = self.kv_a_layernorm(kv[..., :self.r])                          # [B, T, r]
        k_pe = apply_rope(kv[..., self.r:], cos, sin)[:, None]                # [B, 1, T, dr] shared by heads
        kvb = self.kv_b_proj(c_kv).view(B, T, H, dn + dv).transpose(1, 2)     # [B, H, T, dn + dv]
        k_nope, v = kvb[..., :dn], kvb[..., dn:]
        scores = (q_nope @ k_nope.transpose(-1, -2) + q_pe @ k_pe.transpose(-1, -2)) * self.scale  # [B, H, T, T]
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        probs = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        o = (probs @ v).transpose(1, 2).reshape(B, T, H * dv)                 # [B, T, H dv]
        return self.o_proj(o)


class SwiGLU(nn.Module):
    def __init__(self, d, f):
        super().__init__()
        self.gate_proj, self.up_proj, self.down_proj = linear(d, f), linear(d, f), linear(f, d)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Gate(nn.Module):
    """Router weight [E, d] and the load-balancing bias [E] (a buffer: it gets no
    gradient; train.py moves it by DeepSeek-V3's sign rule after each step)."""

    def __init__(self, d, E):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(E, d))
        self.register_buffer("e_score_correction_bias", torch.zeros(E))


def route(cfg, x, gate):
    """noaux_tc sigmoid routing, as deepseek_ref.route: x [N, d] -> (experts [N, k], weights [N, k])."""
    E, k, G, kg = cfg["n_routed_experts"], cfg["num_experts_per_tok"], cfg["n_group"], cfg["topk_group"]
    s = torch.sigmoid(x @ gate.weight.t())                                    # [N, E] unbiased scores
    biased = s.detach() + gate.e_score_correction_bias                        # selection only
    if G > 1:
        per = E // G
        gscore = biased.view(-1, G, per).topk(min(2, per), dim=-1).values.sum(-1)   # [N, G]
        keep = torch.zeros_like(gscore, dtype=torch.bool).scatter_(1, gscore.topk(kg, dim=-1).indices, True)
        biased = biased.masked_fill(~keep.repeat_interleave(per, dim=1), float("-inf"))
    experts = biased.topk(k, dim=-1).indices                                  # [N, k] by descending score
    w = s.gather(1, experts)
    if cfg["norm_topk_prob"]:
        w = w / w.sum(-1, keepdim=True)
    return experts, w * cfg["routed_scaling_factor"]


class MoE(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, f, E = cfg["hidden_size"], cfg["moe_intermediate_size"], cfg["n_routed_experts"]
        self.cfg = cfg
        self.gate = Gate(d, E)
        self.experts = nn.ModuleList(SwiGLU(d, f) for _ in range(E))
        self.shared_experts = SwiGLU(d, cfg["n_shared_experts"] * f)
        self.last_load = None   # [E] tokens routed to each expert in the last forward (for the bias rule)

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])                                          # [N, d]
        experts, w = route(self.cfg, x, self.gate)
        self.last_load = torch.bincount(experts.flatten(), minlength=len(self.experts))
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            t, slot = torch.nonzero(experts == e, as_tuple=True)             # a token picks e at most once
            if t.numel():
                out.index_add_(0, t, expert(x[t]) * w[t, slot, None])
        return (out + self.shared_experts(x)).view(shape)


class Block(nn.Module):
    """One decoder layer: norm -> MLA -> residual -> norm -> MLP / MoE -> residual."""

    def __init__(self, cfg, moe):
        super().__init__()
        d, eps = cfg["hidden_size"], cfg["rms_norm_eps"]
        self.input_layernorm = RMSNorm(d, eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(d, eps)
        self.mlp = MoE(cfg) if moe else SwiGLU(d, cfg["intermediate_size"])

    def forward(self, x, cos, sin):
        h = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return h + self.mlp(self.post_attention_layernorm(h))


class SharedHead(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.norm = RMSNorm(d, eps)


class MTPLayer(Block):
    """DeepSeek-V3's multi-token-prediction module (depth 1): position i joins the
    main model's final hidden state h_i (after model.norm, as vLLM and SGLang feed
    DeepSeek's MTP weights) with the embedding of token i+1 and predicts token i+2:
    eh_proj(concat(enorm(emb(t_{i+1})), hnorm(h_i))) -> one MoE block ->
    shared_head.norm -> the main lm_head. Embedding and head are the main model's
    (shared, as in the paper); the checkpoint stores copies."""

    def __init__(self, cfg):
        super().__init__(cfg, moe=True)
        d, eps = cfg["hidden_size"], cfg["rms_norm_eps"]
        self.enorm, self.hnorm = RMSNorm(d, eps), RMSNorm(d, eps)
        self.eh_proj = linear(2 * d, d)
        self.shared_head = SharedHead(d, eps)

    def forward(self, h, next_emb, cos, sin):
        x = self.eh_proj(torch.cat((self.enorm(next_emb), self.hnorm(h)), dim=-1))
        return self.shared_head.norm(super().forward(x, cos, sin))


class Inner(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        L = cfg["num_hidden_layers"]
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        layers = [Block(cfg, moe=l >= cfg["first_k_dense_replace"]) for l in range(L)]
        layers += [MTPLayer(cfg) for _ in range(cfg["num_nextn_predict_layers"])]
        self.layers = nn.ModuleList(layers)   # index L: the MTP layer, as in DeepSeek's checkpoints
        self.norm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])


class DeepseekV3(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        if cfg["num_nextn_predict_layers"] > 1:
            raise ValueError("one MTP layer at most")
        self.cfg = cfg
        self.model = Inner(cfg)
        self.lm_head = linear(cfg["hidden_size"], cfg["vocab_size"])

    def moe_layers(self):
        return [m for m in self.modules() if isinstance(m, MoE)]

    def forward(self, ids, mtp=False):
        """ids [B, T] -> logits [B, T, vocab] of the next token at every position;
        with mtp also the MTP logits [B, T-1, vocab] of the token after next."""
        L = self.cfg["num_hidden_layers"]
        cos, sin = rope_tables(self.cfg, torch.arange(ids.shape[1]))
        cos, sin = cos.to(self.lm_head.weight.dtype), sin.to(self.lm_head.weight.dtype)
        x = self.model.embed_tokens(ids)                                      # [B, T, d]
        for layer in self.model.layers[:L]:
            x = layer(x, cos, sin)
        h = self.model.norm(x)
        logits = self.lm_head(h)
        if not mtp:
            return logits
        m = self.model.layers[L](h[:, :-1], self.model.embed_tokens(ids[:, 1:]), cos[:-1], sin[:-1])
        return logits, self.lm_head(m)


def init_weights(model, seed):
    """Normal(0, 0.02) matrices (output projections by 1/sqrt(2 layers), GPT-2's rule),
    unit norms, zero router bias; a pure function of the seed."""
    g = torch.Generator().manual_seed(seed)
    depth = 2 * (model.cfg["num_hidden_layers"] + model.cfg["num_nextn_predict_layers"])
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if p.dim() == 1:
                p.fill_(1.0)
            else:
                std = 0.02 / math.sqrt(depth) if name.endswith(("o_proj.weight", "down_proj.weight")) else 0.02
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64).to(p.dtype) * std)
