"""The phone-track front end: text -> one phone per 25 Hz codec frame, from flite's own timing.

flite (a Debian package) normalizes the text, looks words up in its lexicon (letter-to-sound rules for the
rest) and predicts every phone's duration; `flite -psdur` prints them. The track names the phone sounding at
the centre of each frame of the finished clip (silence trimmed like the corpus), then "_" up to
TRACK_FRAMES entries. In the LM's layout, audio frame j then always sits the same distance after track
entry j, so reading the text is a fixed-offset lookup instead of an alignment the LM must discover.
Training data comes from the same function (scripts/flite_track.py), so inference replays its timing.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf

from gepard.data.synthesize import SAMPLE_RATE, finish_bounds

TRACK_FRAMES = 200  # 8 s at 25 Hz: the longest utterance one track holds
TRACK_VOICE = "slt"  # the flite voice whose timing the front end uses at inference
FRAME_S = 0.04
PAD = "_"
# flite's US English phones as `flite -psdur` names them ("pau": a pause)
PHONES = ("pau", "aa", "ae", "ah", "ao", "aw", "ax", "ay", "b", "ch", "d", "dh", "eh", "er", "ey", "f", "g", "hh", "ih",
          "iy", "jh", "k", "l", "m", "n", "ng", "ow", "oy", "p", "r", "s", "sh", "t", "th", "uh", "uw", "v", "w", "y",
          "z", "zh")
MAX_TRACK_CHARS = 90  # text per utterance: flite slt says ~17 characters a second (5th percentile 14)


def flite_with_phones(voice: str, text: str) -> tuple[np.ndarray, list[tuple[str, float]]]:
    """(T,) float32 at 16 kHz and [(phone, end time in s)] from `flite -psdur`."""
    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "out.wav"
        try:
            out = subprocess.run(["flite", "-voice", voice, "-psdur", "-t", text, "-o", str(wav)], check=True,
                                 capture_output=True, text=True).stdout
        except FileNotFoundError:
            raise ValueError("the phone-track front end needs flite: apt-get install flite") from None
        audio, rate = sf.read(str(wav), dtype="float32")
    if rate != SAMPLE_RATE:
        raise ValueError(f"flite voice {voice} speaks at {rate} Hz, not {SAMPLE_RATE}")
    return audio, [(p.rsplit(":", 1)[0], float(p.rsplit(":", 1)[1])) for p in out.split()]


def frame_phones(phones: list[tuple[str, float]], start_s: float, n_frames: int) -> list[str]:
    """The phone sounding at the centre of each frame of a clip that starts `start_s` into flite's output."""
    ends = np.array([end for _, end in phones])
    centres = start_s + (np.arange(n_frames) + 0.5) * FRAME_S
    return [phones[i][0] for i in np.minimum(np.searchsorted(ends, centres), len(phones) - 1)]


def aligned_flite(voice: str, text: str) -> tuple[np.ndarray, list[str]]:
    """`text` in flite `voice`, finished like the corpus: ((T,) float32 at 16 kHz, one phone per frame)."""
    raw, phones = flite_with_phones(voice, text)
    start, end, gain = finish_bounds(raw)
    audio = (raw[start:end] * gain).astype(np.float32)
    return audio, frame_phones(phones, start / SAMPLE_RATE, -(-len(audio) // int(SAMPLE_RATE * FRAME_S)))


def padded_track(frames: list[str]) -> str:
    """Frame phones -> the track string the tokenizer reads (one word per frame, padded to TRACK_FRAMES)."""
    if len(frames) > TRACK_FRAMES:
        raise ValueError(f"the text takes {len(frames) * FRAME_S:.1f} s to say; one utterance holds at most "
                         f"{TRACK_FRAMES * FRAME_S:.0f} s (split it into sentences)")
    return " ".join(frames + [PAD] * (TRACK_FRAMES - len(frames)))


def track(text: str) -> str:
    """Text -> its padded phone track in TRACK_VOICE's timing."""
    return padded_track(aligned_flite(TRACK_VOICE, text)[1])


def track_seconds(text: str) -> float:
    """How long TRACK_VOICE takes to say `text`, in whole frames."""
    return len(aligned_flite(TRACK_VOICE, text)[1]) * FRAME_S
