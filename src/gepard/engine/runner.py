"""A thread that drives an EngineCore, so many callers can stream from one engine at once.

`submit` returns a Stream: iterate it for audio codes as they are sampled (blocking, thread-safe);
`close` (or leaving the iteration early) cancels the request and frees its slot at the next step.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from gepard.engine.base import Output, Request
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
        try:
            while self.finished is None:
                event = self.events.get()
                if event.code is not None:
                    yield event.code
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


class EngineRunner:
    def __init__(self, core: EngineCore):
        self.core = core
        self.lock = threading.Condition()
        self.streams: dict[int, Stream] = {}
        self.stopping = False
        self.thread = threading.Thread(target=self._loop, name="gepard-engine", daemon=True)
        self.thread.start()

    def submit(self, request: Request) -> Stream:
        with self.lock:
            stream = Stream(self.cancel, self.core.add(request))
            self.streams[stream.request_id] = stream
            self.lock.notify()
        return stream

    def cancel(self, request_id: int) -> None:
        with self.lock:
            self.core.cancel(request_id)
            self.streams.pop(request_id, None)

    @property
    def active(self) -> int:
        with self.lock:
            return len(self.streams)

    def shutdown(self) -> None:
        with self.lock:
            self.stopping = True
            for rid in list(self.streams):
                self.core.cancel(rid)
                self.streams.pop(rid).events.put(Output(rid, None, "cancelled"))
            self.lock.notify()
        self.thread.join()

    def _loop(self) -> None:
        while True:
            with self.lock:
                while not self.stopping and not self.core.busy:
                    self.lock.wait()
                if self.stopping:
                    return
                try:
                    outputs = self.core.step()  # under the lock: submit/cancel happen between steps
                except Exception as e:  # noqa: BLE001 - a failed step fails its requests, never the engine
                    outputs = [Output(rid, None, "error", repr(e)) for rid in list(self.streams)
                               if self.core.cancel(rid)]
                for out in outputs:
                    stream = self.streams.get(out.request_id)
                    if stream is not None:
                        stream.events.put(out)
                        if out.finished:
                            self.streams.pop(out.request_id, None)
