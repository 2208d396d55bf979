"""Does each frame's prediction carry the speech when the LM is given the true audio before it?

Teacher forcing: the LM sees the text, the voice prefix and every true frame before frame j, and its argmax
(or a temperature-0.8 sample) stands in for frame j. Decoded by the codec and heard by Whisper, those frames
are intelligible only if the LM predicts what is said, not just that speech goes on. Also: how often each
FSQ digit of the argmax equals the true one, against simply repeating the previous true frame.

Usage: python scripts/teacher_forced_wer.py OUT.md --shards DIR --codec DIR MODEL [MODEL ...] [--n 12]
Each MODEL must have been trained on codes of that codec. The N utterances are an even spread of the
shards' utterances of 60-250 frames; each voice reference is the first 100 frames of another utterance of
the same speaker.
"""

import argparse
import datetime
import shlex
import sys
from collections import defaultdict
from pathlib import Path

import torch

from gepard.codec.model import Codec
from gepard.data.prepare import read_shards
from gepard.eval.asr import get_transcriber, wer
from gepard.eval.machine import describe_machine
from gepard.lm.speech_lm import SpeechLM
from gepard.lm.teacher_forced import audio_logits


def digit_agreement(codec: Codec, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(J,) codes twice -> (D,) share of frames where each FSQ digit agrees."""
    return (codec.fsq.index_to_digits(a) == codec.fsq.index_to_digits(b)).float().mean(0)


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("out", type=Path)
    args.add_argument("models", nargs="+")
    args.add_argument("--shards", required=True)
    args.add_argument("--codec", required=True)
    args.add_argument("--n", type=int, default=12)
    a = args.parse_args()
    torch.set_num_threads(2)
    rows = [r for r in read_shards(a.shards) if 60 <= len(r[3]) <= 250 and r[1].strip()]
    by_speaker = defaultdict(list)
    for r in rows:
        by_speaker[r[2]].append(r)
    picked = rows[:: max(1, len(rows) // a.n)][: a.n]
    codec, asr = Codec.from_pretrained(a.codec), get_transcriber(2)
    texts = [text for _, text, _, _ in picked]
    true_codes = [torch.from_numpy(codes) for *_, codes in picked]
    heard_true = [asr.transcribe(codec.decode(c[None])[0].numpy()) for c in true_codes]
    copy = torch.stack([digit_agreement(codec, c[1:], c[:-1]) for c in true_codes]).mean(0)
    lines = ["# Teacher-forced frames", "", f"Command: `python {shlex.join(sys.argv)}`", "",
             (f"Machine: {describe_machine()}. Date: {datetime.date.today().isoformat()}. {len(picked)} utterances "
              f"of `{a.shards}`, codec `{a.codec}`; WER by Whisper tiny.en against the transcript."), "",
             "| frames decoded | WER % | FSQ digits equal to the true frame's |", "|---|---|---|",
             f"| true codes (the codec's ceiling) | {100 * wer(texts, heard_true):.1f} | 1.00 |",
             f"| previous true frame repeated | — | {' '.join(f'{x:.2f}' for x in copy)} |"]
    gen = torch.Generator().manual_seed(0)
    examples = []
    for path in a.models:
        model = SpeechLM.from_pretrained(path)
        heard, agree = defaultdict(list), []
        for (uid, text, speaker, _), codes in zip(picked, true_codes):
            ref = next((r for r in by_speaker[speaker] if r[0] != uid), (None, None, None, codes.numpy()))[3]
            logits = audio_logits(model, text, codes, torch.from_numpy(ref[:100]))
            argmax = logits.argmax(-1)
            sample = torch.multinomial((logits / 0.8).softmax(-1), 1, generator=gen)[:, 0]
            agree.append(digit_agreement(codec, argmax, codes))
            for name, c in (("argmax", argmax), ("sample", sample)):
                heard[name].append(asr.transcribe(codec.decode(c[None])[0].numpy()))
        digits = " ".join(f"{x:.2f}" for x in torch.stack(agree).mean(0))
        lines += [f"| `{path}` argmax | {100 * wer(texts, heard['argmax']):.1f} | {digits} |",
                  f"| `{path}` sample (temperature 0.8) | {100 * wer(texts, heard['sample']):.1f} | — |"]
        examples += [f"- `{path}` argmax: {t!r} → {h!r}" for t, h in list(zip(texts, heard["argmax"]))[:3]]
    lines += ["", "Examples (transcript → heard):", "",
              *[f"- true codes: {t!r} → {h!r}" for t, h in list(zip(texts, heard_true))[:3]], *examples, ""]
    a.out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
