#!/usr/bin/env bash
# Frame-rate sweep for the codec: the same short training (600 steps of batch 8 on the 4500-step
# schedule) at 12.5, 25 and 50 frames/s, each measured by `gepard eval codec` on 40 utterances per set.
# Writes docs/results/codec_frame_rate.md. Takes ~25 minutes on 2 CPU cores.
set -euo pipefail
cd "$(dirname "$0")/.."
GEPARD=${GEPARD:-.venv/bin/gepard}
mkdir -p docs/results/frame_rate
for stride in 8 4 2; do
  run=runs/frame_rate_$stride
  "$GEPARD" train codec --run-dir "$run" --stride "$stride" --steps 4500 --stop-at 600 --batch-size 8 \
    --export "$run/codec"
  "$GEPARD" eval codec --codec "$run/codec" --limit 40 --out "docs/results/frame_rate/stride_$stride.md"
done
.venv/bin/python - <<'PY'
import json, datetime
from pathlib import Path
from gepard.eval.machine import describe_machine
rows = []
for stride in (8, 4, 2):
    r = json.loads(Path(f"docs/results/frame_rate/stride_{stride}.json").read_text())
    log = [json.loads(l) for l in Path(f"runs/frame_rate_{stride}/log.jsonl").read_text().splitlines()]
    val = [x["val_mel"] for x in log if "val_mel" in x][-1]
    t, h = r["sets"]["teacher_test"], r["sets"]["real_heldout"]
    rows.append(f"| {r['frame_rate']:g} | {r['bitrate']:.0f} | {val:.3f} | {t['wer_resynth'] - t['wer_original']:.1f} "
                f"| {h['wer_resynth'] - h['wer_original']:.1f} | {t['cosine_mean']:.3f} | {h['cosine_mean']:.3f} "
                f"| {r['speed']['decode_x_realtime']:.0f} | {r['frame_rate']:g} |")
Path("docs/results/codec_frame_rate.md").write_text("\n".join([
    "# Codec frame rate: 12.5 vs 25 vs 50 frames/s", "",
    "Command: `bash scripts/codec_frame_rate.sh`", "",
    f"Machine: {describe_machine()}. Date: {datetime.date.today().isoformat()}.", "",
    "Each codec: same architecture and data, 600 steps of batch 8 × 1.6 s on the 4500-step schedule (a short, "
    "equal-budget run, not the release training); evaluated on the first 40 utterances of each held-out set.", "",
    "| frames/s | bit/s | held-out log-mel L1 | WER gap teacher (pts) | WER gap real (pts) | cosine teacher "
    "| cosine real | decode × RT | LM decode steps per s of audio |",
    "|---|---|---|---|---|---|---|---|---|", *rows, ""]))
print(Path("docs/results/codec_frame_rate.md").read_text())
PY
