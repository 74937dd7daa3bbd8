#!/usr/bin/env bash
# The README's first command: on a fresh Debian/Ubuntu machine, install the
# dependencies, build trillion, generate a small synthetic DeepSeek-V3-style
# checkpoint, convert it to HDF5, and run a batch generation under mpirun.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
RANKS=${RANKS:-2}
WORK=${WORK:-work/quickstart}

bash tools/install-deps.sh
cmake -B build >/dev/null
cmake --build build -j "$(nproc)" --target trillion

mkdir -p "$WORK"
if [ ! -f "$WORK/hf/config.json" ]; then
  $PY tools/synth/make_checkpoint.py --preset tiny --format fp8 --seed 0 --output "$WORK/hf"
fi
if [ ! -f "$WORK/model/manifest.json" ]; then
  build/trillion convert --input "$WORK/hf" --output "$WORK/model"
fi
build/trillion inspect "$WORK/model"

cat > "$WORK/prompts.jsonl" <<'JSONL'
{"id": "greeting", "prompt_token_ids": [0, 17, 42, 99, 7], "max_tokens": 12}
{"id": "counting", "prompt_token_ids": [0, 3, 4, 5, 6, 7, 8], "max_tokens": 8}
{"id": "long", "prompt_token_ids": [0, 101, 202, 303, 404, 105, 206, 307, 408, 109], "max_tokens": 24}
{"id": "short", "prompt_token_ids": [0], "max_tokens": 4}
JSONL

mpirun --oversubscribe -np "$RANKS" build/trillion generate \
  --model "$WORK/model" --prompts "$WORK/prompts.jsonl" --output "$WORK/results.jsonl" --restart
echo "--- $WORK/results.jsonl"
cat "$WORK/results.jsonl"
