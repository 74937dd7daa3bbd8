"""`--model trillion`: the harness's three request types, each call run as one
trillion job (docs/evaluations.md)."""
import hashlib
import json
import logging
import os

from lm_eval.api.model import LM
from tqdm import tqdm

from . import checks, windows
from .chat import ChatTemplate
from .jobs import JobError, Launcher

log = logging.getLogger("trillion_lm_eval")

DEFAULT_MAX_GEN_TOKS = 256  # lm-eval's default (defaults.DEFAULT_MAX_GEN_TOKS)
# Arguments the harness adds to every model's constructor, meaningless here.
HARNESS_ARGS = {"batch_size", "max_batch_size", "device"}


def _bool(v):
    if isinstance(v, str):
        return v.lower() in ("1", "true", "yes")
    return bool(v)


class TrillionLM(LM):
    converted_model = True  # the engine needs `trillion convert`'s output

    def __init__(self, model=None, binary="trillion", workdir=None, np=1, hostfile=None, parallel="pipeline",
                 max_batch=8, max_length=None, max_gen_toks=DEFAULT_MAX_GEN_TOKS, seed=1234, threads=0,
                 mpirun="mpirun", mpirun_args="", add_bos_token=None, prefix_token_id=None, check_hosts=True,
                 activations="auto", **kwargs):
        super().__init__()
        unknown = sorted(set(kwargs) - HARNESS_ARGS)
        if unknown:
            raise checks.SetupError(f"unknown model_args {unknown} for {self.backend_name} (docs/evaluations.md "
                                    f"lists them)")
        self.model = checks.check_model_dir(model, converted=self.converted_model)
        self.binary = checks.check_binary(str(binary))
        if parallel not in ("pipeline", "expert"):
            raise checks.SetupError(f"parallel={parallel}: expected pipeline or expert")
        if activations not in ("auto", "f32", "int8", "bf16"):
            raise checks.SetupError(f"activations={activations}: expected auto, f32, int8 or bf16 (trillion's "
                                    f"--activations)")
        if int(np) < 1:
            raise checks.SetupError(f"np={np}: expected 1 or more ranks")
        if hostfile:
            hostfile = os.path.abspath(str(hostfile))
            if _bool(check_hosts):
                checks.check_hostfile(hostfile)
        with open(os.path.join(self.model, "config.json")) as f:
            config = json.load(f)
        self.bos = config.get("bos_token_id")
        self.eos = config.get("eos_token_id")
        if isinstance(self.eos, list):
            self.eos = self.eos[0]
        # trillion scores at most min(max_position_embeddings, 4096) tokens; the
        # harness's max_length counts model inputs, one fewer (the last token is
        # only a target), so max_length + 1 tokens are sent (windows.scored_sequence).
        limit = min(int(config.get("max_position_embeddings", 4096)), 4096)
        self._max_length = int(max_length) if max_length else limit - 1
        if not 1 <= self._max_length <= limit - 1:
            raise checks.SetupError(f"max_length={max_length}: must be 1..{limit - 1} (the model's "
                                    f"{limit} positions hold max_length inputs and one more target)")
        self.max_gen_toks = int(max_gen_toks)
        self.seed = int(seed)
        tok_cfg = _read_json(os.path.join(self.model, "tokenizer_config.json"))
        self.add_bos_token = _bool(tok_cfg.get("add_bos_token", False)) if add_bos_token is None \
            else _bool(add_bos_token)
        self.prefix_token_id = int(prefix_token_id) if prefix_token_id is not None else \
            (self.bos if self.bos is not None else self.eos)
        if self.prefix_token_id is None:
            raise checks.SetupError(f"model={self.model}: config.json has no bos_token_id or eos_token_id; "
                                    f"give prefix_token_id=")
        if workdir is None:
            workdir = os.path.join(os.getcwd(), "trillion-eval-work")
        self.workdir = os.path.abspath(str(workdir))
        self.np, self.hostfile, self.parallel = int(np), hostfile, parallel
        self.launcher = Launcher(self.binary, self.model, self.workdir, np=np, hostfile=hostfile,
                                 parallel=parallel, max_batch=max_batch, max_len=self._max_length + 1,
                                 threads=threads, mpirun=mpirun, mpirun_args=mpirun_args,
                                 activations=activations)
        self._chat = None
        self._warned_truncation = False
        self._bos_text = None

    backend_name = "trillion"

    @property
    def max_length(self):
        return self._max_length

    # -- tokens ------------------------------------------------------------------------
    def _encode(self, texts):
        """{text: ids} for all texts, in one tokenize process."""
        unique = list(dict.fromkeys(texts))
        return dict(zip(unique, self.launcher.tokenize(unique)))

    def _warn_truncated(self, n, what):
        if n and not self._warned_truncation:
            self._warned_truncation = True  # once per evaluation: a task with long documents would flood the log
            log.warning("%d %s longer than max_length=%d tokens: left-truncated as the harness does (kept "
                        "the last tokens); further truncations are not reported", n, what, self._max_length)

    def _encode_pairs(self, pairs):
        """(ctx ids, cont ids) of each (context, continuation) by the
        harness's _encode_pair rules (windows.py), one tokenize for all."""
        # The harness tests for an empty context before moving whitespace: a
        # context of only whitespace goes through _encode_pair (and becomes "").
        split = [(c, x, c == "") if c == "" else (*windows.split_pair(c, x), False) for c, x in pairs]
        texts = []
        for c, x, empty in split:
            texts += [x] if empty else [c, c + x]
        ids = self._encode(texts)
        bos = [self.bos] if self.add_bos_token and self.bos is not None else []
        out = []
        for c, x, empty in split:
            ctx = bos + ids[c] if not empty else []
            if not ctx:
                # Nothing to condition on (an empty context, or one of only
                # whitespace without BOS): the prefix token, as for "".
                out.append(windows.empty_context_tokens(ids[x] if empty else ids[c + x], self.prefix_token_id))
            else:
                out.append(windows.pair_tokens(ctx, bos + ids[c + x]))
        return out

    # -- the three request types --------------------------------------------------------
    def loglikelihood(self, requests, disable_tqdm=False):
        pairs = self._encode_pairs([r.args for r in requests])
        results = self._score_pairs(pairs, [_label(r) for r in requests], disable_tqdm, "loglikelihood")
        for r, res in zip(requests, results):
            self.cache_hook.add_partial("loglikelihood", r.args, res)
        return results

    def loglikelihood_rolling(self, requests, disable_tqdm=False):
        texts = [r.args[0] for r in requests]
        ids = self._encode([t for t in texts if t])
        pairs, owner = [], []
        for i, t in enumerate(texts):
            for w in windows.rolling_windows(ids.get(t, []), self.prefix_token_id, self._max_length):
                pairs.append(w)
                owner.append(i)
        labels = [_label(requests[i]) for i in owner]
        scored = self._score_pairs(pairs, labels, disable_tqdm, "loglikelihood_rolling")
        totals = [0.0] * len(requests)
        for i, (lp, _) in zip(owner, scored):
            totals[i] += lp
        for r, total in zip(requests, totals):
            self.cache_hook.add_partial("loglikelihood_rolling", r.args, total)
        return totals

    def generate_until(self, requests, disable_tqdm=False):
        contexts = [r.args[0] for r in requests]
        ids = self._encode([c for c in contexts if c])
        bos_text = self._bos_string()
        records, stops, cut, copies = [], [], 0, {}
        for r in requests:
            context, gen_kwargs = r.args
            opts = dict(gen_kwargs or {})
            until = opts.pop("until", None) or []
            until = [until] if isinstance(until, str) else list(until)
            max_gen = _max_gen_toks(opts, self.max_gen_toks)
            prompt = ids.get(context, [])
            # The tokenizer adds BOS (add_bos_token) unless a chat template
            # already wrote it as text at the start.
            if self.add_bos_token and self.bos is not None and not (bos_text and context.startswith(bos_text)):
                prompt = [self.bos] + prompt
            prompt, was_cut = windows.generation_prompt(prompt, self._max_length, max_gen)
            cut += was_cut
            rec = {"prompt_token_ids": prompt, "max_tokens": max_gen}
            # EOS ends a trillion generation by itself; the harness's decoded-EOS
            # stop string would never match (special tokens are not text).
            stop = [s for s in until if s]
            if stop:
                rec["stop"] = stop
            if _sampling(opts):
                rec["temperature"] = float(opts["temperature"])
                for k in ("top_p", "top_k", "min_p"):
                    if opts.get(k) is not None:
                        rec[k] = opts[k]
                # The harness sends the K repeats of a request as the same object
                # K times: copy k draws with its own seed so the samples differ.
                k = copies.get(id(r), 0)
                copies[id(r)] = k + 1
                rec["seed"] = _copy_seed(int(opts.get("seed", self.seed)), k)
            records.append(rec)
            stops.append(until)
        self._warn_truncated(cut, "generation prompts")
        texts = self._run_unique("generate", records, [_label(r) for r in requests], disable_tqdm,
                                 "generate_until", self._generate)
        out = [windows.cut_at_stops(t, s) for t, s in zip(texts, stops)]
        for r, s in zip(requests, out):
            self.cache_hook.add_partial("generate_until", r.args, s)
        return out

    # -- running ------------------------------------------------------------------------
    def _score_pairs(self, pairs, labels, disable_tqdm, desc):
        records, lens, cut = [], [], 0
        for ctx, cont in pairs:
            seq, was_cut = windows.scored_sequence(ctx, cont, self._max_length)
            cut += was_cut
            records.append({"token_ids": seq})
            lens.append(len(cont))
        self._warn_truncated(cut, "requests")
        scored = self._run_unique("score", records, labels, disable_tqdm, desc, self._score)
        out = []
        for (logprobs, greedy), seq_rec, n in zip(scored, records, lens):
            seq = seq_rec["token_ids"]
            cont = seq[len(seq) - n:]
            # token_logprobs[t] and greedy[t] are the prediction of token t+1
            # (greedy also has the one after the last token: not a target).
            first, last = len(seq) - 1 - n, len(seq) - 1
            out.append((float(sum(logprobs[first:last])), list(greedy[first:last]) == cont))
        return out

    def _run_unique(self, kind, records, labels, disable_tqdm, desc, run):
        """Runs each distinct record once (identical token sequences and
        parameters are computed once) and maps the results back."""
        ids, unique = [], {}
        for rec in records:
            key = json.dumps(rec, sort_keys=True)
            if key not in unique:
                unique[key] = dict(rec, id=f"r{len(unique)}")
            ids.append(unique[key]["id"])
        jobs = list(unique.values())
        bar = tqdm(total=len(records), disable=disable_tqdm, desc=f"{self.backend_name} {desc}")
        scale = len(records) / max(1, len(jobs))

        def progress(n):
            bar.update(min(len(records), round(n * scale)) - bar.n)

        results = run(jobs, progress)
        progress(len(jobs))
        bar.close()
        failed = [(lab, results[i]["error"]) for lab, i in zip(labels, ids) if "error" in results[i]]
        if failed:
            lines = [f"{lab}: {_message(err)}" for lab, err in failed[:10]]
            more = f"\n  ... and {len(failed) - 10} more" if len(failed) > 10 else ""
            raise JobError(f"{len(failed)} of {len(records)} {desc} requests failed in trillion {kind}:\n  "
                           + "\n  ".join(lines) + more)
        return [results[i]["value"] for i in ids]

    def _score(self, jobs, progress):
        res = self.launcher.run("score", jobs, progress)
        return {k: v if "error" in v else {"value": (v["token_logprobs"], v["greedy_token_ids"])}
                for k, v in res.items()}

    def _generate(self, jobs, progress):
        res = self.launcher.run("generate", jobs, progress)
        return {k: v if "error" in v else {"value": v.get("text", "")} for k, v in res.items()}

    # -- chat, names, info ----------------------------------------------------------------
    def _template(self):
        if self._chat is None:
            self._chat = ChatTemplate(self.model)
        return self._chat

    def _bos_string(self):
        if self._bos_text is None:
            cfg = _read_json(os.path.join(self.model, "tokenizer_config.json")).get("bos_token")
            self._bos_text = (cfg.get("content") if isinstance(cfg, dict) else cfg) or ""
        return self._bos_text

    def apply_chat_template(self, chat_history, add_generation_prompt=True):
        return self._template().render(chat_history, add_generation_prompt=add_generation_prompt)

    def chat_template(self, chat_template=False):
        return self._template().source if chat_template else None

    @property
    def tokenizer_name(self):
        return "trillion:" + os.path.basename(self.model.rstrip("/")) + ":" + _file_hash(self._tokenizer_file())

    def _tokenizer_file(self):
        for f in ("tokenizer.json", "tiktoken.model"):
            p = os.path.join(self.model, f)
            if os.path.isfile(p):
                return p
        return None

    def get_model_info(self):
        manifest = os.path.join(self.model, "manifest.json")
        return {"trillion_backend": self.backend_name, "trillion_model": self.model,
                "trillion_model_hash": _file_hash(manifest if os.path.isfile(manifest)
                                                  else os.path.join(self.model, "config.json")),
                "trillion_binary": self.binary, "trillion_np": self.np, "trillion_parallel": self.parallel,
                "trillion_max_length": self._max_length}


def _read_json(path):
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _file_hash(path):
    if not path:
        return "none"
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def _label(r):
    """A harness request named for an error message."""
    shown = r.args[:2] if len(r.args) > 1 and isinstance(r.args[1], str) else r.args[0]
    args = repr(shown)
    if len(args) > 100:
        args = args[:97] + "..."
    return f"task {getattr(r, 'task_name', '?')} doc {getattr(r, 'doc_id', '?')} ({args})"


def _message(err):
    return err.get("message", json.dumps(err)) if isinstance(err, dict) else str(err)


def _max_gen_toks(opts, default):
    """The harness's precedence (models/utils.normalize_gen_kwargs)."""
    for k in ("max_gen_toks", "max_new_tokens", "max_tokens", "max_completion_tokens"):
        if opts.get(k) is not None:
            return int(opts[k])
    return default


def _sampling(opts):
    """do_sample=False forces greedy; otherwise a temperature > 0 samples."""
    if opts.get("do_sample") is False:
        return False
    return float(opts.get("temperature") or 0.0) > 0.0


def _copy_seed(seed, k):
    """The seed of copy k of a sampled request: copy 0 keeps the seed itself
    (one sample is what --gen_kwargs seed=S asks for), the others a distinct
    32-bit seed derived from (seed, k)."""
    if k == 0:
        return seed
    return int.from_bytes(hashlib.sha256(f"{seed}:{k}".encode()).digest()[:4], "little")
