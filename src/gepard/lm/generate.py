"""Prompts for the speech LM, and the plain HF generation loop that the engine is checked against."""

from __future__ import annotations

import torch

from gepard.engine.base import Request, SamplingParams
from gepard.engine.sampling import sample_tokens
from gepard.lm.layout import Repetition, prompt_tokens
from gepard.lm.speech_lm import SpeechLM
from gepard.lm.track import TRACK_FRAMES

MAX_TEXT_TOKENS = 400  # longer texts are refused; streaming segmentation splits long input first


def max_frames_for(n_text_tokens: int, frame_rate: float, front_end: str = "text") -> int:
    """The runaway guard: ~3x a slow speaking rate for the text, at least 2 s; a phone track says how long
    the speech is, so there it is the track's length plus 1 s."""
    if front_end == "track":
        return TRACK_FRAMES + int(frame_rate)
    return int(frame_rate * max(2.0, 0.75 * n_text_tokens))


def text_prompt(model: SpeechLM, text: str, repetition: Repetition | None = None) -> tuple[list[int], int]:
    """Text -> (prompt token ids, runaway guard in frames); repetition defaults to the checkpoint's own."""
    if not text or not text.strip():
        raise ValueError("the text is empty")
    ids = model.encode_text(text.strip())
    if len(ids) > MAX_TEXT_TOKENS:
        raise ValueError(f"the text is {len(ids)} tokens long; the limit for one utterance is {MAX_TEXT_TOKENS}")
    guard = max_frames_for(len(ids), model.codec_frame_rate, model.text_front_end)
    return prompt_tokens(ids, model.vocab, (repetition or model.repetition).copies(len(ids))), guard


def text_request(model: SpeechLM, text: str, prefix: torch.Tensor, sampling: SamplingParams = SamplingParams(),
                 repetition: Repetition | None = None) -> Request:
    """An engine request for `text` in the voice of the (1, K, H) prefix, with the runaway guard set."""
    ids, guard = text_prompt(model, text, repetition)
    uncond = prompt_tokens(model.null_text(), model.vocab, 1) if sampling.cfg_scale != 1.0 else None
    return Request(prefix[0], ids, guard, sampling, uncond)


@torch.inference_mode()
def generate_codes(model: SpeechLM, text: str, prefix: torch.Tensor, sampling: SamplingParams = SamplingParams(),
                   max_frames: int | None = None, repetition: Repetition | None = None,
                   trace: list[tuple[float, float]] | None = None) -> tuple[list[int], bool]:
    """Text + (1, K, H) voice prefix -> (codes, stopped); stopped is False if the guard cut it off.

    trace: if given, gets one (entropy, NLL of the sampled token) per step, in nats, from the model's
    distribution over audio codes + <eos> (before temperature and top-k/top-p).
    """
    ids, guard = text_prompt(model, text, repetition)
    vocab = model.vocab
    limit = max_frames or guard
    allowed = torch.full((vocab.size,), float("-inf"))
    allowed[vocab.audio_offset:] = 0.0
    allowed[vocab.special("<eos>")] = 0.0
    gen = torch.Generator().manual_seed(sampling.seed)
    out = model.lm(inputs_embeds=model.embed(prefix, torch.tensor([ids])), use_cache=True)
    codes: list[int] = []
    while len(codes) < limit:
        logits = out.logits[0, -1].float() + allowed
        [token] = sample_tokens(logits[None], [sampling], [gen])
        if trace is not None:
            logp = torch.log_softmax(logits, -1)
            trace.append((float(-(logp.exp() * logp.nan_to_num(neginf=0.0)).sum()), float(-logp[token])))
        if token == vocab.special("<eos>"):
            return codes, True
        codes.append(token - vocab.audio_offset)
        out = model.lm(input_ids=torch.tensor([[token]]), past_key_values=out.past_key_values, use_cache=True)
    return codes, False
