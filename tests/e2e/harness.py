"""Shared helpers of the end-to-end tests: make a synthetic HF checkpoint,
convert it with `trillion convert`, run trillion commands, compare arrays."""
import argparse
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON = sys.executable
MAKE_CHECKPOINT = os.path.join(ROOT, "tools", "synth", "make_checkpoint.py")
REFERENCE = os.path.join(ROOT, "tests", "reference", "run_reference.py")


class Failures:
    """Collects check results; prints the closing 'N passed, N failed' line."""

    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print("FAILED:", what, flush=True)
        return ok

    def finish(self):
        print(f"{self.passed} passed, {self.failed} failed", flush=True)
        sys.exit(1 if self.failed else 0)


def run(cmd, check=True, **kw):
    """Runs a command, echoing it; returns CompletedProcess with text output."""
    print("+", " ".join(str(c) for c in cmd), flush=True)
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        print(p.stdout)
        print(p.stderr)
        raise SystemExit(f"command failed with exit code {p.returncode}: {cmd[0]}")
    return p


def checkpoint(work, preset, fmt, seed=0):
    """A synthetic HF checkpoint, made once per (preset, format, seed) under work/."""
    out = os.path.join(work, "hf", f"{preset}-{fmt}-{seed}")
    if not os.path.exists(os.path.join(out, ".complete")):
        shutil.rmtree(out, ignore_errors=True)
        run([PYTHON, MAKE_CHECKPOINT, "--preset", preset, "--format", fmt, "--seed", seed, "--output", out])
        open(os.path.join(out, ".complete"), "w").close()
    return out


def converted(trillion, work, preset, fmt, seed=0, extra=(), quantize=None):
    """The checkpoint converted to trillion's HDF5 layout, made once; with
    `quantize` (int8, int4, fp8) requantized by `convert --quantize`."""
    hf = checkpoint(work, preset, fmt, seed)
    out = os.path.join(work, "model", f"{preset}-{fmt}-{seed}" + (f"-q{quantize}" if quantize else ""))
    if not os.path.exists(os.path.join(out, "manifest.json")):
        shutil.rmtree(out, ignore_errors=True)
        q = ["--quantize", quantize] if quantize else []
        run([trillion, "convert", "--input", hf, "--output", out, *q, *extra])
    return hf, out


def write_jsonl(path, records):
    with open(path, "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def parse_args(mpiexec=False, mpiexec_help=None):
    """The common command line of an e2e test: --trillion, --work (made
    absolute) and, when asked, --mpiexec (optional when it has a help text)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--trillion", required=True)
    ap.add_argument("--work", required=True)
    if mpiexec:
        ap.add_argument("--mpiexec", required=mpiexec_help is None, help=mpiexec_help)
    args = ap.parse_args()
    args.work = os.path.abspath(args.work)
    return args


def fresh_case(work, name):
    """An empty directory work/case/<name> for one test's files."""
    case = os.path.join(work, "case", name)
    shutil.rmtree(case, ignore_errors=True)
    os.makedirs(case)
    return case


def vocab_size(model):
    with open(os.path.join(model, "config.json")) as f:
        return json.load(f)["vocab_size"]


def demo_text_model(trillion, work):
    """The `demo` FP8 model (DeepSeek-V3's vocabulary) with DeepSeek-V3's
    tokenizer.json and tokenizer_config.json (chat template) copied in, made once."""
    fixtures = os.path.join(ROOT, "tests", "fixtures", "tokenizers", "deepseek-v3")
    hf = os.path.join(work, "hf", "demo-fp8-text")
    model = os.path.join(work, "model", "demo-fp8-text")
    if not os.path.exists(os.path.join(model, "manifest.json")):
        shutil.rmtree(hf, ignore_errors=True)
        shutil.rmtree(model, ignore_errors=True)
        run([PYTHON, MAKE_CHECKPOINT, "--preset", "demo", "--format", "fp8", "--output", hf, "--quiet"])
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(fixtures, name), hf)
        run([trillion, "convert", "--input", hf, "--output", model])
    return hf, model
