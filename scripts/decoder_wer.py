"""Which codec decoder makes the speech LM clearer? The same codes through each decoder, paired.

Usage: python scripts/decoder_wer.py OUT.md CODEC [CODEC ...] [--model DIR] [--voices V1,V2] [--seeds N] [--short]
       [--limit N] [--asr whisper|sphinx] [--render mean|codes]

The codecs must share the encoder the LM learned (same fingerprint: a decoder-only fine-tune, `gepard train
codec --freeze-encoder`), so one set of codes means the same to all of them. On the teacher test sentences
of `--voices`, the LM's codes (N seeds) and the original clips' codes are decoded by every codec and
transcribed by Whisper tiny.en (--asr sphinx: by PocketSphinx): a paired comparison, where only the decoder
differs. Each decoder renders the LM's frames as `--render` says (default: as `gepard say` does). With --short, the shared short-register list too, each item in the flite voice `gepard eval lm
--voices` gives it (flite's own clip as in scripts/short_register_floor.py): the share of items that fail (no stop
before the frame guard, or utterance WER over 50 %, as in `gepard eval lm`).
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
from gepard.codec.render import DEFAULT_RENDERING, RENDERINGS, render_frames
from gepard.data.manifests import shared_split
from gepard.engine.base import SamplingParams
from gepard.eval.asr import get_sphinx, get_transcriber, utterance_wer, wer
from gepard.eval.lm_report import FAIL_WER, VoicePicker, generate_frames
from gepard.eval.machine import describe_machine
from gepard.lm.frontend import segment_chars
from short_register_floor import flite_clip

FLITE_VOICES = "flite_awb,flite_kal16,flite_rms,flite_slt"
RECOGNIZERS = {"whisper": lambda: get_transcriber(2), "sphinx": get_sphinx}
ASR_NAMES = {"whisper": "Whisper tiny.en", "sphinx": "PocketSphinx"}


def scored(refs: list[str], hypotheses: list[str]) -> str:
    """Corpus WER (%) and, in brackets, how many utterances the recognizer got more than FAIL_WER wrong: a count
    that one looping transcript (insertions past 100 %) cannot move by more than one."""
    failed = sum(utterance_wer(r, h) > FAIL_WER for r, h in zip(refs, hypotheses))
    return f"{100 * wer(refs, hypotheses):.1f} ({failed})"


def failing(refs: list[str], hypotheses: list[str], stopped: list[bool]) -> float:
    """Share (%) of items that did not stop before the frame guard or that the recognizer got more than FAIL_WER
    wrong."""
    failed = [(not s) or utterance_wer(r, h) > FAIL_WER for r, h, s in zip(refs, hypotheses, stopped)]
    return 100 * sum(failed) / len(failed)


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("out", type=Path)
    args.add_argument("codecs", nargs="+")
    args.add_argument("--model", default=None)
    args.add_argument("--voices", default=FLITE_VOICES)
    args.add_argument("--seeds", type=int, default=2)
    args.add_argument("--short", action="store_true", help="also the shared short-register list")
    args.add_argument("--limit", type=int, default=0, help="only the first N items of each list (a quick check)")
    args.add_argument("--asr", choices=list(RECOGNIZERS), default="whisper",
                      help="who listens: Whisper tiny.en, or PocketSphinx (a second ear that shares nothing with it)")
    args.add_argument("--render", choices=list(RENDERINGS), default=DEFAULT_RENDERING,
                      help="what each decoder is given for the LM's frames")
    a = args.parse_args()
    torch.set_num_threads(2)
    voices = a.voices.split(",")
    test = [u for u in shared_split("teacher_test") if u.speaker in voices][: a.limit or None]
    short = shared_split("short_register")[: a.limit or None] if a.short else []
    codecs = [load_codec(c) for c in a.codecs]
    if len({c.fingerprint() for c in codecs}) != 1:
        raise SystemExit("the codecs encode differently (fingerprints differ): codes would not mean the same")
    with TTS.load(a.model, a.codecs[0]) as tts:
        voice_of = VoicePicker(tts, voices)
        lm_frames = [[frames for frames, _ in generate_frames(tts, [(u.text, voice_of(u)[0], None) for u in test],
                                                          f"LM, seed {seed}", SamplingParams(seed=seed))]
                    for seed in range(a.seeds)]
        short_lm = [generate_frames(tts, [(u.text, voice_of(u)[0], None) for u in short], f"short replies, seed {seed}",
                                 SamplingParams(seed=seed)) for seed in range(a.seeds) if short]
        max_chars = segment_chars(tts.model.text_front_end)
        short_clips = [flite_clip(voice_of.speaker(u), u.text, max_chars) for u in short]
    originals = [load_audio(u.audio) for u in test]
    clip_codes = [codecs[0].encode(torch.from_numpy(x)[None])[0].tolist() for x in originals]
    asr = RECOGNIZERS[a.asr]()
    refs = [u.text for u in test]
    short_refs = [u.reference_text for u in short]
    short_clip_codes = [codecs[0].encode(torch.from_numpy(x)[None])[0].tolist() for x in short_clips]
    always = [True] * len(short)

    def short_cells(heard, spoken_heard) -> str:
        """' | resynthesis % | LM % per seed' of the short list through one decoder (`heard`: clip codes -> text,
        `spoken_heard`: LM frames -> text)."""
        if not short:
            return ""
        spoken = [failing(short_refs, [spoken_heard(f) for f, _ in seed], [s for _, s in seed]) for seed in short_lm]
        return (f" | {failing(short_refs, [heard(c) for c in short_clip_codes], always):.1f} | "
                + " / ".join(f"{x:.1f}" for x in spoken))

    flite_short = ""
    if short:
        flite_short = f" | {failing(short_refs, [asr.transcribe(x) for x in short_clips], always):.1f} | —"
    rows = [("original clips", 100 * wer(refs, [asr.transcribe(x) for x in originals]), "—" + flite_short)]
    for path, codec in zip(a.codecs, codecs):
        def heard(codes: list[int]) -> str:
            return asr.transcribe(decode_codes(codec, codes))

        def spoken_heard(frames) -> str:
            return asr.transcribe(render_frames(codec, frames, a.render))
        resynth = 100 * wer(refs, [heard(c) for c in clip_codes])
        spoken = " / ".join(scored(refs, [spoken_heard(f) for f in seed]) for seed in lm_frames)
        rows.append((f"`{path}`", resynth, spoken + short_cells(heard, spoken_heard)))
    lines = ["# The same codes through each decoder", "",
             f"Command: `python {' '.join(shlex.quote(x) for x in sys.argv)}`", "",
             f"Machine: {describe_machine()}. Date: {datetime.date.today().isoformat()}.", "",
             (f"{len(test)} held-out sentences of the teacher test set ({', '.join(voices)}); "
              f"WER by {ASR_NAMES[a.asr]}. "
             f"LM: {a.model or 'models/lm'}, seeds 0–{a.seeds - 1} (default sampling), its frames generated once and "
             f"rendered by every codec from {RENDERINGS[a.render]}; resynthesis: the original clips encoded once and decoded by every codec."
              + (f" Short replies: the {len(short)} items of the shared short-register list, each in the flite voice "
                "`gepard eval lm --voices` gives it (resynthesis: flite's own clip; failing: no stop before the frame "
                "guard, or over 50 % WER)." if short else "")), "",
             "| decoder | WER % resynthesis | WER % LM speech, per seed (utterances over 50 % WER) |"
             + (" short replies failing %, resynthesis | short replies failing %, LM per seed |" if short else ""),
             "|---|---|---|" + ("---|---|" if short else "")]
    lines += [f"| {name} | {resynth:.1f} | {spoken} |" for name, resynth, spoken in rows]
    a.out.write_text("\n".join(lines) + "\n")
    print(a.out.read_text())


if __name__ == "__main__":
    main()
