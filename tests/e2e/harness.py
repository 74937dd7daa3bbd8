"""Shared helpers of the end-to-end tests: make a synthetic HF checkpoint,
convert it with `trillion convert`, run trillion commands, compare arrays.

Checkpoints and converted models are kept in work/ between runs, each keyed
on what made it: the generator's sources and arguments for a checkpoint, and
also the trillion binary's bytes and the convert arguments for a model. A
change to either is tested against fresh output, never against old files."""
import argparse
import fcntl
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON = sys.executable
MAKE_CHECKPOINT = os.path.join(ROOT, "tools", "synth", "make_checkpoint.py")
REFERENCE = os.path.join(ROOT, "tests", "reference", "run_reference.py")
TOKENIZER_FIXTURES = os.path.join(ROOT, "tests", "fixtures", "tokenizers", "deepseek-v3")
# trillion's exit codes (src/app/main.cpp): 1 an error in the input (files,
# requests, models), 2 a command-line error, 3 an internal error.
INPUT_ERROR, USAGE_ERROR = 1, 2


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

    def expect_error(self, cmd, needles, what, code=INPUT_ERROR, **kw):
        """Runs cmd, which must fail cleanly: exit `code` (not a crash or a
        signal, see crash()) with every one of `needles` in its stderr."""
        p = run(cmd, check=False, **kw)
        problem = crash(p) or (f"exit {p.returncode}, expected {code}" if p.returncode != code else None)
        missing = [n for n in needles if n not in p.stderr]
        self.check(problem is None and not missing,
                   f"{what}: {problem or 'exit ' + str(p.returncode)}; stderr {p.stderr.strip()[-1500:]!r}"
                   f"{' lacks ' + repr(missing) if missing else ''}")
        return p

    def finish(self):
        """Exits 1 if a check failed, or if none was made (a test that checked
        nothing proves nothing)."""
        print(f"{self.passed} passed, {self.failed} failed", flush=True)
        if self.passed + self.failed == 0:
            print("FAILED: no checks were made", flush=True)
        sys.exit(1 if self.failed or self.passed == 0 else 0)


def run(cmd, check=True, **kw):
    """Runs a command, echoing it; returns CompletedProcess with text output."""
    print("+", " ".join(str(c) for c in cmd), flush=True)
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        print(p.stdout)
        print(p.stderr)
        raise SystemExit(f"command failed with exit code {p.returncode}: {cmd[0]}")
    return p


# A killed process: a negative return code (the signal) from subprocess, an
# exit code of 128 + the signal from mpirun (or a shell), or mpirun's report.
CRASH_WORDS = re.compile(r"exited on signal|Segmentation fault|core dumped|Aborted \(core")


def crash(p):
    """Why the finished process p (text output captured) crashed, or None."""
    if p.returncode < 0:
        return f"killed by signal {-p.returncode}"
    if p.returncode >= 128:
        return f"exit {p.returncode}: signal {p.returncode - 128}"
    m = CRASH_WORDS.search((p.stdout or "") + (p.stderr or ""))
    return f"exit {p.returncode}, the output says {m.group(0)!r}" if m else None


_digests = {}


def digest(*paths):
    """sha256 over the contents of files (each read once per process)."""
    h = hashlib.sha256()
    for path in paths:
        path = os.path.realpath(path)
        if path not in _digests:
            with open(path, "rb") as fp:
                _digests[path] = hashlib.sha256(fp.read()).hexdigest()
        h.update(f"{path}:{_digests[path]}\n".encode())
    return h.hexdigest()


def generator_digest():
    """What a synthetic checkpoint depends on: every source of tools/synth."""
    return digest(*sorted(glob.glob(os.path.join(ROOT, "tools", "synth", "*.py"))))


def made_once(out, key, make):
    """out, made by make() unless out.key holds `key` (a dict: what makes out);
    a different key (other sources, binary or arguments) remakes it. Tests
    that run at once and share an output wait for each other on out.lock
    (the second finds the first's output made), never make it twice."""
    stamp = out + ".key"
    text = json.dumps(key, sort_keys=True)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if this process dies
        if os.path.isdir(out) and os.path.exists(stamp):
            with open(stamp) as fp:
                if fp.read() == text:
                    return out
        shutil.rmtree(out, ignore_errors=True)
        if os.path.exists(stamp):
            os.remove(stamp)
        make()
        with open(stamp, "w") as fp:
            fp.write(text)
    return out


def checkpoint(work, preset, fmt, seed=0):
    """A synthetic HF checkpoint under work/, kept while the generator and its
    arguments are the same."""
    out = os.path.join(work, "hf", f"{preset}-{fmt}-{seed}")
    args = ["--preset", preset, "--format", fmt, "--seed", str(seed)]
    return made_once(out, {"generator": generator_digest(), "args": args},
                     lambda: run([PYTHON, MAKE_CHECKPOINT, *args, "--output", out]))


def converted(trillion, work, preset, fmt, seed=0, extra=(), quantize=None, variant=None):
    """The checkpoint converted to trillion's HDF5 layout, kept while the
    checkpoint, the trillion binary and the arguments are the same; with
    `quantize` (int8, int4, fp8) requantized by `convert --quantize`. Other
    convert arguments (`extra`) need a `variant` name for their directory."""
    if extra and not variant:
        raise ValueError("convert arguments need a variant name")
    hf = checkpoint(work, preset, fmt, seed)
    name = f"{preset}-{fmt}-{seed}" + (f"-q{quantize}" if quantize else "") + (f"-{variant}" if variant else "")
    out = os.path.join(work, "model", name)
    args = [*(["--quantize", quantize] if quantize else []), *map(str, extra)]
    with open(hf + ".key") as fp:
        made_by = {"checkpoint": json.load(fp), "trillion": digest(trillion), "args": args}
    made_once(out, made_by, lambda: run([trillion, "convert", "--input", hf, "--output", out, *args]))
    return hf, out


def bundled_trained(trillion, work):
    """The committed trained model (models/kjv: DeepSeek-V3 architecture with
    a trained MTP layer, FP8; tools/train) and its conversion, kept while the
    checkpoint and the binary are the same. Needs no torch."""
    hf = os.path.join(ROOT, "models", "kjv")
    out = os.path.join(work, "model", "bundled-kjv")
    made_once(out, {"checkpoint": digest(*sorted(glob.glob(os.path.join(hf, "*.safetensors")))),
                    "trillion": digest(trillion)},
              lambda: run([trillion, "convert", "--input", hf, "--output", out]))
    return hf, out


def write_jsonl(path, records):
    with open(path, "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def parse_lines(path):
    """Every line of a result file; None where a line does not parse."""
    if not os.path.exists(path):
        return []
    out = []
    with open(path) as fp:
        for line in fp:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                out.append(None)
    return out


def ompi_major(mpiexec):
    """The Open MPI generation of `mpiexec` (4, 5, ...; 0 if not Open MPI)."""
    out = subprocess.run([mpiexec, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"\(Open MPI\) (\d+)\.", out)
    return int(m.group(1)) if m else 0


def arg_parser(mpiexec=False, mpiexec_help=None):
    """The common command line of an e2e test: --trillion, --work and, when
    asked, --mpiexec (optional when it has a help text); add a test's own."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--trillion", required=True)
    ap.add_argument("--work", required=True)
    if mpiexec:
        ap.add_argument("--mpiexec", required=mpiexec_help is None, help=mpiexec_help)
    return ap


def parse_args(mpiexec=False, mpiexec_help=None, parser=None):
    """arg_parser()'s (or `parser`'s) arguments, --work made absolute."""
    args = (parser or arg_parser(mpiexec, mpiexec_help)).parse_args()
    args.work = os.path.abspath(args.work)
    return args


def fresh_case(work, name):
    """An empty directory work/case/<name> for one test's files."""
    case = os.path.join(work, "case", name)
    shutil.rmtree(case, ignore_errors=True)
    os.makedirs(case)
    return case


def rank_processes(session, binary):
    """{rank: pid} of the processes of `session` running `binary` (by their
    executable, so never mpiexec or its daemons, whose command lines name it too)."""
    ranks = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.getsid(int(pid)) != session or os.path.realpath(f"/proc/{pid}/exe") != binary:
                continue
            with open(f"/proc/{pid}/environ", "rb") as fp:
                env = dict(v.split(b"=", 1) for v in fp.read().split(b"\0") if b"=" in v)
        except OSError:  # gone meanwhile
            continue
        if b"OMPI_COMM_WORLD_RANK" in env:
            ranks[int(env[b"OMPI_COMM_WORLD_RANK"])] = int(pid)
    return ranks


def stopped(pid):
    """Whether process pid is stopped (a rank that reached its TRILLION_FAULT
    point stops itself with SIGSTOP, src/common/fault.hpp)."""
    try:
        with open(f"/proc/{pid}/stat") as fp:
            return fp.read().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
        return False


def wait_rank0_stopped(proc, binary, deadline):
    """The pid of `proc`'s rank 0 once it has stopped itself at its
    TRILLION_FAULT point: `proc` itself when it runs `binary` alone, else the
    rank of its session (start_new_session) that runs `binary`. None when
    proc ends first or time.time() passes `deadline` (a hang, not a figure)."""
    binary = os.path.realpath(binary)
    while time.time() < deadline and proc.poll() is None:
        try:
            alone = os.path.realpath(f"/proc/{proc.pid}/exe") == binary
        except OSError:
            alone = False
        pid = proc.pid if alone else rank_processes(proc.pid, binary).get(0)
        if pid and stopped(pid):
            return pid
        time.sleep(0.02)
    return None


def signal_pending(pid, sig):
    """Whether `sig` waits for delivery to process pid (as while it is stopped)."""
    mask = 0
    try:
        with open(f"/proc/{pid}/status") as fp:
            for line in fp:
                if line.startswith(("SigPnd:", "ShdPnd:")):
                    mask |= int(line.split()[1], 16)
    except OSError:
        return False
    return bool(mask >> (int(sig) - 1) & 1)


def vocab_size(model):
    with open(os.path.join(model, "config.json")) as f:
        return json.load(f)["vocab_size"]


def demo_text_model(trillion, work):
    """The `demo` FP8 model (DeepSeek-V3's vocabulary) with DeepSeek-V3's
    tokenizer.json and tokenizer_config.json (chat template) copied in, kept
    like converted()'s (the tokenizer files are part of the key)."""
    hf = os.path.join(work, "hf", "demo-fp8-text")
    model = os.path.join(work, "model", "demo-fp8-text")
    args = ["--preset", "demo", "--format", "fp8"]
    tokenizer = [os.path.join(TOKENIZER_FIXTURES, n) for n in ("tokenizer.json", "tokenizer_config.json")]

    def make_hf():
        run([PYTHON, MAKE_CHECKPOINT, *args, "--output", hf, "--quiet"])
        for path in tokenizer:
            shutil.copy(path, hf)

    key = {"generator": generator_digest(), "args": args, "tokenizer": digest(*tokenizer)}
    made_once(hf, key, make_hf)
    made_once(model, dict(key, trillion=digest(trillion)),
              lambda: run([trillion, "convert", "--input", hf, "--output", model]))
    return hf, model


def start(name, preset="tiny", fmt="bf16", mpiexec=False, mpiexec_help=None, demo_text=False):
    """The usual start of an e2e test on one model: the command line
    (parse_args), a Failures, the converted model (preset/fmt, or the demo
    text model) and an empty case directory work/case/<name>.
    -> (args, failures, hf, model, case)"""
    args = parse_args(mpiexec, mpiexec_help)
    if demo_text:
        hf, model = demo_text_model(args.trillion, args.work)
    else:
        hf, model = converted(args.trillion, args.work, preset, fmt)
    return args, Failures(), hf, model, fresh_case(args.work, name)
