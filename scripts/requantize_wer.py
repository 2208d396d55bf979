"""How much does a coarser FSQ grid cost before any training? Re-quantize a codec's latents, decode, ask Whisper.

The encoder's latents are rounded to each grid of --levels (the decoder's input stays in [-1, 1), so the
unchanged decoder reads any grid) and the resynthesis is transcribed by Whisper tiny.en. A grid that loses
little untrained is a cheap start for `gepard train codec --init CODEC --levels ...`.

Usage: python scripts/requantize_wer.py OUT.md [--codec DIR] [--n 40] [--levels 8,8,8,5,5,5 --levels 4,4,4,4,4,4]
[--voices flite_awb,flite_slt] (needs the shared corpus). The N clips are an even spread of the teacher test set's
2-8 s clips (of those voices only, with --voices).
"""

import argparse
import datetime
import math
import shlex
import sys
from pathlib import Path

import torch

from gepard.audio import load_audio
from gepard.codec.files import load_codec
from gepard.codec.fsq import FSQ
from gepard.data.manifests import shared_split
from gepard.eval.asr import get_transcriber, wer
from gepard.eval.machine import describe_machine


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("out", type=Path)
    args.add_argument("--codec", default=None)
    args.add_argument("--n", type=int, default=40)
    args.add_argument("--levels", action="append", default=None)
    args.add_argument("--voices", default=None, help="comma-separated speakers of the teacher test set")
    a = args.parse_args()
    grids = [[int(x) for x in text.split(",")] for text in (a.levels or ["8,8,8,5,5,5", "5,5,5,5,5,5",
                                                                         "4,4,4,4,4,4", "3,3,3,3,3,3"])]
    torch.set_num_threads(2)
    voices = a.voices.split(",") if a.voices else None
    clips = [u for u in shared_split("teacher_test") if u.duration and 2.0 < u.duration < 8.0
             and (voices is None or u.speaker in voices)]
    clips = clips[:: max(1, len(clips) // a.n)][: a.n]
    codec, asr = load_codec(a.codec), get_transcriber(2)
    heard = {str(g): [] for g in grids}
    for u in clips:
        audio = torch.from_numpy(load_audio(u.audio, codec.config.sample_rate))[None]
        with torch.inference_mode():
            latents = codec.encoder(codec.pad(audio))
            for g in grids:
                heard[str(g)].append(asr.transcribe(codec.decoder(FSQ(g)(latents)).float()[0].numpy()))
    texts = [u.text for u in clips]
    lines = ["# Other FSQ grids, untrained", "", f"Command: `python {shlex.join(sys.argv)}`", "",
             (f"Machine: {describe_machine()}. Date: {datetime.date.today().isoformat()}. Codec "
              f"`{a.codec or 'models/codec'}`; {len(clips)} teacher test clips of 2-8 s"
              f"{' (' + a.voices + ')' if a.voices else ''}; WER by Whisper tiny.en."), "",
             "| levels | codebook | bit/s | WER % |", "|---|---|---|---|"]
    for g in grids:
        bits = codec.config.frame_rate * math.log2(math.prod(g))
        score = 100 * wer(texts, heard[str(g)])
        lines.append(f"| {','.join(map(str, g))} | {math.prod(g):,} | {bits:.0f} | {score:.1f} |")
    a.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
