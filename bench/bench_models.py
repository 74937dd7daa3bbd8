"""What the Python benchmarks share: running a command (its output on
failure), and the synthetic models they measure on, made once into a work
directory and kept (a checkpoint from tools/synth, converted by the build's
trillion, optionally requantized)."""
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"


def sh(cmd):
    """Runs cmd; on failure exits with its command line and the ends of its output."""
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"failed: {' '.join(map(str, cmd))}\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}")
    return p


def synthetic_model(trillion, work, preset, fmt, quantize=None, checkpoint_args=(), name=None):
    """WORK/model-NAME: tools/synth's `preset` in `fmt` (extra make_checkpoint
    arguments `checkpoint_args`), converted (with --quantize `quantize`)."""
    name = name or f"{preset}-{fmt}" + (f"-q{quantize}" if quantize else "")
    hf = os.path.join(work, f"hf-{name if checkpoint_args else f'{preset}-{fmt}'}")
    model = os.path.join(work, f"model-{name}")
    if not os.path.exists(os.path.join(hf, "config.json")):
        print(f"  making the {preset} checkpoint ({fmt}) ...", flush=True)
        shutil.rmtree(hf, ignore_errors=True)
        sh([PY, os.path.join(ROOT, "tools/synth/make_checkpoint.py"), "--preset", preset, "--format", fmt,
            *checkpoint_args, "--output", hf, "--quiet"])
    if not os.path.exists(os.path.join(model, "manifest.json")):
        print(f"  converting it{f' (--quantize {quantize})' if quantize else ''} ...", flush=True)
        shutil.rmtree(model, ignore_errors=True)
        sh([trillion, "convert", "--input", hf, "--output", model, "--quiet",
            *(["--quantize", quantize] if quantize else [])])
    return model
