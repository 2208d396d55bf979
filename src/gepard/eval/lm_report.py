"""`gepard eval lm`: the speech LM on held-out sentences and the short-register list -> docs/results/lm.md."""

from __future__ import annotations

import datetime
import itertools
import json
import time
import zlib
from dataclasses import replace
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from gepard.api import TTS
from gepard.audio import load_audio
from gepard.codec.render import RENDERINGS
from gepard.data.manifests import Utterance, shared_split
from gepard.data.prepare import read_shards
from gepard.eval.asr import Transcriber, get_transcriber, utterance_wer, wer
from gepard.eval.machine import describe_machine
from gepard.eval.similarity import get_speaker_encoder
from gepard.engine.base import SamplingParams, Top
from gepard.lm.frontend import segment_chars
from gepard.lm.generate import text_request
from gepard.lm.layout import Repetition
from gepard.lm.voices import prefix_from_audio
from gepard.stream.text import segment_stream

NO_REPETITION = Repetition(below=0)
FAIL_WER = 0.5


def references_by_speaker(pool: list[Utterance]) -> dict[str, list[Utterance]]:
    by = defaultdict(list)
    for u in pool:
        if (u.duration or 0) >= 2.0:
            by[u.speaker].append(u)
    return by


def pick_reference(u: Utterance, by: dict[str, list[Utterance]], speaker: str | None = None) -> Utterance:
    """A different utterance of the same voice (or of `speaker`), chosen deterministically."""
    speaker = speaker or u.speaker
    others = [r for r in by.get(speaker, []) if r.id != u.id]
    if not others:
        raise ValueError(f"no reference clip for voice {speaker}")
    return others[zlib.crc32(u.id.encode()) % len(others)]


def assigned_voice(u: Utterance, voices: list[str] | None) -> str:
    """The voice `u` is spoken in: its own, or (with `voices`, if it is not one of them) one chosen by its id."""
    return voices[zlib.crc32(u.id.encode()) % len(voices)] if voices and u.speaker not in voices else u.speaker


class VoicePicker:
    """Utterance -> ((1, K, H) prefix, (T,) reference audio) of a different utterance of its voice from the
    teacher test set; with `voices`, an utterance in any other voice gets one of these (chosen by its id)."""

    def __init__(self, tts: TTS, voices: list[str] | None = None):
        self.tts, self.voices = tts, voices
        self.by = references_by_speaker(shared_split("teacher_test"))
        self.cache: dict[str, tuple[torch.Tensor, np.ndarray]] = {}

    def speaker(self, u: Utterance) -> str:
        return assigned_voice(u, self.voices)

    def __call__(self, u: Utterance) -> tuple[torch.Tensor, np.ndarray]:
        ref = pick_reference(u, self.by, self.speaker(u))
        if ref.id not in self.cache:
            audio = load_audio(ref.audio)
            self.cache[ref.id] = (prefix_from_audio(self.tts.model, self.tts.codec, audio, ref.id)[None], audio)
        return self.cache[ref.id]


def synthesize_all(tts: TTS, jobs: list[tuple[str, torch.Tensor, Repetition | None]], desc: str,
                   sampling: SamplingParams = SamplingParams(seed=0),
                   concurrency: int = 16) -> list[tuple[np.ndarray, bool]]:
    """generate_frames, each utterance rendered as `tts` renders it -> [(audio (T,), stopped before the guard)]."""
    return [(tts.render(frames), ok) for frames, ok in generate_frames(tts, jobs, desc, sampling, concurrency)]


def generate_all(tts: TTS, jobs: list[tuple[str, torch.Tensor, Repetition | None]], desc: str,
                 sampling: SamplingParams = SamplingParams(seed=0),
                 concurrency: int = 16) -> list[tuple[list[int], bool]]:
    """generate_frames, codes only -> [(codes, stopped before the guard)]."""
    return [([code for code, _ in frames], ok) for frames, ok in generate_frames(tts, jobs, desc, sampling, concurrency)]


def generate_frames(tts: TTS, jobs: list[tuple[str, torch.Tensor, Repetition | None]], desc: str,
                    sampling: SamplingParams = SamplingParams(seed=0),
                    concurrency: int = 16) -> list[tuple[list[tuple[int, Top | None]], bool]]:
    """(text, (1, K, H) prefix, repetition or None for the model's) jobs, run `concurrency` segments at a time
    through the engine -> [([(code, top)], stopped before the guard)]. A text is cut into segments as
    `TTS.stream` cuts it (segment i sampled with seed + i); its segments' frames make one utterance.

    Reproducible: every request is built (text front end included) before any is submitted, and a batch is
    submitted at once, so the engine admits and batches them the same way in every run (tokens depend on
    the batch a request decodes in)."""
    max_chars = segment_chars(tts.model.text_front_end)
    segments = [(j, i, segment, prefix, rep) for j, (text, prefix, rep) in enumerate(jobs)
                for i, segment in enumerate(segment_stream([text], max_chars))]
    parts = [(j, text_request(tts.model, segment, prefix, replace(sampling, seed=sampling.seed + i), rep))
             for j, i, segment, prefix, rep in tqdm(segments, desc=f"{desc}: text", unit="segment", leave=False)]
    frames: list[list[tuple[int, Top | None]]] = [[] for _ in jobs]
    stopped = [True] * len(jobs)
    with tqdm(total=len(parts), desc=desc, unit="segment") as bar:
        for start in range(0, len(parts), concurrency):
            batch = parts[start: start + concurrency]
            streams = [tts.engine.submit(request) for _, request in batch]
            for (j, _), stream in zip(batch, streams):
                frames[j] += list(stream.frames())
                stopped[j] = stopped[j] and stream.finished == "stop"
                bar.update(1)
    return list(zip(frames, stopped))


def speak_short_register(tts: TTS, items: list[Utterance], voice_of: VoicePicker, asr: Transcriber,
                         sampling: SamplingParams, repetition: Repetition | None, desc: str) -> list[dict]:
    """Each short-register item spoken once -> [{seed, asr, stopped, failed}]; failed: no stop before the
    max-frame guard, or utterance WER > FAIL_WER."""
    generated = synthesize_all(tts, [(u.text, voice_of(u)[0], repetition) for u in items], desc, sampling)
    out = []
    for u, (audio, stopped) in zip(items, generated):
        hyp = asr.transcribe(audio)
        out.append({"seed": sampling.seed, "asr": hyp, "stopped": stopped,
                    "failed": (not stopped) or utterance_wer(u.reference_text, hyp) > FAIL_WER})
    return out


def evaluate_lm(tts: TTS, limit: int = 0, threads: int = 2, sampling: SamplingParams = SamplingParams(seed=0),
                plain_short: bool = True, voices: list[str] | None = None, short_seeds: int = 2) -> dict:
    """Held-out sentences (WER, cosine, duration error, compute) and the short-register list, each item spoken
    with `short_seeds` seeds (failure rate with the model's text repetition and, if plain_short, without; two
    seeds bring the runaway rate over 500 generations). `voices`: only the test sentences of these corpus
    voices, and short-register items spoken in one of them (for a model trained on a few voices)."""
    torch.set_num_threads(threads)
    asr, speakers = get_transcriber(threads), get_speaker_encoder()
    loops_before = asr.loops
    voice_of = VoicePicker(tts, voices)
    test = [u for u in shared_split("teacher_test") if not voices or u.speaker in voices]
    test = test[:limit] if limit else test
    rows = []
    start = time.perf_counter()
    generated = synthesize_all(tts, [(u.text, voice_of(u)[0], None) for u in test], "test sentences", sampling)
    elapsed = time.perf_counter() - start
    for u, (audio, stopped) in zip(test, generated):
        original_s = len(load_audio(u.audio)) / tts.sample_rate
        rows.append({"id": u.id, "text": u.text, "asr": asr.transcribe(audio), "stopped": stopped,
                     "cosine": speakers.cosine(audio, voice_of(u)[1]) if len(audio) else 0.0,
                     "frames": round(len(audio) / tts.codec.config.samples_per_frame),
                     "duration_error": abs(len(audio) / tts.sample_rate - original_s) / original_s})
    short = shared_split("short_register")
    short = short[:limit] if limit else short
    short_rows = [{"id": u.id, "text": u.text} for u in short]
    plain_short = plain_short and tts.model.text_front_end != "track"  # a track (200 tokens) is never repeated
    modes = (("repeated", None), ("plain", NO_REPETITION))[: 2 if plain_short else 1]
    for (name, rep), k in itertools.product(modes, range(short_seeds)):
        spoken_once = speak_short_register(tts, short, voice_of, asr, replace(sampling, seed=sampling.seed + k), rep,
                                           f"short register, {name}, seed {sampling.seed + k}")
        for row, generation in zip(short_rows, spoken_once):
            row.setdefault(name, []).append(generation)

    def spoken(name: str) -> list[dict]:
        return [g for r in short_rows for g in r[name]]

    generations = [r["stopped"] for r in rows] + [g["stopped"] for name, _ in modes for g in spoken(name)]
    frames = sum(r["frames"] for r in rows)
    guided = sum(min(r["frames"], sampling.cfg_frames) for r in rows) if sampling.cfg_scale != 1.0 else 0
    return {
        "wer": 100 * wer([r["text"] for r in rows], [r["asr"] for r in rows]),
        "cosine_mean": float(np.mean([r["cosine"] for r in rows])),
        "duration_error": 100 * float(np.mean([r["duration_error"] for r in rows])),
        "decode_passes_per_audio_s": (frames + guided) / max(frames / tts.model.codec_frame_rate, 1e-9),
        "wall_s_per_audio_s": elapsed / max(frames / tts.model.codec_frame_rate, 1e-9),
        "test_utterances": len(rows),
        "short_failure_repeated": 100 * float(np.mean([g["failed"] for g in spoken("repeated")])),
        "short_failure_plain": 100 * float(np.mean([g["failed"] for g in spoken("plain")])) if plain_short else None,
        "short_items": len(short_rows), "short_seeds": short_seeds,
        "runaway_rate": 100 * (1 - float(np.mean(generations))), "generations": len(generations),
        "params": sum(p.numel() for p in tts.model.lm.parameters()),
        "voice_params": sum(p.numel() for p in tts.model.voice.parameters()),
        "machine": describe_machine(), "date": datetime.date.today().isoformat(), "engine": tts.engine_name,
        "voices": voices, "temperature": sampling.temperature, "top_p": sampling.top_p, "rendering": tts.rendering,
        "asr_loops": asr.loops - loops_before,
        "rows": rows, "short_rows": short_rows,
    }


def write_report(r: dict, command: str, out: Path, train_log: Path | None = None) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    ok = lambda good: "✅" if good else "❌"  # noqa: E731
    lines = [
        "# Speech LM", "", f"Command: `{command}`", "", f"Machine: {r['machine']}. Date: {r['date']}.", "",
        f"LM parameters: {r['params'] / 1e6:.1f} M (stock Qwen3); reference compressor: {r['voice_params'] / 1e6:.2f} M.",
        "", "| measure | value | target |", "|---|---|---|",
        f"| WER on held-out sentences ({r['test_utterances']} utterances, Whisper tiny.en) | {r['wer']:.2f} % "
        f"{ok(r['wer'] <= 8)} | ≤ 8 % |",
        f"| resemblyzer cosine to the reference (another utterance of the voice) | {r['cosine_mean']:.3f} "
        f"{ok(r['cosine_mean'] >= 0.75)} | ≥ 0.75 |",
        f"| duration error against the original recording, mean | {r['duration_error']:.1f} % | — |",
        f"| short-register failure rate, with text repetition ({r['short_items']} items × "
        f"{r['short_seeds']} seeds) "
        f"| {r['short_failure_repeated']:.1f} % | — |",
        "| short-register failure rate, without text repetition | "
        + ("— (same prompts: a phone track is never repeated)" if r["short_failure_plain"] is None
           else f"{r['short_failure_plain']:.1f} %") + " | — |",
        f"| runaway rate (no stop before the max-frame guard), {r['generations']} generations "
        f"| {r['runaway_rate']:.2f} % | — |",
        "", f"Failure: no stop before the guard, or utterance WER > {FAIL_WER:.0%}. Sampling: "
        f"{SamplingParams(temperature=r.get('temperature', 0.8), top_p=r.get('top_p', 0.95)).describe()}, seed 0; "
        f"engine: {r.get('engine', 'torch')}; decoder input: {RENDERINGS[r.get('rendering', 'codes')]}. Whisper "
        f"transcripts that looped and were decoded again with a beam of 5: {r.get('asr_loops', '—')}."
        + (f" Voices: {', '.join(r['voices'])} (test sentences of these voices only; short-register items spoken "
           "in one of them)." if r.get("voices") else ""),
    ]
    if train_log and train_log.exists():
        lines += ["", training_facts(train_log)]
    out.write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps(r, indent=2))  # with every utterance's transcript


def training_facts(train_log: Path) -> str:
    """One line from a run's files: steps, hours and devices, data hours (from its shards), model size."""
    log = [json.loads(line) for line in train_log.read_text().splitlines() if line.strip()]
    cfg = json.loads((train_log.parent / "train_config.json").read_text())
    frames = sum(len(codes) for folder in cfg["shards"] for _, text, _, codes in read_shards(folder) if text.strip())
    device = f"{log[-1].get('processes', 1)} × {log[-1].get('device', 'cpu')}"
    precision = log[-1].get("precision", "bf16 autocast")  # logs from before runs recorded it were all bf16
    return (f"Training: {log[-1]['step']} steps in {log[-1]['elapsed_s'] / 3600:.2f} h ({device}, {precision}); "
            f"data: {frames / cfg['codec_frame_rate'] / 3600:.2f} h of transcribed speech "
            f"({', '.join(cfg['shards'])}); {cfg['lm']['layers']} layers × {cfg['lm']['hidden_size']} wide.")
