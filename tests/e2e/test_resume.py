"""Overnight safety: kill -9 a `trillion generate` run mid-way, rerun the same
command; every request appears exactly once, every line parses, the results
equal those of an uninterrupted run. Also: a torn last line is cut, bad lines
are not reported twice, --restart overwrites, `score` resumes likewise."""
import json
import os
import re
import signal
import subprocess
import time

from harness import parse_lines, run, start, vocab_size, wait_rank0_stopped, write_jsonl

args, f, hf, model, case = start("resume")
T = args.trillion
vocab = vocab_size(model)

N = 300
reqs = [{"id": f"r{i}", "prompt_token_ids": [(i * 31 + j * 7) % vocab for j in range(3 + i % 9)],
         "max_tokens": 24 + i % 9, **({"temperature": 0.8, "seed": i} if i % 3 == 0 else {})} for i in range(N)]
prompts = os.path.join(case, "prompts.jsonl")
write_jsonl(prompts, reqs)
with open(prompts, "a") as fp:  # two bad lines: N + 1 and N + 2
    fp.write('{"id": "bad-json", \n')
    fp.write(json.dumps({"prompt_token_ids": [1]}) + "\n")
bad_lines = {N + 1, N + 2}


def check_complete(path, what):
    recs = parse_lines(path)
    f.check(all(r is not None for r in recs), f"{what}: every line parses")
    recs = [r for r in recs if r is not None]
    ids = [r["id"] for r in recs if "error" not in r]
    errs = sorted(r["error"]["line"] for r in recs if "error" in r)
    f.check(len(ids) == len(set(ids)) == N and set(ids) == {r["id"] for r in reqs},
            f"{what}: each of the {N} requests exactly once (got {len(ids)}, {len(set(ids))} distinct)")
    f.check(errs == sorted(bad_lines), f"{what}: each bad line reported once: {errs}")
    return {r["id"]: r for r in recs if "error" not in r}


cmd = [T, "generate", "--model", model, "--prompts", prompts, "--max-batch", 2, "--threads", 1]
base_out = os.path.join(case, "base.jsonl")
p = run([*cmd, "--output", base_out])
base = check_complete(base_out, "uninterrupted run")
f.check(re.search(r"\d+/300 requests, [\d.]+ tokens/s", p.stderr) is not None,
        f"progress lines on stderr: {p.stderr[-500:]!r}")

# The crash: kill -9 half-way through writing the 40th result, where the
# run stops itself (TRILLION_FAULT=write:40): mid-way by construction, not
# by timing (the deadline only catches a hang).
out = os.path.join(case, "crash.jsonl")
full = [str(c) for c in [*cmd, "--output", out]]
print("+ TRILLION_FAULT=write:40", " ".join(full), "(to be killed)", flush=True)
proc = subprocess.Popen(full, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                        env=dict(os.environ, TRILLION_FAULT="write:40"))
killed = wait_rank0_stopped(proc, T, time.time() + 300) is not None
if proc.poll() is None:
    os.kill(proc.pid, signal.SIGKILL)
proc.wait()
lines_at_kill = parse_lines(out)
f.check(killed and len(lines_at_kill) == 40 and None not in lines_at_kill[:39] and lines_at_kill[39] is None,
        f"the run was killed mid-way, writing its 40th line ({len(lines_at_kill)} lines written)")
# The kill left a torn line; another fragment after it is still one torn line.
with open(out, "a") as fp:
    fp.write('{"id": "r1", "token_ids": [1, 2')
p = run([*cmd, "--output", out])
f.check("torn last line" in p.stderr, "the rerun reports the torn line")
f.check(re.search(r"resuming: \d+ of 302 requests", p.stderr) is not None, f"the rerun resumes: {p.stderr[-300:]!r}")
got = check_complete(out, "killed and rerun")
f.check(all(got.get(k, {}).get("token_ids") == v["token_ids"] for k, v in base.items()),
        "resumed results equal the uninterrupted run's")

# A rerun of a finished job writes nothing.
size = os.path.getsize(out)
run([*cmd, "--output", out])
f.check(os.path.getsize(out) == size, "a finished job's rerun appends nothing")
# --restart overwrites.
run([*cmd, "--output", out, "--restart"])
check_complete(out, "--restart")

# An output that is not a result file is refused, not appended to.
alien = os.path.join(case, "alien.jsonl")
with open(alien, "w") as fp:
    fp.write("hello\n")
f.expect_error([*cmd, "--output", alien], ["--restart"], "a foreign output file is refused")
f.check(open(alien).read() == "hello\n", "a foreign output file is left as it was")

# score resumes likewise.
score_in = os.path.join(case, "score.jsonl")
write_jsonl(score_in, [{"id": f"s{i}", "token_ids": [(i + j) % vocab for j in range(2 + i)]} for i in range(6)])
score_out = os.path.join(case, "score.out.jsonl")
run([T, "score", "--model", model, "--input", score_in, "--output", score_out])
want = open(score_out).read().splitlines()
with open(score_out, "w") as fp:
    fp.write("\n".join(want[:2]) + "\n" + want[2][:10])
run([T, "score", "--model", model, "--input", score_in, "--output", score_out])
f.check(sorted(open(score_out).read().splitlines()) == sorted(want), "score: resumed file equals the full one")
f.finish()
