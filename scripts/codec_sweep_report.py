"""Table of an equal-budget codec sweep (scripts/codec_sweep.sh) -> $OUT.md.

python scripts/codec_sweep_report.py STRIDE:LEVELS ...   (reads $OUT/stride_S_levels_L.json, runs/codec_sweep/*/log.jsonl)
"""

import datetime
import json
import math
import os
import sys
from pathlib import Path

from gepard.eval.machine import describe_machine

out = Path(os.environ["OUT"])
gan_from = int(os.environ["GAN_FROM"])
gan = "no discriminator" if gan_from < 0 else f"the discriminator from step {gan_from}"
rows = []
for variant in sys.argv[1:]:
    stride, levels = variant.split(":")
    name = f"stride_{stride}_levels_{levels.replace(',', '-')}"
    r = json.loads((out / f"{name}.json").read_text())
    log = [json.loads(line) for line in Path(f"runs/codec_sweep/{name}/log.jsonl").read_text().splitlines()]
    val = [x["val_mel"] for x in log if "val_mel" in x][-1]
    bits = math.log2(math.prod(int(n) for n in levels.split(",")))
    f = r["sets"]["teacher_flite"]
    rows.append(f"| {r['frame_rate']:g} | {levels} | {bits:.1f} | {r['bitrate']:.0f} | {val:.3f} | "
                f"{f['wer_original']:.1f} | {f['wer_resynth']:.1f} | {f['cosine_mean']:.3f} | "
                f"{r['speed']['decode_x_realtime']:.0f} | {r['speed']['frame_ms_p50']:.2f} | [report]({out.name}/{name}.md) |")
command = " ".join([f"OUT={out} bash scripts/codec_sweep.sh", *sys.argv[1:]])
out.with_suffix(".md").write_text("\n".join([
    f"# Equal-budget codec sweep: {', '.join(sys.argv[1:])} (stride:FSQ levels)", "",
    f"Command: `{command}`", "",
    f"Machine: {describe_machine()}. Date: {datetime.date.today().isoformat()}.", "",
    f"Each codec: the same architecture and data ({os.environ.get('TRAIN', 'data/ft/manifest.jsonl')}: the "
    f"four flite voices), trained from scratch for {os.environ['STEPS']} steps of batch 16 × 1.6 s (spectral + "
    f"phase losses, {gan}): an equal-step budget, far shorter than a release training. Measured by "
    f"`gepard eval codec --limit {os.environ['LIMIT']}` on the flite voices of the teacher test set (held-out "
    "sentences).", "",
    "| frames/s | FSQ levels | bits/frame | bit/s | held-out log-mel L1 | WER original % | WER resynth % | cosine "
    "| decode × RT | one-frame decode ms | full report |",
    "|---|---|---|---|---|---|---|---|---|---|---|", *rows, ""]))
print(out.with_suffix(".md").read_text())
