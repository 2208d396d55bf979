#!/usr/bin/env bash
# Train the speech LM on a lent GPU machine (the `device` tool; see DEVELOPERS.md), from the repo root:
#   bash scripts/gpu_train_lm.sh STEPS BATCH_FRAMES [HIDDEN] [LAYERS]
# Needs shards/train and shards/test (carried; the second gives the held-out NLL in the log), and the wheels in .whl/ of what the machine lacks (soundfile, soxr).
# Writes to $OUT: the log, loss plot and config of the run, and the bf16 release export as a tar split
# into 15 MB parts (files coming back are limited to 16 MiB). Join here with: cat export.tar.part-* | tar -x
set -euo pipefail
steps=${1:?steps}; frames=${2:?batch frames}; hidden=${3:-256}; layers=${4:-6}
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
out=${OUT:?set OUT to the folder whose files come back}
work=$(mktemp -d)
python3 -m gepard.cli train lm --run-dir "$work/run" --steps "$steps" --batch-frames "$frames" --hidden "$hidden" \
  --layers "$layers" --threads 8 --val-shards shards/test --export "$work/export" 2>&1 | tr '\r' '\n' | tail -n 40 > "$out/train.log"
cp "$work/run/log.jsonl" "$work/run/loss.png" "$work/run/train_config.json" "$out/"
tar -C "$work" -cf - export | split -b 15M - "$out/export.tar.part-"
ls -la "$out"
