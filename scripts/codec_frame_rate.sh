#!/usr/bin/env bash
# Frame-rate sweep for the codec: the same training from scratch at 12.5, 25 and 50 frames/s (same FSQ grid,
# so the same bits per frame), each measured by `gepard eval codec` on the first $LIMIT utterances per set.
# Default data: the four flite voices the shipped LM speaks (data/ft, recipe in DEVELOPERS.md).
# Writes docs/results/codec_frame_rate.md. Takes ~50 minutes on 2 quiet CPU cores with the defaults
# (spectral + phase losses only; GAN_FROM=N adds the discriminator from step N).
set -euo pipefail
cd "$(dirname "$0")/.."
GEPARD=${GEPARD:-.venv/bin/gepard}
TRAIN=${TRAIN:-data/ft/manifest.jsonl}
VAL=${VAL:-data/ft_test/manifest.jsonl}
STEPS=${STEPS:-1500}
GAN_FROM=${GAN_FROM:--1}
LIMIT=${LIMIT:-69}
OUT=${OUT:-docs/results/codec_frame_rate}
mkdir -p "$OUT"
for stride in 8 4 2; do
  run=runs/frame_rate_$stride
  "$GEPARD" train codec --run-dir "$run" --stride "$stride" --levels 4,4,4,4,4,4 --steps "$STEPS" \
    --train "$TRAIN" --val "$VAL" --phase-weight 1 --adversarial-from "$GAN_FROM" --export "$run/codec"
  "$GEPARD" eval codec --codec "$run/codec" --limit "$LIMIT" --out "$OUT/stride_$stride.md" \
    --train-log "$run/log.jsonl"
done
STEPS=$STEPS GAN_FROM=$GAN_FROM LIMIT=$LIMIT OUT=$OUT .venv/bin/python scripts/codec_frame_rate_report.py
