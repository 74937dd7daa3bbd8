"""Our own byte-level BPE: trainer, encoder, and the Hugging Face
`tokenizer.json` / `tokenizer_config.json` writer.

Why our own: Debian ships no `tokenizers` library, and the algorithm is
small. The format is the one trillion's loader reads (src/tokenizer/load_hf.cpp):
a `ByteLevel` pre-tokenizer with `use_regex: true` (GPT-2's split regex), a BPE
model over GPT-2's byte-to-unicode spelling, a ByteLevel decoder, and special
tokens as added tokens. tests/e2e/test_trained_model.py holds trillion's
encoder to `encode` here.

Training is deterministic: the most frequent adjacent pair wins, ties broken
by the smaller pair of byte strings."""
import argparse
import collections
import json
import os

import regex  # Debian python3-regex: \p{L} / \p{N} as in GPT-2's pattern

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
_SPLIT = regex.compile(GPT2_PATTERN)
# DeepSeek-V3's names: bos 0 and eos 1 as in its config, then its chat markers.
SPECIALS = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>"]
BOS, EOS = 0, 1
# DeepSeek-V3's template without the tool-call branches: system text first, then
# the turns; a finished assistant turn ends with EOS.
CHAT_TEMPLATE = (
    "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}"
    "{{ bos_token }}"
    "{% for message in messages %}{% if message['role'] == 'system' %}{{ message['content'] }}{% endif %}{% endfor %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'user' %}{{ '<｜User｜>' + message['content'] }}"
    "{% elif message['role'] == 'assistant' %}{{ '<｜Assistant｜>' + message['content'] + '<｜end▁of▁sentence｜>' }}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<｜Assistant｜>' }}{% endif %}")


def byte_to_unicode():
    """GPT-2's reversible map of the 256 bytes to printable characters."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


B2U = byte_to_unicode()


def spell(token_bytes):
    return "".join(B2U[b] for b in token_bytes)


def pretokenize(text):
    return _SPLIT.findall(text)


def train(texts, vocab_size):
    """-> merges [(bytes, bytes)] in rank order, so that specials + 256 bytes + merges = vocab_size."""
    n_merges = vocab_size - len(SPECIALS) - 256
    if n_merges < 0:
        raise ValueError("vocab_size %d < %d" % (vocab_size, len(SPECIALS) + 256))
    counts = collections.Counter(w for t in texts for w in pretokenize(t))
    words = [[bytes([b]) for b in w.encode("utf-8")] for w in counts]
    freq = list(counts.values())
    pairs = collections.Counter()
    where = collections.defaultdict(set)  # pair -> indices of words holding it
    for i, w in enumerate(words):
        for a, b in zip(w, w[1:]):
            pairs[a, b] += freq[i]
            where[a, b].add(i)
    merges = []
    while len(merges) < n_merges and pairs:
        best = max(pairs.items(), key=lambda kv: (kv[1], _neg(kv[0])))[0]
        if pairs[best] <= 0:
            break
        merges.append(best)
        joined = best[0] + best[1]
        for i in sorted(where.pop(best, ())):
            w = words[i]
            for a, b in zip(w, w[1:]):   # remove the word's old pairs
                pairs[a, b] -= freq[i]
            out, j = [], 0
            while j < len(w):
                if j + 1 < len(w) and w[j] == best[0] and w[j + 1] == best[1]:
                    out.append(joined)
                    j += 2
                else:
                    out.append(w[j])
                    j += 1
            words[i] = out
            for a, b in zip(out, out[1:]):
                pairs[a, b] += freq[i]
                where[a, b].add(i)
        pairs.pop(best, None)
        for p in [p for p, c in pairs.items() if c <= 0]:
            del pairs[p]
    return merges


def _neg(pair):
    """Sort key making max() prefer the smaller pair of byte strings on a count tie."""
    return tuple(tuple(-c for c in part) + (1,) for part in pair)


class Encoder:
    """Rank-ordered BPE over GPT-2 pre-tokens (the Hugging Face algorithm)."""

    def __init__(self, merges):
        self.ranks = {m: r for r, m in enumerate(merges)}
        self.vocab = {s.encode("utf-8"): i for i, s in enumerate(SPECIALS)}
        for b in range(256):
            self.vocab[bytes([b])] = len(self.vocab)
        for a, b in merges:
            self.vocab[a + b] = len(self.vocab)
        self.tokens = {i: t for t, i in self.vocab.items()}
        self.cache = {}

    def encode_word(self, w):
        if w in self.cache:
            return self.cache[w]
        parts = [bytes([b]) for b in w.encode("utf-8")]
        while len(parts) > 1:
            ranked = [(self.ranks.get((a, b), 1 << 30), k) for k, (a, b) in enumerate(zip(parts, parts[1:]))]
            r, k = min(ranked)
            if r == 1 << 30:
                break
            parts[k:k + 2] = [parts[k] + parts[k + 1]]
        ids = [self.vocab[p] for p in parts]
        self.cache[w] = ids
        return ids

    def encode(self, text):
        """Plain text (no special tokens recognized) -> ids."""
        return [i for w in pretokenize(text) for i in self.encode_word(w)]

    def decode(self, ids):
        return b"".join(self.tokens[i] for i in ids if i >= len(SPECIALS)).decode("utf-8", "replace")


def tokenizer_json(merges):
    enc = Encoder(merges)
    vocab = {}
    for t, i in sorted(enc.vocab.items(), key=lambda kv: kv[1]):
        vocab[SPECIALS[i] if i < len(SPECIALS) else spell(t)] = i
    added = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, s in enumerate(SPECIALS)]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [[spell(a), spell(b)] for a, b in merges]},
    }


def tokenizer_config():
    tok = lambda s: {"__type": "AddedToken", "content": s, "lstrip": False, "normalized": True,
                     "rstrip": False, "single_word": False}
    return {"add_bos_token": True, "add_eos_token": False, "bos_token": tok(SPECIALS[BOS]),
            "eos_token": tok(SPECIALS[EOS]), "pad_token": tok(SPECIALS[EOS]), "unk_token": None,
            "clean_up_tokenization_spaces": False, "model_max_length": 1024,
            "tokenizer_class": "PreTrainedTokenizerFast", "chat_template": CHAT_TEMPLATE}


def write(out_dir, merges):
    os.makedirs(out_dir, exist_ok=True)
    for name, obj in (("tokenizer.json", tokenizer_json(merges)), ("tokenizer_config.json", tokenizer_config())):
        with open(os.path.join(out_dir, name), "w", encoding="utf-8") as f:
            json.dump(obj, f, ensure_ascii=False, indent=1 if name != "tokenizer.json" else None)
            f.write("\n")


def load_merges(tokenizer_file):
    """Merges of a tokenizer.json written by write(), back as byte pairs."""
    u2b = {u: b for b, u in B2U.items()}
    unspell = lambda s: bytes(u2b[c] for c in s)
    with open(tokenizer_file, encoding="utf-8") as f:
        return [(unspell(a), unspell(b)) for a, b in json.load(f)["model"]["merges"]]


if __name__ == "__main__":
    import corpus
    ap = argparse.ArgumentParser(description="train the byte-level BPE on the training chapters")
    ap.add_argument("--vocab-size", type=int, default=4096)
    ap.add_argument("--output", required=True)
    a = ap.parse_args()
    train_text, _ = corpus.split(corpus.chapters())
    write(a.output, train(train_text, a.vocab_size))
    print("wrote", a.output)
