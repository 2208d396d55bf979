"""Mixed precision where it pays: bf16 autocast on CUDA and on CPUs that multiply bf16 natively.

On a CPU without AVX512-BF16 or AMX (an AVX2-only AMD EPYC, say) oneDNN emulates bf16 matmuls, measured
~350x slower than fp32 on this project's machines, so training and scoring run in fp32 there.
"""

from __future__ import annotations

import functools

import torch


@functools.cache
def native_bf16(device_type: str) -> bool:
    """True where bf16 autocast is fast: CUDA, or a CPU with AVX512-BF16 or AMX tiles."""
    if device_type != "cpu":
        return True
    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


def autocast(device_type: str = "cpu") -> torch.autocast:
    """bf16 autocast for `device_type` ("cpu" or "cuda"), disabled (fp32) where bf16 is not native."""
    return torch.autocast(device_type, dtype=torch.bfloat16, enabled=native_bf16(device_type))


def precision_name(device_type: str = "cpu") -> str:
    """How training runs on this device, for logs and reports: "bf16 autocast" or "fp32"."""
    return "bf16 autocast" if native_bf16(device_type) else "fp32"
