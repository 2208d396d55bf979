"""Table of the frame-rate sweep (scripts/codec_frame_rate.sh) -> $OUT.md (reads $OUT/stride_*.json)."""

import datetime
import json
import os
from pathlib import Path

from gepard.eval.machine import describe_machine

out = Path(os.environ.get("OUT", "docs/results/codec_frame_rate"))
gan_from = int(os.environ["GAN_FROM"])
gan = "no discriminator" if gan_from < 0 else f"the discriminator from step {gan_from}"
rows = []
for stride in (8, 4, 2):
    r = json.loads((out / f"stride_{stride}.json").read_text())
    log = [json.loads(line) for line in Path(f"runs/frame_rate_{stride}/log.jsonl").read_text().splitlines()]
    val = [x["val_mel"] for x in log if "val_mel" in x][-1]
    f = r["sets"]["teacher_flite"]
    rows.append(f"| {r['frame_rate']:g} | {r['bitrate']:.0f} | {val:.3f} | {f['wer_original']:.1f} | "
                f"{f['wer_resynth']:.1f} | {f['cosine_mean']:.3f} | {r['speed']['decode_x_realtime']:.0f} | "
                f"{r['speed']['frame_ms_p50']:.2f} |")
out.with_suffix(".md").write_text("\n".join([
    "# Codec frame rate: 12.5 vs 25 vs 50 frames/s", "",
    "Command: `bash scripts/codec_frame_rate.sh`", "",
    f"Machine: {describe_machine()}. Date: {datetime.date.today().isoformat()}.", "",
    f"Each codec: the same architecture, FSQ grid (4,4,4,4,4,4: 12 bits per frame) and data "
    f"({os.environ.get('TRAIN', 'data/ft/manifest.jsonl')}: the four flite voices), trained from scratch for "
    f"{os.environ['STEPS']} steps of batch 16 × 1.6 s (spectral + phase losses, {gan}): an equal-step budget, "
    "far shorter than a release training. Measured by "
    f"`gepard eval codec --limit {os.environ['LIMIT']}` on the flite voices of the teacher test set (held-out "
    "sentences); per-codec reports beside this file.", "",
    "| frames/s | bit/s | held-out log-mel L1 | WER original % | WER resynth % | cosine | decode × RT "
    "| one-frame decode ms |",
    "|---|---|---|---|---|---|---|---|", *rows, ""]))
print(out.with_suffix(".md").read_text())
