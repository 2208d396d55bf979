"""What the decoder is given for each of the LM's frames: the code it sampled, or the mean of its belief.

The LM samples one code per frame and reads that code back; the decoder need not render the sample. From the
step's likeliest codes and their probabilities (engine/base.py `Output.top`) it can render their mean FSQ
values instead: the frame the LM expects, with the sampling noise averaged out. The same rollouts read clearer
that way, to Whisper and to PocketSphinx (docs/results/soft_render.md). The shipped decoder has also been trained
on such means, the LM's teacher-forced ones (lm_values.py; docs/results/decoder_gta.md).
"""

from __future__ import annotations

import numpy as np
import torch

from gepard.codec.fsq import FSQ
from gepard.codec.model import Codec
from gepard.engine.base import Top

RENDERINGS = {"mean": "the mean values of each step's likeliest codes", "codes": "the sampled codes"}
DEFAULT_RENDERING = "mean"
MEAN_TEMPERATURE = 1.0  # the LM's own distribution over its likeliest codes (docs/results/soft_render.md)


def check_rendering(rendering: str) -> str:
    """The rendering, or a ValueError that names the choices."""
    if rendering not in RENDERINGS:
        raise ValueError(f"unknown rendering {rendering!r}: use one of {', '.join(RENDERINGS)}")
    return rendering


def frame_values(fsq: FSQ, frames: list[tuple[int, Top | None]], rendering: str = DEFAULT_RENDERING,
                 temperature: float = MEAN_TEMPERATURE) -> torch.Tensor:
    """[(code, top or None)] of one stream -> (n, D) decoder input: each code's FSQ values ("codes"), or the mean
    values of its step's top codes at `temperature` ("mean"; the code's own where the step has no top)."""
    check_rendering(rendering)
    codes = torch.tensor([code for code, _ in frames], dtype=torch.long)
    values = fsq.index_to_values(codes)  # (n, D)
    if rendering == "mean":
        for i, (_, top) in enumerate(frames):
            if top is not None:
                values[i] = mean_values(fsq, torch.tensor([top[0]]), torch.tensor([top[1]]), temperature)[0]
    return values


@torch.inference_mode()
def render_frames(codec: Codec, frames: list[tuple[int, Top | None]], rendering: str = DEFAULT_RENDERING) -> np.ndarray:
    """A whole utterance's [(code, top)] -> (T,) float32 audio, decoded offline from `rendering`'s values."""
    if not frames:
        return np.zeros(0, np.float32)
    return codec.decoder(frame_values(codec.fsq, frames, rendering)[None]).float()[0].numpy()


def mean_values(fsq: FSQ, codes: torch.Tensor, logits: torch.Tensor,
                temperature: float = MEAN_TEMPERATURE) -> torch.Tensor:
    """(n, k) codes and their (n, k) logits -> (n, D) the mean FSQ values of the codes under softmax(logits / T)."""
    probs = torch.softmax(logits.float() / temperature, -1)  # (n, k)
    return (probs[..., None] * fsq.index_to_values(codes.long())).sum(-2)
