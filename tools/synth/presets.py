"""Synthetic model presets: their Hugging Face config.json and their tensor list.

A preset is a set of DeepSeek-V3-architecture hyper-parameters.  `build_config`
turns it into a config.json with every field of the real DeepSeek-V3 config (same
names, same JSON types), plus the format's `quantization_config`.
`tensor_sources` lists the checkpoint's logical weight matrices in model order,
with how each is initialised; generator.py turns each into the stored
tensors of the chosen format.
"""
import copy
import math
from collections import namedtuple

# --------------------------------------------------------------------------- presets

def _yarn(factor, beta_fast, beta_slow, mscale, mscale_all_dim, original_max):
    return {"beta_fast": beta_fast, "beta_slow": beta_slow, "factor": factor, "mscale": mscale,
            "mscale_all_dim": mscale_all_dim, "original_max_position_embeddings": original_max,
            "type": "yarn"}


_TINY = dict(
    family="deepseek",
    vocab_size=512, hidden_size=64, num_hidden_layers=3, first_k_dense_replace=1,
    intermediate_size=96, num_attention_heads=4, q_lora_rank=48, kv_lora_rank=32,
    qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
    n_routed_experts=16, moe_intermediate_size=32, n_group=4, topk_group=2, num_experts_per_tok=4,
    n_shared_experts=1, routed_scaling_factor=2.5,
    max_position_embeddings=512, rope_theta=10000, rope_scaling=_yarn(40, 32, 1, 1.0, 1.0, 64),
    bos_token_id=0, eos_token_id=1, num_nextn_predict_layers=1,
)

PRESETS = {
    "tiny": dict(_TINY, description="DeepSeek-like, seconds for a float64 numpy reference"),
    "tiny-kimi": dict(
        _TINY, family="kimi", description="Kimi-K2-like: n_group 1, 48 experts top-6, no MTP, Kimi yarn",
        n_routed_experts=48, moe_intermediate_size=32, num_experts_per_tok=6, n_group=1, topk_group=1,
        routed_scaling_factor=2.827, rope_theta=50000.0,
        rope_scaling=_yarn(32.0, 1.0, 1.0, 1.0, 1.0, 64), num_nextn_predict_layers=0,
    ),
    "tiny-noqlora": dict(_TINY, description="tiny with q_lora_rank null (self_attn.q_proj)", q_lora_rank=None),
    "small": dict(
        _TINY, description="dims > 128 and not multiples of 128 (partial FP8 blocks), 2 shared experts",
        vocab_size=1000, hidden_size=320, num_hidden_layers=4, first_k_dense_replace=1,
        intermediate_size=416, num_attention_heads=6, q_lora_rank=192, kv_lora_rank=160,
        qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32,
        n_routed_experts=24, moe_intermediate_size=96, n_group=4, topk_group=2, num_experts_per_tok=4,
        n_shared_experts=2, max_position_embeddings=1024, rope_scaling=_yarn(40, 32, 1, 1.0, 1.0, 128),
    ),
    "bench": dict(
        _TINY, description="kernel/throughput benchmark model, ~1.26B params (no MTP layer)",
        vocab_size=32000, hidden_size=2048, num_hidden_layers=6, first_k_dense_replace=1,
        intermediate_size=5632, num_attention_heads=16, q_lora_rank=768, kv_lora_rank=512,
        qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
        n_routed_experts=64, moe_intermediate_size=512, n_group=8, topk_group=4, num_experts_per_tok=8,
        n_shared_experts=1, max_position_embeddings=16384,
        rope_scaling=_yarn(40, 32, 1, 1.0, 1.0, 4096), num_nextn_predict_layers=0,
    ),
    "demo": dict(
        _TINY, description="README first run: DeepSeek-V3 tokenizer vocabulary (129280), small body",
        vocab_size=129280, hidden_size=256, num_hidden_layers=4, first_k_dense_replace=1,
        intermediate_size=512, num_attention_heads=4, q_lora_rank=128, kv_lora_rank=96,
        qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32,
        n_routed_experts=16, moe_intermediate_size=128, n_group=4, topk_group=2, num_experts_per_tok=4,
        n_shared_experts=1, max_position_embeddings=4096,
        rope_scaling=_yarn(40, 32, 1, 1.0, 1.0, 4096),
    ),
}

# --------------------------------------------------------------------------- config.json

FP8_QUANTIZATION_CONFIG = {  # DeepSeek-V3's
    "activation_scheme": "dynamic",
    "fmt": "e4m3",
    "quant_method": "fp8",
    "weight_block_size": [128, 128],
}

INT4_QUANTIZATION_CONFIG = {  # Kimi K2 Thinking's (verbatim)
    "config_groups": {
        "group_0": {
            "input_activations": None,
            "output_activations": None,
            "targets": ["Linear"],
            "weights": {
                "actorder": None,
                "block_structure": None,
                "dynamic": False,
                "group_size": 32,
                "num_bits": 4,
                "observer": "minmax",
                "observer_kwargs": {},
                "strategy": "group",
                "symmetric": True,
                "type": "int",
            },
        }
    },
    "format": "pack-quantized",
    "ignore": [
        "lm_head",
        "re:.*self_attn.*",
        "re:.*shared_experts.*",
        "re:.*mlp\\.(gate|up|gate_up|down)_proj.*",
    ],
    "kv_cache_scheme": None,
    "quant_method": "compressed-tensors",
    "quantization_status": "compressed",
}
# Linear modules of the MTP layer that stay bf16 (Kimi K2 Thinking has no MTP layer, so its
# ignore list does not need them; ours names them when the preset has one).
INT4_MTP_IGNORE = ["re:.*eh_proj.*", "re:.*shared_head.*"]

FORMATS = ("bf16", "fp8", "int4")

_CONFIG_KEYS = [  # every key of the real DeepSeek-V3 config.json, except quantization_config
    "architectures", "attention_bias", "attention_dropout", "auto_map", "aux_loss_alpha",
    "bos_token_id", "eos_token_id", "ep_size", "first_k_dense_replace", "hidden_act", "hidden_size",
    "initializer_range", "intermediate_size", "kv_lora_rank", "max_position_embeddings", "model_type",
    "moe_intermediate_size", "moe_layer_freq", "n_group", "n_routed_experts", "n_shared_experts",
    "norm_topk_prob", "num_attention_heads", "num_experts_per_tok", "num_hidden_layers",
    "num_key_value_heads", "num_nextn_predict_layers", "pretraining_tp", "q_lora_rank",
    "qk_nope_head_dim", "qk_rope_head_dim", "rms_norm_eps", "rope_scaling", "rope_theta",
    "routed_scaling_factor", "scoring_func", "seq_aux", "tie_word_embeddings", "topk_group",
    "topk_method", "torch_dtype", "transformers_version", "use_cache", "v_head_dim", "vocab_size",
]


def preset(name):
    if name not in PRESETS:
        raise KeyError(f"unknown preset '{name}' (known: {', '.join(PRESETS)})")
    return PRESETS[name]


def build_config(name, fmt, nextn_layers=None):
    """-> the config.json dict (keys sorted like the real one) for preset `name` in format `fmt`."""
    p = copy.deepcopy(preset(name))
    if fmt not in FORMATS:
        raise ValueError(f"unknown format '{fmt}' (bf16, fp8, int4)")
    if nextn_layers is not None:
        p["num_nextn_predict_layers"] = int(nextn_layers)
    kimi = p["family"] == "kimi"
    c = {
        "architectures": ["DeepseekV3ForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "auto_map": {
            "AutoConfig": "configuration_deepseek.DeepseekV3Config",
            "AutoModel": "modeling_deepseek.DeepseekV3Model",
            "AutoModelForCausalLM": "modeling_deepseek.DeepseekV3ForCausalLM",
        },
        "aux_loss_alpha": 0.001,
        "ep_size": 1,
        "hidden_act": "silu",
        "initializer_range": 0.02,
        "model_type": "kimi_k2" if kimi else "deepseek_v3",
        "moe_layer_freq": 1,
        "norm_topk_prob": True,
        "num_key_value_heads": p["num_attention_heads"],
        "pretraining_tp": 1,
        "rms_norm_eps": 1e-06,
        "scoring_func": "sigmoid",
        "seq_aux": True,
        "tie_word_embeddings": False,
        "topk_method": "noaux_tc",
        "torch_dtype": "bfloat16",
        "transformers_version": "4.48.3" if kimi else "4.33.1",
        "use_cache": True,
    }
    for k in _CONFIG_KEYS:
        if k not in c:
            c[k] = p[k]
    if set(c) != set(_CONFIG_KEYS):
        raise ValueError(f"config keys differ from the preset's: {set(_CONFIG_KEYS) ^ set(c)}")
    if fmt == "fp8":
        c["quantization_config"] = copy.deepcopy(FP8_QUANTIZATION_CONFIG)
    elif fmt == "int4":
        q = copy.deepcopy(INT4_QUANTIZATION_CONFIG)
        if c["num_nextn_predict_layers"] > 0:
            q["ignore"] += INT4_MTP_IGNORE
        c["quantization_config"] = q
    check_config(c, fmt)
    return {k: c[k] for k in sorted(c)}


def check_config(c, fmt):
    """Refuses presets the formats or the architecture cannot hold."""
    def need(cond, what):
        if not cond:
            raise ValueError("preset invalid: " + what)
    need(c["n_routed_experts"] % c["n_group"] == 0, "n_routed_experts % n_group")
    need(c["topk_group"] <= c["n_group"], "topk_group <= n_group")
    need(c["num_experts_per_tok"] <= c["topk_group"] * c["n_routed_experts"] // c["n_group"],
         "num_experts_per_tok <= experts in kept groups")
    need(c["n_group"] == 1 or c["n_routed_experts"] // c["n_group"] >= 2, ">= 2 experts per group")
    need(c["qk_rope_head_dim"] % 2 == 0, "qk_rope_head_dim even")
    need(c["first_k_dense_replace"] <= c["num_hidden_layers"], "first_k_dense_replace <= layers")
    if fmt == "int4":
        need(c["hidden_size"] % 32 == 0 and c["moe_intermediate_size"] % 32 == 0,
             "int4 needs hidden_size and moe_intermediate_size multiples of 32")


def generation_config(c):
    return {
        "_from_model_config": True,
        "bos_token_id": c["bos_token_id"],
        "do_sample": True,
        "eos_token_id": c["eos_token_id"],
        "temperature": 0.6,
        "top_p": 0.95,
        "transformers_version": c["transformers_version"],
    }


# --------------------------------------------------------------------------- tensors

# kind:  embed | head | norm | gate | bias | lin | exp | lin_bf16
#   lin      : a LIN matrix of docs/checkpoint.md (fp8 in the fp8 format, bf16 otherwise)
#   exp      : a routed expert matrix, EXP (fp8 in fp8, int4 in int4)
#   lin_bf16 : a linear layer every format keeps in bf16 (the MTP eh_proj, as in DeepSeek-V3's FP8 release)
# init:  ("normal", std) | ("norm",) = 1 + 0.1 N(0,1) | ("uniform", lo, hi)
# key:   name of the random stream (the MTP layer's embed_tokens and shared_head.head reuse
#        the main model's streams: DeepSeek's MTP shares them, so the copies are identical)
Source = namedtuple("Source", "name kind shape init key")

GATE_STD = 0.4          # router weight std * sqrt(d): logits ~ N(0, 0.4^2) -> sigmoid in ~(0.15, 0.85)
BIAS_RANGE = 0.05       # e_score_correction_bias ~ U(-0.05, 0.05)


def _lin(name, out_f, in_f, kind="lin"):
    return Source(name, kind, (out_f, in_f), ("normal", 1.0 / math.sqrt(in_f)), name)


def _norm(name, n):
    return Source(name, "norm", (n,), ("norm",), name)


def is_moe_layer(c, layer):
    return c["n_routed_experts"] > 0 and layer >= c["first_k_dense_replace"] and layer % c["moe_layer_freq"] == 0


def _decoder_layer(c, layer, moe):
    d = c["hidden_size"]
    H = c["num_attention_heads"]
    nope, rope, v = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    kv = c["kv_lora_rank"]
    p = f"model.layers.{layer}."
    s = [_norm(p + "input_layernorm.weight", d)]
    if c["q_lora_rank"] is not None:
        r = c["q_lora_rank"]
        s += [_lin(p + "self_attn.q_a_proj.weight", r, d),
              _norm(p + "self_attn.q_a_layernorm.weight", r),
              _lin(p + "self_attn.q_b_proj.weight", H * (nope + rope), r)]
    else:
        s += [_lin(p + "self_attn.q_proj.weight", H * (nope + rope), d)]
    s += [_lin(p + "self_attn.kv_a_proj_with_mqa.weight", kv + rope, d),
          _norm(p + "self_attn.kv_a_layernorm.weight", kv),
          _lin(p + "self_attn.kv_b_proj.weight", H * (nope + v), kv),
          _lin(p + "self_attn.o_proj.weight", d, H * v),
          _norm(p + "post_attention_layernorm.weight", d)]
    if not moe:
        f = c["intermediate_size"]
        s += [_lin(p + "mlp.gate_proj.weight", f, d), _lin(p + "mlp.up_proj.weight", f, d),
              _lin(p + "mlp.down_proj.weight", d, f)]
        return s
    E, f = c["n_routed_experts"], c["moe_intermediate_size"]
    s += [Source(p + "mlp.gate.weight", "gate", (E, d), ("normal", GATE_STD / math.sqrt(d)), p + "mlp.gate.weight"),
          Source(p + "mlp.gate.e_score_correction_bias", "bias", (E,), ("uniform", -BIAS_RANGE, BIAS_RANGE),
                 p + "mlp.gate.e_score_correction_bias")]
    for e in range(E):
        q = p + f"mlp.experts.{e}."
        s += [_lin(q + "gate_proj.weight", f, d, "exp"), _lin(q + "up_proj.weight", f, d, "exp"),
              _lin(q + "down_proj.weight", d, f, "exp")]
    if c["n_shared_experts"] > 0:
        fs = c["n_shared_experts"] * f
        s += [_lin(p + "mlp.shared_experts.gate_proj.weight", fs, d),
              _lin(p + "mlp.shared_experts.up_proj.weight", fs, d),
              _lin(p + "mlp.shared_experts.down_proj.weight", d, fs)]
    return s


def tensor_sources(c):
    """-> list of Source in model order: embeddings, layers 0..L-1, final norm, lm_head, MTP layers."""
    d, V, L = c["hidden_size"], c["vocab_size"], c["num_hidden_layers"]
    embed = Source("model.embed_tokens.weight", "embed", (V, d), ("normal", 1.0), "model.embed_tokens.weight")
    head = Source("lm_head.weight", "head", (V, d), ("normal", 1.0 / math.sqrt(d)), "lm_head.weight")
    s = [embed]
    for layer in range(L):
        s += _decoder_layer(c, layer, is_moe_layer(c, layer))
    s += [_norm("model.norm.weight", d), head]
    for layer in range(L, L + c["num_nextn_predict_layers"]):
        p = f"model.layers.{layer}."
        s += [embed._replace(name=p + "embed_tokens.weight"),
              _norm(p + "enorm.weight", d), _norm(p + "hnorm.weight", d),
              _lin(p + "eh_proj.weight", d, 2 * d, "lin_bf16")]
        s += _decoder_layer(c, layer, True)
        s += [_norm(p + "shared_head.norm.weight", d), head._replace(name=p + "shared_head.head.weight")]
    return s


def stored_tensors(src, fmt):
    """-> [(name, dtype, shape)] that source `src` becomes in format `fmt`."""
    if src.kind == "bias":
        return [(src.name, "F32", src.shape)]
    quantized = (src.kind == "lin" and fmt == "fp8") or (src.kind == "exp" and fmt in ("fp8", "int4"))
    if not quantized:
        return [(src.name, "BF16", src.shape)]
    out_f, in_f = src.shape
    if fmt == "fp8":
        return [(src.name, "F8_E4M3", src.shape),
                (src.name + "_scale_inv", "F32", (-(-out_f // 128), -(-in_f // 128)))]
    base = src.name[: -len(".weight")]
    return [(base + ".weight_packed", "I32", (out_f, in_f // 8)),
            (base + ".weight_scale", "BF16", (out_f, in_f // 32)),
            (base + ".weight_shape", "I32", (2,))]
