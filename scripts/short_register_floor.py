"""How much of the short-register failure is the LM's? Flite's own clip, its codec resynthesis and the LM's
speech for every item of the short-register list, transcribed in one process.

Usage: python scripts/short_register_floor.py OUT.md [--model DIR] [--codec DIR] [--seeds N]

Each item is spoken in the flite voice `gepard eval lm --voices` gives it (chosen by its id): flite says the
text as the phone-track front end segments it (the clip the LM was trained to imitate), the codec re-synthesizes
that clip, and the LM speaks it from another clip of that voice (N seeds). Failure as in `gepard eval lm`:
no stop before the guard, or utterance WER > 50 %. The resynthesis row is the codec's share (a reference,
not a bound: the LM's codes differ from the encoder's and now and then come out clearer).
"""

import argparse
import datetime
import shlex
import sys
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from gepard.api import TTS
from gepard.codec.files import decode_codes
from gepard.data.manifests import shared_split
from gepard.engine.base import SamplingParams
from gepard.eval.asr import get_transcriber, utterance_wer
from gepard.eval.lm_report import FAIL_WER, VoicePicker, generate_all
from gepard.eval.machine import describe_machine
from gepard.lm.frontend import segment_chars
from gepard.lm.track import aligned_flite
from gepard.stream.text import segment_stream

FLITE_VOICES = "flite_awb,flite_kal16,flite_rms,flite_slt"


def flite_clip(voice: str, text: str, max_chars: int) -> np.ndarray:
    """(T,) float32: `text` in flite `voice` (corpus name, e.g. flite_slt), segment by segment as the LM says it."""
    return np.concatenate([aligned_flite(voice.removeprefix("flite_"), s)[0]
                           for s in segment_stream([text], max_chars)])


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("out", type=Path)
    args.add_argument("--model", default=None)
    args.add_argument("--codec", default=None)
    args.add_argument("--seeds", type=int, default=2)
    a = args.parse_args()
    torch.set_num_threads(2)
    voices = FLITE_VOICES.split(",")
    items = shared_split("short_register")
    asr = get_transcriber(2)
    with TTS.load(a.model, a.codec) as tts:
        voice_of = VoicePicker(tts, voices)
        spoken = [generate_all(tts, [(u.text, voice_of(u)[0], None) for u in items], f"LM, seed {seed}",
                               SamplingParams(seed=seed)) for seed in range(a.seeds)]
        max_chars = segment_chars(tts.model.text_front_end)
        originals = [flite_clip(voice_of.speaker(u), u.text, max_chars) for u in tqdm(items, desc="flite")]
        with torch.inference_mode():
            resynth = [tts.codec.decode(tts.codec.encode(torch.from_numpy(x)[None]))[0].numpy() for x in originals]
        codec = tts.codec
    wers = lambda clips: np.array([utterance_wer(u.text, asr.transcribe(x))  # noqa: E731
                                   for u, x in tqdm(list(zip(items, clips)), desc="ASR")])
    rows = [("flite's own clip", wers(originals), None), ("its codec resynthesis", wers(resynth), None)]
    for seed, outputs in enumerate(spoken):
        stopped = np.array([ok for _, ok in outputs])
        rows.append((f"speech LM, seed {seed}", wers([decode_codes(codec, c) for c, _ in outputs]), stopped))
    failed = [(w > FAIL_WER) | (~s if s is not None else False) for _, w, s in rows]
    lines = ["# Short register: flite, its codec, the speech LM", "",
             f"Command: `python {' '.join(shlex.quote(x) for x in sys.argv)}`", "",
             f"Machine: {describe_machine()}. Date: {datetime.date.today().isoformat()}.", "",
             f"The {len(items)} items of the shared short-register list, each in the flite voice `gepard eval lm "
             f"--voices {FLITE_VOICES}` gives it; Whisper tiny.en (greedy), one process. Failure: utterance WER > "
             f"{FAIL_WER:.0%} (and, for the LM, no stop before the guard). LM: {a.model or 'models/lm'}, default "
             "sampling.", "",
             "| speech | failure rate % | mean utterance WER % |", "|---|---|---|"]
    lines += [f"| {name} | {100 * f.mean():.1f} | {100 * w.mean():.1f} |" for (name, w, _), f in zip(rows, failed)]
    if len(spoken) > 1:
        lm_failed = np.stack(failed[2:])
        lines.append(f"| speech LM, best of {len(spoken)} seeds | {100 * lm_failed.all(0).mean():.1f} | — |")
    a.out.write_text("\n".join(lines) + "\n")
    print(a.out.read_text())


if __name__ == "__main__":
    main()
