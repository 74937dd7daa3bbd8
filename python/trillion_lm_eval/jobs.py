"""Running trillion for the harness: one batched `trillion tokenize` per
call, and one `trillion score` or `trillion generate` job per call (under
mpirun when there are several ranks or a hostfile), its request file named by
the hash of its content so a rerun with the same workdir finds the output of
an interrupted run and lets trillion's own resume skip what is done."""
import hashlib
import json
import os
import shlex
import subprocess
import time


class JobError(RuntimeError):
    """A trillion job or one of its requests failed."""


class Launcher:
    def __init__(self, binary, model, workdir, np=1, hostfile=None, parallel="pipeline", max_batch=8,
                 max_len=None, threads=0, mpirun="mpirun", mpirun_args="", extra_args="", activations="auto"):
        self.binary = binary
        self.model = model
        self.workdir = workdir
        self.np = int(np)
        self.hostfile = hostfile
        self.parallel = parallel
        self.max_batch = int(max_batch)
        self.max_len = max_len
        self.threads = int(threads)
        self.activations = activations  # trillion's --activations (auto: its own choice, which it logs)
        self.mpirun = mpirun
        self.mpirun_args = shlex.split(mpirun_args or "")
        self.extra_args = shlex.split(extra_args or "")
        # Seconds in trillion tokenize and in score/generate jobs (process
        # start to exit): what bench/eval_overhead.py sets against the wall time.
        self.stats = {"tokenize_s": 0.0, "job_s": 0.0, "jobs": 0}
        os.makedirs(workdir, exist_ok=True)

    # -- tokenizer -----------------------------------------------------------------
    def tokenize(self, texts, decode=False):
        """Token ids of every text (or texts of id lists with decode=True), in
        one `trillion tokenize` process however many there are; no BOS added.
        Runs directly on this host: the tokenizer is all it needs."""
        if not texts:
            return []
        key = "decode" if decode else "encode"
        base = os.path.join(self.workdir, f"tokenize-{os.getpid()}")
        src, dst = base + ".in.jsonl", base + ".out.jsonl"
        with open(src, "w", encoding="utf-8") as f:
            for t in texts:
                f.write(json.dumps({"ids": t} if decode else {"text": t}, ensure_ascii=False) + "\n")
        cmd = [self.binary, "tokenize", "--model", self.model, "--input", src, "--output", dst]
        if decode:
            cmd.append("--decode")
        t = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True)
        self.stats["tokenize_s"] += time.perf_counter() - t
        if p.returncode != 0:
            raise JobError(f"trillion tokenize ({key} of {len(texts)} strings) failed with exit code "
                           f"{p.returncode}: {p.stderr.strip()[-2000:]}")
        with open(dst, encoding="utf-8") as f:
            out = [json.loads(line)["text" if decode else "ids"] for line in f if line.strip()]
        os.remove(src)
        os.remove(dst)
        if len(out) != len(texts):
            raise JobError(f"trillion tokenize returned {len(out)} lines for {len(texts)} strings")
        return out

    # -- score / generate jobs -------------------------------------------------------
    def command(self, kind, request_file, output_file):
        cmd = [self.binary, kind, "--model", self.model,
               "--input" if kind == "score" else "--prompts", request_file, "--output", output_file,
               "--max-batch", str(self.max_batch), "--parallel", self.parallel]
        if self.max_len:
            cmd += ["--max-len", str(self.max_len)]
        if self.threads:
            cmd += ["--threads", str(self.threads)]
        cmd += ["--activations", self.activations]
        cmd += self.extra_args
        if self.np > 1 or self.hostfile:
            launch = [self.mpirun, "-np", str(self.np), "--bind-to", "none"]
            if self.hostfile:
                launch += ["--hostfile", self.hostfile]
            cmd = launch + self.mpirun_args + cmd
        return cmd

    def files(self, kind, records):
        """The request and output file of a call: named by the hash of the
        requests and of what shapes their results (model, max-len), so the
        same call in a rerun finds its earlier output, and a different one
        never does."""
        text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)
        h = hashlib.sha256()
        h.update(json.dumps([kind, os.path.realpath(self.model), self.max_len]).encode())
        h.update(text.encode())
        name = f"{kind}-{h.hexdigest()[:20]}"
        req = os.path.join(self.workdir, name + ".jsonl")
        if not os.path.exists(req):
            tmp = req + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, req)  # never a partial request file under the final name
        return req, os.path.join(self.workdir, name + ".out.jsonl")

    def run(self, kind, records, progress=None):
        """Runs `trillion kind` over records (each with a unique "id") in one
        job; returns {id: result record}. progress(n) is called with the
        number of results written so far as they appear in the output file."""
        if not records:
            return {}
        req, out = self.files(kind, records)
        want = {r["id"] for r in records}
        done = read_results(out)
        if want - done.keys():
            log = out[:-len(".out.jsonl")] + ".log"
            cmd = self.command(kind, req, out)
            with open(log, "a") as logf:
                logf.write("+ " + " ".join(shlex.quote(c) for c in cmd) + "\n")
                logf.flush()
                t = time.perf_counter()
                proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT)
                counter = LineCounter(out)
                while True:
                    if progress:
                        progress(counter.count())
                    try:  # returns as soon as the job ends: no polling delay added to a call
                        proc.wait(timeout=0.2)
                        break
                    except subprocess.TimeoutExpired:
                        pass
                self.stats["job_s"] += time.perf_counter() - t
                self.stats["jobs"] += 1
            if progress:
                progress(counter.count())
            if proc.returncode != 0:
                with open(log, errors="replace") as f:
                    tail = f.read()[-3000:]
                raise JobError(f"trillion {kind} exited with code {proc.returncode} (requests {req}, "
                               f"log {log}); rerun to resume:\n{tail}")
            done = read_results(out)
        missing = sorted(want - done.keys())
        if missing:
            raise JobError(f"trillion {kind}: no result for {len(missing)} requests of {req} "
                           f"(first: {missing[:3]}) in {out}")
        return {k: v for k, v in done.items() if k in want}


def read_results(path):
    """{id: record} of a result file; a torn last line (a killed job) is
    ignored, as trillion's resume cuts it off."""
    out = {}
    if not os.path.exists(path):
        return out
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(r, dict) and "id" in r:
                out[r["id"]] = r
    return out


class LineCounter:
    """Complete lines of a file that is being appended to, read
    incrementally (the progress of a job is its result lines)."""

    def __init__(self, path):
        self.path = path
        self.pos = 0
        self.lines = 0

    def count(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                chunk = f.read()
        except FileNotFoundError:
            return self.lines
        self.lines += chunk.count(b"\n")
        self.pos += len(chunk)
        return self.lines
