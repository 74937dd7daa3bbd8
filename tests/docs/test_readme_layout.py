#!/usr/bin/env python3
"""The README's "Layout of the source" names every folder of the tree, and its
links to docs/ resolve.

Checks, against the source tree (default: this file's repository):
  - every folder under src/ (at any depth) has a line of its own in the
    layout block, starting with its path (`src/kernels/x86  ...`);
  - every top-level folder (src, tests, bench, jobs, ...; hidden folders and
    those .gitignore lists are left out) has a line starting with `name/`;
  - every line of the block that names a src/ folder names one that exists;
  - every docs/... path the README mentions exists, and every docs/*.md is
    linked from the README.
Exits 1 with one line per problem, naming the folder or file.

    /usr/bin/python3 tests/docs/test_readme_layout.py [--root DIR]
"""
import argparse
import fnmatch
import os
import re
import sys

HEADING = "## Layout of the source"


def ignored_names(root):
    """Folder patterns of the top-level .gitignore (build*/, work/, ...)."""
    pats = []
    path = os.path.join(root, ".gitignore")
    if os.path.exists(path):
        for line in open(path, encoding="utf-8"):
            line = line.strip()
            if line and not line.startswith("#") and not line.startswith("!"):
                pats.append(line.rstrip("/"))
    return pats


def is_ignored(name, pats):
    return name.startswith(".") or any(fnmatch.fnmatch(name, p) for p in pats)


def layout_block(readme):
    """The lines of the first code block under the layout heading."""
    lines = readme.splitlines()
    try:
        start = next(i for i, l in enumerate(lines) if l.strip() == HEADING)
    except StopIteration:
        return None
    block, inside = [], False
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        if line.startswith("```"):
            if inside:
                return block
            inside = True
            continue
        if inside:
            block.append(line)
    return block if inside else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                    help="the source tree (default: this file's repository)")
    args = ap.parse_args()
    root = args.root
    readme_path = os.path.join(root, "README.md")
    readme = open(readme_path, encoding="utf-8").read()
    problems = []

    block = layout_block(readme)
    if block is None:
        print(f"README.md: no code block under '{HEADING}'")
        return 1
    named = {line.split()[0].rstrip("/") for line in block if line.strip() and not line[0].isspace()}

    pats = ignored_names(root)
    src = os.path.join(root, "src")
    for dirpath, dirnames, _ in os.walk(src):
        dirnames[:] = sorted(d for d in dirnames if not is_ignored(d, pats))
        for d in dirnames:
            rel = os.path.relpath(os.path.join(dirpath, d), root).replace(os.sep, "/")
            if rel not in named:
                problems.append(f"README.md, '{HEADING}': no line for the folder {rel}/ "
                                f"(add a line starting with '{rel}' that says what it holds)")
    for d in sorted(os.listdir(root)):
        if os.path.isdir(os.path.join(root, d)) and not is_ignored(d, pats) and d != "src":
            if d not in named:
                problems.append(f"README.md, '{HEADING}': no line for the top-level folder {d}/ "
                                f"(add a line starting with '{d}/')")
    if "src" not in named and not any(n.startswith("src/") for n in named):
        problems.append(f"README.md, '{HEADING}': no line for src/")
    for n in sorted(named):
        if n.startswith("src/") and not os.path.isdir(os.path.join(root, n)):
            problems.append(f"README.md, '{HEADING}': names {n}/, which does not exist")

    mentioned = set(re.findall(r"(?<![\w/.-])(docs/[\w./-]*[\w-])", readme))
    for m in sorted(mentioned):
        if not os.path.exists(os.path.join(root, m)):
            problems.append(f"README.md: {m} does not exist")
    linked = set(re.findall(r"\]\((docs/[^)#\s]+)", readme))
    for doc in sorted(os.listdir(os.path.join(root, "docs"))):
        if doc.endswith(".md") and f"docs/{doc}" not in linked:
            problems.append(f"README.md: docs/{doc} is not linked (add it to the table of documents)")

    for p in problems:
        print(p)
    print(f"{len(named)} folders named, {len(mentioned)} docs/ paths mentioned: "
          f"{'ok' if not problems else f'{len(problems)} problem(s)'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
