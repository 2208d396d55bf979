"""Resynthesis of the 69 held-out flite sentences by several codecs in one run (paired, same machine).

Each codec re-synthesizes the `teacher_flite` set (the row "flite voices only" of `gepard eval codec`) through
`evaluate_set`, the function behind that report's rows: Whisper tiny.en WER, resemblyzer cosine, DNSMOS.

Usage: python scripts/flite_pair.py OUT.json CODEC_DIR [CODEC_DIR ...]   (needs the shared corpus)
"""

import json
import sys

from gepard.codec.files import load_codec
from gepard.eval.codec_report import evaluate_set, evaluation_set

out = {path: evaluate_set(load_codec(path), evaluation_set("teacher_flite"), threads=2) for path in sys.argv[2:]}
with open(sys.argv[1], "w") as f:
    json.dump(out, f, indent=1)
for path, result in out.items():
    print(f"{path}: WER original {result['wer_original']:.2f} %, resynthesis {result['wer_resynth']:.2f} %, "
          f"cosine {result['cosine_mean']:.3f}, DNSMOS {result['mos_resynth']:.2f}")
