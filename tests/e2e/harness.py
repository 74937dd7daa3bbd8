"""Shared helpers of the end-to-end tests: make a synthetic HF checkpoint,
convert it with `trillion convert`, run trillion commands, compare arrays."""
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
