"""Which precision decodes faster on this CPU, bf16 or fp32: measured once per machine and remembered.

Both kinds of CPU this project ran on multiply bf16 natively (AVX512-BF16), yet the same decoder streamed
2x faster in bf16 on an AMD EPYC (codec.md) and 1.3-1.5x slower on an Intel Xeon (codec_pl2_eval.md), so the
choice is a measurement, not a flag check.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import asdict

import torch

from gepard.codec.model import Codec
from gepard.eval.machine import describe_machine
from gepard.eval.speed import stream_seconds
from gepard.paths import cache_dir
from gepard.precision import native_bf16

CACHE_FILE = "decoder_precision.json"


def _load(path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def faster_decoder_dtype(codec: Codec) -> torch.dtype:
    """torch.bfloat16 or torch.float32 for `codec`'s decoder: fp32 where bf16 is not native; else whichever
    streams faster here, timed on first use (~1 s) and kept in the cache per machine, torch and codec shape."""
    if not native_bf16("cpu"):
        return torch.float32
    key = f"{describe_machine()} | {json.dumps(asdict(codec.config), sort_keys=True)}"
    path = cache_dir() / CACHE_FILE
    known = _load(path)
    if known.get(key) not in ("bf16", "fp32"):
        fp32, bf16 = copy.deepcopy(codec).float(), copy.deepcopy(codec)
        bf16.decoder.to(torch.bfloat16)
        known[key] = "bf16" if stream_seconds(bf16) < stream_seconds(fp32) else "fp32"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(f"{path.name}.{os.getpid()}")
            partial.write_text(json.dumps(known, indent=1))
            partial.replace(path)  # atomic: a process loading a codec beside this one never reads half a file
        except OSError:
            pass  # a read-only cache only costs the measurement again next time
    return torch.bfloat16 if known[key] == "bf16" else torch.float32
