"""`gepard bench`: streaming speed of the embedded engine (a benchmark, not a test).

Single-stream RTF and time to first audio (TTFA), a concurrency sweep (aggregate x real time, per-stream
RTF, TTFA p50/p95, underruns and stall time), a latency breakdown (prefill, one decode step, codec per
frame), and the plain HF `generate` loop on the same checkpoint as the baseline.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import torch
import torch.nn.functional as F

from gepard.api import TTS
from gepard.codec.model import StreamingDecoder
from gepard.engine.base import SamplingParams
from gepard.engine.core import EngineCore
from gepard.lm.generate import generate_codes, text_prompt

TEXTS = [
    "Sure, I can help with that. Your table for two is booked for seven thirty tonight.",
    "The next train to the airport leaves in twelve minutes from platform four.",
    "I am sorry, I could not find that order. Could you read me the number again?",
    "It will be sunny this afternoon, with a light breeze and a high of twenty one degrees.",
]


class Playback:
    """A player that starts with the first chunk and, when the next chunk arrives after the audio before it
    ran out by more than `tolerance` s (an underrun), waits for it (a stall) and plays on from there."""

    def __init__(self, tolerance: float = 1e-3):
        self.tolerance = tolerance
        self.first: float | None = None
        self.played = self.stalled = 0.0

    def arrive(self, now: float, seconds: float) -> None:
        """A chunk of `seconds` of audio arrived at time `now` (s)."""
        if self.first is None:
            self.first = now
        elif (late := now - self.first - self.stalled - self.played) > self.tolerance:
            self.stalled += late
        self.played += seconds


def one_stream(tts: TTS, text: str, seed: int) -> dict:
    """Consume one stream as a Playback would."""
    start = time.perf_counter()
    player = Playback()
    for chunk in tts.stream(text, seed=seed):
        player.arrive(time.perf_counter(), len(chunk) / tts.sample_rate)
    elapsed = time.perf_counter() - start
    return {"ttfa_ms": ((player.first or start) - start) * 1000, "audio_s": player.played, "elapsed_s": elapsed,
            "rtf": elapsed / max(player.played, 1e-9), "underrun": player.stalled > 0,
            "stall_ms": player.stalled * 1000}


def concurrent(tts: TTS, streams: int, rounds: int = 1) -> dict:
    """`streams` simultaneous streams (each speaking `rounds` texts back to back)."""
    results: list[dict] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        for r in range(rounds):
            res = one_stream(tts, TEXTS[(i + r) % len(TEXTS)], seed=i * 100 + r)
            with lock:
                results.append(res)

    start = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    ttfa = [r["ttfa_ms"] for r in results]
    return {"streams": streams, "aggregate_x_realtime": sum(r["audio_s"] for r in results) / wall,
            "rtf_mean": float(np.mean([r["rtf"] for r in results])),
            "ttfa_p50_ms": float(np.percentile(ttfa, 50)), "ttfa_p95_ms": float(np.percentile(ttfa, 95)),
            "underruns": sum(r["underrun"] for r in results), "requests": len(results),
            "stall_ms_mean": float(np.mean([r["stall_ms"] for r in results])),
            "stall_ms_max": float(max(r["stall_ms"] for r in results))}


def breakdown(tts: TTS, batch: int = 1, steps: int = 20) -> dict:
    """Milliseconds for: prefill of one prompt, one decode step at `batch` (the engine's forward + logits, on
    an engine core built here, in this process), codec decode of one frame for `batch` streams at once (as
    the codec batcher runs it)."""
    core, prefix = EngineCore(tts.model, slots=batch, int8_head=True), tts.voice(None)
    ids, _ = text_prompt(tts.model, TEXTS[0])
    lm = core.lm
    t = time.perf_counter()
    for slot in range(batch):
        lm.forward(torch.cat([prefix.to(lm.kv.dtype), lm.embed(torch.tensor([ids]))], dim=1), torch.tensor([slot]))
    prefill = (time.perf_counter() - t) / batch
    tokens = lm.embed(torch.full((batch, 1), core.vocab.audio_offset))
    t = time.perf_counter()
    for _ in range(steps):
        lm.logits(lm.forward(tokens, torch.arange(batch)))
    step = (time.perf_counter() - t) / steps
    decoders = [tts.codec.stream() for _ in range(batch)]
    codes = torch.zeros(batch, 1, dtype=torch.long)
    StreamingDecoder.push_many(decoders, codes)  # past the pre-roll
    t = time.perf_counter()
    for _ in range(steps):
        StreamingDecoder.push_many(decoders, codes)
    return {"batch": batch, "prefill_ms": prefill * 1000, "decode_step_ms": step * 1000,
            "codec_step_ms": (time.perf_counter() - t) / steps * 1000}


def hf_baseline(tts: TTS) -> dict:
    """The plain transformers loop (KV cache, batch 1) on the same checkpoint and text."""
    start = time.perf_counter()
    codes, _ = generate_codes(tts.model, TEXTS[0], tts.voice(None), SamplingParams(seed=0))
    elapsed = time.perf_counter() - start
    audio_s = len(codes) / tts.model.codec_frame_rate
    return {"elapsed_s": elapsed, "audio_s": audio_s, "rtf": elapsed / max(audio_s, 1e-9)}


@torch.inference_mode()
def int8_head_check(tts: TTS) -> dict:
    """What the engine's int8 output head costs in accuracy: the NLL of codes the model itself sampled (one
    sequence per bench text, HF loop), teacher-forced through the engine's forward with the full-precision
    head and with the int8 one, and how often their argmax agrees."""
    prefix = tts.voice(None)
    exact, int8 = (EngineCore(tts.model, slots=1, int8_head=q).lm for q in (False, True))
    nll, agree = {"exact": [], "int8": []}, []
    for i, text in enumerate(TEXTS):
        ids, _ = text_prompt(tts.model, text)
        codes, _ = generate_codes(tts.model, text, prefix, SamplingParams(seed=i))
        tokens = torch.tensor([ids + [tts.model.vocab.audio_offset + c for c in codes]])
        targets = tokens[0, len(ids):]
        rows = {}
        for name, lm in (("exact", exact), ("int8", int8)):
            lm.reset(0)
            hidden = lm.forward(torch.cat([prefix.to(lm.kv.dtype), lm.embed(tokens)], dim=1), torch.tensor([0]))
            rows[name] = lm.logits(hidden[0, -len(targets) - 1: -1]).float()  # (J, V): the logits for each code
            nll[name].append(float(F.cross_entropy(rows[name], targets)))
        agree.append(float((rows["exact"].argmax(-1) == rows["int8"].argmax(-1)).float().mean()))
    return {"nll_exact": float(np.mean(nll["exact"])), "nll_int8": float(np.mean(nll["int8"])),
            "top1_agreement": float(np.mean(agree))}


def run_bench(tts: TTS, concurrency: list[int], rounds: int = 1) -> dict:
    """Single stream, the sweep, and for the embedded torch engine its latency breakdown and the HF baseline."""
    one_stream(tts, TEXTS[1], seed=0)  # warm-up
    single = [one_stream(tts, TEXTS[i % len(TEXTS)], seed=i) for i in range(4)]
    r = {
        "single": {"rtf": float(np.mean([r["rtf"] for r in single])),
                   "ttfa_p50_ms": float(np.percentile([r["ttfa_ms"] for r in single], 50))},
        "sweep": [concurrent(tts, n, rounds) for n in concurrency],
    }
    if tts.engine_name == "torch":
        r["breakdown"] = [breakdown(tts, b) for b in sorted({1, max(concurrency)})]
        r["hf_baseline"] = hf_baseline(tts)
        r["int8_head"] = int8_head_check(tts)
    return r


def write_bench_report(runs: dict[str, dict], peers: dict[str, dict], command: str, out, machine: str,
                       date: str) -> None:
    """Markdown tables + JSON + a plot of the concurrency sweep: runs = {engine: run_bench}, peers =
    {name: measure_peer}."""
    import json

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# Engine benchmark", "", f"Command: `{command}`", "", f"Machine: {machine}. Date: {date}.", "",
             "| engine | single-stream RTF (warm) | TTFA p50 ms |", "|---|---|---|"]
    lines += [f"| {name} | {r['single']['rtf']:.3f} | {r['single']['ttfa_p50_ms']:.0f} |" for name, r in runs.items()]
    lines += [f"| HF `transformers` loop (same checkpoint, batch 1) | {r['hf_baseline']['rtf']:.3f} | — |"
              for r in runs.values() if "hf_baseline" in r]
    lines += [f"| peer: {name} | {p['rtf']:.3f} | {p['ttfa_p50_ms']:.0f} |" for name, p in peers.items()]
    lines += ["", "| engine | streams | aggregate × real time | per-stream RTF | TTFA p50 ms | TTFA p95 ms | underruns "
              "| stall ms per stream, mean / max |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {name} | {s['streams']} | {s['aggregate_x_realtime']:.1f} | {s['rtf_mean']:.3f} | "
              f"{s['ttfa_p50_ms']:.0f} | {s['ttfa_p95_ms']:.0f} | {s['underruns']}/{s['requests']} | "
              f"{s['stall_ms_mean']:.0f} / {s['stall_ms_max']:.0f} |"
              for name, r in runs.items() for s in r["sweep"]]
    for name, r in runs.items():
        if "breakdown" in r:
            lines += ["", f"Latency breakdown ({name} engine):", "",
                      "| batch | prefill ms | decode step ms | codec step ms (one frame for every stream) |", "|---|---|---|---|"]
            lines += [f"| {b['batch']} | {b['prefill_ms']:.1f} | {b['decode_step_ms']:.1f} | {b['codec_step_ms']:.2f} |"
                      for b in r["breakdown"]]
        if "int8_head" in r:
            q = r["int8_head"]
            lines += ["", f"Int8 output head ({name} engine): NLL of the model's own samples {q['nll_exact']:.4f} "
                      f"with the full-precision head, {q['nll_int8']:.4f} with int8; argmax agreement "
                      f"{q['top1_agreement']:.1%}."]
    lines += ["", f"![concurrency sweep]({out.stem}.png)"]
    out.write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps({"engines": runs, "peers": peers}, indent=2))
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.6))
    for name, r in runs.items():
        n = [s["streams"] for s in r["sweep"]]
        ax[0].plot(n, [s["aggregate_x_realtime"] for s in r["sweep"]], "o-", label=name)
        ax[1].plot(n, [s["ttfa_p50_ms"] for s in r["sweep"]], "o-", label=f"{name} p50")
        ax[1].plot(n, [s["ttfa_p95_ms"] for s in r["sweep"]], "s--", label=f"{name} p95")
    ax[0].set_xscale("log", base=2), ax[0].set_xlabel("concurrent streams"), ax[0].set_ylabel("aggregate × real time")
    ax[1].set_xscale("log", base=2), ax[1].set_xlabel("concurrent streams"), ax[1].set_ylabel("TTFA ms")
    ax[0].legend(), ax[1].legend()
    fig.tight_layout()
    fig.savefig(out.with_suffix(".png"), dpi=100)
    plt.close(fig)
