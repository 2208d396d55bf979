"""One thread decodes audio for every stream: pushes that arrive together run as one codec batch.

Each stream calls `push(decoder, values)` from its own thread and gets its samples back. The worker takes
every push waiting at that moment, groups those with the same number of frames and pre-roll point, stacks
their decoder states, runs the codec once per group and hands each stream its row. A step of a batched
LM engine releases one frame for many streams at once, so 16 streams cost about one codec call, not 16.
"""

from __future__ import annotations

import queue
import threading
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import torch

from gepard.codec.model import StreamingDecoder


@dataclass
class Push:
    decoder: StreamingDecoder
    values: torch.Tensor  # (n, D) decoder input (gepard/codec/render.py)
    done: threading.Event = field(default_factory=threading.Event)
    samples: np.ndarray | None = None
    error: Exception | None = None


class CodecBatcher:
    def __init__(self):
        self.pushes: queue.Queue[Push | None] = queue.Queue()
        self.thread = threading.Thread(target=self._loop, name="gepard-codec", daemon=True)
        self.thread.start()

    def push(self, decoder: StreamingDecoder, values: torch.Tensor) -> np.ndarray:
        """(n, D) decoder input of one stream -> (m,) float32 samples in [-1, 1] that are final now (blocks until
        decoded)."""
        job = Push(decoder, values)
        self.pushes.put(job)
        job.done.wait()
        if job.error is not None:
            raise job.error
        return job.samples

    def close(self) -> None:
        """Stop the worker once the pushes already queued are decoded."""
        self.pushes.put(None)
        self.thread.join()

    def _loop(self) -> None:
        while True:
            jobs = [self.pushes.get()]
            while not self.pushes.empty():
                jobs.append(self.pushes.get_nowait())
            closing = None in jobs
            jobs = [job for job in jobs if job is not None]
            groups: dict[tuple[int, int], list[Push]] = defaultdict(list)
            for job in jobs:
                groups[len(job.values), job.decoder.state["skip"]].append(job)
            for group in groups.values():
                self._decode(group)
            if closing:
                return

    @staticmethod
    def _decode(group: list[Push]) -> None:
        try:
            values = torch.stack([job.values for job in group])
            audio = StreamingDecoder.push_many([job.decoder for job in group], values).clamp(-1, 1).numpy()
            for job, row in zip(group, audio):
                job.samples = row
        except Exception as e:  # reported to every waiting stream, never kills the worker
            for job in group:
                job.error = e
        for job in group:
            job.done.set()
