"""The LM's frames -> PCM chunks through the codec's streaming decoder (exact: no seams, no crossfades)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np

from gepard.codec.model import StreamingDecoder


def pcm_chunks(push: Callable[[list], np.ndarray], frames: Iterable,
               frames_per_chunk: int = 3) -> Iterator[np.ndarray]:
    """Decode frames (codes, or what `push` takes for one frame) as they arrive, `frames_per_chunk` at a time.

    The decoder's first frame yields only one hop of audio (10 ms; the rest waits for the overlap-add),
    so a first chunk after one frame would run dry before the next arrived; after two it holds 50 ms.
    `push` decodes a list of frames with one stream's decoder (e.g. through a CodecBatcher) -> (m,) samples in
    [-1, 1].
    The decoder is not flushed here, so consecutive segments continue one waveform; call `finish` at the end.
    """
    pending: list = []
    for frame in frames:
        pending.append(frame)
        if len(pending) >= frames_per_chunk:
            chunk = push(pending)
            pending = []
            if len(chunk):
                yield chunk
    if pending:
        yield push(pending)


def finish(decoder: StreamingDecoder) -> np.ndarray:
    """The stream's last samples (the decoder's overlap tail)."""
    return decoder.flush()[0].clamp(-1, 1).numpy()
