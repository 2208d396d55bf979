#!/usr/bin/env bash
# Equal-budget codec sweep: the same codec trained from scratch once per variant STRIDE:LEVELS (stride in
# 10 ms hops: 8/4/2 = 12.5/25/50 frames/s; LEVELS the FSQ grid), each measured by `gepard eval codec` on the
# first $LIMIT utterances per set, then one table in $OUT.md.
#   OUT=docs/results/codec_frame_rate bash scripts/codec_sweep.sh 8:4,4,4,4,4,4 4:4,4,4,4,4,4 2:4,4,4,4,4,4
#   OUT=docs/results/codec_bits bash scripts/codec_sweep.sh 4:4,4,4,4,4,4 4:8,8,8,5,5,5
# Default data: the four flite voices the shipped LM speaks (data/ft, recipe in DEVELOPERS.md). About 15
# minutes per variant on 2 quiet CPU cores with the defaults (spectral + phase losses only; GAN_FROM=N adds
# the discriminator from step N).
set -euo pipefail
cd "$(dirname "$0")/.."
GEPARD=${GEPARD:-.venv/bin/gepard}
TRAIN=${TRAIN:-data/ft/manifest.jsonl}
VAL=${VAL:-data/ft_test/manifest.jsonl}
STEPS=${STEPS:-1500}
GAN_FROM=${GAN_FROM:--1}
LIMIT=${LIMIT:-69}
OUT=${OUT:?set OUT, e.g. OUT=docs/results/codec_bits}
[ $# -gt 0 ] || { echo "usage: scripts/codec_sweep.sh STRIDE:LEVELS ... (e.g. 4:4,4,4,4,4,4)" >&2; exit 2; }
mkdir -p "$OUT"
for variant in "$@"; do
  stride=${variant%%:*} levels=${variant#*:}
  name=stride_${stride}_levels_${levels//,/-}
  run=runs/codec_sweep/$name
  "$GEPARD" train codec --run-dir "$run" --stride "$stride" --levels "$levels" --steps "$STEPS" \
    --train "$TRAIN" --val "$VAL" --phase-weight 1 --adversarial-from "$GAN_FROM" --export "$run/codec"
  "$GEPARD" eval codec --codec "$run/codec" --limit "$LIMIT" --out "$OUT/$name.md" --train-log "$run/log.jsonl"
done
STEPS=$STEPS GAN_FROM=$GAN_FROM LIMIT=$LIMIT OUT=$OUT TRAIN=$TRAIN .venv/bin/python scripts/codec_sweep_report.py "$@"
