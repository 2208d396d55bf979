"""bf16 autocast only where the hardware multiplies bf16 natively."""

import torch

from gepard.precision import autocast, native_bf16, precision_name


def test_cpu_autocast_runs_bf16_only_where_the_cpu_has_it():
    with autocast("cpu"):
        product = torch.ones(4, 4) @ torch.ones(4, 4)
    assert (product.dtype == torch.bfloat16) == native_bf16("cpu")
    assert precision_name("cpu") == ("bf16 autocast" if native_bf16("cpu") else "fp32")


def test_cuda_always_counts_as_native():
    assert native_bf16("cuda") and precision_name("cuda") == "bf16 autocast"
