#!/usr/bin/env bash
# Train the codec on a lent GPU machine (the `device` tool; see DEVELOPERS.md), from the repo root:
#   bash scripts/gpu_train_codec.sh SECONDS [more `gepard train codec` flags, e.g. --steps 20000 --init models/codec]
# It first makes its own speech, DEVELOPERS.md's flite recipe on every core: data/markov.txt in the four flite voices
# (Debian's flite unpacked from .flite/*.deb), its last 200 sentences held out for validation. Training then stops
# after SECONDS whatever the step, and the last checkpoint (every 250 steps) is exported.
# Needs (carried): .flite (flite, libflite1, libasound2 .debs), data/markov.txt, and the wheels in .whl/ of what the
# machine lacks (soundfile, soxr, cffi, pycparser).
# Writes to $OUT: data.log, train.log, and one tar split into 15 MB parts (files coming back are limited to 16 MiB)
# holding run/ (log.jsonl, train_config.json, data.json) and export/ (the bf16 codec: config.json + model.safetensors).
# Join here with: cat codec.tar.part-* | tar -x
# At most 8 files come back, so the export must fit 6 parts (~85 MiB): ~44 M parameters in bf16. The shipped size is
# 14.9 M (28 MiB); --frame-dim 512 makes 23.4 M, with --frame-depth 8 29.8 M; --frame-dim 768 (47.6 M) is too big.
set -uo pipefail
seconds=${1:?seconds}; shift
out=${OUT:?set OUT to the folder whose files come back}
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
if compgen -G ".flite/*.deb" >/dev/null; then
  for f in .flite/*.deb; do dpkg -x "$f" .flite/root; done
  export PATH=$PWD/.flite/root/usr/bin:$PATH
  export LD_LIBRARY_PATH=$PWD/.flite/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
work=$(mktemp -d)
head -n -200 data/markov.txt > "$work/train.txt"
tail -n 200 data/markov.txt > "$work/val.txt"
for split in train val; do
  python3 scripts/flite_track.py "$work/$split" --texts "$work/$split.txt" --jobs "$(nproc)" >> "$out/data.log" 2>&1 \
    || { echo "flite failed: see data.log"; tail -5 "$out/data.log"; exit 1; }
done
echo "speech made after ${SECONDS}s" | tee -a "$out/data.log"
timeout "$seconds" python3 -m gepard.cli train codec --run-dir "$work/run" --train "$work/train/manifest.jsonl" \
  --val "$work/val/manifest.jsonl" --threads 8 "$@" > "$out/train.log" 2>&1
echo "training exit status $? after ${SECONDS}s" | tee -a "$out/train.log"
python3 - "$work" <<'PY' | tee -a "$out/train.log"
import sys
import torch
from gepard.codec.model import Codec, CodecConfig
work = sys.argv[1]
ckpt = torch.load(f"{work}/run/checkpoint.pt", map_location="cpu", weights_only=False)
codec = Codec(CodecConfig(**ckpt["codec"]))
codec.load_state_dict(ckpt["model"])
codec.save_pretrained(f"{work}/export")
print(f"exported the checkpoint of step {ckpt['step']}")
PY
rm -f "$work/run/checkpoint.pt"
tar -C "$work" -cf - run export | split -b 15M - "$out/codec.tar.part-"
ls -la "$out"
