"""WebSocket /v1/audio/speech/stream: text deltas in, PCM out while the text is still arriving.

Client -> server (JSON): {"type": "start", "voice"?, "seed"?} (optional, first), {"type": "text", "text"},
{"type": "flush"} (speak what you have), {"type": "cancel"} (barge-in: stop now), {"type": "close"}.
Server -> client: {"type": "start", "sample_rate", "format": "pcm_s16le", "channels": 1}, binary PCM
chunks, {"type": "done", "ttfa_ms", "audio_seconds", "elapsed_s"} after each flush, {"type": "cancelled"},
{"type": "error", "message"}.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing
import json
import queue
import time

from fastapi import FastAPI, HTTPException, WebSocket, WebSocketDisconnect

from gepard.server.formats import pcm16
from gepard.server.limits import Busy

END = None  # sentinel on a turn's delta queue: no more text for this turn


class Turn:
    """One utterance: deltas go into a queue that the TTS stream reads from a worker thread."""

    def __init__(self, ws: WebSocket, server, prefix, seed: int, after: "Turn | None"):
        self.deltas: queue.Queue[str | None] = queue.Queue()
        self.ended = self.cancelled = False
        chunks = server.tts.stream(iter(self.deltas.get, END), voice=prefix, seed=seed)
        self.task = asyncio.create_task(self._speak(ws, server, chunks, after))

    async def _speak(self, ws: WebSocket, server, chunks, after: "Turn | None") -> None:
        if after is not None:  # speak turns in order
            await asyncio.shield(after.task)
        if self.cancelled:  # cancelled before its turn came: nothing was generated
            chunks.close()
            return
        start, first, samples = time.perf_counter(), None, 0
        async with aclosing(server.audio_stream("websocket", chunks)) as audio:  # cleanup now, even if cancelled
            async for chunk in audio:
                if self.cancelled:  # barge-in: stop at the next frame; aclosing cancels the generation
                    return
                first = first or time.perf_counter()
                samples += len(chunk)
                await ws.send_bytes(pcm16(chunk))
        await ws.send_json({"type": "done", "ttfa_ms": round(((first or start) - start) * 1000, 1),
                            "audio_seconds": round(samples / server.tts.sample_rate, 3),
                            "elapsed_s": round(time.perf_counter() - start, 3)})

    def end(self) -> None:
        if not self.ended:
            self.ended = True
            self.deltas.put(END)

    async def cancel(self) -> None:
        """Stop within one decode step; returns once the engine request is cancelled and the slot is free."""
        self.cancelled = True
        self.end()  # unblocks the worker if it waits for text
        try:
            await self.task
        except Exception:  # the client may already be gone; nothing more to send
            pass


def add_websocket_route(app: FastAPI, server) -> None:
    @app.websocket("/v1/audio/speech/stream")
    async def speech_stream(ws: WebSocket):
        await ws.accept()
        await ws.send_json({"type": "start", "sample_rate": server.tts.sample_rate, "format": "pcm_s16le",
                            "channels": 1})
        prefix, seed, chars = server.prefix("default"), 0, 0
        turns: list[Turn] = []  # the last one takes new text until it is flushed
        try:
            while True:
                try:
                    message = json.loads(await ws.receive_text())
                    kind = message["type"]
                except (ValueError, KeyError, TypeError):
                    await ws.send_json({"type": "error", "message": "messages are JSON objects with a 'type'"})
                    continue
                turns = [t for t in turns if not t.task.done()]
                if kind == "start" and not turns:
                    try:
                        prefix = server.prefix(str(message.get("voice") or "default"))
                    except HTTPException as e:
                        await ws.send_json({"type": "error", "message": e.detail})
                        continue
                    seed = int(message.get("seed", 0))
                elif kind == "text":
                    text = str(message.get("text", ""))
                    chars += len(text)
                    if chars > server.limits.max_text_chars:
                        await ws.send_json({"type": "error", "message": "text limit of this session reached"})
                        continue
                    if not turns or turns[-1].ended:
                        server.admission.check()
                        turns.append(Turn(ws, server, prefix, seed, turns[-1] if turns else None))
                    turns[-1].deltas.put(text)
                elif kind == "flush":
                    if turns:
                        turns[-1].end()
                    chars = 0
                elif kind == "cancel":
                    for t in turns:
                        await t.cancel()
                    turns, chars = [], 0
                    await ws.send_json({"type": "cancelled"})
                elif kind == "close":
                    for t in turns:
                        t.end()
                    for t in turns:
                        await t.task
                    await ws.close()
                    return
                elif kind != "start":
                    await ws.send_json({"type": "error", "message": f"unknown message type {kind!r}"})
        except Busy as e:
            await ws.send_json({"type": "error", "message": str(e)})
            await ws.close(code=1013)
        except WebSocketDisconnect:
            pass
        finally:
            for t in turns:
                if not t.task.done():
                    await t.cancel()
