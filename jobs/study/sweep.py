"""Runs the points of a study on the emulated cluster, one `generate --metrics`
each, and asks `trillion plan` for each point's prediction.

Layout of a study directory:
  study.json                     the study's parameters (a rerun must match them)
  points/<id>/requests.jsonl     batch requests of exactly `tokens` generated tokens each
  points/<id>/results.jsonl      generate's results
  points/<id>/metrics.json       generate --metrics (complete once "final": true)
  points/<id>/load.json          the machine's 1-minute load average before and after
  points/<id>/plan.json          trillion plan --json for the point (when plan predicts)
  points/<id>/profile.json       --recalibrate: trillion calibrate just before the point ran
A point whose metrics.json is final is measured: a rerun skips it, so a study
resumes like a batch job (after a stop, a crash or a requeue)."""
import json
import os
import subprocess
import sys

from . import cluster
from .points import point_id



class PointFailed(Exception):
    pass


def point_dir(study, p):
    return os.path.join(study, "points", point_id(p))


def read_json(path):
    try:
        with open(path) as fp:
            return json.load(fp)
    except (OSError, ValueError):
        return None


def measured(study, p):
    m = read_json(os.path.join(point_dir(study, p), "metrics.json"))
    return isinstance(m, dict) and m.get("final") is True


def host_profile(cfg, p):
    """The host profile a point is predicted (and --stages auto split) with:
    its own calibration when --recalibrate made one, else the study's."""
    own = os.path.join(point_dir(cfg["study"], p), "profile.json")
    return own if os.path.exists(own) else cfg.get("host_profile")


def recalibrate(cfg, p, log):
    """--recalibrate: this machine's figures right before the point, so that
    on a machine whose speed drifts (a shared VM: 30-50% within minutes here)
    the prediction's error measures the model, not the drift."""
    d = point_dir(cfg["study"], p)
    path = os.path.join(d, "profile.json")
    proc = subprocess.run([cfg["trillion"], "calibrate", "--output", path + ".tmp"], capture_output=True, text=True)
    if proc.returncode == 0:
        os.replace(path + ".tmp", path)
    else:
        log(f"point {point_id(p)}: trillion calibrate failed, predicting from the study's profile: "
            f"{proc.stderr.strip()[-300:]}")


def loadavg():
    try:
        with open("/proc/loadavg") as fp:
            return float(fp.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def requests(p, prompt_tokens, tokens, vocab):
    """`batch` requests that all run at once (max-batch = batch); each generates
    exactly `tokens` tokens (ignore_eos, min_tokens = max_tokens)."""
    out = []
    for i in range(p.batch):
        prompt = [(17 + 31 * i + 7 * j) % vocab for j in range(prompt_tokens)]
        out.append({"id": f"s{i}", "prompt_token_ids": prompt, "max_tokens": tokens,
                    "min_tokens": tokens, "ignore_eos": True})
    return out


def generate_args(trillion, model, p, d, threads, profile=None):
    args = [trillion, "generate", "--model", model, "--prompts", os.path.join(d, "requests.jsonl"),
            "--output", os.path.join(d, "results.jsonl"), "--restart", "--metrics", os.path.join(d, "metrics.json"),
            "--metrics-interval", "0", "--max-batch", str(p.batch), "--threads", str(threads)]
    if p.ranks > 1:
        args += ["--parallel", p.mode]
        if p.micro_batches:
            args += ["--micro-batches", str(p.micro_batches)]
        if p.mode == "pipeline" and p.stages == "auto":  # from the profile plan predicts with: the same split
            args += ["--stages", "auto"] + (["--profile", os.path.abspath(profile)] if profile else [])
    return args


def run_point(cfg, p, net, log):
    """Measures one point (the cluster for its link is up). Raises on failure."""
    d = point_dir(cfg["study"], p)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "requests.jsonl"), "w") as fp:
        for r in requests(p, cfg["prompt_tokens"], cfg["tokens"], cfg["vocab"]):
            fp.write(json.dumps(r) + "\n")
    hf = os.path.join(d, "hostfile")
    cluster.hostfile(hf, p.ranks, net)
    if cfg.get("recalibrate"):
        recalibrate(cfg, p, log)
    cmd = cluster.mpirun_prefix(p.ranks, hf, cfg["prefix"], net) + generate_args(
        os.path.abspath(cfg["trillion"]), os.path.abspath(cfg["model"]), p, d, cfg["threads"], host_profile(cfg, p))
    log(f"point {point_id(p)}")
    load_before = loadavg()
    with open(os.path.join(d, "generate.log"), "w") as err:
        proc = subprocess.Popen(cmd, stdout=err, stderr=subprocess.STDOUT)
        try:
            rc = proc.wait(timeout=cfg["point_timeout"])
        except subprocess.TimeoutExpired:
            # SIGTERM first: mpirun stops its ranks on every host (a SIGKILL
            # would leave them running in the namespaces), then SIGKILL.
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            discard_metrics(d)
            raise PointFailed(f"point {point_id(p)}: no result within --point-timeout {cfg['point_timeout']} s; "
                              f"see {d}/generate.log") from None
        except BaseException:  # Ctrl-C: the point's ranks go with the study
            proc.terminate()
            proc.wait()
            raise
    # The machine's load around the point: other jobs on the cores slow it.
    with open(os.path.join(d, "load.json"), "w") as fp:
        json.dump({"loadavg_1min_before": load_before, "loadavg_1min_after": loadavg(), "cores": os.cpu_count()}, fp)
    if rc != 0 or not measured(cfg["study"], p):
        discard_metrics(d)
        raise PointFailed(f"point {point_id(p)} failed (exit {rc}); see {d}/generate.log")


def discard_metrics(d):
    """A failed point is not measured, even when its run got as far as a
    final metrics file (it overran while shutting down): kept aside as
    metrics.failed.json, so neither the resume nor the CSV takes it."""
    m = os.path.join(d, "metrics.json")
    if os.path.exists(m):
        os.replace(m, os.path.join(d, "metrics.failed.json"))


def plan_args(cfg, p):
    args = [cfg["trillion"], "plan", "--model", cfg["model"], "--ranks", str(p.ranks),
            "--parallel", "pipeline" if p.mode == "single" else p.mode, "--batch", str(p.batch),
            "--max-batch", str(p.batch),  # generate's slots (--stages auto balances at it)
            "--threads", str(cfg["threads"]), "--json",
            # Every host is a namespace of this machine: ranks share its cores
            # (host i pinned to core i mod cores) and its bandwidth.
            "--emulated",
            # The point's prefill is one step of its batch's prompts (generate's
            # --step-tokens 256 at most); the context its decode steps read.
            "--step-tokens", str(max(1, min(256, p.batch * cfg["prompt_tokens"]))),
            "--context", str(cfg["prompt_tokens"] + cfg["tokens"] // 2)]
    if p.micro_batches:  # 0: plan's default (one per stage; 2 groups in expert mode), as generate's
        args += ["--micro-batches", str(p.micro_batches)]
    if p.mode == "pipeline" and p.stages == "auto":
        args += ["--stages", "auto"]
    if host_profile(cfg, p):
        args += ["--profile", host_profile(cfg, p)]
    if p.link != "none":
        args += ["--link-profile", cfg["links"][p.link]["path"]]
    return args


def predict(cfg, p, log):
    """plan.json for the point, or None with the reason logged once: until
    `trillion plan` predicts speeds, the study goes on without predictions."""
    d = point_dir(cfg["study"], p)
    path = os.path.join(d, "plan.json")
    proc = subprocess.run(plan_args(cfg, p), capture_output=True, text=True)
    doc = None
    if proc.returncode == 0:
        try:
            doc = json.loads(proc.stdout)
        except ValueError:
            doc = None
    if not isinstance(doc, dict) or not isinstance(doc.get("predictions"), list):
        reason = (proc.stderr.strip().splitlines() or ["no \"predictions\" in plan --json"])[-1]
        if not cfg.get("_warned_plan"):
            log(f"no prediction: trillion plan: {reason}")
            cfg["_warned_plan"] = True
        if os.path.exists(path):
            os.remove(path)  # an old prediction must not stand for the current plan
        return None
    os.makedirs(d, exist_ok=True)
    with open(path + ".tmp", "w") as fp:
        json.dump(doc, fp, indent=1)
    os.replace(path + ".tmp", path)
    return doc


def link_runs(points):
    """[(link, points)]: the study's order cut where the link changes. One
    cluster per run of points, not per link: a study of several rounds
    (--repeats) keeps its rounds in order."""
    runs = []
    for p in points:
        if runs and runs[-1][0] == p.link:
            runs[-1][1].append(p)
        else:
            runs.append((p.link, [p]))
    return runs


def run(cfg, points, log=lambda s: print(s, file=sys.stderr, flush=True), stop=lambda: False):
    """Measures the points not yet measured, in order, one link's cluster at a time;
    the cluster is torn down whatever happens. A point that fails is logged
    and left unmeasured (the next run tries it again); the others go on.
    -> (measured now, skipped, failed messages)."""
    todo = [p for p in points if not measured(cfg["study"], p)]
    skipped = len(points) - len(todo)
    if skipped:
        log(f"{skipped} point(s) already measured: skipped")
    done, failed = 0, []
    for link, pts in link_runs(todo):
        hosts = max(p.ranks for p in pts)
        profile = cfg["links"].get(link, {"name": "none", "latency_s": 0, "bandwidth_bytes_per_s": 0,
                                             "rate_bytes_per_s": 0})
        net = cfg["net"]
        cluster.up(hosts, profile, cfg["prefix"], net)
        try:
            for p in pts:
                if stop():
                    return done, skipped, failed
                try:
                    run_point(cfg, p, net, log)
                    done += 1
                except PointFailed as e:
                    log(str(e))
                    failed.append(str(e))
        finally:
            cluster.down(cfg["prefix"])
    return done, skipped, failed
