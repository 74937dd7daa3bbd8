"""The script's own evaluation of an exported checkpoint: the weights read
back from the safetensors and dequantized exactly (FP8 e4m3 x block scale,
bf16), the forward pass in float64. What it measures is what `trillion score`
and `trillion generate` must reproduce (tests/e2e/test_trained_model.py).

    /usr/bin/python3 tools/train/evaluate.py DIR     # re-evaluates DIR, compares with DIR/training.json"""
import argparse
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe_train  # noqa: E402
import export  # noqa: E402

HELDOUT_FILE = "heldout.jsonl"   # {"id", "token_ids"}: the held-out windows, a `trillion score` input
PROMPTS = ["In the beginning", "And the LORD spake unto Moses, saying,", "Blessed are the",
           "The heavens declare", "And Jesus answered and said unto them,"]
GREEDY_TOKENS = 32


def read_windows(path):
    with open(path) as f:
        return [json.loads(line)["token_ids"] for line in f if line.strip()]


def write_windows(path, windows):
    with open(path, "w") as f:
        for i, w in enumerate(windows):
            f.write(json.dumps({"id": "heldout-%03d" % i, "token_ids": w}) + "\n")


@torch.no_grad()
def mean_nll(model, windows, mtp=False):
    """Mean negative log-likelihood (nats) of every token after the first of each
    window given its prefix, as `trillion score` sums them (and with mtp: of every
    token after the second, by the MTP layer); -> (mean, tokens)."""
    total, n = 0.0, 0
    for w in windows:
        ids = torch.tensor(w)[None]
        if mtp:
            _, logits = model(ids, mtp=True)
            target = ids[0, 2:]
        else:
            logits = model(ids)
            target = ids[0, 1:]
        lp = F.log_softmax(logits[0, :len(target)].double(), dim=-1)
        total -= float(lp.gather(1, target[:, None]).sum())
        n += len(target)
    return total / n, n


@torch.no_grad()
def greedy(model, ids, n, eos):
    """n greedy tokens after ids (full recompute per token; stops after eos as trillion does)."""
    out = []
    seq = list(ids)
    for _ in range(n):
        tok = int(torch.argmax(model(torch.tensor(seq)[None])[0, -1]))
        out.append(tok)
        seq.append(tok)
        if tok == eos:
            break
    return out


def evaluate_checkpoint(hf_dir, encoder=None):
    """-> the "fp8" record of training.json for the checkpoint in hf_dir."""
    model = export.load_float64(hf_dir)
    windows = read_windows(os.path.join(hf_dir, HELDOUT_FILE))
    nll, n = mean_nll(model, windows)
    mtp_nll, mtp_n = mean_nll(model, windows, mtp=True)
    if encoder is None:
        encoder = bpe_train.Encoder(bpe_train.load_merges(os.path.join(hf_dir, "tokenizer.json")))
    samples = []
    for text in PROMPTS:
        ids = [bpe_train.BOS] + encoder.encode(text)
        out = greedy(model, ids, GREEDY_TOKENS, model.cfg["eos_token_id"])
        samples.append({"prompt": text, "prompt_token_ids": ids, "greedy_token_ids": out,
                        "text": encoder.decode(out)})
    return {"precision": "float64 forward on the checkpoint's dequantized FP8 / bf16 weights",
            "heldout_file": HELDOUT_FILE, "heldout_windows": len(windows), "heldout_tokens": n,
            "heldout_loss": nll, "heldout_perplexity": math.exp(nll),
            "heldout_mtp_loss": mtp_nll, "heldout_mtp_tokens": mtp_n, "greedy": samples}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    got = evaluate_checkpoint(a.dir)
    with open(os.path.join(a.dir, "training.json")) as f:
        want = json.load(f)["fp8"]
    rel = abs(got["heldout_loss"] - want["heldout_loss"]) / want["heldout_loss"]
    same = [g["greedy_token_ids"] == w["greedy_token_ids"] for g, w in zip(got["greedy"], want["greedy"])]
    print(json.dumps({"heldout_loss": got["heldout_loss"], "recorded": want["heldout_loss"], "rel": rel,
                      "greedy_same": same}, indent=1))
    sys.exit(0 if rel < 1e-9 and all(same) else 1)


if __name__ == "__main__":
    main()
