"""The Python API: `tts = TTS.load()`, then `tts.say(text)` or `tts.stream(text or deltas)`."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import torch

from gepard.codec.files import load_codec
from gepard.codec.model import Codec, StreamingDecoder
from gepard.codec.render import DEFAULT_RENDERING, check_rendering, frame_values, render_frames
from gepard.engine.base import DEFAULT_TEMPERATURE, SamplingParams, Top
from gepard.engine.process import EngineProcess
from gepard.lm.frontend import segment_chars
from gepard.lm.generate import text_request
from gepard.lm.speech_lm import SpeechLM
from gepard.lm.voices import resolve_voice
from gepard.paths import lm_dir
from gepard.stream.audio import finish, pcm_chunks
from gepard.stream.codec_batcher import CodecBatcher
from gepard.stream.normalize import normalize_for_speech
from gepard.stream.text import segment_stream


MAX_TEXT_CHARS = 5000  # one call; longer input is refused with a clear error


class TTS:
    """Text -> 16 kHz mono speech; many streams may run at once (one engine, continuous batching)."""

    def __init__(self, model: SpeechLM, codec: Codec, model_dir: Path, slots: int = 16,
                 engine: str | EngineProcess = "torch", rendering: str = DEFAULT_RENDERING):
        """engine: "torch", "vllm", or a torch EngineProcess already started for `model_dir`; rendering: what the
        decoder is given for each frame, "mean" or "codes" (gepard/codec/render.py)."""
        check_codec(model, codec, model_dir)
        self.model, self.codec, self.model_dir = model, codec, model_dir
        self.rendering = check_rendering(rendering)
        if isinstance(engine, EngineProcess):
            self.engine, self.engine_name = engine, "torch"
            engine.wait_ready()
        else:
            self.engine, self.engine_name = start_engine(engine, model, model_dir, slots), engine
        self.codec_batcher = CodecBatcher()  # decodes the audio of all streams together

    def close(self) -> None:
        """Stop the engine (with vLLM, its processes); `with TTS.load(...) as tts:` does it on leaving."""
        self.engine.shutdown()
        self.codec_batcher.close()

    def __enter__(self) -> "TTS":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def sample_rate(self) -> int:
        return self.codec.config.sample_rate

    @classmethod
    def load(cls, model_dir: str | Path | None = None, codec_dir: str | Path | None = None, slots: int = 16,
             engine: str | EngineProcess = "torch", rendering: str = DEFAULT_RENDERING) -> "TTS":
        """The shipped model (or `model_dir`) on the embedded torch engine, or on vLLM with engine="vllm"
        (or on an EngineProcess the caller started early for `model_dir`)."""
        model_dir = lm_dir(model_dir)
        if engine == "torch":  # its process loads the model while this one does
            engine = start_engine(engine, None, model_dir, slots)
        try:
            return cls(SpeechLM.from_pretrained(model_dir), load_codec(codec_dir), model_dir, slots, engine, rendering)
        except BaseException:
            if isinstance(engine, EngineProcess):
                engine.shutdown()
            raise

    def voice(self, voice: str | torch.Tensor | None = None) -> torch.Tensor:
        """A named voice, a reference clip path, a (1, K, H) prefix, or None for the default -> (1, K, H)."""
        if isinstance(voice, torch.Tensor):
            return voice
        return resolve_voice(self.model, self.codec, self.model_dir, voice)

    def stream(self, text: str | Iterable[str], voice: str | torch.Tensor | None = None, seed: int = 0,
               temperature: float = DEFAULT_TEMPERATURE) -> Iterator[np.ndarray]:
        """Text, or an iterator of text deltas, -> (n,) float32 PCM chunks as soon as they are decoded."""
        if isinstance(text, str) and not text.strip():
            raise ValueError("the text is empty")
        prefix = self.voice(voice)
        decoder = self.codec.stream()
        deltas = limited([text] if isinstance(text, str) else text)
        for i, segment in enumerate(segment_stream(deltas, segment_chars(self.model.text_front_end))):
            sampling = SamplingParams(temperature=temperature, seed=seed + i)
            frames = self.engine.submit(text_request(self.model, normalize_for_speech(segment), prefix, sampling))
            try:
                yield from pcm_chunks(functools.partial(self.push, decoder), frames.frames())
            finally:
                frames.close()  # a consumer that stops early cancels the generation
        yield finish(decoder)

    def push(self, decoder: StreamingDecoder, frames: list[tuple[int, Top | None]]) -> np.ndarray:
        """One stream's [(code, top)] -> (m,) samples final now, decoded with the other streams' pushes."""
        return self.codec_batcher.push(decoder, frame_values(self.codec.fsq, frames, self.rendering))

    def render(self, frames: list[tuple[int, Top | None]]) -> np.ndarray:
        """A whole utterance's [(code, top)] -> (T,) float32 audio, offline: what `stream` plays for them."""
        return render_frames(self.codec, frames, self.rendering)

    def say(self, text: str, voice: str | None = None, seed: int = 0,
            temperature: float = DEFAULT_TEMPERATURE) -> np.ndarray:
        """Text -> (T,) float32 audio: exactly the concatenation of `stream`."""
        return np.concatenate(list(self.stream(text, voice, seed, temperature)))


def check_codec(model: SpeechLM, codec: Codec, model_dir: Path) -> None:
    """Raises unless the codec is the one whose codes the speech LM was trained on (when it recorded one)."""
    if model.codec_fingerprint and model.codec_fingerprint != (found := codec.fingerprint()):
        raise ValueError(f"the speech LM in {model_dir} speaks the codes of codec {model.codec_fingerprint}, "
                         f"but the codec given is {found}: pass the codec it was trained with (--codec)")


def start_engine(kind: str, model: SpeechLM | None, model_dir: Path, slots: int):
    """"torch" (the embedded engine, in a process of its own; the default) or "vllm" (needs the vllm extra,
    and `model`); both give the same Streams."""
    if kind == "torch":
        return EngineProcess(model_dir, slots)
    if kind == "vllm":
        try:
            from gepard.engine.vllm_engine import VLLMEngine

            return VLLMEngine(model, model_dir, max_streams=slots)
        except ModuleNotFoundError as e:
            raise RuntimeError("the vLLM engine needs vLLM: pip install 'gepard[vllm]' (see README)") from e
    raise ValueError(f"unknown engine {kind!r}: use torch or vllm")


def limited(deltas: Iterable[str]) -> Iterator[str]:
    """Pass deltas through, refusing more than MAX_TEXT_CHARS in all."""
    total = 0
    for delta in deltas:
        total += len(delta)
        if total > MAX_TEXT_CHARS:
            raise ValueError(f"the text is longer than the limit of {MAX_TEXT_CHARS} characters")
        yield delta

