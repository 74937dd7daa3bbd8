"""The model's configuration and rotary embedding for the float64 reference
(deepseek_ref.py, which re-exports every name here): Config reads the HF
config.json fields under their HF names and refuses what the reference does
not implement; rope_inv_freq, softmax_scale and apply_rope are YaRN RoPE as
Hugging Face `modeling_deepseek.py` and DeepSeek's `inference/model.py`
compute it."""

import math

import numpy as np


class ConfigError(Exception):
    pass


# ----------------------------------------------------------------------------- config

class Config:
    """The HF config.json fields the forward pass uses, under their HF names."""

    def __init__(self, cfg):
        def need(key):
            if cfg.get(key) is None:
                raise ConfigError("config.json: missing %s" % key)
            return cfg[key]

        self.vocab_size = int(need("vocab_size"))
        self.hidden_size = int(need("hidden_size"))
        self.intermediate_size = int(need("intermediate_size"))
        self.num_hidden_layers = int(need("num_hidden_layers"))
        self.num_attention_heads = int(need("num_attention_heads"))
        self.q_lora_rank = cfg.get("q_lora_rank")  # None: plain q_proj
        self.kv_lora_rank = int(need("kv_lora_rank"))
        self.qk_nope_head_dim = int(need("qk_nope_head_dim"))
        self.qk_rope_head_dim = int(need("qk_rope_head_dim"))
        self.v_head_dim = int(need("v_head_dim"))
        self.rms_norm_eps = float(cfg.get("rms_norm_eps", 1e-6))
        self.rope_theta = float(cfg.get("rope_theta", 10000.0))
        self.rope_scaling = cfg.get("rope_scaling")
        self.first_k_dense_replace = int(cfg.get("first_k_dense_replace", 0) or 0)
        self.moe_layer_freq = int(cfg.get("moe_layer_freq", 1) or 1)
        self.n_routed_experts = cfg.get("n_routed_experts")
        self.n_shared_experts = cfg.get("n_shared_experts")
        self.moe_intermediate_size = cfg.get("moe_intermediate_size")
        self.num_experts_per_tok = cfg.get("num_experts_per_tok")
        self.n_group = int(cfg.get("n_group") or 1)
        self.topk_group = int(cfg.get("topk_group") or 1)
        self.norm_topk_prob = bool(cfg.get("norm_topk_prob", False))
        self.routed_scaling_factor = float(cfg.get("routed_scaling_factor", 1.0))
        self.topk_method = cfg.get("topk_method", "noaux_tc")
        self.scoring_func = cfg.get("scoring_func", "sigmoid")
        self.quantization_config = cfg.get("quantization_config")
        self.qk_head_dim = self.qk_nope_head_dim + self.qk_rope_head_dim

        if self.q_lora_rank is not None:
            self.q_lora_rank = int(self.q_lora_rank)
        if self.qk_rope_head_dim % 2:
            raise ConfigError("qk_rope_head_dim must be even")
        if any(self.is_moe_layer(l) for l in range(self.num_hidden_layers)):
            for key in ("n_routed_experts", "moe_intermediate_size", "num_experts_per_tok"):
                if getattr(self, key) is None:
                    raise ConfigError("config.json: MoE layers need %s" % key)
            if self.topk_method != "noaux_tc" or self.scoring_func != "sigmoid":
                raise ConfigError("only topk_method noaux_tc with scoring_func sigmoid is implemented "
                                  "(got %s / %s)" % (self.topk_method, self.scoring_func))
            if self.n_routed_experts % self.n_group:
                raise ConfigError("n_routed_experts %d not divisible by n_group %d"
                                  % (self.n_routed_experts, self.n_group))
            if self.topk_group > self.n_group:
                raise ConfigError("topk_group > n_group")
            if self.topk_group * (self.n_routed_experts // self.n_group) < self.num_experts_per_tok:
                raise ConfigError("kept groups hold fewer experts than num_experts_per_tok")
        if self.rope_scaling is not None:
            kind = self.rope_scaling.get("type", self.rope_scaling.get("rope_type"))
            if kind != "yarn":
                raise ConfigError("rope_scaling type %r not implemented (only yarn)" % kind)

    def is_moe_layer(self, layer):
        return (self.n_routed_experts is not None and layer >= self.first_k_dense_replace
                and layer % self.moe_layer_freq == 0)


# ----------------------------------------------------------------------------- rope

def yarn_get_mscale(scale, mscale):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def yarn_correction_dim(num_rotations, dim, base, max_pos):
    return dim * math.log(max_pos / (num_rotations * 2 * math.pi)) / (2 * math.log(base))


def rope_inv_freq(cfg):
    """(inv_freq [dr/2], cos_sin_mscale) of the rope dims, YaRN when configured."""
    dim, base = cfg.qk_rope_head_dim, cfg.rope_theta
    freq_extra = 1.0 / base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    rs = cfg.rope_scaling
    if rs is None:
        return freq_extra, 1.0
    factor = float(rs["factor"])
    orig = float(rs.get("original_max_position_embeddings", 4096))
    beta_fast, beta_slow = float(rs.get("beta_fast", 32)), float(rs.get("beta_slow", 1))
    mscale, mscale_all_dim = float(rs.get("mscale", 1)), float(rs.get("mscale_all_dim", 0))
    freq_inter = 1.0 / (factor * base ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    low = max(math.floor(yarn_correction_dim(beta_fast, dim, base, orig)), 0)
    high = min(math.ceil(yarn_correction_dim(beta_slow, dim, base, orig)), dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    inv_freq_mask = 1.0 - ramp
    inv_freq = freq_inter * (1.0 - inv_freq_mask) + freq_extra * inv_freq_mask
    return inv_freq, yarn_get_mscale(factor, mscale) / yarn_get_mscale(factor, mscale_all_dim)


def softmax_scale(cfg):
    scale = cfg.qk_head_dim ** -0.5
    rs = cfg.rope_scaling
    if rs is not None and rs.get("mscale_all_dim"):
        m = yarn_get_mscale(float(rs["factor"]), float(rs["mscale_all_dim"]))
        scale = scale * m * m
    return scale


def apply_rope(x, cos, sin):
    """Rotate adjacent pairs (x[2i], x[2i+1]) by angle_i: x [..., dr], cos/sin [..., dr/2]."""
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty(np.broadcast_shapes(x.shape, cos.shape[:-1] + (x.shape[-1],)))
    out[..., 0::2] = a * cos - b * sin
    out[..., 1::2] = b * cos + a * sin
    return out
