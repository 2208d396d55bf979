"""Resynthesis of the held-out flite speech by several codecs in one run (paired, same machine).

Each codec re-synthesizes the `teacher_flite` set (the row "flite voices only" of `gepard eval codec`) through
`evaluate_set`, the function behind that report's rows: Whisper tiny.en WER, resemblyzer cosine, DNSMOS. With
--short, also flite's own clips of the shared short-register list (each item in the flite voice `gepard eval lm
--voices` gives it, as scripts/short_register_floor.py makes them): the share that fails (utterance WER > 50 %).
With --unrounded, each codec a second time with its decoder hearing the encoder's values before FSQ rounds them:
what the rounding costs (no code can carry those values). With --sphinx, also PocketSphinx's WER of the
originals and each codec's resynthesis: a second ear that no codec trains against (codec/whisper_ear.py trains
against Whisper's own encoder).

Usage: python scripts/flite_pair.py OUT.json CODEC_DIR [CODEC_DIR ...] [--short] [--unrounded] [--sphinx]
       (needs the shared corpus)
"""

import argparse
import json

import numpy as np
from tqdm import tqdm

from gepard.audio import load_audio
from gepard.codec.files import load_codec
from gepard.data.manifests import shared_split
from gepard.eval.asr import get_sphinx, get_transcriber, utterance_wer, wer
from gepard.eval.codec_report import evaluate_set, evaluation_set, resynthesize
from gepard.eval.lm_report import FAIL_WER, assigned_voice
from gepard.lm.frontend import segment_chars
from short_register_floor import FLITE_VOICES, flite_clip


def short_failing(codec, items, clips: list[np.ndarray], rounded: bool) -> float:
    """Share (%) of the short-register clips whose resynthesis Whisper gets more than FAIL_WER wrong."""
    asr = get_transcriber(2)
    failed = [utterance_wer(u.text, asr.transcribe(resynthesize(codec, x, rounded))) > FAIL_WER
              for u, x in zip(items, tqdm(clips, desc="short replies"))]
    return 100 * float(np.mean(failed))


def sphinx_wers(codec, utterances) -> dict:
    """PocketSphinx's WER (%) of the originals and of their resynthesis, with its transcripts."""
    sphinx, refs, rows = get_sphinx(), [u.reference_text for u in utterances], []
    for u in tqdm(utterances, desc="sphinx"):
        original = load_audio(u.audio)
        rows.append({"id": u.id, "original": sphinx.transcribe(original),
                     "resynth": sphinx.transcribe(resynthesize(codec, original))})
    return {"wer_original": 100 * wer(refs, [r["original"] for r in rows]),
            "wer_resynth": 100 * wer(refs, [r["resynth"] for r in rows]), "rows": rows}


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("out")
    args.add_argument("codecs", nargs="+")
    args.add_argument("--short", action="store_true", help="also the short-register list in flite's voices")
    args.add_argument("--unrounded", action="store_true", help="also each codec without FSQ's rounding")
    args.add_argument("--sphinx", action="store_true", help="also PocketSphinx's WER, a second ear")
    a = args.parse_args()
    items = shared_split("short_register") if a.short else []
    clips = [flite_clip(assigned_voice(u, FLITE_VOICES.split(",")), u.text, segment_chars("track"))
             for u in tqdm(items, desc="flite")]
    out = {}
    for path in a.codecs:
        codec = load_codec(path)
        for rounded in [True, False][: 1 + a.unrounded]:
            result = evaluate_set(codec, evaluation_set("teacher_flite"), threads=2, rounded=rounded)
            if a.short:
                result["short_failing"] = short_failing(codec, items, clips, rounded)
            if a.sphinx and rounded:
                result["sphinx"] = sphinx_wers(codec, evaluation_set("teacher_flite"))
            out[path if rounded else f"{path} (unrounded)"] = result
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    for name, r in out.items():
        print(f"{name}: WER original {r['wer_original']:.2f} %, resynthesis {r['wer_resynth']:.2f} %, "
              f"cosine {r['cosine_mean']:.3f}, DNSMOS {r['mos_resynth']:.2f}"
              + (f", short replies failing {r['short_failing']:.1f} %" if a.short else "")
              + (f"; PocketSphinx WER original {r['sphinx']['wer_original']:.2f} %, resynthesis "
                 f"{r['sphinx']['wer_resynth']:.2f} %" if "sphinx" in r else ""))


if __name__ == "__main__":
    main()
