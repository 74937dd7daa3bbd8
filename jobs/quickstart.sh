#!/usr/bin/env bash
# The README's first command: on a fresh Debian/Ubuntu machine, install the
# dependencies, build trillion, convert the bundled trained model (models/kjv:
# a 10 M-parameter model of the exact DeepSeek-V3 architecture trained here on
# the King James Bible, in DeepSeek's native FP8 layout, with its own BPE
# tokenizer and chat template; tools/train) to HDF5, and run a batch of text,
# chat, sampled and token-id prompts under mpirun on 2 ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
RANKS=${RANKS:-2}
WORK=${WORK:-work/quickstart}

bash tools/install-deps.sh
cmake -B build >/dev/null
cmake --build build -j "$(nproc)" --target trillion

mkdir -p "$WORK"
MODEL=${MODEL:-models/kjv}
if [ ! -f "$WORK/model/manifest.json" ] || [ "$MODEL/config.json" -nt "$WORK/model/manifest.json" ]; then
  rm -rf "$WORK/model"
  build/trillion convert --input "$MODEL" --output "$WORK/model"
fi
build/trillion plan --model "$WORK/model" --ranks "$RANKS"

cat > "$WORK/prompts.jsonl" <<'JSONL'
{"id": "text", "prompt": "In the beginning God created", "max_tokens": 24, "temperature": 0}
{"id": "chat", "messages": [{"role": "user", "content": "Who led the children of Israel out of Egypt?"}], "max_tokens": 24, "temperature": 0}
{"id": "sampled", "prompt": "And it came to pass", "max_tokens": 32, "temperature": 0.8, "top_p": 0.95, "seed": 7}
{"id": "ids", "prompt_token_ids": [0, 300, 301, 302], "max_tokens": 12}
{"custom_id": "openai-1", "method": "POST", "url": "/v1/chat/completions", "body": {"messages": [{"role": "system", "content": "Answer as the scripture does."}, {"role": "user", "content": "What is love?"}], "max_tokens": 24, "temperature": 0}}
JSONL

mpirun --oversubscribe -np "$RANKS" build/trillion generate \
  --model "$WORK/model" --prompts "$WORK/prompts.jsonl" --output "$WORK/results.jsonl" --restart \
  --metrics "$WORK/metrics.json"
echo "--- $WORK/results.jsonl"
cat "$WORK/results.jsonl"
