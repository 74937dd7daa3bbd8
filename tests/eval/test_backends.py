"""The three local tasks (tasks/: cloze, perplexity, generation) through
both backends: `trillion` on 1 rank and on 2 (mpirun, pipeline and expert) against
`trillion-reference` (tests/reference's float64 forward pass on the HF
checkpoint, no engine code). Same accuracies and exact_match, same greedy
decisions and generated texts, log-likelihoods, rolling log-likelihoods and
perplexities within 1e-6 relative. Independently of the backends: the
generation task's targets are the reference's greedy continuations written
by make_data.py (exact_match must be 1.0), and the rolling requests are the
ceil(n / max_length) windows per passage that the harness's rule gives.

    tests/eval/run.sh VENV tests/eval/test_backends.py --trillion build/trillion --work DIR --mpiexec mpirun"""
import json
import math
import os
import shutil

from evalcommon import (HF_MODEL, MAX_LENGTH, REFERENCE_DIR, TASKS_DIR, lm_eval, model_args, results, samples,
                        setup)

REL = 1e-6
args, model, f = setup(mpiexec=True)
case = os.path.join(args.work, "eval-backends")
shutil.rmtree(case, ignore_errors=True)
os.makedirs(case)
mpirun = args.mpiexec

runs = {
    "reference": ("trillion-reference", model_args(model=HF_MODEL, binary=args.trillion, max_length=MAX_LENGTH,
                                                   workdir=os.path.join(case, "w-ref"), reference_dir=REFERENCE_DIR)),
    "np1": ("trillion", model_args(model=model, binary=args.trillion, max_length=MAX_LENGTH,
                                   workdir=os.path.join(case, "w-np1"), activations="f32")),
    "np2": ("trillion", model_args(model=model, binary=args.trillion, max_length=MAX_LENGTH, np=2,
                                   parallel="pipeline", mpirun=mpirun, workdir=os.path.join(case, "w-np2"), activations="f32")),
    "np2-expert": ("trillion", model_args(model=model, binary=args.trillion, max_length=MAX_LENGTH, np=2,
                                          parallel="expert", mpirun=mpirun, workdir=os.path.join(case, "w-np2e"), activations="f32")),
}
got = {}
for name, (backend, margs) in runs.items():
    out = os.path.join(case, "out-" + name)
    _, took = lm_eval(out, margs, backend=backend)
    got[name] = (results(out), samples(out))
    print(f"{name}: {took:.1f} s: {json.dumps(got[name][0], sort_keys=True)}", flush=True)


def rel(a, b):
    a, b = float(a), float(b)
    return abs(a - b) / max(abs(b), 1e-300)


ref_metrics, ref_samples = got["reference"]
f.check(ref_metrics["kjv_gen"]["exact_match"] == 1.0,
        f"reference: kjv_gen exact_match {ref_metrics['kjv_gen']['exact_match']}, expected 1.0 (its own greedy "
        f"continuations, make_data.py)")
for name in ("np1", "np2", "np2-expert"):
    metrics, smp = got[name]
    for task, want in ref_metrics.items():
        for m, v in want.items():
            if not isinstance(v, (int, float)):
                continue
            same = (v == metrics[task][m]) if m in ("acc", "acc_norm", "exact_match") else rel(metrics[task][m], v) <= REL
            f.check(same, f"{name}: {task} {m} {metrics[task][m]} vs reference {v}")
    f.check(smp.keys() == ref_samples.keys(), f"{name}: samples of {len(smp)} docs, reference {len(ref_samples)}")
    worst, n = 0.0, 0
    for key, want in ref_samples.items():
        have = smp.get(key, [])
        f.check(len(have) == len(want), f"{name}: {key}: {len(have)} responses, reference {len(want)}")
        for h, w in zip(have, want):
            n += 1
            if key[0] == "kjv_cloze":  # [log-likelihood, is greedy]
                worst = max(worst, rel(h[0], w[0]))
                f.check(h[1] == w[1], f"{name}: {key}: is-greedy {h[1]}, reference {w[1]}")
                f.check(rel(h[0], w[0]) <= REL, f"{name}: {key}: log-likelihood {h[0]}, reference {w[0]}")
            elif key[0] == "kjv_ppl":  # the document's rolling log-likelihood
                worst = max(worst, rel(h, w))
                f.check(rel(h, w) <= REL, f"{name}: {key}: rolling log-likelihood {h}, reference {w}")
            else:  # the generated text
                f.check(h == w, f"{name}: {key}: generated {h!r}, reference {w!r}")
    print(f"{name}: {n} responses, worst relative difference {worst:.2e}", flush=True)

# The rolling windows, counted independently: ceil(n / max_length) per passage
# of n tokens, each at most max_length + 1 tokens (inputs and the last target).
texts = [json.loads(line)["text"] for line in open(os.path.join(TASKS_DIR, "data", "ppl.jsonl"))]
tok_in = os.path.join(case, "ppl-text.jsonl")
with open(tok_in, "w") as fp:
    for t in texts:
        fp.write(json.dumps({"text": t}) + "\n")
import subprocess  # noqa: E402
p = subprocess.run([args.trillion, "tokenize", "--model", model, "--input", tok_in], capture_output=True, text=True,
                   check=True)
lengths = [len(json.loads(line)["ids"]) for line in p.stdout.splitlines()]
want_windows = sum(math.ceil(n / MAX_LENGTH) for n in lengths)
f.check(max(lengths) > 2 * MAX_LENGTH, f"the longest passage has {max(lengths)} tokens: not several windows")
work = os.path.join(case, "w-np1")
score_files = [os.path.join(work, x) for x in os.listdir(work)
               if x.startswith("score-") and x.endswith(".jsonl") and not x.endswith(".out.jsonl")]
sizes = {}
for path in score_files:
    with open(path) as fp:
        sizes[path] = [len(json.loads(line)["token_ids"]) for line in fp]
rolling = [s for s in sizes.values() if len(s) == want_windows]
f.check(len(rolling) == 1, f"no score request file of {want_windows} windows (ceil(n/{MAX_LENGTH}) over passages "
        f"of {lengths} tokens) among {[len(s) for s in sizes.values()]}")
f.check(all(n <= MAX_LENGTH + 1 for s in sizes.values() for n in s), "a scored sequence over max_length + 1 tokens")
f.finish()
