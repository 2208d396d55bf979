"""Audio codes -> PCM chunks through the codec's streaming decoder (exact: no seams, no crossfades)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np

from gepard.codec.model import StreamingDecoder


def pcm_chunks(push: Callable[[list[int]], np.ndarray], codes: Iterable[int],
               frames_per_chunk: int = 2) -> Iterator[np.ndarray]:
    """Decode codes as they arrive: the first chunk after one frame, then every `frames_per_chunk` frames.

    `push` decodes codes with one stream's decoder (e.g. through a CodecBatcher) -> (m,) samples in [-1, 1].
    The decoder is not flushed here, so consecutive segments continue one waveform; call `finish` at the end.
    """
    pending: list[int] = []
    first = True
    for code in codes:
        pending.append(code)
        if first or len(pending) >= frames_per_chunk:
            chunk = push(pending)
            pending, first = [], False
            if len(chunk):
                yield chunk
    if pending:
        yield push(pending)


def finish(decoder: StreamingDecoder) -> np.ndarray:
    """The stream's last samples (the decoder's overlap tail)."""
    return decoder.flush()[0].clamp(-1, 1).numpy()
