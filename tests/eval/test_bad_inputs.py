"""The backends' handling of what goes wrong or needs care (issue 44):

- a context longer than max_length: left-truncated as the harness does (the
  scored sequence is the last max_length + 1 tokens, independently
  tokenized here), warned once for all calls, and scored as the float64
  reference scores the same truncated requests; identical requests scored once;
- a wrong model directory, an unreachable host in a hostfile, a model
  without a chat template asked for one: clear errors before any job;
- the chat template rendered as DeepSeek-V3's template renders (by hand),
  and a chat prompt keeps the single BOS its text holds;
- a hostfile naming this host: the job runs under `mpirun --hostfile`, with
  the answers of one rank;
- an error record from trillion: an exception naming the harness request;
- sampled generation with repeats: each copy its own seed, reproducible.

    tests/eval/run.sh VENV tests/eval/test_bad_inputs.py --trillion build/trillion --work DIR --mpiexec mpirun"""
import json
import logging
import os
import shutil
import subprocess
import sys
import time

from evalcommon import HF_MODEL, REFERENCE_DIR, setup
from lm_eval.api.instance import Instance

from trillion_lm_eval import ReferenceLM, TrillionLM
from trillion_lm_eval.chat import ChatTemplateError
from trillion_lm_eval.checks import SetupError
from trillion_lm_eval.jobs import JobError

args, model, f = setup(mpiexec=True)
case = os.path.join(args.work, "eval-bad-inputs")
shutil.rmtree(case, ignore_errors=True)
os.makedirs(case)
L = 32


class Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.records = []

    def emit(self, record):
        self.records.append(record.getMessage())


warned = Warnings()
logging.getLogger("trillion_lm_eval").addHandler(warned)


def inst(kind, arguments, doc_id, task="t"):
    return Instance(request_type=kind, doc={}, arguments=arguments, idx=0, metadata=(task, doc_id, 1))


def raises(fn, exc, needles, what):
    try:
        fn()
    except exc as e:
        msg = str(e)
        missing = [n for n in needles if n not in msg]
        return f.check(not missing, f"{what}: the message {msg!r} lacks {missing}")
    except Exception as e:  # noqa: BLE001  (a wrong exception type is a failure, named)
        return f.check(False, f"{what}: raised {type(e).__name__}: {e}")
    return f.check(False, f"{what}: no error")


def tokenize(text):
    p = subprocess.run([args.trillion, "tokenize", "--model", model], input=json.dumps({"text": text}) + "\n",
                       capture_output=True, text=True, check=True)
    return json.loads(p.stdout)["ids"]


def request_files(workdir, kind):
    return sorted(os.path.join(workdir, n) for n in os.listdir(workdir)
                  if n.startswith(kind + "-") and n.endswith(".jsonl") and not n.endswith(".out.jsonl"))


def read(path):
    with open(path) as fp:
        return [json.loads(x) for x in fp if x.strip()]


# -- too long: truncated as the harness does, warned once ------------------------------------
ppl = [json.loads(x)["text"] for x in open(os.path.join(os.path.dirname(__file__), "tasks", "data", "ppl.jsonl"))]
long_ctx = [ppl[0][:400], ppl[1][:500], ppl[2][:300]]
reqs = [inst("loglikelihood", (c, " And the LORD"), i) for i, c in enumerate(long_ctx)]
reqs += [inst("loglikelihood", ("In the beginning", " God"), 3), inst("loglikelihood", ("In the beginning", " God"), 4)]
work = os.path.join(case, "w-long")
lm = TrillionLM(model=model, binary=args.trillion, workdir=work, max_length=L, activations="f32")
got = lm.loglikelihood(reqs, disable_tqdm=True)
files = request_files(work, "score")
f.check(len(files) == 1, f"one score job for one loglikelihood call, found {files}")
sent = [r["token_ids"] for r in read(files[0])]
f.check(len(sent) == 4, f"5 requests, 2 of them identical: {len(sent)} scored (identical ones once)")
for i, c in enumerate(long_ctx):
    whole = [0] + tokenize(c + " And the LORD")  # BOS: the tokenizer's add_bos_token
    f.check(len(whole) > L + 1 and sent[i] == whole[-(L + 1):],
            f"request {i}: sent {len(sent[i])} tokens, expected the last {L + 1} of {len(whole)}")
truncation = [m for m in warned.records if "left-truncated" in m]
f.check(len(truncation) == 1 and "3 requests" in truncation[0], f"one truncation warning for 3 requests: {truncation}")
lm.loglikelihood_rolling([inst("loglikelihood_rolling", (ppl[3],), 0)], disable_tqdm=True)
lm.generate_until([inst("generate_until", (ppl[4][:600], {"until": ["\n"], "max_gen_toks": 4}), 0)],
                  disable_tqdm=True)
f.check(len([m for m in warned.records if "left-truncated" in m]) == 1,
        f"warned again on later calls: {warned.records}")
prompt = read(request_files(work, "generate")[0])[0]["prompt_token_ids"]
f.check(len(prompt) == L - 4, f"generation prompt of {len(prompt)} tokens, expected max_length - max_gen_toks = {L - 4}")
ref = ReferenceLM(model=HF_MODEL, binary=args.trillion, workdir=os.path.join(case, "w-ref"), max_length=L,
                  reference_dir=REFERENCE_DIR)
want = ref.loglikelihood(reqs, disable_tqdm=True)
for i, (g, w) in enumerate(zip(got, want)):
    f.check(abs(g[0] - w[0]) <= 1e-6 * abs(w[0]) and g[1] == w[1], f"truncated request {i}: {g} vs reference {w}")
f.check(got[3] == got[4], "identical requests, different answers")

# -- wrong model directory, unreachable host --------------------------------------------------
raises(lambda: TrillionLM(model=os.path.join(case, "nowhere"), binary=args.trillion, workdir=case),
       SetupError, ["nowhere", "no such directory"], "missing model directory")
raises(lambda: TrillionLM(model=HF_MODEL, binary=args.trillion, workdir=case),
       SetupError, [HF_MODEL, "manifest.json", "trillion convert"], "a Hugging Face checkpoint given to trillion")
raises(lambda: TrillionLM(model=model, binary=os.path.join(case, "no-trillion"), workdir=case),
       SetupError, ["binary=", "no-trillion"], "missing binary")
hostfile = os.path.join(case, "hosts")
with open(hostfile, "w") as fp:
    # A name that cannot resolve (.invalid, RFC 2606) and an address that
    # resolves but answers no one (TEST-NET-1, RFC 5737: ssh fails or times out).
    fp.write("# three hosts\nlocalhost slots=1\nno-such-host.invalid slots=1\n192.0.2.1 slots=1\n")
t = time.time()
raises(lambda: TrillionLM(model=model, binary=args.trillion, workdir=case, np=3, hostfile=hostfile),
       SetupError, [f"{hostfile} line 3: host no-such-host.invalid does not resolve",
                    f"{hostfile} line 4: host 192.0.2.1 ssh"], "unreachable hosts")
f.check(time.time() - t < 15, f"the hostfile check took {time.time() - t:.1f} s")
# A hostfile of this host only: checked (nothing remote), then used by mpirun.
local_hosts = os.path.join(case, "local-hosts")
with open(local_hosts, "w") as fp:
    fp.write("localhost slots=2\n")
hwork = os.path.join(case, "w-hostfile")
on_hosts = TrillionLM(model=model, binary=args.trillion, workdir=hwork, max_length=L, np=2, hostfile=local_hosts,
                      mpirun=args.mpiexec, activations="f32").loglikelihood(reqs, disable_tqdm=True)
job_log = open([os.path.join(hwork, n) for n in os.listdir(hwork) if n.endswith(".log")][0]).read()
f.check(f"--hostfile {local_hosts}" in job_log and "-np 2" in job_log, f"not run under mpirun --hostfile: {job_log[:300]}")
f.check(on_hosts == got, f"2 ranks from a hostfile: {on_hosts}, 1 rank: {got}")
raises(lambda: TrillionLM(model=model, binary=args.trillion, workdir=case, max_lenght=3),
       SetupError, ["max_lenght"], "a misspelt model_arg")
raises(lambda: TrillionLM(model=model, binary=args.trillion, workdir=case, activations="fp16"),
       SetupError, ["activations=fp16", "auto, f32, int8 or bf16"], "an unknown compute path")

# -- chat templates ------------------------------------------------------------------------------
# DeepSeek-V3's template by hand: BOS, then <｜User｜>content, then <｜Assistant｜>.
msgs = [{"role": "user", "content": "Who begat Enos?"}]
f.check(lm.apply_chat_template(msgs) == "<｜begin▁of▁sentence｜><｜User｜>Who begat Enos?<｜Assistant｜>",
        f"rendered {lm.apply_chat_template(msgs)!r}")
lm.generate_until([inst("generate_until", (lm.apply_chat_template(msgs), {"until": ["\n"], "max_gen_toks": 4}), 0)],
                  disable_tqdm=True)
prompts = [r["prompt_token_ids"] for path in request_files(work, "generate") for r in read(path)]
f.check(any(p[:2] == [0, 2] for p in prompts) and not any(p[:2] == [0, 0] for p in prompts),
        f"the chat prompt should begin with one BOS, then <｜User｜>: {[p[:3] for p in prompts]}")
bare = os.path.join(case, "no-template")
os.makedirs(bare)
for n in os.listdir(model):
    if n != "tokenizer_config.json":
        os.symlink(os.path.join(model, n), os.path.join(bare, n))
cfg = json.load(open(os.path.join(model, "tokenizer_config.json")))
cfg.pop("chat_template", None)
json.dump(cfg, open(os.path.join(bare, "tokenizer_config.json"), "w"))
nochat_work = os.path.join(case, "w-nochat")
p = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "driver.py"), "--model_args",
                    f"model={bare},binary={args.trillion},workdir={nochat_work}", "--tasks", "kjv_gen",
                    "--out", os.path.join(case, "nochat.json"), "--apply_chat_template"],
                   capture_output=True, text=True)
f.check(p.returncode != 0 and "no chat template" in p.stderr and bare in p.stderr,
        f"no chat template: exit {p.returncode}, stderr {p.stderr[-1500:]}")
f.check(not os.path.isdir(nochat_work) or not [n for n in os.listdir(nochat_work) if n.endswith(".out.jsonl")],
        "a job ran for a model without the chat template it was asked for")

# -- an error record names the harness request -----------------------------------------------------
bad = TrillionLM(model=model, binary=args.trillion, workdir=os.path.join(case, "w-bad"), prefix_token_id=5000)
raises(lambda: bad.loglikelihood([inst("loglikelihood", ("", "Amen"), 7, task="kjv_x"),
                                  inst("loglikelihood", ("Amen", " Amen"), 8, task="kjv_x")], disable_tqdm=True),
       JobError, ["1 of 2 loglikelihood requests failed", "task kjv_x doc 7", "5000"], "an error record")

# -- sampled repeats: a seed per copy, reproducible --------------------------------------------------
sample = inst("generate_until", ("And God said", {"until": ["\n"], "max_gen_toks": 12, "do_sample": True,
                                                  "temperature": 1.0}), 0)
swork = os.path.join(case, "w-sample")
first = TrillionLM(model=model, binary=args.trillion, workdir=swork).generate_until([sample] * 4, disable_tqdm=True)
seeds = [r["seed"] for r in read(request_files(swork, "generate")[0])]
f.check(len(set(seeds)) == 4 and seeds[0] == 1234, f"4 copies, seeds {seeds}: expected 4 distinct, the first 1234")
f.check(len(set(first)) > 1, f"4 samples all alike: {first}")
again = TrillionLM(model=model, binary=args.trillion, workdir=os.path.join(case, "w-sample2")).generate_until(
    [sample] * 4, disable_tqdm=True)
f.check(again == first, f"sampling not reproducible: {first} then {again}")
f.finish()
