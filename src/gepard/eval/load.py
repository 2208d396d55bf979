"""`gepard eval server`: a bounded load test of the WebSocket API on loopback -> docs/results/server.md.

Each session speaks turn after turn: it sends a reply word by word at LLM pace, flushes, and plays the
audio as it arrives (received while the words are still going out). Per turn: TTFA (first word sent ->
first audio; it includes waiting for the first speakable segment), underruns (a chunk arriving after the
audio before it ran out), errors. Memory (RSS of the serving process and of the torch engine's process) before and after.
"""

from __future__ import annotations

import json
import threading
import time
import tracemalloc
from pathlib import Path

import numpy as np
from websockets.sync.client import connect

from gepard.eval.bench import TEXTS, Playback
from gepard.server.local import LocalServer

BYTES_PER_SECOND = 2 * 16000  # pcm_s16le mono at 16 kHz


def rss_mb(pid: int | str = "self") -> float:
    """Resident memory of a process, MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def server_rss_mb(app) -> dict[str, float]:
    """RSS of this process (server, codec, the load clients) and of the torch engine's process, if any."""
    engine = app.state.server.tts.engine
    process = getattr(engine, "process", None)
    return {"server": rss_mb(), "engine": rss_mb(process.pid) if process is not None else 0.0}


def listen(ws, arrivals: list[tuple[float, bytes | dict]]) -> None:
    """Record (arrival time, PCM bytes or event) of one turn until its "done" (or "error") event."""
    while True:
        msg = ws.recv(timeout=120)
        item = msg if isinstance(msg, bytes) else json.loads(msg)
        arrivals.append((time.perf_counter(), item))
        if isinstance(item, dict) and item["type"] in ("done", "error"):
            return


def session(url: str, index: int, until: float, words_per_s: float, turns: list[dict]) -> None:
    """Speak turns until `until`; append one dict per turn to `turns`. Audio is received while the words
    are still being sent (by a listener thread), so arrival times are real."""
    n = index
    try:
        with connect(url, max_size=None) as ws:
            json.loads(ws.recv())  # start
            while time.time() < until:
                words = TEXTS[n % len(TEXTS)].split()
                n += 1
                arrivals: list[tuple[float, bytes | dict]] = []
                listener = threading.Thread(target=listen, args=(ws, arrivals))
                listener.start()
                start = time.perf_counter()
                for w in words:
                    ws.send(json.dumps({"type": "text", "text": w + " "}))
                    time.sleep(1 / words_per_s)
                ws.send(json.dumps({"type": "flush"}))
                listener.join()
                if not arrivals or arrivals[-1][1]["type"] != "done":
                    raise RuntimeError(arrivals[-1][1]["message"] if arrivals else "no reply")
                chunks = [(t, len(item) / BYTES_PER_SECOND) for t, item in arrivals if isinstance(item, bytes)]
                first = chunks[0][0] if chunks else arrivals[-1][0]
                player = Playback(tolerance=0.02)
                for t, seconds in chunks:
                    player.arrive(t, seconds)
                turns.append({"session": index, "ttfa_ms": (first - start) * 1000, "audio_s": player.played,
                              "underrun": player.stalled > 0, "error": None})
    except Exception as e:  # noqa: BLE001 - every failure is counted, none may pass silently
        turns.append({"session": index, "ttfa_ms": float("nan"), "audio_s": 0.0, "underrun": False,
                      "error": repr(e)})


def run_sessions(url: str, n: int, duration_s: float, words_per_s: float) -> list[dict]:
    """n concurrent sessions for duration_s -> their turns."""
    turns: list[dict] = []
    until = time.time() + duration_s
    threads = [threading.Thread(target=session, args=(url, i, until, words_per_s, turns)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return turns


def run_load(app, sessions: list[int], duration_s: float, words_per_s: float = 15.0,
             warmup_s: float = 10.0, trace_memory: bool = False) -> list[dict]:
    """Each level of `sessions` for duration_s, after a warm-up at the largest level (so that first-use
    allocations of threads, caches and the allocator's arenas are not counted as growth). trace_memory:
    also track Python's own heap (tracemalloc, from the first level on; it slows Python down) and report
    the allocation sites that grew most from the first level to the end."""
    server = LocalServer(app)
    url = server.url.replace("http", "ws") + "/v1/audio/speech/stream"
    results = []
    try:
        run_sessions(url, max(sessions), warmup_s, words_per_s)
        if trace_memory:
            tracemalloc.start(8)
            start = tracemalloc.take_snapshot()
        for n in sessions:
            before = server_rss_mb(app)
            if trace_memory:
                before["python_heap"] = tracemalloc.get_traced_memory()[0] / 2**20
            turns = run_sessions(url, n, duration_s, words_per_s)
            ok = [t for t in turns if t["error"] is None]
            ttfa = [t["ttfa_ms"] for t in ok] or [float("nan")]
            results.append({
                "sessions": n, "duration_s": duration_s, "turns": len(turns), "errors": len(turns) - len(ok),
                "error_examples": sorted({t["error"] for t in turns if t["error"]})[:3],
                "sustained": n - len({t["session"] for t in turns if t["error"]}),
                "ttfa_p50_ms": float(np.percentile(ttfa, 50)), "ttfa_p95_ms": float(np.percentile(ttfa, 95)),
                "underruns": sum(t["underrun"] for t in ok), "audio_s": sum(t["audio_s"] for t in ok),
                "rss_before_mb": before, "rss_after_mb": server_rss_mb(app),
            })
            if trace_memory:
                results[-1]["rss_after_mb"]["python_heap"] = tracemalloc.get_traced_memory()[0] / 2**20
        if trace_memory:
            growth = tracemalloc.take_snapshot().compare_to(start, "traceback")[:5]
            results[-1]["python_heap_growth"] = [{"kib": g.size_diff / 1024, "count": g.count_diff,
                                                  "where": str(g.traceback[-1])} for g in growth]
    finally:
        if trace_memory:
            tracemalloc.stop()
        server.stop()
    return results


def write_server_report(results: list[dict], command: str, out: Path, machine: str, date: str,
                        words_per_s: float) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# Server under load", "", f"Command: `{command}`", "", f"Machine: {machine}. Date: {date}.", "",
             f"Each WebSocket session sends a reply word by word at {words_per_s:g} words/s (LLM pace), flushes, "
             "plays the audio as it arrives, and starts the next reply; TTFA runs from the first word sent to the first "
             "audio chunk, so it includes waiting for the first speakable segment (the first four words take "
             f"{4 / words_per_s * 1000:.0f} ms to arrive at this pace). Server and clients share this machine; "
             "its memory (RSS) is first measured after a warm-up at the largest level, so first-use allocations "
             "do not count as growth.", "",
             "| sessions | sustained | turns | errors | TTFA p50 ms | TTFA p95 ms | underruns | audio s | "
             "server RSS before → after MB | engine process RSS before → after MB |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['sessions']} | {r['sustained']} | {r['turns']} | {r['errors']} | {r['ttfa_p50_ms']:.0f} | {r['ttfa_p95_ms']:.0f} | "
              f"{r['underruns']}/{r['turns'] - r['errors']} | {r['audio_s']:.0f} | "
              f"{r['rss_before_mb']['server']:.0f} → {r['rss_after_mb']['server']:.0f} | "
              f"{r['rss_before_mb']['engine']:.0f} → {r['rss_after_mb']['engine']:.0f} |" for r in results]
    if "python_heap" in results[0]["rss_before_mb"]:
        lines += ["", "Python heap (tracemalloc; it slows Python, so latencies above are not comparable to an "
                  "untraced run), MB before → after each level: "
                  + ", ".join(f"{r['rss_before_mb']['python_heap']:.1f} → {r['rss_after_mb']['python_heap']:.1f}"
                              for r in results) + ".", "", "Allocation sites that grew most over all levels:", "",
                  "| KiB | blocks | where |", "|---|---|---|"]
        lines += [f"| {g['kib']:.0f} | {g['count']} | `{g['where']}` |" for g in results[-1]["python_heap_growth"]]
    out.write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps(results, indent=2))
