#!/usr/bin/env bash
# Train the speech LM on a lent GPU machine (the `device` tool; see DEVELOPERS.md), from the repo root:
#   bash scripts/gpu_train_lm.sh STEPS SECONDS BATCH_FRAMES HIDDEN LAYERS [more `gepard train lm` flags]
# Training is stopped after SECONDS if it has not finished by then, so the call ends in time; the best export
# made so far survives. Measured on an H200: ~40 s of start-up, then 0.30 s a step at 8,192 frames, 384 wide, 8 layers
# (the batches are built on the CPU, which bounds the step time).
# Needs shards/train and shards/test (carried: the second gives the held-out NLL and picks the export), and the
# wheels in .whl/ of what the machine lacks (soundfile, soxr).
# Writes to $OUT: train.log, and one tar split into 15 MB parts (files coming back are limited to 16 MiB) holding
# run/ (log.jsonl, loss.png, train_config.json) and best/ (the bf16 release export of the lowest held-out NLL).
# Join here with: cat lm.tar.part-* | tar -x
set -uo pipefail
steps=${1:?steps}; seconds=${2:?seconds}; frames=${3:?batch frames}; hidden=${4:?hidden}; layers=${5:?layers}; shift 5
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
out=${OUT:?set OUT to the folder whose files come back}
work=$(mktemp -d)
timeout "$seconds" python3 -m gepard.cli train lm --shards shards/train --val-shards shards/test \
  --batch-frames "$frames" --hidden "$hidden" --layers "$layers" --threads 8 --run-dir "$work/run" --steps "$steps" \
  --val-every $(( steps >= 18 ? steps / 18 : 1 )) --checkpoint-every "$steps" --best-export "$work/best" "$@" > "$out/train.log" 2>&1
echo "training exit status $? after ${SECONDS}s" | tee -a "$out/train.log"
rm -rf "$work/run/checkpoint"
tar -C "$work" -cf - run best | split -b 15M - "$out/lm.tar.part-"
ls -la "$out"
