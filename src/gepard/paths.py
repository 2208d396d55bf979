"""Where the shipped models and the shared corpus live."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def models_dir() -> Path:
    """$GEPARD_MODELS, else the checkout's models/ folder."""
    return Path(os.environ.get("GEPARD_MODELS") or REPO_ROOT / "models")


def lm_dir(path: str | Path | None = None) -> Path:
    """A speech LM folder (default: the shipped one); FileNotFoundError if it holds none."""
    path = Path(path) if path else models_dir() / "lm"
    if not (path / "gepard.json").is_file():
        raise FileNotFoundError(f"no speech LM at {path} (expected gepard.json, config.json, ...)")
    return path


def shared_data_dir() -> Path | None:
    """The shared corpus: $GEPARD_DATA, else ../shared/data beside the checkout; None if absent."""
    env = os.environ.get("GEPARD_DATA")
    for c in ([Path(env)] if env else []) + [REPO_ROOT.parent / "shared" / "data"]:
        if (c / "manifests").is_dir():
            return c
    return None


def cache_dir() -> Path:
    """$GEPARD_CACHE, else the checkout's .cache/ folder (ignored by git)."""
    return Path(os.environ.get("GEPARD_CACHE") or REPO_ROOT / ".cache")
