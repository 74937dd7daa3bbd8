#!/usr/bin/env bash
# tools/eval-venv.sh DIR: a venv in DIR with lm-eval==0.4.13 (its dependencies
# pinned by python/constraints.txt) and this repository's python/ package
# (trillion_lm_eval). Reused when DIR already holds both at these versions
# and the package's sources have not changed (DIR/.stamp). Needs python3-venv
# and PyPI.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: tools/eval-venv.sh DIR" >&2; exit 2; }
top=$(cd "$(dirname "$0")/.." && pwd)
dir=$1
py=/usr/bin/python3
[ -x $py ] || py=python3
# What the venv is made from: a change to any of it remakes the package install.
stamp=$(cat "$top/python/constraints.txt" "$top/python/pyproject.toml" "$top"/python/trillion_lm_eval/*.py | sha256sum | cut -c1-16)
if [ -f "$dir/.stamp" ] && [ "$(cat "$dir/.stamp")" = "$stamp" ] && [ -x "$dir/bin/python" ]; then
  exit 0
fi
if [ ! -x "$dir/bin/python" ]; then
  "$py" -m venv "$dir" || { echo "tools/eval-venv.sh: python3 -m venv $dir failed (apt-get install python3-venv)" >&2; exit 1; }
fi
pip=("$dir/bin/pip" install -q --disable-pip-version-check)
"${pip[@]}" -c "$top/python/constraints.txt" "lm-eval==0.4.13"
# Not editable: the tests run what a user installs (--no-deps: the pins above
# hold). Built from a copy: setuptools writes build/ and *.egg-info where it
# builds, and two build directories may make their venvs at once.
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
cp -r "$top/python/pyproject.toml" "$top/python/trillion_lm_eval" "$src/"
rm -rf "$src/trillion_lm_eval/__pycache__"
"${pip[@]}" --no-deps --force-reinstall "$src"
echo "$stamp" > "$dir/.stamp"
