"""`gepard serve`: OpenAI-compatible speech, a WebSocket for text deltas, durable voices, metrics, a web page."""

from __future__ import annotations

import threading
import time
from contextlib import aclosing
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Literal

import anyio
import numpy as np
import torch
from fastapi import FastAPI, File, Form, HTTPException, UploadFile
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, Field

from gepard.api import TTS
from gepard.audio import AudioError, load_audio
from gepard.lm.voices import list_voices, prefix_from_audio
from gepard.server.formats import CONTENT_TYPES, STREAMABLE, encode_file, pcm16, sse_audio, sse_event, wav_header
from gepard.server.limits import Admission, Busy, Limits
from gepard.server.metrics import Metrics
from gepard.server.speed import change_speed
from gepard.server.voices import VoiceStore

PAGE = Path(__file__).with_name("page.html")
MAX_UPLOAD_BYTES = 20 * 2**20


class SpeechRequest(BaseModel):
    model: str = "gepard"
    input: str = Field(min_length=1)
    voice: str = "default"
    response_format: Literal["wav", "pcm", "flac", "mp3", "opus"] = "wav"
    speed: float = Field(1.0, ge=0.25, le=4.0)
    stream_format: Literal["audio", "sse"] = "audio"
    seed: int = 0
    instructions: str | None = None  # accepted for OpenAI compatibility; not used


class Server:
    """Everything the routes share: the TTS, voices, admission and metrics."""

    def __init__(self, tts: TTS, data_dir: Path, limits: Limits):
        self.tts, self.limits = tts, limits
        self.voices = VoiceStore(data_dir / "voices")
        self.admission = Admission(limits)
        self.metrics = Metrics()

    def prefix(self, voice: str) -> torch.Tensor:
        """A named voice of the model or an uploaded voice id -> (1, K, H); 404 if neither."""
        if voice in ("default", "") or voice in list_voices(self.tts.model_dir):
            return self.tts.voice(None if voice in ("default", "") else voice)
        uploaded = self.voices.prefix(voice)
        if uploaded is None:
            raise HTTPException(404, f"unknown voice {voice!r}")
        return uploaded

    def check_text(self, text: str) -> None:
        if not text.strip():
            raise HTTPException(422, "the input text is empty")
        if len(text) > self.limits.max_text_chars:
            raise HTTPException(413, f"the input is {len(text)} characters; the limit is {self.limits.max_text_chars}")

    async def audio_stream(self, endpoint: str, chunks: Iterator[np.ndarray]) -> AsyncIterator[np.ndarray]:
        """Run a TTS stream in a worker thread under admission control; record TTFA/RTF; always clean up."""
        m, chunks = self.metrics, LockedIterator(chunks)
        m.queued.set(self.admission.waiting + 1)
        async with self.admission:
            m.queued.set(self.admission.waiting)
            m.active.inc()
            start, first, samples, status = time.perf_counter(), None, 0, "ok"
            try:
                while (chunk := await anyio.to_thread.run_sync(chunks.next)) is not None:
                    if first is None:
                        first = time.perf_counter()
                        m.ttfa.observe(first - start)
                    samples += len(chunk)
                    yield chunk
            except BaseException:
                status = "aborted"
                raise
            finally:
                with anyio.CancelScope(shield=True):  # runs even when the client's task is being cancelled
                    await anyio.to_thread.run_sync(chunks.close)  # cancels the engine request if unfinished
                m.active.dec()
                if samples:
                    m.rtf.observe((time.perf_counter() - start) / (samples / self.tts.sample_rate))
                m.requests.labels(endpoint, status).inc()


class LockedIterator:
    """A generator driven from worker threads: `close` waits for an in-flight `next` instead of failing."""

    def __init__(self, iterator: Iterator[np.ndarray]):
        self.iterator, self.lock = iterator, threading.Lock()

    def next(self) -> np.ndarray | None:
        with self.lock:
            return next(self.iterator, None)

    def close(self) -> None:
        with self.lock:
            self.iterator.close()


def uvicorn_settings(limits: Limits) -> dict:
    """How the server runs on uvicorn: on shutdown, HTTP streams get `limits.shutdown_grace_s` to finish;
    no permessage-deflate on the WebSocket: PCM barely compresses, the CPU is better spent on speech, and
    each connection's zlib contexts (~0.5 MB on each side) outlive it until Python's cycle collector runs
    (the load test showed them piling up: docs/results/server.md)."""
    return {"timeout_graceful_shutdown": limits.shutdown_grace_s, "ws_per_message_deflate": False}


def create_app(tts: TTS, data_dir: str | Path = "gepard-data", limits: Limits | None = None) -> FastAPI:
    server = Server(tts, Path(data_dir), limits or Limits())
    app = FastAPI(title="Gepard", version="0.1.0")
    app.state.server = server

    @app.exception_handler(Busy)
    async def busy(_, exc: Busy):
        server.metrics.requests.labels("speech", "429").inc()
        return JSONResponse({"error": {"message": str(exc), "type": "rate_limit"}}, status_code=429)

    @app.exception_handler(HTTPException)
    async def http_error(_, exc: HTTPException):
        server.metrics.requests.labels("speech", str(exc.status_code)).inc()
        return JSONResponse({"error": {"message": exc.detail, "code": exc.status_code}}, status_code=exc.status_code)

    @app.post("/v1/audio/speech")
    async def speech(req: SpeechRequest):
        server.check_text(req.input)
        server.admission.check()
        chunks = server.tts.stream(req.input, voice=server.prefix(req.voice), seed=req.seed)
        audio = server.audio_stream("speech", chunks)
        rate = tts.sample_rate
        if req.stream_format == "sse":
            async def events():
                async with aclosing(audio):  # a client that goes away cancels the generation at once
                    async for chunk in audio:
                        yield sse_audio(change_speed(chunk, req.speed, rate) if req.speed != 1 else chunk)
                yield sse_event({"type": "speech.audio.done"})
            return StreamingResponse(events(), media_type="text/event-stream")
        if req.response_format in STREAMABLE and req.speed == 1.0:
            async def body():
                if req.response_format == "wav":
                    yield wav_header(rate)
                async with aclosing(audio):
                    async for chunk in audio:
                        yield pcm16(chunk)
            return StreamingResponse(body(), media_type=CONTENT_TYPES[req.response_format])
        async with aclosing(audio):
            whole = change_speed(np.concatenate([c async for c in audio]), req.speed, rate)
        if req.response_format in STREAMABLE:
            data = (wav_header(rate) if req.response_format == "wav" else b"") + pcm16(whole)
        else:
            data = encode_file(whole, rate, req.response_format)
        return Response(data, media_type=CONTENT_TYPES[req.response_format])

    @app.post("/v1/voices", status_code=201)
    async def add_voice(file: UploadFile = File(...), name: str = Form("")):
        data = await file.read(MAX_UPLOAD_BYTES + 1)
        if len(data) > MAX_UPLOAD_BYTES:
            raise HTTPException(413, f"the reference clip is larger than {MAX_UPLOAD_BYTES // 2**20} MB")
        tmp = Path(server.voices.folder) / f"upload-{time.time_ns()}{Path(file.filename or 'x.wav').suffix}.part"
        try:
            tmp.write_bytes(data)
            audio = load_audio(tmp)
            prefix = await anyio.to_thread.run_sync(prefix_from_audio, tts.model, tts.codec, audio, name or "upload")
        except AudioError as e:
            raise HTTPException(422, str(e).replace(str(tmp), file.filename or "upload")) from None
        finally:
            tmp.unlink(missing_ok=True)
        return server.voices.add(prefix, name or (file.filename or "voice"), len(audio) / 16000)

    @app.get("/v1/voices")
    async def voices():
        named = [{"id": v, "name": v, "builtin": True} for v in list_voices(tts.model_dir)]
        return {"voices": named + server.voices.list()}

    @app.get("/v1/voices/{voice_id}")
    async def voice(voice_id: str):
        meta = server.voices.get(voice_id)
        if meta is None:
            raise HTTPException(404, f"unknown voice {voice_id!r}")
        return meta

    @app.delete("/v1/voices/{voice_id}")
    async def delete_voice(voice_id: str):
        if not server.voices.delete(voice_id):
            raise HTTPException(404, f"unknown voice {voice_id!r}")
        return {"id": voice_id, "deleted": True}

    @app.get("/health")
    async def health():
        return {"status": "ok", "active_streams": server.admission.active, "queued": server.admission.waiting}

    @app.get("/metrics")
    async def metrics():
        return Response(server.metrics.render(), media_type="text/plain; version=0.0.4")

    @app.get("/", response_class=HTMLResponse)
    async def page():
        return PAGE.read_text() if PAGE.exists() else "<h1>Gepard</h1>"

    from gepard.server.websocket import add_websocket_route

    add_websocket_route(app, server)
    return app
