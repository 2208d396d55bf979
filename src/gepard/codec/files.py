"""Codec on files: bounded memory for inputs of any length, any rate or channel count in."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf
import torch

from gepard.audio import iter_audio
from gepard.codec.decoder_precision import faster_decoder_dtype
from gepard.codec.model import Codec
from gepard.paths import models_dir


def load_codec(path: str | Path | None = None, bf16_decoder: bool | None = None) -> Codec:
    """The shipped codec (models/codec), or the one saved at `path`; fp32, with a bf16 decoder where asked
    (`bf16_decoder=True`) or, by default (`None`), where it streams faster on this CPU (decoder_precision.py).

    The codec trained under bf16 autocast; its bf16 decoder's samples are ~0.7 % (relative L2, about -43 dB)
    from the fp32 decoder's, so streaming then matches offline decoding to that ~0.7 % rather than exactly, and a
    stream's samples differ in the last bits with the streams decoded beside it (all exact in fp32). The encoder
    stays fp32: the codes never depend on it.
    """
    path = Path(path) if path else models_dir() / "codec"
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"no codec at {path} (expected config.json + model.safetensors)")
    codec = Codec.from_pretrained(path)
    bf16 = faster_decoder_dtype(codec) == torch.bfloat16 if bf16_decoder is None else bf16_decoder
    if bf16:
        codec.decoder.to(torch.bfloat16)
    return codec


def decode_codes(codec: Codec, codes: list[int]) -> np.ndarray:
    """One utterance's codes -> (T,) float32 audio (empty for no codes)."""
    return codec.decode(torch.tensor([codes]))[0].numpy() if codes else np.zeros(0, np.float32)


def encode_file(codec: Codec, path: str | Path, chunk_seconds: float = 30.0) -> np.ndarray:
    """Audio file -> (J,) int64 codes, encoded chunk by chunk with the encoder's causal state."""
    spf = codec.config.samples_per_frame
    state = codec.encoder.initial_state(1)
    pending = np.zeros(0, dtype=np.float32)
    codes = []
    with torch.inference_mode():
        for block in iter_audio(path, codec.config.sample_rate, block_seconds=chunk_seconds):
            pending = np.concatenate([pending, block])
            whole = len(pending) // spf * spf
            if whole:
                latents, state = codec.encoder.step(torch.from_numpy(pending[:whole])[None], state)
                codes.append(codec.fsq.values_to_index(codec.fsq(latents))[0])
                pending = pending[whole:]
        if len(pending):
            tail = torch.from_numpy(np.pad(pending, (0, spf - len(pending))))[None]
            latents, state = codec.encoder.step(tail, state)
            codes.append(codec.fsq.values_to_index(codec.fsq(latents))[0])
    if not codes:
        raise ValueError(f"{path}: the file holds no audio samples")
    return torch.cat(codes).numpy()


def decode_to_file(codec: Codec, codes: np.ndarray, path: str | Path, num_samples: int | None = None,
                   chunk_frames: int = 750) -> int:
    """(J,) codes -> 16-bit audio file written chunk by chunk; returns the samples written."""
    codes = np.asarray(codes)
    if codes.ndim != 1 or codes.size == 0 or not np.issubdtype(codes.dtype, np.integer):
        raise ValueError("codes must be a non-empty 1-D integer array")
    if codes.min() < 0 or codes.max() >= codec.codebook_size:
        raise ValueError(f"codes must lie in [0, {codec.codebook_size}), got [{codes.min()}, {codes.max()}]")
    limit = num_samples if num_samples is not None else len(codes) * codec.config.samples_per_frame
    stream, written = codec.stream(), 0
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with sf.SoundFile(str(path), "w", codec.config.sample_rate, 1, subtype="PCM_16") as out:

        def write(audio: torch.Tensor) -> None:
            nonlocal written
            audio = audio[0, : max(0, limit - written)].clamp(-1, 1).numpy()
            out.write(audio)
            written += len(audio)

        for i in range(0, len(codes), chunk_frames):
            write(stream.push(torch.from_numpy(codes[i: i + chunk_frames]).long()[None]))
        write(stream.flush())
    return written


def roundtrip_file(codec: Codec, src: str | Path, dst: str | Path) -> tuple[np.ndarray, int]:
    """Encode `src` and decode it to `dst` (16 kHz mono, same duration); returns (codes, samples)."""
    codes = encode_file(codec, src)
    info = sf.info(str(src))
    num_samples = int(round(info.frames * codec.config.sample_rate / info.samplerate))
    return codes, decode_to_file(codec, codes, dst, num_samples)
