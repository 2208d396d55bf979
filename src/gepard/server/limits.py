"""Admission control: at most `max_streams` generate at once, `max_queue` more wait, the rest get 429."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass


@dataclass
class Limits:
    max_streams: int = 16
    max_queue: int = 32
    max_text_chars: int = 4096
    queue_timeout_s: float = 30.0
    shutdown_grace_s: float = 10.0  # on shutdown, HTTP streams get this long to finish; WebSockets close at once


class Busy(Exception):
    """No room: the caller answers 429."""


class Admission:
    def __init__(self, limits: Limits):
        self.limits = limits
        self.semaphore = asyncio.Semaphore(limits.max_streams)
        self.active = 0
        self.waiting = 0

    def check(self) -> None:
        """Raise Busy now if neither a stream nor a queue place is free (before a response starts)."""
        if self.waiting >= self.limits.max_queue and self.semaphore.locked():
            raise Busy(f"the server is at its limit of {self.limits.max_streams} streams and "
                       f"{self.limits.max_queue} queued requests")

    async def __aenter__(self) -> "Admission":
        self.check()
        self.waiting += 1
        try:
            await asyncio.wait_for(self.semaphore.acquire(), self.limits.queue_timeout_s)
        except TimeoutError:
            raise Busy(f"no stream became free within {self.limits.queue_timeout_s:g} s") from None
        finally:
            self.waiting -= 1
        self.active += 1
        return self

    async def __aexit__(self, *exc) -> None:
        self.active -= 1
        self.semaphore.release()
