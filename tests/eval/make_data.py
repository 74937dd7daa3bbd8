"""Writes the local tasks' data (tasks/data/*.jsonl) from the bundled model's
held-out text: models/kjv/heldout.jsonl, every 25th chapter of the KJV, never
trained on (tools/train/corpus.py). Deterministic; the committed files are
its output:

    /usr/bin/python3 tests/eval/make_data.py build/trillion

- cloze.jsonl: a verse's opening words, then the next three words among three
  distractors (three-word spans at the same place of other held-out verses);
- ppl.jsonl: passages of consecutive verses, 300 to 2400 characters (several
  windows at the tests' max_length=128 tokens);
- gen.jsonl: a verse's opening words; the target is the float64 reference's
  (tests/reference) greedy continuation up to the stop strings, so an engine
  that decodes as the reference does scores exact_match 1.0."""
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODEL = os.path.join(ROOT, "models", "kjv")
OUT = os.path.join(HERE, "tasks", "data")
GEN_STOPS = ["\n", ";"]
GEN_MAX = 24


def pieces():
    """{id: bytes} of tokenizer.json's byte-level vocabulary (GPT-2's byte map), specials left out."""
    tok = json.load(open(os.path.join(MODEL, "tokenizer.json"), encoding="utf-8"))
    specials = {a["id"] for a in tok["added_tokens"]}
    printable = [b for b in range(256) if 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255]
    u2b = {chr(b): b for b in printable}
    u2b.update({chr(256 + n): b for n, b in enumerate(b for b in range(256) if b not in printable)})
    return {i: bytes(u2b[c] for c in s) for s, i in tok["model"]["vocab"].items() if i not in specials}


def heldout_chapters():
    """The held-out chapters' text: the windows of heldout.jsonl joined,
    split at BOS/EOS, decoded with tokenizer.json's byte-level vocabulary."""
    cfg = json.load(open(os.path.join(MODEL, "config.json")))
    piece = pieces()
    stream = [t for line in open(os.path.join(MODEL, "heldout.jsonl")) for t in json.loads(line)["token_ids"]]
    chapters, cur = [], None
    for t in stream:
        if t == cfg["bos_token_id"]:
            cur = []
        elif t == cfg["eos_token_id"] and cur is not None:
            chapters.append(b"".join(piece[x] for x in cur).decode("utf-8"))
            cur = None
        elif cur is not None:
            cur.append(t)
    return chapters


def write(name, rows):
    with open(os.path.join(OUT, name), "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"{name}: {len(rows)} docs")


def main():
    rng = random.Random(44)
    chapters = heldout_chapters()
    verses = [v for c in chapters for v in c.split("\n") if len(v.split()) >= 12]
    rng.shuffle(verses)
    os.makedirs(OUT, exist_ok=True)

    cloze, pool = [], verses[200:]
    for v in verses[:24]:
        w = v.split()
        k = rng.randrange(4, 8)
        truth = " ".join(w[k:k + 3])
        choices = {truth}
        while len(choices) < 4:
            o = rng.choice(pool).split()
            choices.add(" ".join(o[k:k + 3]))
        choices = sorted(choices)
        cloze.append({"context": " ".join(w[:k]), "choices": choices, "answer": choices.index(truth)})
    write("cloze.jsonl", cloze)

    ppl = []
    for c in chapters[:12]:
        lines = c.split("\n")
        n = rng.randrange(300, 2400)
        text = ""
        for line in lines:
            if len(text) + len(line) > n and text:
                break
            text += line + "\n"
        ppl.append({"text": text.rstrip("\n")})
    write("ppl.jsonl", ppl)

    sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
    import deepseek_ref
    net = deepseek_ref.load_model(MODEL)
    piece = pieces()
    gen = []
    for v in verses[24:40]:
        prompt = " ".join(v.split()[:5])
        gen.append({"prompt": prompt, "target": greedy_text(net, deepseek_ref, piece, prompt)})
    write("gen.jsonl", gen)


def greedy_text(net, ref, piece, prompt):
    """The reference's greedy continuation of BOS + prompt, cut at the first
    stop string (the prompt's ids from `trillion tokenize`: the tokenizer, not
    the engine's forward pass)."""
    ids = [0] + encode(prompt)  # BOS + the prompt, as the backends send it
    cache = ref.KVCache(net.cfg.num_hidden_layers)
    logits, _ = net.forward(ids, cache)
    out = []
    for _ in range(GEN_MAX):
        t = int(logits[-1].argmax())
        if t == 1:
            break
        out.append(t)
        text = b"".join(piece.get(i, b"") for i in out).decode("utf-8", errors="replace")
        hits = [text.find(s) for s in GEN_STOPS if s in text]
        if hits:
            return text[:min(hits)]
        logits, _ = net.forward([t], cache)
    return b"".join(piece.get(i, b"") for i in out).decode("utf-8", errors="replace")


def encode(text):
    import subprocess
    p = subprocess.run([sys.argv[1], "tokenize", "--model", MODEL], input=json.dumps({"text": text}) + "\n",
                       capture_output=True, text=True, check=True)
    return json.loads(p.stdout)["ids"]


if __name__ == "__main__":
    main()
