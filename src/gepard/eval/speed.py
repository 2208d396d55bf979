"""Codec speed: encode/decode x real time (batch 1, one thread) and one-frame streaming latency."""

from __future__ import annotations

import contextlib
import time

import numpy as np
import torch

from gepard.codec.model import Codec


def _best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


@contextlib.contextmanager
def torch_threads(threads: int):
    """Run the block on `threads` CPU threads, then restore the count before it."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def stream_seconds(codec: Codec, frames: int = 25, repeats: int = 3) -> float:
    """Best-of-`repeats` seconds to stream `frames` random codes one frame at a time (batch 1, one thread),
    after one uncounted warm-up pass."""
    codes = torch.randint(codec.codebook_size, (1, frames), generator=torch.Generator().manual_seed(0))

    def stream_all() -> None:
        stream = codec.stream()
        for i in range(frames):
            stream.push(codes[:, i: i + 1])

    with torch_threads(1):
        stream_all()
        return _best_of(stream_all, repeats)


def codec_speed(codec: Codec, audio: np.ndarray, threads: int = 1, repeats: int = 3, frames: int = 200) -> dict:
    """(T,) audio -> encode/decode x real time and one-frame streaming latency (ms, p50/p95)."""
    with torch_threads(threads):
        x = torch.from_numpy(audio)[None]
        seconds = len(audio) / codec.config.sample_rate
        codes = codec.encode(x)
        codec.decode(codes)  # warm-up
        encode_s = _best_of(lambda: codec.encode(x), repeats)
        decode_s = _best_of(lambda: codec.decode(codes), repeats)
        stream = codec.stream()
        latencies = []
        for i in range(min(frames, codes.shape[1])):
            t = time.perf_counter()
            stream.push(codes[:, i: i + 1])
            latencies.append(time.perf_counter() - t)
        latencies = np.array(latencies[5:]) * 1000
    return {
        "seconds": seconds,
        "encode_x_realtime": seconds / encode_s,
        "decode_x_realtime": seconds / decode_s,
        "frame_ms_p50": float(np.percentile(latencies, 50)),
        "frame_ms_p95": float(np.percentile(latencies, 95)),
    }
