"""Audio response formats: streamed PCM/WAV, whole-file FLAC/MP3/Opus, and OpenAI-style SSE events."""

from __future__ import annotations

import base64
import io
import json
import struct

import numpy as np
import soundfile as sf

CONTENT_TYPES = {"wav": "audio/wav", "pcm": "audio/pcm", "flac": "audio/flac", "mp3": "audio/mpeg",
                 "opus": "audio/ogg", "aac": "audio/aac"}
STREAMABLE = {"wav", "pcm"}  # sent chunk by chunk; the others are encoded once the audio is complete
FILE_FORMATS = {"flac": ("FLAC", "PCM_16"), "mp3": ("MP3", "MPEG_LAYER_III"), "opus": ("OGG", "OPUS")}


def pcm16(chunk: np.ndarray) -> bytes:
    """(n,) float -> little-endian signed 16-bit PCM bytes."""
    return np.clip(np.rint(chunk * 32768), -32768, 32767).astype("<i2").tobytes()


def wav_header(sample_rate: int) -> bytes:
    """A WAV header for a stream of unknown length (sizes set to the maximum, as streaming servers do)."""
    return b"RIFF" + struct.pack("<I", 0xFFFFFFFF) + b"WAVEfmt " + struct.pack(
        "<IHHIIHH", 16, 1, 1, sample_rate, sample_rate * 2, 2, 16) + b"data" + struct.pack("<I", 0xFFFFFFFF)


def encode_file(audio: np.ndarray, sample_rate: int, fmt: str) -> bytes:
    """(T,) float -> a whole FLAC, MP3 or Ogg/Opus file."""
    container, subtype = FILE_FORMATS[fmt]
    buffer = io.BytesIO()
    sf.write(buffer, np.clip(audio, -1, 1), sample_rate, format=container, subtype=subtype)
    return buffer.getvalue()


def sse_event(payload: dict) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


def sse_audio(chunk: np.ndarray) -> bytes:
    """OpenAI's `speech.audio.delta` event: base64 of 16-bit PCM."""
    return sse_event({"type": "speech.audio.delta", "audio": base64.b64encode(pcm16(chunk)).decode()})
