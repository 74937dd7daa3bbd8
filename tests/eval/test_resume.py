"""A killed evaluation resumes (issue 44): the trillion job of a call is
killed with SIGKILL while it writes results; the evaluation fails naming the
job; rerun with the same workdir it completes with the metrics of an
uninterrupted run, every request of the killed job appears once in its
output (none computed twice: the rerun's own count of requests run is the
remainder), and a third run finds every output complete and starts no job.

    tests/eval/run.sh VENV tests/eval/test_resume.py --trillion build/trillion --work DIR"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from evalcommon import HERE, MAX_LENGTH, model_args, setup

args, model, f = setup()
case = os.path.join(args.work, "eval-resume")
shutil.rmtree(case, ignore_errors=True)
os.makedirs(case)
DRIVER = os.path.join(HERE, "driver.py")


def driver(workdir, out, **kw):
    # max_batch=1 and one thread: results appear one by one, slowly enough to be caught mid-job.
    margs = model_args(model=model, binary=args.trillion, workdir=workdir, max_length=MAX_LENGTH, max_batch=1,
                       threads=1)
    return [sys.executable, DRIVER, "--model_args", margs, "--out", out]


def lines(path):
    with open(path) as fp:
        return [json.loads(x) for x in fp if x.strip()]


def job_pid(out_file):
    """The pid of the trillion process writing out_file (found by its
    command line; only a process this test started has this path)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fp:
                cmd = fp.read().split(b"\0")
        except OSError:
            continue
        if out_file.encode() in cmd and cmd[0].endswith(b"trillion"):
            return int(pid)
    return None


# The uninterrupted run.
p = subprocess.run(driver(os.path.join(case, "w-whole"), os.path.join(case, "whole.json")), capture_output=True,
                   text=True)
f.check(p.returncode == 0, f"uninterrupted run: exit {p.returncode}: {p.stderr[-2000:]}")
whole = json.load(open(os.path.join(case, "whole.json")))

# The killed run: SIGKILL to the job once its output holds a few results and
# misses many (the rolling windows' job: 129-token windows, one at a time).
work = os.path.join(case, "w")
run1 = subprocess.Popen(driver(work, os.path.join(case, "first.json")), stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)
killed = None
while run1.poll() is None and killed is None:
    for name in os.listdir(work) if os.path.isdir(work) else []:
        if not (name.endswith(".out.jsonl") and name.startswith(("score-", "generate-"))):
            continue
        out = os.path.join(work, name)
        req = out[:-len(".out.jsonl")] + ".jsonl"
        with open(out, "rb") as fp:
            done = fp.read().count(b"\n")
        total = sum(1 for _ in open(req))
        if 2 <= done <= total - 5:
            pid = job_pid(out)
            if pid:
                os.kill(pid, signal.SIGKILL)
                killed = (out, req, done, total)
                break
    time.sleep(0.002)
stdout, stderr = run1.communicate()
f.check(killed is not None, "the job was never caught mid-run to be killed")
if killed:
    out, req, done, total = killed
    print(f"killed the job of {os.path.basename(req)} after {done} of {total} results", flush=True)
    f.check(run1.returncode != 0 and "rerun to resume" in stderr and os.path.basename(req) in stderr,
            f"killed run: exit {run1.returncode}, stderr should name the job and say to rerun: {stderr[-1500:]}")
    before = len(lines(out))
    p = subprocess.run(driver(work, os.path.join(case, "second.json")), capture_output=True, text=True)
    f.check(p.returncode == 0, f"rerun: exit {p.returncode}: {p.stderr[-2000:]}")
    second = json.load(open(os.path.join(case, "second.json")))
    f.check(second == whole, f"resumed metrics {second} != uninterrupted {whole}")
    ids = [r["id"] for r in lines(out)]
    want = [r["id"] for r in lines(req)]
    f.check(len(ids) == len(set(ids)) and sorted(ids) == sorted(want),
            f"{out}: {len(ids)} results, {len(set(ids))} distinct, {len(want)} requests")
    # trillion's own summary of the resumed job: only the remainder was run.
    log = open(out[:-len(".out.jsonl")] + ".log").read()
    f.check(log.count("+ ") == 2, f"the killed job should have been started twice, the log says {log.count('+ ')}")
    f.check(f"resuming: {before} of {total} requests" in log.split("+ ")[-1],
            f"the rerun should have run {total - before} requests ({before} done): {log.split('+ ')[-1][-800:]}")
    # A third run: every output complete, no job started.
    logs = {n: open(os.path.join(work, n)).read() for n in os.listdir(work) if n.endswith(".log")}
    p = subprocess.run(driver(work, os.path.join(case, "third.json")), capture_output=True, text=True)
    f.check(p.returncode == 0 and json.load(open(os.path.join(case, "third.json"))) == whole,
            f"third run: exit {p.returncode}, metrics differ or {p.stderr[-1000:]}")
    f.check(logs == {n: open(os.path.join(work, n)).read() for n in os.listdir(work) if n.endswith(".log")},
            "the third run started a job though every output was complete")
f.finish()
