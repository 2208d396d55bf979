"""The embedded torch engine's core: slots, chunked prefill, one batched decode step, continuous batching.

Synchronous and step-driven: `add` queues a request, each `step` admits waiting requests into free slots,
runs a part of their prompts (prefill) and advances every decoding request by one audio frame, returning the
new codes. Requests join and leave between any two steps; `cancel` frees a slot at once. A runner thread
drives it for streaming.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field

import torch

from gepard.engine.base import Output, Request, Top, check_request
from gepard.engine.cached_lm import CachedLM
from gepard.engine.sampling import apply_repetition_penalty, candidates, sample_tokens, top_codes
from gepard.lm.speech_lm import SpeechLM


DEFAULT_PREFILL_CHUNK = 128  # prompt positions in a decode step: docs/results/bench_chunked_prefill.md


@dataclass
class Active:
    request_id: int
    request: Request
    slot: int
    uncond_slot: int | None
    generator: torch.Generator
    codes: list[int] = field(default_factory=list)
    last_token: int | None = None
    prompt_logits: torch.Tensor | None = None  # (V,) the conditional prompt's, while the unconditional one runs


@dataclass
class Prefill:
    """A prompt on its way into one slot's cache, a chunk a step while other requests decode."""

    state: Active
    slot: int
    embeds: torch.Tensor  # (T, H) the prompt positions not yet run


class EngineCore:
    def __init__(self, model: SpeechLM, slots: int = 16, max_len: int = 2048, int8_head: bool = False,
                 prefill_chunk: int = DEFAULT_PREFILL_CHUNK, batch_invariant: bool = False):
        self.model, self.vocab, self.prefill_chunk = model, model.vocab, prefill_chunk
        self.lm = CachedLM(model.lm, slots, max_len, int8_head, batch_invariant)
        self.free = list(range(slots))
        self.waiting: deque[tuple[int, Request]] = deque()
        self.prefilling: deque[Prefill] = deque()
        self.active: dict[int, Active] = {}
        self.ids = itertools.count()
        eos = self.vocab.special("<eos>")
        self.blocked = torch.tensor([i for i in range(self.vocab.audio_offset) if i != eos])  # text and specials

    def add(self, request: Request) -> int:
        check_request(request)
        rid = next(self.ids)
        self.waiting.append((rid, request))
        return rid

    def cancel(self, request_id: int) -> bool:
        """Stop a request now; its slot is free for the next step. False if it was not running or queued."""
        for i, (rid, _) in enumerate(self.waiting):
            if rid == request_id:
                del self.waiting[i]
                return True
        state = self.active.pop(request_id, None)
        if state is None:
            return False
        self.prefilling = deque(p for p in self.prefilling if p.state is not state)
        self._release(state)
        return True

    @property
    def busy(self) -> bool:
        return bool(self.active or self.waiting)

    def step(self) -> list[Output]:
        """Admit what fits, then advance every decoding request by one frame and the oldest unfinished
        prompt by one chunk of `prefill_chunk` positions, in one pass over the weights.

        A whole prompt (~200 positions) costs twice a 16-stream decode step: run whole in the steps of the
        running streams, a burst of arrivals slowed every step until their audio ran dry
        (docs/results/bench_chunked_prefill.md). With nothing decoding, one request's prompt goes in whole (in
        chunks with `batch_invariant`, so that its bits never depend on the load).
        """
        self._admit()
        decoding = [s for s in self.active.values() if s.last_token is not None]
        if not decoding:
            return self._prefill_one_request()
        rows = [(s, s.slot) for s in decoding] + [(s, s.uncond_slot) for s in decoding if s.uncond_slot is not None]
        slots, counts = [slot for _, slot in rows], [1] * len(rows)
        x = self.lm.embed(torch.tensor([s.last_token for s, _ in rows], device=self.lm.device))  # (R, H)
        part = self.prefilling[0] if self.prefilling else None
        if part is not None:
            chunk = part.embeds[: self.prefill_chunk]
            x = torch.cat([x, chunk])
            slots.append(part.slot)
            counts.append(len(chunk))
        hidden = self.lm.forward_ragged(x, torch.tensor(slots, device=self.lm.device), counts)
        logits = self.lm.logits(hidden[: len(rows)])
        guided = [s for s in decoding if s.uncond_slot is not None]
        uncond = {s.request_id: logits[len(decoding) + i] for i, s in enumerate(guided)}
        outputs = self._emit(decoding, logits[: len(decoding)], uncond)
        if part is not None:
            outputs += self._chunk_done(part, len(chunk), hidden[-1])
        return outputs

    @staticmethod
    def _slots_needed(request: Request) -> int:
        return 2 if request.sampling.cfg_scale != 1.0 else 1

    def _admit(self) -> None:
        """Give waiting requests their slots and queue their prompts (the unconditional one after)."""
        while self.waiting and len(self.free) >= self._slots_needed(self.waiting[0][1]):
            rid, request = self.waiting.popleft()
            slot = self.free.pop()
            uncond = self.free.pop() if self._slots_needed(request) == 2 else None
            state = Active(rid, request, slot, uncond, torch.Generator().manual_seed(request.sampling.seed))
            self.active[rid] = state
            self.prefilling.append(Prefill(state, slot, self._prompt_embeds(slot, request.prefix,
                                                                            request.prompt_ids)))
            if uncond is not None:
                self.prefilling.append(Prefill(state, uncond, self._prompt_embeds(uncond, request.prefix,
                                                                                  request.uncond_prompt_ids)))

    def _prompt_embeds(self, slot: int, prefix: torch.Tensor, ids: list[int]) -> torch.Tensor:
        """(K, H) prefix + prompt ids -> (K + L, H) input embeddings; the slot's past is forgotten."""
        self.lm.reset(slot)
        tokens = self.lm.embed(torch.tensor(ids, device=self.lm.device))
        return torch.cat([prefix.to(tokens), tokens])

    def _prefill_one_request(self) -> list[Output]:
        """Run queued prompts until the oldest request can sample its first code."""
        outputs = []
        while self.prefilling and not outputs:
            part = self.prefilling[0]
            chunk = part.embeds[: self.prefill_chunk] if self.lm.batch_invariant else part.embeds
            hidden = self.lm.forward_ragged(chunk, torch.tensor([part.slot], device=self.lm.device), [len(chunk)])
            outputs = self._chunk_done(part, len(chunk), hidden[-1])
        return outputs

    def _chunk_done(self, part: Prefill, run: int, last: torch.Tensor) -> list[Output]:
        """`run` more positions of the oldest queued prompt went in (last: the last one's (H,) hidden state);
        once all of its request's prompts are in, the request samples its first code."""
        part.embeds = part.embeds[run:]
        if len(part.embeds):
            return []
        self.prefilling.popleft()
        state, logits = part.state, self.lm.logits(last[None])[0]  # (V,)
        if part.slot == state.uncond_slot:  # a guided request's prompts are both in
            return self._emit([state], state.prompt_logits[None], {state.request_id: logits})
        if state.uncond_slot is not None:
            state.prompt_logits = logits
            return []  # its unconditional prompt is next
        return self._emit([state], logits[None], {})

    def _emit(self, states: list[Active], logits: torch.Tensor, uncond: dict[int, torch.Tensor]) -> list[Output]:
        """Sample the next code of each request from its row of (B, V) logits (CFG-combined with its
        unconditional row in `uncond`, if any); finish a request on <eos> or at max_frames."""
        rows = []
        for state, row in zip(states, logits.float().cpu()):  # sampling runs on the CPU (per-request generators)
            s = state.request.sampling
            if state.request_id in uncond:
                base = uncond[state.request_id].float().cpu()
                row = base + s.cfg_scale * (row - base)
                if len(state.codes) + 1 >= s.cfg_frames:  # guidance is over: the second pass stops costing
                    self.free.append(state.uncond_slot)
                    state.uncond_slot = None
            recent = [self.vocab.audio_offset + c for c in state.codes[-s.repetition_window:]]
            rows.append(apply_repetition_penalty(row, recent, s.repetition_penalty))
        logits = torch.stack(rows)
        logits[:, self.blocked] = float("-inf")  # sample audio codes and <eos> only
        params = [s.request.sampling for s in states]
        likeliest = candidates(logits, params)
        tokens = sample_tokens(logits, params, [s.generator for s in states], likeliest)
        tops = top_codes(likeliest, params, self.vocab.audio_offset)
        return [self._advance(state, token, top) for state, token, top in zip(states, tokens, tops)]

    def _advance(self, state: Active, token: int, top: Top) -> Output:
        """Record one sampled token of a request (`top`: its step's likeliest codes)."""
        if token == self.vocab.special("<eos>"):
            return self._finish(state, "stop")
        code = token - self.vocab.audio_offset
        state.codes.append(code)
        state.last_token = token
        if len(state.codes) >= state.request.max_frames:
            self._finish(state, "length")
            return Output(state.request_id, code, "length", top=top)
        return Output(state.request_id, code, top=top)

    def _finish(self, state: Active, reason: str) -> Output:
        self.active.pop(state.request_id, None)
        self._release(state)
        return Output(state.request_id, None, reason)

    def _release(self, state: Active) -> None:
        self.free.append(state.slot)
        if state.uncond_slot is not None:
            self.free.append(state.uncond_slot)
