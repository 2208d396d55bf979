"""A one-line description of the machine a result was measured on."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import torch

from gepard.precision import native_bf16


def describe_machine() -> str:
    cpu = platform.processor() or "cpu"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                 if line.startswith("model name")]
        cpu = names[0] if names else cpu
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    bf16 = "native bf16" if native_bf16("cpu") else "no native bf16 (fp32)"
    gpu = f", GPU {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ", no GPU"
    return f"{cpu} ({bf16}), {os.cpu_count()} cores, {mem:.0f} GiB RAM{gpu}; torch {torch.__version__}"
