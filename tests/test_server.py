"""The server on a real uvicorn over loopback, with tiny random models: API, WebSocket, voices, limits."""

import json
import struct
import threading
import time

import httpx
import numpy as np
import pytest
from openai import OpenAI
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from gepard.api import TTS
from gepard.engine.process import BATCH_INVARIANT
from gepard.server.app import create_app
from gepard.server.limits import Limits
from gepard.server.local import LocalServer


def live_server(tts, data_dir, limits=None) -> LocalServer:
    return LocalServer(create_app(tts, data_dir, limits))


@pytest.fixture
def tts(tiny_lm_dir, tiny_codec_dir):
    with TTS.load(tiny_lm_dir, tiny_codec_dir, slots=4) as tts:
        tts.codec.decoder.float()  # bit-exact audio to compare: a bf16 decoder (the default on CPUs with native
        # bf16) gives a stream's samples that differ in the last bits with the streams decoded beside it
        yield tts


@pytest.fixture
def invariant_tts(monkeypatch, tiny_lm_dir, tiny_codec_dir):
    """As `tts`, with an engine whose decode steps are batch-invariant (the engine process reads the variable)."""
    monkeypatch.setenv(BATCH_INVARIANT, "1")
    with TTS.load(tiny_lm_dir, tiny_codec_dir, slots=4) as tts:
        tts.codec.decoder.float()
        yield tts


@pytest.fixture
def live(tts, tmp_path):
    server = live_server(tts, tmp_path / "data")
    yield server
    server.stop()


def wav_samples(data: bytes) -> np.ndarray:
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE" and struct.unpack("<I", data[24:28])[0] == 16000
    return np.frombuffer(data[44:], dtype="<i2")


def test_openai_client_plain_and_streaming(live):
    client = OpenAI(base_url=f"{live.url}/v1", api_key="unused")
    speech = client.audio.speech.create(model="gepard", voice="default", input="Hello there.", response_format="wav")
    plain = wav_samples(speech.content)
    assert len(plain) > 0
    with client.audio.speech.with_streaming_response.create(model="gepard", voice="default", input="Hello there.",
                                                            response_format="pcm") as response:
        chunks = [c for c in response.iter_bytes(chunk_size=None) if c]
    streamed = np.frombuffer(b"".join(chunks), dtype="<i2")
    assert np.array_equal(streamed, plain)  # same seed: the same samples, plain or streamed


def test_sse_and_file_formats(live):
    r = httpx.post(f"{live.url}/v1/audio/speech", json={"input": "Hello there.", "stream_format": "sse"}, timeout=60)
    events = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: ")]
    assert events[-1]["type"] == "speech.audio.done"
    assert all(e["type"] == "speech.audio.delta" and e["audio"] for e in events[:-1]) and len(events) > 2
    for fmt, magic in (("flac", b"fLaC"), ("mp3", b""), ("opus", b"OggS")):
        r = httpx.post(f"{live.url}/v1/audio/speech", json={"input": "Hi there.", "response_format": fmt}, timeout=60)
        assert r.status_code == 200 and r.content.startswith(magic) and len(r.content) > 100
    slow = httpx.post(f"{live.url}/v1/audio/speech", json={"input": "Hello there.", "speed": 0.5}, timeout=60)
    normal = httpx.post(f"{live.url}/v1/audio/speech", json={"input": "Hello there."}, timeout=60)
    assert abs(len(wav_samples(slow.content)) / len(wav_samples(normal.content)) - 2) < 0.05


def test_bad_requests_get_clear_json_errors(live):
    cases = [({"input": ""}, 422), ({"input": "x" * 5000}, 413), ({"input": "hi", "voice": "nobody"}, 404),
             ({"input": "hi", "response_format": "ogg-vorbis"}, 422), ({"input": "hi", "speed": 9}, 422),
             ({"voice": "default"}, 422)]
    for body, status in cases:
        r = httpx.post(f"{live.url}/v1/audio/speech", json=body, timeout=30)
        assert r.status_code == status, (body, r.text)
        assert r.json()
    r = httpx.post(f"{live.url}/v1/audio/speech", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert httpx.get(f"{live.url}/health").json()["status"] == "ok"
    metrics = httpx.get(f"{live.url}/metrics").text
    assert 'gepard_requests_total{endpoint="speech",status="404"} 1.0' in metrics


def test_voices_upload_use_delete_and_survive_a_restart(tts, live, speech_path, tmp_path):
    files = {"file": ("cathy.flac", speech_path.read_bytes(), "audio/flac")}
    r = httpx.post(f"{live.url}/v1/voices", files=files, data={"name": "cathy"}, timeout=60)
    assert r.status_code == 201, r.text
    voice = r.json()
    assert voice["name"] == "cathy" and httpx.get(f"{live.url}/v1/voices/{voice['id']}").json() == voice
    r = httpx.post(f"{live.url}/v1/audio/speech", json={"input": "Hello.", "voice": voice["id"]}, timeout=60)
    assert r.status_code == 200 and len(wav_samples(r.content)) > 0
    bad = httpx.post(f"{live.url}/v1/voices", files={"file": ("x.wav", b"not audio", "audio/wav")}, timeout=30)
    silent = np.zeros(32000, dtype="<i2").tobytes()
    quiet = httpx.post(f"{live.url}/v1/voices", files={"file": ("s.wav", _wav(silent), "audio/wav")}, timeout=30)
    assert bad.status_code == 422 and quiet.status_code == 422 and "silent" in quiet.json()["error"]["message"]
    live.stop()
    half = tmp_path / "data" / "voices" / "deadbeef.tmp"  # what a crash in the middle of an upload leaves
    half.write_bytes(b"half a voice")
    again = live_server(tts, tmp_path / "data")
    try:
        ids = [v["id"] for v in httpx.get(f"{again.url}/v1/voices").json()["voices"]]
        assert voice["id"] in ids and "deadbeef" not in ids and not half.exists()
        assert httpx.delete(f"{again.url}/v1/voices/{voice['id']}").status_code == 200
        assert httpx.get(f"{again.url}/v1/voices/{voice['id']}").status_code == 404
    finally:
        again.stop()


def _wav(pcm: bytes) -> bytes:
    import io

    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, np.frombuffer(pcm, dtype="<i2"), 16000, format="WAV", subtype="PCM_16")
    return buf.getvalue()


def ws_url(live) -> str:
    return f"ws://127.0.0.1:{live.port}/v1/audio/speech/stream"


def test_websocket_deltas_flush_and_done(live):
    with connect(ws_url(live)) as ws:  # the client offers permessage-deflate; PCM is sent uncompressed
        assert "Sec-WebSocket-Extensions" not in ws.response.headers
        assert json.loads(ws.recv())["type"] == "start"
        for delta in ["Hello ", "there, how ", "are you ", "today? "]:
            ws.send(json.dumps({"type": "text", "text": delta}))
        ws.send(json.dumps({"type": "flush"}))
        audio, done = b"", None
        while done is None:
            msg = ws.recv(timeout=60)
            if isinstance(msg, bytes):
                audio += msg
            else:
                done = json.loads(msg)
        assert done["type"] == "done" and done["audio_seconds"] == len(audio) / 2 / 16000 > 0


def test_websocket_cancel_stops_at_once_and_frees_the_slot(live, tts):
    with connect(ws_url(live)) as ws:
        ws.recv()
        ws.send(json.dumps({"type": "text", "text": "This is a long sentence that will be interrupted by the user. "}))
        assert isinstance(ws.recv(timeout=60), bytes)  # audio is flowing
        ws.send(json.dumps({"type": "cancel"}))
        while not isinstance(msg := ws.recv(timeout=30), str):
            pass
        assert json.loads(msg)["type"] == "cancelled"
        assert tts.engine.active == 0 and tts.engine.slots_in_use() == 0


def test_client_that_disconnects_mid_stream_leaks_nothing(live, tts):
    with connect(ws_url(live)) as ws:  # leaving the block drops the connection mid-stream
        ws.recv()
        ws.send(json.dumps({"type": "text", "text": "Speak for a while please, this is a long reply to nobody. "}))
        assert isinstance(ws.recv(timeout=60), bytes)
    with httpx.stream("POST", f"{live.url}/v1/audio/speech", json={"input": "Another long reply to nobody."}) as r:
        next(r.iter_bytes())
    deadline = time.time() + 10
    while (tts.engine.active or live.app.state.server.admission.active) and time.time() < deadline:
        time.sleep(0.05)
    assert tts.engine.active == 0 and live.app.state.server.admission.active == 0
    assert httpx.get(f"{live.url}/health").json()["active_streams"] == 0


def test_full_server_answers_429(tts, tmp_path):
    server = live_server(tts, tmp_path / "d", Limits(max_streams=1, max_queue=0))
    try:
        with connect(ws_url(server)) as ws:  # a session whose text is still arriving holds the only stream
            ws.recv()
            ws.send(json.dumps({"type": "text", "text": "Well"}))
            deadline = time.time() + 10
            while not server.app.state.server.admission.active and time.time() < deadline:
                time.sleep(0.02)
            second = httpx.post(f"{server.url}/v1/audio/speech", json={"input": "hi"}, timeout=30)
            assert second.status_code == 429 and "limit" in second.json()["error"]["message"]
            ws.send(json.dumps({"type": "cancel"}))
        deadline = time.time() + 10  # the session's stream is released as its connection closes
        while server.app.state.server.admission.active and time.time() < deadline:
            time.sleep(0.02)
        third = httpx.post(f"{server.url}/v1/audio/speech", json={"input": "hi"}, timeout=30)
        assert third.status_code == 200
    finally:
        server.stop()


def test_graceful_shutdown_finishes_http_streams_and_closes_sessions(invariant_tts, tmp_path):
    tts = invariant_tts
    server = live_server(tts, tmp_path / "d", Limits(shutdown_grace_s=120))  # a busy CI machine must not cut it
    text = {"input": "A reply that is still streaming when the server is asked to stop."}
    whole = httpx.post(f"{server.url}/v1/audio/speech", json=text, timeout=60).content
    streaming, streamed, errors = threading.Event(), [], []

    def listen():
        try:
            with httpx.stream("POST", f"{server.url}/v1/audio/speech", json=text, timeout=60) as r:
                for chunk in r.iter_bytes():
                    streamed.append(chunk)
                    streaming.set()
        except httpx.HTTPError as e:  # a response cut short ends in an incomplete chunked body
            errors.append(e)

    listener = threading.Thread(target=listen)
    with connect(ws_url(server)) as ws:
        ws.recv()
        ws.send(json.dumps({"type": "text", "text": "A session that is speaking when the server stops. "}))
        assert isinstance(ws.recv(timeout=60), bytes)
        listener.start()
        assert streaming.wait(60)
        server.stop()  # what SIGTERM does
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                ws.recv(timeout=30)
        assert closed.value.rcvd.code == 1012  # "service restart": the client knows to reconnect
    listener.join(60)
    assert not server.thread.is_alive()
    # the HTTP stream in flight finished, every sample delivered: with batch-invariant decode steps a request
    # sampled beside the session gets the codes it gets alone; the codec, which decodes every stream's frames
    # together, may round a sample 1 step the other way (fp32 conv kernels vary with the batch)
    body = b"".join(streamed)
    assert not errors and body[:44] == whole[:44] and len(body) == len(whole)
    assert np.abs(wav_samples(body).astype(int) - wav_samples(whole)).max() <= 1
    assert tts.engine.active == 0 and tts.engine.slots_in_use() == 0


def test_load_test_counts_turns_ttfa_underruns_and_memory(tts, tmp_path):
    from gepard.eval.load import run_load, write_server_report

    [r] = run_load(create_app(tts, tmp_path / "data"), sessions=[2], duration_s=1.0, words_per_s=200.0,
                   warmup_s=0.5, trace_memory=True)
    assert r["sessions"] == 2 and r["errors"] == 0 and r["sustained"] == 2 and r["turns"] >= 2
    assert r["ttfa_p95_ms"] >= r["ttfa_p50_ms"] > 0 and r["audio_s"] > 0
    assert r["rss_after_mb"]["server"] > 0 and r["rss_after_mb"]["engine"] > 0  # the engine has its own process
    assert r["rss_after_mb"]["python_heap"] > 0 and len(r["python_heap_growth"]) > 0
    write_server_report([r], "gepard eval server", tmp_path / "server.md", "test machine", "today", 200.0)
    assert "| 2 | 2 |" in (tmp_path / "server.md").read_text() and "Python heap" in (tmp_path / "server.md").read_text()
