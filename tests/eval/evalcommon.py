"""Shared pieces of the eval tests: the converted bundled model (through the
e2e harness's cache), lm-eval runs through the wrapper's CLI, and the
per-request answers of a run read back from its --log_samples files."""
import glob
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
from harness import Failures, arg_parser, bundled_trained, parse_args  # noqa: E402,F401

TASKS_DIR = os.path.join(HERE, "tasks")
TASKS = "kjv_cloze,kjv_ppl,kjv_gen"
REFERENCE_DIR = os.path.join(ROOT, "tests", "reference")
HF_MODEL = os.path.join(ROOT, "models", "kjv")
MAX_LENGTH = 128  # small enough that several ppl passages need several windows


def setup(mpiexec=False):
    """(args, the converted model directory, a Failures)."""
    args = parse_args(parser=arg_parser(mpiexec=mpiexec))
    _, model = bundled_trained(args.trillion, args.work)
    return args, model, Failures()


def model_args(**kw):
    return ",".join(f"{k}={v}" for k, v in kw.items() if v is not None)


def lm_eval(out, margs, backend="trillion", tasks=TASKS, extra=(), check=True, env=None):
    """python -m trillion_lm_eval ... --log_samples into out; returns
    (CompletedProcess, seconds)."""
    cmd = [sys.executable, "-m", "trillion_lm_eval", "--model", backend, "--model_args", margs,
           "--tasks", tasks, "--include_path", TASKS_DIR, "--output_path", out, "--log_samples", *extra]
    print("+", " ".join(cmd), flush=True)
    t = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    took = time.time() - t
    if check and p.returncode != 0:
        print(p.stdout[-3000:])
        print(p.stderr[-6000:])
        raise SystemExit(f"lm-eval run into {out} failed with exit code {p.returncode}")
    return p, took


def results(out):
    """{task: {metric: value}} of the run in out (its one results_*.json)."""
    files = glob.glob(os.path.join(out, "*", "results_*.json"))
    if len(files) != 1:
        raise SystemExit(f"{out}: expected one results_*.json, found {files}")
    with open(files[0]) as f:
        res = json.load(f)["results"]
    return {t: {k.split(",")[0]: v for k, v in m.items() if k != "alias" and "stderr" not in k}
            for t, m in res.items()}


def samples(out):
    """{(task, doc_id): [response of each request]} of a run's samples files."""
    got = {}
    for path in glob.glob(os.path.join(out, "*", "samples_*.jsonl")):
        task = os.path.basename(path)[len("samples_"):].rsplit("_", 1)[0]
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                got[(task, r["doc_id"])] = [x[0] for x in r["resps"]]
    return got
