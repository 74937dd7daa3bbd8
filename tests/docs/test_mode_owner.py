#!/usr/bin/env python3
"""The parallel modes have their owners: src/parallel (roles, mode_rules) and
src/plan (layout, cost). The commands in src/app ask a Layout's questions
(pool_slots, takes_stages, modes_for, row_groups, ...) and never name a mode,
so a new mode does not reach into them (issue 47).

Checks every .cpp/.hpp under src/app for the ways C++ names an enumerator:
`ParallelMode::` (with spaces too), `using enum ParallelMode`, and a cast or
braced value from a number (`static_cast<ParallelMode>(1)`,
`ParallelMode{1}`); parse_parallel_mode and the ParallelMode type itself
are fine. Exits 1 with one line per place, naming file and line. It reads
text: a mode reached through a macro or an alias of the type would pass.

    /usr/bin/python3 tests/docs/test_mode_owner.py [--root DIR]
"""
import argparse
import os
import re
import sys

NAMES_A_MODE = re.compile(r"\bParallelMode\s*::|\busing\s+enum\s+ParallelMode\b|"
                          r"_cast\s*<\s*ParallelMode\s*>|\bParallelMode\s*[({]\s*[-+0-9]")

ap = argparse.ArgumentParser()
ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
args = ap.parse_args()
app = os.path.join(args.root, "src", "app")
if not os.path.isdir(app):
    print(f"no folder {app}")
    sys.exit(1)
problems, files = [], 0
for dirpath, _, names in os.walk(app):
    for name in sorted(names):
        if not name.endswith((".cpp", ".hpp")):
            continue
        files += 1
        path = os.path.join(dirpath, name)
        for n, line in enumerate(open(path, encoding="utf-8"), 1):
            if NAMES_A_MODE.search(line):
                problems.append(f"{os.path.relpath(path, args.root)}:{n}: names a parallel mode: {line.strip()}")
if files == 0:
    problems.append(f"no source files under {app}")
for p in problems:
    print(p)
print(f"{files} files of src/app read, {len(problems)} naming a mode")
sys.exit(1 if problems else 0)
