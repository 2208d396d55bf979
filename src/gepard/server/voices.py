"""Durable uploaded voices: one prefix tensor + metadata per voice under a data directory.

Writes go to a temporary file and are renamed into place, so a crash mid-upload leaves no half voice.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file


class VoiceStore:
    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        for stale in self.folder.glob("*.tmp"):  # leftovers of a crash
            stale.unlink()

    def add(self, prefix: torch.Tensor, name: str, seconds: float) -> dict:
        voice_id = f"voice_{uuid.uuid4().hex[:12]}"
        meta = {"id": voice_id, "name": name, "reference_seconds": round(seconds, 2), "created": int(time.time())}
        tmp = self.folder / f"{voice_id}.tmp"
        save_file({"prefix": prefix.to(torch.bfloat16).contiguous()}, str(tmp), metadata={"meta": json.dumps(meta)})
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        tmp.replace(self.folder / f"{voice_id}.safetensors")
        return meta

    def _path(self, voice_id: str) -> Path | None:
        path = self.folder / f"{voice_id}.safetensors"
        return path if voice_id.startswith("voice_") and path.parent == self.folder and path.is_file() else None

    def get(self, voice_id: str) -> dict | None:
        path = self._path(voice_id)
        if path is None:
            return None
        from safetensors import safe_open

        with safe_open(str(path), "pt") as f:
            return json.loads(f.metadata()["meta"])

    def prefix(self, voice_id: str) -> torch.Tensor | None:
        path = self._path(voice_id)
        return load_file(str(path))["prefix"].float()[None] if path else None

    def list(self) -> list[dict]:
        return sorted((self.get(p.stem) for p in self.folder.glob("voice_*.safetensors")), key=lambda m: m["created"])

    def delete(self, voice_id: str) -> bool:
        path = self._path(voice_id)
        if path is None:
            return False
        path.unlink()
        return True
