#!/usr/bin/env bash
# tests/eval/run.sh VENV SCRIPT ARGS...: runs a test script with the venv's
# python, making the venv first (tools/eval-venv.sh, serialized by a lock:
# the eval tests may start at once). A venv that cannot be made (no
# python3-venv, no network) skips the test (exit 77), or fails it under
# CI=true, where a missing dependency is a failure.
set -uo pipefail
venv=$1
shift
top=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$(dirname "$venv")"
if ! flock "$venv.lock" bash "$top/tools/eval-venv.sh" "$venv"; then
  if [ "${CI:-}" = true ]; then
    echo "FAILED: tools/eval-venv.sh $venv could not make the lm-eval venv (CI=true: a failure, not a skip)"
    exit 1
  fi
  echo "SKIPPED: tools/eval-venv.sh $venv could not make the lm-eval venv (python3-venv, PyPI)"
  exit 77
fi
# Datasets are local JSON files: no hub access, a cache of the test's own.
export HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 HF_HOME=${HF_HOME:-$(dirname "$venv")/hf-home}
exec "$venv/bin/python" "$@"
