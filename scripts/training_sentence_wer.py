"""Does the LM speak its own *training* sentences? A memorization check, free-running like `gepard eval lm`.

Teacher-forced, the first release scores NLL 5.0 on its training utterances against 8.2 on held-out ones
(docs/results/alignment.md). If it also spoke its training sentences intelligibly, the fix would be
generalization (more text); if it babbles even there, generation does not follow the text at all.

Usage: python scripts/training_sentence_wer.py OUT.md MODEL [MODEL ...] [--n 10] [--cfg 1.0] [--codec DIR]
(needs the shared corpus). The N sentences are an even spread of the corpus's teacher training sentences
of 8+ words; each voice reference is another training utterance of the same voice.
"""

import argparse
import datetime
import shlex
import sys
from pathlib import Path

import torch

from gepard.api import TTS
from gepard.audio import load_audio
from gepard.data.manifests import shared_split
from gepard.engine.base import SamplingParams
from gepard.eval.asr import get_transcriber, wer
from gepard.eval.lm_report import pick_reference, references_by_speaker, synthesize_all
from gepard.eval.machine import describe_machine
from gepard.lm.voices import prefix_from_audio


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("out", type=Path)
    args.add_argument("models", nargs="+")
    args.add_argument("--n", type=int, default=10)
    args.add_argument("--cfg", type=float, default=1.0, help="two-pass text CFG scale on every frame")
    args.add_argument("--codec", default=None, help="the codec the models were trained on (default: shipped)")
    a = args.parse_args()
    torch.set_num_threads(2)
    training = [u for u in shared_split("codec_train") if u.kind == "teacher"]
    long = [u for u in training if len(u.text.split()) >= 8]
    sentences = long[:: max(1, len(long) // a.n)][: a.n]
    by = references_by_speaker(training)
    asr = get_transcriber(2)
    sampling = SamplingParams(seed=0, cfg_scale=a.cfg, cfg_frames=10**6)
    lines = ["# Training sentences, free-running", "",
             f"Command: `python {shlex.join(sys.argv)}`", "",
             (f"Machine: {describe_machine()}. Date: {datetime.date.today().isoformat()}. {len(sentences)} teacher "
             f"training sentences, voice reference another training utterance of the same voice; sampling: "
             f"temperature {sampling.temperature}, top-k {sampling.top_k}, top-p {sampling.top_p}, seed 0, "
             f"text CFG scale {a.cfg}."), ""]
    for model in a.models:
        with TTS.load(model, a.codec, engine="torch") as tts:
            jobs = []
            for u in sentences:
                ref = pick_reference(u, by)
                prefix = prefix_from_audio(tts.model, tts.codec, load_audio(ref.audio), ref.id)[None]
                jobs.append((u.text, prefix, None))
            outputs = synthesize_all(tts, jobs, model, sampling)
        heard = [asr.transcribe(audio) for audio, _ in outputs]
        lines += [f"## {model}: WER {100 * wer([u.text for u in sentences], heard):.1f} %", "",
                  "| text | heard (Whisper tiny.en) |", "|---|---|",
                  *[f"| {u.text} | {h} |" for u, h in zip(sentences, heard)], ""]
    a.out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
