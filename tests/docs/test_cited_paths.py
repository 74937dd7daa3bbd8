#!/usr/bin/env python3
"""Every file a comment or a document cites exists.

Scans the tree's documents (*.md) whole, and the comments and docstrings of
its code (C/C++, CMake, Python, shell; plus any `docs/...` path in the code's
strings, such as a --help text). A cited path is a file name with an
extension whose first folder is one of the tree's (`src/...`, `docs/...`,
`tools/...`; inside src/ also a library's own, `parallel/pipeline.cpp`), or a
bare file name ending in .md. It resolves against the tree's root, the citing file's folder
and its parents, and src/. Exits 1 with `file:line: path` per missing one.

    /usr/bin/python3 tests/docs/test_cited_paths.py [--root DIR]
"""
import argparse
import ast
import os
import re
import sys

EXT = r"(?:md|py|hpp|cpp|h|c|sh|json|cmake|txt|jinja|png|csv|js|sbatch)"
PATH = re.compile(r"(?<![\w./$<{@-])((?:[\w.+-]+/)*[\w+-][\w.+-]*\." + EXT + r")(?![\w/])")
DOCS_IN_CODE = re.compile(r"(?<![\w./-])(docs/[\w./-]*\.md)")
SKIP = ("tests/fixtures/", "tests/fuzz/corpus/", "tests/fuzz/regressions/", "models/")
CODE = {".cpp": "c", ".hpp": "c", ".h": "c", ".c": "c", ".cmake": "hash", ".py": "py", ".sh": "hash",
        ".sbatch": "hash"}


def tracked_files(root):
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and not d.startswith("build")
                       and d not in ("work", "__pycache__")]
        for f in filenames:
            rel = f if rel_dir == "." else f"{rel_dir}/{f}"
            if not rel.startswith(SKIP):
                out.append(rel)
    return sorted(out)


def kind(rel):
    name = os.path.basename(rel)
    if name.endswith(".md"):
        return "md"
    if name == "CMakeLists.txt":
        return "hash"
    ext = os.path.splitext(name)[1]
    if ext in CODE:
        return CODE[ext]
    if ext == "" and rel.startswith(("jobs/", "tools/", ".ci/")):  # scripts without an extension
        return "script"
    return None


def c_comments(text):
    """(line number, comment text) of // and /* */ comments."""
    out, in_block = [], False
    for i, line in enumerate(text.splitlines(), 1):
        if in_block:
            end = line.find("*/")
            out.append((i, line if end < 0 else line[:end]))
            in_block = end < 0
            continue
        at = line.find("//")
        start = line.find("/*")
        if start >= 0 and (at < 0 or start < at):
            end = line.find("*/", start + 2)
            out.append((i, line[start:] if end < 0 else line[start:end]))
            in_block = end < 0
        elif at >= 0:
            out.append((i, line[at:]))
    return out


def hash_comments(text):
    return [(i, line[line.index("#"):]) for i, line in enumerate(text.splitlines(), 1) if "#" in line]


def py_comments(text):
    out = hash_comments(text)
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return out
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str):
                first = body[0].lineno
                for k, line in enumerate(body[0].value.value.splitlines()):
                    out.append((first + k, line))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    args = ap.parse_args()
    root = args.root
    top = {d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)) and not d.startswith(".")}
    libs = {d for d in os.listdir(os.path.join(root, "src")) if os.path.isdir(os.path.join(root, "src", d))}
    missing, checked = [], 0
    for rel in tracked_files(root):
        k = kind(rel)
        if k is None:
            continue
        try:
            text = open(os.path.join(root, rel), encoding="utf-8").read()
        except (UnicodeDecodeError, OSError):
            continue
        if k == "md":
            spans = list(enumerate(text.splitlines(), 1))
        elif k == "c":
            spans = c_comments(text)
        elif k == "py":
            spans = py_comments(text)
        elif k == "script" and text.startswith("#!") and "python" in text.splitlines()[0]:
            spans = py_comments(text)
        else:
            spans = hash_comments(text)
        if k != "md":  # docs/ paths anywhere in the code: help texts, error messages
            spans += [(i, " ".join(DOCS_IN_CODE.findall(line))) for i, line in enumerate(text.splitlines(), 1)
                      if "docs/" in line]
        here = os.path.dirname(rel)
        seen = set()
        for lineno, span in spans:
            for p in PATH.findall(span):
                first = p.split("/")[0]
                in_src = rel.startswith("src/") and first in libs
                if "/" in p and first not in top and not in_src:
                    continue  # another project's path, a placeholder (MODEL_DIR/...), or a system header
                if "/" not in p and not p.endswith(".md"):
                    continue
                if (lineno, p) in seen:
                    continue
                seen.add((lineno, p))
                checked += 1
                cands = [p, os.path.join(here, p), os.path.join("src", p), os.path.join("docs", p)]
                d = here
                while d:
                    d = os.path.dirname(d)
                    cands.append(os.path.join(d, p))
                if not any(os.path.exists(os.path.join(root, c)) for c in cands):
                    missing.append(f"{rel}:{lineno}: {p}")
    for m in missing:
        print(m)
    print(f"{checked} cited paths checked: {'ok' if not missing else f'{len(missing)} missing'}")
    return 1 if missing or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
