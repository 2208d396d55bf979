"""Which codec decoder makes the speech LM clearer? The same codes through each decoder, paired.

Usage: python scripts/decoder_wer.py OUT.md CODEC [CODEC ...] [--model DIR] [--voices V1,V2] [--seeds N]

The codecs must share the encoder the LM learned (same fingerprint: a decoder-only fine-tune, `gepard train
codec --freeze-encoder`), so one set of codes means the same to all of them. On the teacher test sentences
of `--voices`, the LM's codes (N seeds) and the original clips' codes are decoded by every codec and
transcribed by Whisper tiny.en: a paired comparison, where only the decoder differs.
"""

import argparse
import datetime
import shlex
import sys
from pathlib import Path

import torch

from gepard.api import TTS
from gepard.audio import load_audio
from gepard.codec.files import decode_codes, load_codec
from gepard.data.manifests import shared_split
from gepard.engine.base import SamplingParams
from gepard.eval.asr import get_transcriber, utterance_wer, wer
from gepard.eval.lm_report import FAIL_WER, VoicePicker, generate_all
from gepard.eval.machine import describe_machine

FLITE_VOICES = "flite_awb,flite_kal16,flite_rms,flite_slt"


def scored(refs: list[str], hypotheses: list[str]) -> str:
    """Corpus WER (%) and, in brackets, how many utterances Whisper got more than FAIL_WER wrong: a count that one
    looping transcript (insertions past 100 %) cannot move by more than one."""
    failed = sum(utterance_wer(r, h) > FAIL_WER for r, h in zip(refs, hypotheses))
    return f"{100 * wer(refs, hypotheses):.1f} ({failed})"


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("out", type=Path)
    args.add_argument("codecs", nargs="+")
    args.add_argument("--model", default=None)
    args.add_argument("--voices", default=FLITE_VOICES)
    args.add_argument("--seeds", type=int, default=2)
    a = args.parse_args()
    torch.set_num_threads(2)
    voices = a.voices.split(",")
    test = [u for u in shared_split("teacher_test") if u.speaker in voices]
    codecs = [load_codec(c) for c in a.codecs]
    if len({c.fingerprint() for c in codecs}) != 1:
        raise SystemExit("the codecs encode differently (fingerprints differ): codes would not mean the same")
    with TTS.load(a.model, a.codecs[0]) as tts:
        voice_of = VoicePicker(tts, voices)
        lm_codes = [[codes for codes, _ in generate_all(tts, [(u.text, voice_of(u)[0], None) for u in test],
                                                          f"LM, seed {seed}", SamplingParams(seed=seed))]
                    for seed in range(a.seeds)]
    originals = [load_audio(u.audio) for u in test]
    clip_codes = [codecs[0].encode(torch.from_numpy(x)[None])[0].tolist() for x in originals]
    asr = get_transcriber(2)
    refs = [u.text for u in test]
    rows = [("original clips", 100 * wer(refs, [asr.transcribe(x) for x in originals]), "—")]
    for path, codec in zip(a.codecs, codecs):
        resynth = 100 * wer(refs, [asr.transcribe(decode_codes(codec, c)) for c in clip_codes])
        spoken = [scored(refs, [asr.transcribe(decode_codes(codec, c)) for c in seed]) for seed in lm_codes]
        rows.append((f"`{path}`", resynth, " / ".join(spoken)))
    lines = ["# The same codes through each decoder", "",
             f"Command: `python {' '.join(shlex.quote(x) for x in sys.argv)}`", "",
             f"Machine: {describe_machine()}. Date: {datetime.date.today().isoformat()}.", "",
             (f"{len(test)} held-out sentences of the teacher test set ({', '.join(voices)}); WER by Whisper tiny.en. "
             f"LM: {a.model or 'models/lm'}, seeds 0–{a.seeds - 1} (default sampling), its codes generated once and "
             "decoded by every codec; resynthesis: the original clips encoded once and decoded by every codec."), "",
             "| decoder | WER % resynthesis | WER % LM speech, per seed (utterances over 50 % WER) |",
             "|---|---|---|"]
    lines += [f"| {name} | {resynth:.1f} | {spoken} |" for name, resynth, spoken in rows]
    a.out.write_text("\n".join(lines) + "\n")
    print(a.out.read_text())


if __name__ == "__main__":
    main()
