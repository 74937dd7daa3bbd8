"""trillion tokenize: JSONL text -> ids against the DeepSeek-V3 goldens, --decode
back to the text, --input/--output files, and a bad line named by its number."""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def run(cmd, stdin=""):
    return subprocess.run(cmd, input=stdin.encode(), capture_output=True)


def check(ok, what):
    """Exits 1 naming the failure (a check that holds under `python -O` too)."""
    if not ok:
        raise SystemExit(f"FAILED: {what}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trillion", required=True)
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--golden", required=True)
    a = ap.parse_args()
    model = os.path.join(a.fixtures, "tokenizers", "deepseek-v3")
    goldens = [json.loads(l) for l in open(os.path.join(a.golden, "deepseek-v3.jsonl"), encoding="utf-8")]
    check(len(goldens) > 0, "no golden lines to check")
    texts = "".join(json.dumps({"text": g["text"]}) + "\n" for g in goldens)

    r = run([a.trillion, "tokenize", "--model", model], texts)
    check(r.returncode == 0, r.stderr.decode())
    got = [json.loads(l)["ids"] for l in r.stdout.decode().splitlines()]
    check(got == [g["ids"] for g in goldens], "ids differ from the goldens")

    with tempfile.TemporaryDirectory() as tmp:
        ids_file, text_file = os.path.join(tmp, "ids.jsonl"), os.path.join(tmp, "text.jsonl")
        open(ids_file, "w").write(r.stdout.decode())
        r2 = run([a.trillion, "tokenize", "--tokenizer", os.path.join(model, "tokenizer.json"), "--decode",
                  "--input", ids_file, "--output", text_file])
        check(r2.returncode == 0, r2.stderr.decode())
        back = [json.loads(l)["text"] for l in open(text_file, encoding="utf-8")]
        check(back == [g["text"] for g in goldens], "decode does not give the text back")

    bad = run([a.trillion, "tokenize", "--model", model], '{"text": "ok"}\n{"txt": 1}\n')
    check(bad.returncode == 1 and b":2:" in bad.stderr, bad.stderr.decode())
    bad = run([a.trillion, "tokenize", "--model", model, "--decode"], '{"ids": [1, 2]}\n{"ids": [99999999]}\n')
    check(bad.returncode == 1 and b":2:" in bad.stderr, bad.stderr.decode())
    missing = run([a.trillion, "tokenize", "--model", "/nonexistent/dir"], "")
    check(missing.returncode == 1 and b"/nonexistent/dir" in missing.stderr, missing.stderr.decode())
    print(f"trillion tokenize: {len(goldens)} golden lines, decode round trip, error lines: ok")


if __name__ == "__main__":
    sys.exit(main())
