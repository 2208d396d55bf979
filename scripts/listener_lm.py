"""Does the speech LM say the phones it was asked for? A phone listener's verdict, frame by frame.

Usage: python scripts/listener_lm.py OUT.md [--model DIR] [--codec DIR] [--listener DIR]
       [--voices V1,V2] [--seeds N] [--reference MANIFEST]   (--seeds 0: the reference clips only)

The phone-track front end asks for one flite phone per 25 Hz frame (lm/track.py) and the LM's audio frame j answers
track entry j. A phone listener (codec/listener.py, trained on original flite speech) hears the decoded speech of
every text segment (cut until no piece splits further); the share of frames where it hears the requested phone
(exactly, or within one frame either side) is a dense intelligibility score over thousands of frames. Beside it,
per seed, Whisper tiny.en's WER on the same speech, and across utterances the rank correlation of the two.

With --reference (a phone-track manifest such as data/ft_test), the listener also scores those clips and their
codec resynthesis: what the metric gives speech that is right, and the codec's own ceiling.
"""

import argparse
import datetime
import shlex
import sys
from pathlib import Path

import numpy as np
import torch
from scipy.stats import spearmanr

from gepard.api import TTS
from gepard.audio import load_audio
from gepard.codec.files import decode_codes, load_codec
from gepard.codec.listener import PhoneListener
from gepard.codec.phones import PHONE_IDS, phone_labels
from gepard.data.manifests import read_manifest, shared_split
from gepard.engine.base import SamplingParams
from gepard.eval.asr import get_transcriber, utterance_wer, wer
from gepard.eval.lm_report import VoicePicker, generate_all
from gepard.eval.machine import describe_machine
from gepard.lm.frontend import segment_chars
from gepard.lm.track import TRACK_VOICE, aligned_flite
from gepard.stream.text import segment_stream

FLITE_VOICES = "flite_awb,flite_kal16,flite_rms,flite_slt"


def heard(ear: PhoneListener, audio: np.ndarray, wanted: np.ndarray) -> tuple[int, int, int]:
    """(T,) audio, (J,) wanted phone ids -> (frames compared, heard exactly, heard within ±1 frame)."""
    beliefs = ear.log_beliefs(audio, len(wanted)).argmax(-1).numpy()
    n = min(len(beliefs), len(wanted))
    beliefs, wanted = beliefs[:n], wanted[:n]
    near = beliefs == wanted
    near[1:] |= beliefs[1:] == wanted[:-1]
    near[:-1] |= beliefs[:-1] == wanted[1:]
    return n, int((beliefs == wanted).sum()), int(near.sum())


def atoms(text: str, max_chars: int) -> list[str]:
    """`text` cut as the engine cuts a stream, then each piece again until none splits further: one track each
    (generate_all cuts every job once more, and a later segment of a stream may split when it comes first)."""
    pieces = list(segment_stream([text], max_chars))
    return pieces if pieces == [text] else [a for p in pieces for a in atoms(p, max_chars)]


def score(counts: list[tuple[int, int, int]]) -> tuple[float, float]:
    n, exact, near = np.sum(counts, axis=0)
    return 100 * exact / n, 100 * near / n


def reference_rows(ear: PhoneListener, codec, manifest: Path) -> list[tuple]:
    """Phones heard in a phone-track manifest's clips and in their resynthesis by `codec`."""
    clips = read_manifest(manifest)
    originals = [load_audio(u.audio) for u in clips]
    wanted = [phone_labels(u.text, -(-len(x) // ear.cfg.frame_samples)) for u, x in zip(clips, originals)]
    resynth = [decode_codes(codec, codec.encode(torch.from_numpy(x)[None])[0].tolist()) for x in originals]
    return [(name, "—", *score([heard(ear, x, w) for x, w in zip(audios, wanted)]))
            for name, audios in ((f"original clips of `{manifest}`", originals), ("their codec resynthesis", resynth))]


def lm_rows(ear: PhoneListener, tts: TTS, test: list, voices: list[str], seeds: int) -> tuple[list[tuple], list]:
    """Per seed: Whisper WER and phones heard in the LM's speech of `test`; and every utterance's
    (share of phones heard, Whisper WER)."""
    voice_of = VoicePicker(tts, voices)
    segments = [atoms(u.text, segment_chars(tts.model.text_front_end)) for u in test]
    jobs = [(s, voice_of(u)[0], None) for u, parts in zip(test, segments) for s in parts]
    asked = [np.array([PHONE_IDS[p] for p in aligned_flite(TRACK_VOICE, text)[1]]) for text, _, _ in jobs]
    asr, refs = get_transcriber(2), [u.text for u in test]
    rows, pooled = [], []
    for seed in range(seeds):
        codes = [c for c, _ in generate_all(tts, jobs, f"LM, seed {seed}", SamplingParams(seed=seed))]
        audios = [decode_codes(tts.codec, c) for c in codes]
        counts = [heard(ear, x, w) for x, w in zip(audios, asked)]
        hypotheses, accuracy, start = [], [], 0
        for parts in segments:  # an utterance: its segments' speech, one after the other
            hypotheses.append(asr.transcribe(np.concatenate(audios[start: start + len(parts)])))
            n, exact, _ = np.sum(counts[start: start + len(parts)], axis=0)
            accuracy.append(exact / n)
            start += len(parts)
        pooled += [(acc, utterance_wer(r, h)) for acc, r, h in zip(accuracy, refs, hypotheses)]
        rows.append((f"LM speech, seed {seed} ({len(jobs)} text segments)", f"{100 * wer(refs, hypotheses):.1f}",
                     *score(counts)))
    return rows, pooled


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("out", type=Path)
    args.add_argument("--model", default=None)
    args.add_argument("--codec", default=None)
    args.add_argument("--listener", default="runs/listener")
    args.add_argument("--voices", default=FLITE_VOICES)
    args.add_argument("--seeds", type=int, default=3)
    args.add_argument("--reference", type=Path, default=None)
    a = args.parse_args()
    torch.set_num_threads(2)
    ear = PhoneListener.load(a.listener)
    voices = a.voices.split(",")
    test = [u for u in shared_split("teacher_test") if u.speaker in voices]
    rows = reference_rows(ear, load_codec(a.codec), a.reference) if a.reference else []
    pooled = []
    if a.seeds:
        with TTS.load(a.model, a.codec) as tts:
            spoken, pooled = lm_rows(ear, tts, test, voices, a.seeds)
        rows += spoken
    lines = ["# What the phone listener hears the speech LM say", "",
             f"Command: `python {' '.join(shlex.quote(x) for x in sys.argv)}`", "",
             f"Machine: {describe_machine()}. Date: {datetime.date.today().isoformat()}.", "",
             (f"LM speech: {len(test)} held-out sentences of the teacher test set ({', '.join(voices)}); LM: "
              f"{a.model or 'models/lm'}, codec: {a.codec or 'models/codec'}, listener: {a.listener}; default "
              "sampling. Phones heard: the share of frames where the listener's most likely phone is the one the "
              "track asked for (±1: or the one a frame before or after)."), "",
             "| speech | Whisper WER % | phones heard % | phones heard ±1 % |", "|---|---|---|---|"]
    lines += [f"| {name} | {w} | {exact:.1f} | {near:.1f} |" for name, w, exact, near in rows]
    if pooled:
        lines += ["", f"Across the {len(pooled)} generated utterances, Spearman correlation between an utterance's "
                  f"phones heard and its Whisper WER: {spearmanr(*zip(*pooled)).statistic:.2f}."]
    a.out.write_text("\n".join(lines) + "\n")
    print(a.out.read_text())


if __name__ == "__main__":
    main()
