"""Paired codec speed: several codecs timed in alternating rounds on the 67 s of held-out real speech that
`gepard eval codec` times (batch 1, one thread, fp32 decoder), so a slow spell of the machine hits them all.

Usage: python scripts/codec_speed_pair.py OUT.json CODEC [CODEC ...] [--rounds N]
"""

import argparse
import json
from pathlib import Path

from gepard.codec.files import load_codec
from gepard.eval.codec_report import timing_speech
from gepard.eval.speed import codec_speed


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("out", type=Path)
    args.add_argument("codecs", nargs="+")
    args.add_argument("--rounds", type=int, default=2)
    a = args.parse_args()
    speech = timing_speech()
    codecs = {path: load_codec(path, bf16_decoder=False) for path in a.codecs}
    out = {path: [] for path in a.codecs}
    for r in range(a.rounds):
        for path, codec in codecs.items():
            out[path].append(codec_speed(codec, speech, threads=1))
            print(r, path, {k: round(v, 2) for k, v in out[path][-1].items()}, flush=True)
    a.out.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
