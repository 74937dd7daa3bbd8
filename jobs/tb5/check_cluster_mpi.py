"""jobs/tb5/check-cluster's MPI steps: one Open MPI version everywhere, the
tb5 plugin loading everywhere, a 2-rank then an N-rank tb5 ping-pong, and
the bundled model generating across every rank exactly as on one."""
import json
import os
import re
import shlex

PKGLIB = "$(ompi_info --path pkglibdir | sed 's/.*: *//')"
PROMPTS = [
    {"id": "text", "prompt": "In the beginning God created", "max_tokens": 16, "temperature": 0},
    {"id": "chat", "messages": [{"role": "user", "content": "Who led the children of Israel out of Egypt?"}],
     "max_tokens": 16, "temperature": 0},
    {"id": "sampled", "prompt": "And it came to pass", "max_tokens": 16, "temperature": 0.8, "top_p": 0.95, "seed": 7},
]


def mpirun(run, hosts, ranks, a, plugins, major, work, program):
    """The command line of a tb5 job over the first `ranks` hosts, one rank each."""
    hf = os.path.join(work, f"hosts{ranks}")
    with open(hf, "w") as fp:
        fp.writelines(f"{h} slots=1\n" for h in hosts[:ranks])
    argv = ["mpirun", "--hostfile", hf, "-np", str(ranks), "--map-by", "node",
            "--mca", "mca_base_component_path", f"{plugins}:PKGLIB", "--mca", "btl", "self,tb5",
            *run.mpirun_args(hf, major, a.launch_if), *program]
    return " ".join(shlex.quote(x) for x in argv).replace("PKGLIB", PKGLIB)


def check_mpi(r, run, hosts, a, plugins):
    n = len(hosts)
    work = os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    versions, details = [], []
    for i in range(n):
        rc, out = run.run(i, "mpirun --version")
        m = re.search(r"\(Open MPI\) (\d+)\.(\d+)\.(\d+)", out)
        versions.append(m.group(0)[11:] if m else None)
        details.append(f"{hosts[i]}: {versions[-1] or 'no Open MPI: ' + out.strip()[:200]}")
    ok = None not in versions and len(set(versions)) == 1
    if not r.result("one Open MPI version on every host", ok, "\n".join(details),
                    "install the same Open MPI everywhere (macOS: brew install open-mpi, brew upgrade open-mpi on "
                    "every Mac)"):
        return False
    major = int(versions[0].split(".")[0])
    details, ok = [], True
    for i in range(n):
        rc, out = run.run(i, f"OMPI_MCA_mca_base_component_path={shlex.quote(plugins)}:{PKGLIB} ompi_info "
                             f"| grep 'MCA btl: tb5'")
        ok &= rc == 0
        details.append(f"{hosts[i]}: {out.strip() or 'btl tb5 not listed'}")
    if not r.result(f"the tb5 plugin loads on every host ({plugins})", ok, "\n".join(details),
                    "build it for the installed Open MPI on every host: jobs/tb5/build-openmpi.sh (macOS, "
                    "Homebrew), or cmake -B build && cmake --build build --target mca_btl_tb5; --plugins DIR "
                    "if it is elsewhere"):
        return False
    bench = os.path.join(a.build, "bench", "bench_channel")
    trillion = os.path.join(a.build, "trillion")
    details, ok = [], True
    for i in range(n):
        missing = [p for p in (bench, trillion) if run.run(i, f"test -x {shlex.quote(p)}")[0] != 0]
        ok &= not missing
        details.append(f"{hosts[i]}: " + (f"missing {', '.join(missing)}" if missing else "both present"))
    if not r.result(f"bench_channel and trillion built on every host ({a.build})", ok, "\n".join(details),
                    "cmake --build build --target bench_channel trillion on every host; --build DIR if the "
                    "build directory is elsewhere"):
        return False
    for ranks in sorted({2, n}):
        cmd = mpirun(run, hosts, ranks, a, plugins, major, work,
                     [bench, "--min", "4096", "--max", "1048576", "--latency-iters", "300", "--busy-ms", "10"])
        rc, out = run.run(0, cmd, timeout=600)
        rows = [line.split() for line in out.splitlines() if re.match(r"^\s+\d+\s+[\d.]+\s+[\d.]+\s+[\d.]+", line)]
        ok = rc == 0 and len(rows) >= 2
        detail = out.strip()[-1500:] if not ok else (
            f"8 B one-way: {rows[0][1]} us (RmaChannel), {rows[0][3]} us (MPI); {rows[-1][0]} B: "
            f"{rows[-1][2]} GB/s (RmaChannel), {rows[-1][4]} GB/s (MPI)"
            + "".join(f"\n{line.strip()}" for line in out.splitlines() if line.startswith("ring of")))
        if not r.result(f"tb5 ping-pong over {ranks} hosts (bench_channel)", ok, detail,
                        "rerun the line below with --mca btl_base_verbose 100 (tb5 names its devices and the "
                        f"peers it cannot reach):\n{cmd}"):
            return False
    return check_model(r, run, hosts, a, plugins, major, work)


def check_model(r, run, hosts, a, plugins, major, work):
    """models/kjv converted, generated on one rank and across every host: the same tokens."""
    n = len(hosts)
    trillion = os.path.join(a.build, "trillion")
    model = os.path.join(work, "kjv")
    convert = (f"test -f {shlex.quote(model)}/manifest.json || {shlex.quote(trillion)} convert --input models/kjv "
               f"--output {shlex.quote(model)}")
    for i in range(1 if run.shared_fs else n):  # on each Mac its own copy, at the same path
        rc, out = run.run(i, convert, timeout=600)
        if rc != 0:
            return r.result("the bundled model (models/kjv) converts", False, out.strip()[-1500:],
                            "build trillion on every host (cmake --build build --target trillion)")
    prompts = os.path.join(work, "prompts.jsonl")
    with open(prompts, "w") as fp:
        fp.writelines(json.dumps(p) + "\n" for p in PROMPTS)
    one, many, metrics = (os.path.join(work, f) for f in ("one.jsonl", "all.jsonl", "all-metrics.json"))
    gen = ["generate", "--model", model, "--prompts", prompts, "--threads", "1"]
    rc1, out1 = run.run(0, " ".join(shlex.quote(x) for x in [trillion, *gen, "--output", one]), timeout=600)
    cmd = mpirun(run, hosts, n, a, plugins, major, work,
                 [trillion, *gen, "--parallel", "pipeline", "--output", many, "--metrics", metrics])
    rcn, outn = run.run(0, cmd, timeout=900)
    details, ok = [], rc1 == 0 and rcn == 0
    if not ok:
        details.append((out1 if rc1 else outn).strip()[-1500:])
    else:
        a1 = {x["id"]: x for x in map(json.loads, open(one))}
        an = {x["id"]: x for x in map(json.loads, open(many))}
        for p in PROMPTS:
            same = p["id"] in an and a1[p["id"]]["token_ids"] == an[p["id"]]["token_ids"]
            ok &= same
            details.append(f"{p['id']}: {'same tokens' if same else 'DIFFERENT'}: {an.get(p['id'], {}).get('text', '')!r}")
        m = json.load(open(metrics))
        spans = sorted({p["host"] for p in m.get("per_rank", [])})
        btl = m.get("transport", {}).get("btl")
        ok &= len(spans) == n and btl == "self,tb5"
        details.append(f"{m.get('ranks')} ranks on {', '.join(spans)}, btl {btl}, tb5 backend "
                       f"{m.get('transport', {}).get('btl_tb5_backend_in_use')}")
    return r.result(f"the bundled model generates across {n} hosts as on one (models/kjv, pipeline)", ok,
                    "\n".join(details),
                    "a failed run: its output above; different tokens: report it (a transport must not change a bit):"
                    f"\n{cmd}")
