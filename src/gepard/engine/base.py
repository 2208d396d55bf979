"""What every engine takes and gives: a request (voice prefix + prompt tokens + sampling) in, audio codes out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importing torch takes seconds; the engine process's front end does not need it
    import torch


DEFAULT_TEMPERATURE = 0.3  # docs/results/temperature_dec5.md: 0-0.3 fail fewer short replies than 0.5, same WER
DEFAULT_TOP_P = 1.0  # off: 0.95 spoke no better (docs/results/lm.md) and made vLLM sort every row's logits
TOP_CODES = 20  # each Output carries the step's this-many likeliest codes (vLLM returns at most 20 by default)


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = DEFAULT_TEMPERATURE  # 0 = greedy
    top_k: int = 100  # 0 = off
    top_p: float = DEFAULT_TOP_P  # 1 = off
    repetition_penalty: float = 1.0  # > 1 discourages codes seen in the last `repetition_window` frames
    repetition_window: int = 16
    seed: int = 0
    cfg_scale: float = 1.0  # two-pass text CFG when != 1 (needs Request.uncond_prompt_ids)
    cfg_frames: int = 20  # CFG applies to the first this-many frames

    def describe(self) -> str:
        """'temperature 0.8, top-k 100, top-p 0.95', for reports."""
        return f"temperature {self.temperature:g}, top-k {self.top_k}, top-p {self.top_p:g}"


@dataclass
class Request:
    prefix: torch.Tensor  # (K, H) voice prefix embeddings
    prompt_ids: list[int]  # text layout ending in <sos>
    max_frames: int
    sampling: SamplingParams = field(default_factory=SamplingParams)
    uncond_prompt_ids: list[int] | None = None  # the CFG branch's prompt (text dropped)


Top = tuple[tuple[int, ...], tuple[float, ...]]  # a step's likeliest audio codes, and their logits


@dataclass(frozen=True)
class Output:
    """One engine event for a request: a new audio code, or the end (reason: stop | length | cancelled | error).

    `top`: the TOP_CODES likeliest audio codes of the step and their logits in the distribution the code was
    sampled from, before temperature and top-k: log-probabilities up to one constant per step, which
    `gepard.codec.render` (turning them into decoder input) cancels.
    """

    request_id: int
    code: int | None
    finished: str | None = None
    error: str | None = None  # what went wrong, when finished == "error"
    top: Top | None = None


def check_request(request: Request) -> None:
    """Refuse a request no engine can run (ValueError), before it is queued."""
    if not request.prompt_ids or request.max_frames <= 0:
        raise ValueError("a request needs prompt tokens and max_frames > 0")
    if request.sampling.cfg_scale != 1.0 and not request.uncond_prompt_ids:
        raise ValueError("cfg_scale != 1 needs uncond_prompt_ids")
