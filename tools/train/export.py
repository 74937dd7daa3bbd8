"""The trained model as a Hugging Face checkpoint in DeepSeek-V3's FP8 layout,
and back: written with tools/synth's table of tensors and its encoders (the
same layout as the synthetic checkpoints, docs/checkpoint.md), read back with
tests/reference's dequantization (the float64 oracle's), so the script's own
evaluation sees exactly the weights trillion loads.

Stored: attention, dense MLP and expert matrices as e4m3 with a float32
weight_scale_inv per 128x128 block; embeddings, norms, router, lm_head and
the MTP eh_proj as bf16; e_score_correction_bias as float32."""
import copy
import json
import os
import sys

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "synth"))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
import generator as G          # noqa: E402  (plan, emit_chunk, _write_json)
import presets as P            # noqa: E402
import safetensors_writer as ST  # noqa: E402
from deepseek_ref import CheckpointWeights  # noqa: E402
from safetensors_reader import Checkpoint   # noqa: E402

SHARD = "model-00001-of-00001.safetensors"


def hf_config(arch):
    """config.json of architecture `arch` (HF field names) in the fp8 format:
    every field of DeepSeek-V3's config, built by tools/synth/presets.py."""
    name = "_trained"
    P.PRESETS[name] = dict(copy.deepcopy(arch), family="deepseek")
    try:
        c = P.build_config(name, "fp8")
    finally:
        del P.PRESETS[name]
    c["aux_loss_alpha"] = 0.0   # balanced by the bias alone: no auxiliary loss was used
    return c


def source_tensor(state, name, cfg):
    """The trained value of checkpoint tensor `name`: the MTP layer's embed_tokens
    and shared_head.head are the shared main embedding and lm_head."""
    L = cfg["num_hidden_layers"]
    alias = {f"model.layers.{L}.embed_tokens.weight": "model.embed_tokens.weight",
             f"model.layers.{L}.shared_head.head.weight": "lm_head.weight"}
    return state[alias.get(name, name)]


def write_checkpoint(model, out_dir):
    """Writes config.json, generation_config.json, the index and one shard."""
    cfg = hf_config(model.cfg)
    state = {k: v.detach().to(torch.float32).numpy() for k, v in model.state_dict().items()}
    groups = G.plan(cfg, "fp8")
    names = {s.name for s, _, _ in groups}
    used = names | {"model.embed_tokens.weight", "lm_head.weight"}
    if set(state) - used:
        raise ValueError("trained tensors the checkpoint would drop: %s" % sorted(set(state) - used)[:5])
    os.makedirs(out_dir, exist_ok=True)
    entries = [t for _, st, _ in groups for t in st]
    w = ST.SafetensorsWriter(os.path.join(out_dir, SHARD), entries)
    try:
        for src, _, _ in groups:
            x = np.ascontiguousarray(source_tensor(state, src.name, model.cfg), dtype=np.float32)
            if tuple(x.shape) != tuple(src.shape):
                raise ValueError("%s: trained shape %s, checkpoint %s" % (src.name, x.shape, src.shape))
            G.emit_chunk(src, 0, x, "fp8", w)
        w.close()
    except BaseException:
        w.abort()
        raise
    index = {"metadata": {"total_size": sum(g[2] for g in groups)},
             "weight_map": {name: SHARD for name, _, _ in sorted(entries)}}
    G._write_json(os.path.join(out_dir, "config.json"), cfg)
    G._write_json(os.path.join(out_dir, "generation_config.json"), P.generation_config(cfg))
    G._write_json(os.path.join(out_dir, "model.safetensors.index.json"), index)
    return cfg


def read_state(hf_dir, model):
    """float64 state dict for `model` from the checkpoint: FP8 and bf16 values
    dequantized exactly (tests/reference's CheckpointWeights)."""
    weights = CheckpointWeights(Checkpoint(hf_dir))
    out = {}
    for name in model.state_dict():
        if name.endswith(".weight") and name != "model.embed_tokens.weight" and model.state_dict()[name].dim() == 2:
            out[name] = torch.from_numpy(weights.linear(name[:-len(".weight")]))
        else:
            out[name] = torch.from_numpy(np.asarray(weights.tensor(name), dtype=np.float64))
    return out


def load_float64(hf_dir):
    """The checkpoint as a float64 DeepseekV3 (its config.json's architecture)."""
    from model import DeepseekV3
    with open(os.path.join(hf_dir, "config.json")) as f:
        cfg = json.load(f)
    m = DeepseekV3(cfg).double()
    m.load_state_dict(read_state(hf_dir, m))
    m.eval()
    return m
