"""Trains the embedded default model: a small DeepSeek-V3 (MLA with q LoRA and
compressed KV, YaRN, a dense first layer, sigmoid noaux_tc group-limited MoE
balanced by e_score_correction_bias, a shared expert, one MTP layer with its
own loss) on the KJV Bible, with our own byte-level BPE; writes the FP8 HF
checkpoint that `trillion convert` reads, loss.png and training.json.

    /usr/bin/python3 tools/train/train.py --output models/kjv        # the full run (see tools/train/README.md)
    /usr/bin/python3 tools/train/train.py --arch smoke --steps 30 --output /tmp/kjv-smoke

Deterministic for (seed, threads): fixed seeds for init and batches, a fixed
thread count, torch's deterministic algorithms."""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import blas       # noqa: E402
import bpe_train  # noqa: E402
import corpus     # noqa: E402
import evaluate   # noqa: E402
import export     # noqa: E402
from model import DeepseekV3, init_weights  # noqa: E402


def _yarn(factor, original):
    return {"beta_fast": 32, "beta_slow": 1, "factor": factor, "mscale": 1.0, "mscale_all_dim": 1.0,
            "original_max_position_embeddings": original, "type": "yarn"}


_COMMON = dict(rms_norm_eps=1e-6, rope_theta=10000, bos_token_id=bpe_train.BOS, eos_token_id=bpe_train.EOS,
               num_nextn_predict_layers=1, first_k_dense_replace=1, n_shared_experts=1,
               routed_scaling_factor=2.5, norm_topk_prob=True)
# HF config names. default: ~10.2 M parameters, 16.7 MB in FP8; sized by the timing under DEFAULTS.
ARCHS = {
    "default": dict(_COMMON, vocab_size=4096, hidden_size=256, num_hidden_layers=4, intermediate_size=768,
                    num_attention_heads=4, q_lora_rank=128, kv_lora_rank=64, qk_nope_head_dim=32,
                    qk_rope_head_dim=16, v_head_dim=32, n_routed_experts=16, moe_intermediate_size=128,
                    n_group=4, topk_group=2, num_experts_per_tok=4, max_position_embeddings=1024,
                    rope_scaling=_yarn(4, 256)),
    "smoke": dict(_COMMON, vocab_size=512, hidden_size=64, num_hidden_layers=2, intermediate_size=128,
                  num_attention_heads=2, q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=16,
                  qk_rope_head_dim=8, v_head_dim=16, n_routed_experts=8, moe_intermediate_size=32,
                  n_group=4, topk_group=2, num_experts_per_tok=2, max_position_embeddings=256,
                  rope_scaling=_yarn(4, 64)),
}
# default: 1200 steps of 16 x 256 tokens at ~2.2 s a step (one core, OpenBLAS) ~ 45 min
# + ~3 min for the tokenizer, evaluations and export.
DEFAULTS = {"default": dict(steps=1200, batch=16, seq_len=256), "smoke": dict(steps=30, batch=8, seq_len=64)}


def token_streams(encoder, seq_len):
    """-> (train stream [N] LongTensor, held-out windows): each chapter is
    BOS + text + EOS; held-out windows are consecutive seq_len-token pieces."""
    train, held = corpus.split(corpus.chapters())
    doc = lambda t: [bpe_train.BOS] + encoder.encode(t) + [bpe_train.EOS]
    stream = torch.tensor([i for t in train for i in doc(t)])
    h = [i for t in held for i in doc(t)]
    windows = [h[o:o + seq_len] for o in range(0, len(h) - seq_len + 1, seq_len)]
    return stream, windows


def lr_at(step, steps, peak, warmup):
    if step < warmup:
        return peak * (step + 1) / warmup
    t = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))   # cosine to 10 %


def mtp_weight(step, steps):
    """DeepSeek-V3's lambda: 0.3 for the first 10T of 14.8T tokens, then 0.1."""
    return 0.3 if step < 0.68 * steps else 0.1


def bias_speed(step, steps, gamma):
    """DeepSeek-V3 froze the bias for its last 500B of 14.8T tokens (~3 %)."""
    return gamma if step < 0.97 * steps else 0.0


def update_bias(model, gamma):
    """DeepSeek-V3's auxiliary-loss-free balancing: after each step, an expert's
    bias rises by gamma if it got fewer tokens than the mean, falls if more."""
    with torch.no_grad():
        for moe in model.moe_layers():
            load = moe.last_load.double()
            moe.gate.e_score_correction_bias += gamma * torch.sign(load.mean() - load).float()


def max_load_ratio(model):
    """Per MoE layer: the busiest expert's tokens over the mean (1.0 = balanced), last forward."""
    return [round(float(m.last_load.max()) / float(m.last_load.double().mean()), 3) for m in model.moe_layers()]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--output", required=True, help="checkpoint directory to write")
    ap.add_argument("--arch", default="default", choices=sorted(ARCHS))
    ap.add_argument("--steps", type=int)
    ap.add_argument("--batch", type=int)
    ap.add_argument("--seq-len", type=int)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=50)
    # DeepSeek-V3 used 0.001 over ~10^5 steps; ~10^3 steps here need a faster bias
    # (at 0.001 a 150-step smoke run stayed at 2x the mean load; 0.01 reached 1.1-1.2x).
    ap.add_argument("--gamma", type=float, default=1e-2, help="bias update speed per step")
    ap.add_argument("--seed", type=int, default=0)
    # One thread by default: on a shared 2-core machine a second OpenMP thread
    # measured slower, not faster (it waits for the busy core); the bits depend on it.
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--allow-slow-blas", action="store_true", help="run on the reference BLAS anyway")
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--eval-windows", type=int, default=24, help="held-out windows of the evaluations in training")
    ap.add_argument("--tokenizer", help="reuse this directory's tokenizer.json instead of training one")
    a = ap.parse_args()
    blas.ensure_fast_blas(a.allow_slow_blas)
    for k, v in DEFAULTS[a.arch].items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    torch.set_num_threads(a.threads)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(a.seed)
    arch = ARCHS[a.arch]
    os.makedirs(a.output, exist_ok=True)
    t_start = time.time()

    if a.tokenizer:
        merges = bpe_train.load_merges(os.path.join(a.tokenizer, "tokenizer.json"))
    else:
        merges = bpe_train.train(corpus.split(corpus.chapters())[0], arch["vocab_size"])
    bpe_train.write(a.output, merges)
    enc = bpe_train.Encoder(merges)
    if len(enc.vocab) != arch["vocab_size"]:
        raise SystemExit(f"the tokenizer has {len(enc.vocab)} tokens, the architecture {arch['vocab_size']}")
    stream, windows = token_streams(enc, a.seq_len)
    print("tokenizer %d tokens (%.0f s); train %d tokens, held out %d windows of %d"
          % (len(enc.vocab), time.time() - t_start, len(stream), len(windows), a.seq_len), flush=True)

    model = DeepseekV3(arch)
    init_weights(model, a.seed)
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    batches = torch.Generator().manual_seed(a.seed + 1)
    log, evals = [], []
    t_train = time.time()

    def held_out():
        model.eval()
        loss, _ = evaluate.mean_nll(model, windows[:a.eval_windows])
        mtp, _ = evaluate.mean_nll(model, windows[:a.eval_windows], mtp=True)
        model.train()
        return loss, mtp

    for step in range(a.steps):
        off = torch.randint(0, len(stream) - a.seq_len - 1, (a.batch,), generator=batches)
        seq = torch.stack([stream[o:o + a.seq_len + 1] for o in off.tolist()])   # [B, S + 1]
        logits, mtp_logits = model(seq[:, :-1], mtp=True)
        V = logits.shape[-1]
        main_loss = F.cross_entropy(logits.reshape(-1, V), seq[:, 1:].reshape(-1))
        mtp_loss = F.cross_entropy(mtp_logits.reshape(-1, V), seq[:, 2:].reshape(-1))
        lam = mtp_weight(step, a.steps)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a.steps, a.lr, a.warmup)
        opt.zero_grad(set_to_none=True)
        (main_loss + lam * mtp_loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        update_bias(model, bias_speed(step, a.steps, a.gamma))
        log.append({"step": step + 1, "loss": float(main_loss), "mtp_loss": float(mtp_loss)})
        if (step + 1) % a.eval_every == 0 or step + 1 == a.steps:
            load = max_load_ratio(model)
            h, hm = held_out()
            evals.append({"step": step + 1, "train_loss": float(main_loss), "train_mtp_loss": float(mtp_loss),
                          "heldout_loss": h, "heldout_mtp_loss": hm, "max_load_over_mean": load})
            el = time.time() - t_train
            print("step %d/%d  loss %.3f  mtp %.3f  held-out %.3f / %.3f  load %s  %.0f s (%.2f s/step)"
                  % (step + 1, a.steps, main_loss, mtp_loss, h, hm, load, el, el / (step + 1)), flush=True)
    train_seconds = time.time() - t_train

    export.write_checkpoint(model, a.output)
    evaluate.write_windows(os.path.join(a.output, evaluate.HELDOUT_FILE), windows)
    float32_loss, _ = evaluate.mean_nll(model.eval(), windows)
    fp8 = evaluate.evaluate_checkpoint(a.output, enc)
    record = {"arch": a.arch, "seed": a.seed, "threads": a.threads, "steps": a.steps, "batch": a.batch,
              "seq_len": a.seq_len, "lr": a.lr, "warmup": a.warmup, "bias_gamma": a.gamma,
              "parameters": n_params, "train_tokens_seen": a.steps * a.batch * a.seq_len,
              "train_seconds": round(train_seconds, 1), "total_seconds": round(time.time() - t_start, 1),
              "torch": torch.__version__, "blas": blas.loaded_blas(), "text": "KJV Bible (Debian bible-kjv-text), every %dth chapter held out"
              % corpus.HELDOUT_EVERY, "evals": evals,
              "float32_heldout_loss": float32_loss, "fp8": fp8}
    with open(os.path.join(a.output, "training.json"), "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    plot(log, evals, os.path.join(a.output, "loss.png"))
    print("held-out loss: float32 %.4f, fp8 checkpoint %.4f (perplexity %.2f); %.0f s"
          % (float32_loss, fp8["heldout_loss"], fp8["heldout_perplexity"], time.time() - t_start))


def plot(log, evals, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    steps = [r["step"] for r in log]
    k = max(1, len(log) // 50)   # running mean over ~2 % of the run
    smooth = lambda xs: [sum(xs[max(0, i - k + 1):i + 1]) / len(xs[max(0, i - k + 1):i + 1]) for i in range(len(xs))]
    ax.plot(steps, smooth([r["loss"] for r in log]), label="train (next token)")
    ax.plot(steps, smooth([r["mtp_loss"] for r in log]), label="train (MTP, token after next)", alpha=0.7)
    ax.plot([e["step"] for e in evals], [e["heldout_loss"] for e in evals], "o-", label="held-out (next token)")
    ax.plot([e["step"] for e in evals], [e["heldout_mtp_loss"] for e in evals], "s--", label="held-out (MTP)")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats / token)")
    ax.set_title("KJV DeepSeek-V3 (tools/train/train.py)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


if __name__ == "__main__":
    main()
