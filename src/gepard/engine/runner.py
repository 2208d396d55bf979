"""Driving an EngineCore for many callers at once: the Streams they read, and a thread that steps the core.

`submit` returns a Stream: iterate it for audio codes as they are sampled (blocking, thread-safe);
`close` (or leaving the iteration early) cancels the request and frees its slot at the next step.
`EngineRunner` steps the core in a thread of this process; `EngineProcess` (engine/process.py) in a
process of its own, which is what `TTS` uses.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from gepard.engine.base import Output, Request

if TYPE_CHECKING:
    from gepard.engine.core import EngineCore


class Stream:
    """The codes of one request, in order; ends when the request finishes. `finished` says why.

    Any engine feeds `events` with Outputs from its own thread; `cancel(request_id)` is its way to stop one.
    """

    def __init__(self, cancel: Callable[[int], None], request_id: int):
        self.cancel, self.request_id = cancel, request_id
        self.events: queue.Queue[Output] = queue.Queue()
        self.finished: str | None = None

    def __iter__(self):
        return (code for code, _ in self.frames())

    def frames(self):
        """(code, top) per frame: the code and the step's likeliest codes (engine/base.py `Output.top`)."""
        try:
            while self.finished is None:
                event = self.events.get()
                if event.code is not None:
                    yield event.code, event.top
                if event.finished:
                    self.finished = event.finished
                    if event.finished == "error":
                        raise RuntimeError(f"generation failed: {event.error}")
        finally:
            if self.finished is None:
                self.close()

    def close(self) -> None:
        """Cancel now (barge-in, a client that went away); safe to call twice."""
        if self.finished is None:
            self.finished = "cancelled"
            self.cancel(self.request_id)


class StreamTable:
    """The open Streams of an engine front end, fed with the Outputs of its engine."""

    def __init__(self):
        self.streams: dict[int, Stream] = {}
        self.table_lock = threading.Lock()

    def open(self, request_id: int, cancel: Callable[[int], None]) -> Stream:
        with self.table_lock:
            stream = self.streams[request_id] = Stream(cancel, request_id)
        return stream

    def forget(self, request_id: int) -> None:
        with self.table_lock:
            self.streams.pop(request_id, None)

    def deliver(self, outputs: list[Output]) -> None:
        with self.table_lock:
            for out in outputs:
                stream = self.streams.get(out.request_id)
                if stream is not None:
                    stream.events.put(out)
                    if out.finished:
                        del self.streams[out.request_id]

    def end_all(self, finished: str, error: str | None = None) -> None:
        """End every open stream (engine shutdown: "cancelled"; engine lost: "error")."""
        with self.table_lock:
            streams, self.streams = self.streams, {}
        for rid, stream in streams.items():
            stream.events.put(Output(rid, None, finished, error))

    @property
    def active(self) -> int:
        with self.table_lock:
            return len(self.streams)


def step_safely(core: EngineCore) -> list[Output]:
    """One engine step; a step that raises fails the requests it was running (with the error) and nothing
    else: the core stays usable."""
    try:
        return core.step()
    except Exception as e:  # noqa: BLE001 - a failed step fails its requests, never the engine
        return [Output(rid, None, "error", repr(e)) for rid in [*core.active, *(r for r, _ in core.waiting)]
                if core.cancel(rid)]


class EngineRunner(StreamTable):
    """Steps a core in a thread of this process (`lock` held during each step)."""

    def __init__(self, core: EngineCore):
        super().__init__()
        self.core = core
        self.lock = threading.Condition()
        self.stopping = False
        self.thread = threading.Thread(target=self._loop, name="gepard-engine", daemon=True)
        self.thread.start()

    def submit(self, request: Request) -> Stream:
        with self.lock:
            stream = self.open(self.core.add(request), self.cancel)
            self.lock.notify()
        return stream

    def cancel(self, request_id: int) -> None:
        with self.lock:
            self.core.cancel(request_id)
        self.forget(request_id)

    def slots_in_use(self) -> int:
        with self.lock:
            return len(self.core.active)

    def shutdown(self) -> None:
        with self.lock:
            self.stopping = True
            for rid in list(self.streams):
                self.core.cancel(rid)
            self.end_all("cancelled")
            self.lock.notify()
        self.thread.join()

    def _loop(self) -> None:
        while True:
            with self.lock:
                while not self.stopping and not self.core.busy:
                    self.lock.wait()
                if self.stopping:
                    return
                self.deliver(step_safely(self.core))  # under the lock: submit/cancel happen between steps
