"""model.py against the float64 numpy reference (tests/reference/deepseek_ref.py):
a random-weight model (random norms and router biases, so every term matters)
is exported in the FP8 layout, read back in float64, and its logits, and its
MTP layer's logits, are compared with the reference's on the same checkpoint.
Also: export -> read back returns the FP8/bf16 values (not the float32 ones).

    /usr/bin/python3 tools/train/model_self_test.py     # ~10 s, one thread"""
import os
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export                     # noqa: E402  (also puts tests/reference on sys.path)
import deepseek_ref as R          # noqa: E402
from model import DeepseekV3, init_weights  # noqa: E402
from train import ARCHS           # noqa: E402

torch.set_num_threads(1)
failed, passed = [], []


def check(ok, what):
    print(("ok  " if ok else "FAIL") + " " + what)
    (passed if ok else failed).append(what)


def reference_with_mtp(ref, ids):
    """deepseek_ref's forward, keeping the final hidden state, then the MTP layer
    (index L) built from the reference's own attention / MoE / norm functions."""
    cfg, w = ref.cfg, ref.w
    L, eps = cfg.num_hidden_layers, cfg.rms_norm_eps
    pos = np.arange(len(ids))

    def block(l, x):
        p = "model.layers.%d." % l
        h = x + ref.attention(l, R.rms_norm(x, w.tensor(p + "input_layernorm.weight"), eps), 0, None, False)
        return h + ref.mlp(l, R.rms_norm(h, w.tensor(p + "post_attention_layernorm.weight"), eps), pos[:len(x)])[0]

    x = w.embedding_rows(np.asarray(ids))
    for l in range(L):
        x = block(l, x)
    h = R.rms_norm(x, w.tensor("model.norm.weight"), eps)
    p = "model.layers.%d." % L
    e = R.rms_norm(w.tensor(p + "embed_tokens.weight")[ids[1:]], w.tensor(p + "enorm.weight"), eps)
    m = w.apply(np.concatenate([e, R.rms_norm(h[:-1], w.tensor(p + "hnorm.weight"), eps)], axis=1), p + "eh_proj")
    m = R.rms_norm(block(L, m), w.tensor(p + "shared_head.norm.weight"), eps)
    return w.apply(h, "lm_head"), w.apply(m, p + "shared_head.head")


def main():
    arch = dict(ARCHS["smoke"])
    model = DeepseekV3(arch)
    init_weights(model, seed=3)
    g = torch.Generator().manual_seed(4)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(0.2 * torch.randn(p.shape, generator=g))
            elif "gate.weight" in name:
                p.mul_(20.0)                        # scores spread over (0, 1): routing decisions matter
        for moe in model.moe_layers():
            b = moe.gate.e_score_correction_bias
            b.copy_(0.3 * (torch.rand(b.shape, generator=g) - 0.5))
    with tempfile.TemporaryDirectory() as d:
        export.write_checkpoint(model, d)
        m64 = export.load_float64(d)
        ref = R.load_model(d)
        ids = torch.randint(0, arch["vocab_size"], (40,), generator=g)
        with torch.no_grad():
            logits, mtp = m64(ids[None], mtp=True)
        want, want_mtp = reference_with_mtp(ref, ids.numpy())
        ref_logits, _ = ref.forward(ids.numpy())
        rel = lambda a, b: float(np.max(np.abs(a - b)) / np.max(np.abs(b)))
        check(rel(want, ref_logits) < 1e-12, "the test's reference loop equals deepseek_ref.forward")
        e1, e2 = rel(logits[0].numpy(), want), rel(mtp[0].numpy(), want_mtp)
        check(e1 < 1e-9, "logits vs reference: max rel %.2e" % e1)
        check(e2 < 1e-9, "MTP logits vs reference: max rel %.2e" % e2)
        # The export rounds: read-back weights are the FP8 values, within e4m3's step of the trained ones.
        name = "model.layers.1.mlp.experts.0.up_proj.weight"
        a, b = m64.state_dict()[name].numpy(), model.state_dict()[name].double().numpy()
        err = np.max(np.abs(a - b)) / np.max(np.abs(b))
        check(0 < err < 2 ** -4, "FP8 round trip of %s: max rel %.3f (e4m3: <= 1/16 of the block max)" % (name, err))
        name = "model.layers.1.mlp.gate.e_score_correction_bias"
        check(np.array_equal(m64.state_dict()[name].numpy(), model.state_dict()[name].double().numpy()),
              "router bias stored exactly (float32)")
    print("%d passed, %d failed" % (len(passed), len(failed)))
    sys.exit(1 if failed or not passed else 0)


if __name__ == "__main__":
    main()
