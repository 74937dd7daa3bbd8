"""One evaluation of the local tasks through lm-eval's Python entry point
(simple_evaluate with only tasks/ indexed: ~2 s of harness start-up instead
of the CLI's ~14 s, which indexes every built-in task); writes
{task: {metric: value}} to --out. The tests that run many evaluations use it.

    python tests/eval/driver.py --model trillion --model_args k=v,... --out RES.json [--tasks a,b]"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import lm_eval  # noqa: E402
import trillion_lm_eval  # noqa: E402,F401  (registers the models)
from lm_eval.tasks import TaskManager  # noqa: E402

TASKS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tasks")


def evaluate(model, model_args, tasks, **kw):
    res = lm_eval.simple_evaluate(model=model, model_args=model_args, tasks=tasks,
                                  task_manager=TaskManager(include_path=TASKS_DIR, include_defaults=False), **kw)
    return {t: {k.split(",")[0]: v for k, v in m.items() if isinstance(v, (int, float)) and "stderr" not in k}
            for t, m in res["results"].items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="trillion")
    ap.add_argument("--model_args", required=True)
    ap.add_argument("--tasks", default="kjv_cloze,kjv_ppl,kjv_gen")
    ap.add_argument("--out", required=True)
    ap.add_argument("--apply_chat_template", action="store_true")
    a = ap.parse_args()
    out = evaluate(a.model, a.model_args, a.tasks.split(","), apply_chat_template=a.apply_chat_template)
    with open(a.out, "w") as f:
        json.dump(out, f, sort_keys=True, indent=1)


if __name__ == "__main__":
    main()
