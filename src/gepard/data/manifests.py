"""Utterance manifests: the shared corpus's JSONL, generic JSONL, and LJSpeech-style metadata.csv."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

from gepard.paths import shared_data_dir


@dataclass(frozen=True)
class Utterance:
    id: str
    audio: Path  # absolute path
    text: str
    speaker: str
    duration: float | None = None
    kind: str = "real"  # "teacher" | "real"
    source: str = ""
    reference_text: str = ""  # best transcript for WER: `text`, else a supplied ASR transcript


def read_jsonl(path: str | Path, root: str | Path | None = None) -> list[Utterance]:
    """Rows with `audio`, `text`, `speaker` (+ optional `id`, `duration`, `kind`, `source`, `asr_text`).

    Relative audio paths are taken relative to `root` (default: the manifest's folder).
    """
    path = Path(path)
    root = Path(root) if root else path.parent
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                audio = Path(row["audio"])
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise ValueError(f"{path}:{n}: not a manifest row with an 'audio' field ({e})") from None
            text = row.get("text") or ""
            out.append(
                Utterance(
                    id=str(row.get("id") or audio.stem),
                    audio=audio if audio.is_absolute() else root / audio,
                    text=text,
                    speaker=str(row.get("speaker") or "unknown"),
                    duration=row.get("duration"),
                    kind=row.get("kind", "real"),
                    source=row.get("source", ""),
                    reference_text=text or row.get("asr_text") or "",
                )
            )
    return out


def read_ljspeech(folder: str | Path, speaker: str = "ljspeech") -> list[Utterance]:
    """`metadata.csv` (id|text|normalized text) beside `wavs/<id>.wav`, one speaker."""
    folder = Path(folder)
    out = []
    with open(folder / "metadata.csv", encoding="utf-8", newline="") as f:
        for row in csv.reader(f, delimiter="|", quoting=csv.QUOTE_NONE):
            if not row:
                continue
            text = row[2] if len(row) > 2 and row[2] else row[1]
            out.append(Utterance(id=row[0], audio=folder / "wavs" / f"{row[0]}.wav", text=text, speaker=speaker,
                                 reference_text=text))
    return out


def read_manifest(path: str | Path) -> list[Utterance]:
    """Any supported manifest: a .jsonl file, or a folder (or file) in LJSpeech layout."""
    path = Path(path)
    if path.is_dir() or path.name == "metadata.csv":
        return read_ljspeech(path if path.is_dir() else path.parent)
    return read_jsonl(path)


SHARED_SPLITS = ("codec_train", "teacher_test", "real_heldout", "short_register")

# The held-out slice of real speakers: LibriSpeech test-other (10 speakers), never trained on.
HELDOUT_REAL_SUBSET = "test-other"


def shared_split(name: str, data: Path | None = None) -> list[Utterance]:
    """Named splits of the shared corpus.

    codec_train: teacher train + real speech minus held-out speakers; teacher_test;
    real_heldout: the held-out real speakers; short_register.
    """
    data = data or shared_data_dir()
    if data is None:
        raise FileNotFoundError("the shared corpus is not here (set GEPARD_DATA to its folder)")
    m = data / "manifests"
    if name == "teacher_test":
        return read_jsonl(m / "teacher_test.jsonl", data)
    if name == "short_register":
        return read_jsonl(m / "short_register.jsonl", data)
    real = _real_rows(m / "real.jsonl", data)
    if name == "real_heldout":
        return [u for u, heldout in real if heldout]
    if name == "codec_train":
        return read_jsonl(m / "teacher_train.jsonl", data) + [u for u, heldout in real if not heldout]
    raise ValueError(f"unknown split {name!r}: use codec_train, teacher_test, real_heldout or short_register")


def _real_rows(path: Path, data: Path) -> list[tuple[Utterance, bool]]:
    subsets = [json.loads(line).get("subset") for line in open(path, encoding="utf-8") if line.strip()]
    return [(u, s == HELDOUT_REAL_SUBSET) for u, s in zip(read_jsonl(path, data), subsets)]
