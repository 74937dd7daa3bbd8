#!/usr/bin/env bash
# The README's first command: on a fresh Debian/Ubuntu machine, install the
# dependencies, build trillion, generate a small synthetic DeepSeek-V3-style
# checkpoint in FP8 (the `demo` preset: DeepSeek-V3's real vocabulary, with its
# real tokenizer and chat template copied in), convert it to HDF5, and run a
# batch of text, chat and token-id prompts under mpirun on 2 ranks.
# The weights are random: the text it writes is gibberish, the machinery is real.
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
if [ ! -f "$WORK/model/manifest.json" ] || [ ! -f "$WORK/model/tokenizer.json" ]; then
  rm -rf "$WORK/hf" "$WORK/model"
  $PY tools/synth/make_checkpoint.py --preset demo --format fp8 --seed 0 --output "$WORK/hf" --quiet
  cp tests/fixtures/tokenizers/deepseek-v3/tokenizer.json tests/fixtures/tokenizers/deepseek-v3/tokenizer_config.json "$WORK/hf/"
  build/trillion convert --input "$WORK/hf" --output "$WORK/model"
fi
build/trillion plan --model "$WORK/model" --ranks "$RANKS"

cat > "$WORK/prompts.jsonl" <<'JSONL'
{"id": "text", "prompt": "The capital of France is", "max_tokens": 12}
{"id": "chat", "messages": [{"role": "user", "content": "Name a prime number."}], "max_tokens": 12}
{"id": "sampled", "prompt": "Once upon a time", "max_tokens": 16, "temperature": 0.8, "top_p": 0.95, "seed": 7}
{"id": "ids", "prompt_token_ids": [0, 17, 42, 99, 7], "max_tokens": 8}
{"custom_id": "openai-1", "method": "POST", "url": "/v1/chat/completions", "body": {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello!"}], "max_tokens": 8}}
JSONL

mpirun --oversubscribe -np "$RANKS" build/trillion generate \
  --model "$WORK/model" --prompts "$WORK/prompts.jsonl" --output "$WORK/results.jsonl" --restart \
  --metrics "$WORK/metrics.json"
echo "--- $WORK/results.jsonl"
cat "$WORK/results.jsonl"
