"""`--model trillion-reference`: the same requests, built by the same code
(lm.py: tokenization by `trillion tokenize`, _encode_pair, windows,
truncation, dedup), but computed by the float64 numpy reference of
tests/reference (deepseek_ref.py) instead of the engine: no engine code runs
a forward pass, so agreement of the two backends checks the engine's numerics
and the job plumbing (request files, result mapping) at once. Generated text
is decoded here from tokenizer.json's byte-level vocabulary, independently of
trillion's detokenizer. Greedy only (sampling draws from trillion's Philox
stream, which the reference does not model)."""
import json
import os
import sys

import numpy as np

from . import checks
from .jobs import JobError
from .lm import TrillionLM


def _find_reference(given):
    """tests/reference of the repository: given, $TRILLION_REFERENCE_DIR, under
    the working directory (run from the repository), or found above this
    package (a source checkout or an editable install)."""
    candidates = [given, os.environ.get("TRILLION_REFERENCE_DIR"), os.path.join(os.getcwd(), "tests", "reference")]
    here = os.path.dirname(os.path.abspath(__file__))
    for up in range(1, 5):
        candidates.append(os.path.join(here, *[".."] * up, "tests", "reference"))
    for c in candidates:
        if c and os.path.isfile(os.path.join(c, "deepseek_ref.py")):
            return os.path.abspath(c)
    raise checks.SetupError("trillion-reference: tests/reference not found: give reference_dir=REPO/tests/reference "
                            "or set TRILLION_REFERENCE_DIR")


class ByteDecoder:
    """Token ids -> bytes for a Hugging Face byte-level BPE tokenizer.json
    (GPT-2's map of the 256 bytes to printable characters); special tokens
    decode to nothing, as the harness's skip_special_tokens=True has it."""

    def __init__(self, model):
        path = os.path.join(model, "tokenizer.json")
        if not os.path.isfile(path):
            raise checks.SetupError(f"model={model}: trillion-reference decodes generations from tokenizer.json, "
                                    f"which this model lacks")
        with open(path, encoding="utf-8") as f:
            tok = json.load(f)
        printable = [b for b in range(256) if 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255]
        u2b = {chr(b): b for b in printable}
        u2b.update({chr(256 + n): b for n, b in enumerate(b for b in range(256) if b not in printable)})
        self.special = {a["id"] for a in tok.get("added_tokens", []) if a.get("special")}
        self.piece = {}
        for s, i in tok["model"]["vocab"].items():
            if i not in self.special:
                self.piece[i] = bytes(u2b[c] for c in s)
        for a in tok.get("added_tokens", []):
            if a["id"] not in self.special:
                self.piece[a["id"]] = a["content"].encode()
        self.size = max(list(self.piece) + list(self.special)) + 1

    def text(self, ids):
        return b"".join(self.piece.get(i, b"") for i in ids).decode("utf-8", errors="replace")


class ReferenceLM(TrillionLM):
    backend_name = "trillion-reference"
    converted_model = False  # the reference reads a HF checkpoint or a converted model

    def __init__(self, reference_dir=None, **kwargs):
        super().__init__(**kwargs)
        ref = _find_reference(reference_dir)
        if ref not in sys.path:
            sys.path.insert(0, ref)
        import deepseek_ref  # noqa: E402  (the repository's reference, found above)
        self.ref = deepseek_ref
        self.net = deepseek_ref.load_model(self.model)
        self.decoder = ByteDecoder(self.model)

    def _logits(self, ids):
        logits, _ = self.net.forward(ids)
        return np.asarray(logits, dtype=np.float64)

    def _score(self, jobs, progress):
        out = {}
        for n, job in enumerate(jobs):
            ids = job["token_ids"]
            logits = self._logits(ids)
            m = logits.max(axis=1, keepdims=True)
            logz = (m + np.log(np.exp(logits - m).sum(axis=1, keepdims=True)))[:, 0]
            lp = [float(logits[t, ids[t + 1]] - logz[t]) for t in range(len(ids) - 1)]
            # Greedy among the tokenizer's ids (trillion masks lm_head's padding rows).
            greedy = [int(g) for g in np.argmax(logits[:len(ids) - 1, :self.decoder.size], axis=1)]
            out[job["id"]] = {"value": (lp, greedy)}
            progress(n + 1)
        return out

    def _generate(self, jobs, progress):
        out = {}
        for n, job in enumerate(jobs):
            if "temperature" in job:
                raise JobError("trillion-reference is greedy only: a request samples (temperature "
                               f"{job['temperature']}); compare sampled tasks with trillion alone")
            out[job["id"]] = {"value": self._greedy(job["prompt_token_ids"], job["max_tokens"], job.get("stop", []))}
            progress(n + 1)
        return out

    def _greedy(self, prompt, max_tokens, stops):
        """Greedy decode with the reference's float64 KV cache until EOS,
        max_tokens or the first stop string (the text cut before it)."""
        cache = self.ref.KVCache(self.net.cfg.num_hidden_layers)
        logits, _ = self.net.forward(prompt, cache)
        last = logits[-1]
        generated = []
        for _ in range(max_tokens):
            tok = int(np.argmax(last[:self.decoder.size]))  # ties: the lowest id, as trillion
            if tok == self.eos:
                break
            generated.append(tok)
            text = self.decoder.text(generated)
            hits = [text.find(s) for s in stops if s and s in text]
            if hits:
                return text[:min(hits)]
            if len(prompt) + len(generated) >= self._max_length + 1:
                break
            logits, _ = self.net.forward([tok], cache)
            last = logits[-1]
        return self.decoder.text(generated)
