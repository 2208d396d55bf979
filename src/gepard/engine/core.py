"""The embedded torch engine's core: slots, prefill, one batched decode step, continuous batching.

Synchronous and step-driven: `add` queues a request, each `step` admits waiting requests into free slots
(prefill) and advances every active request by one audio frame, returning the new codes. Requests join
and leave between any two steps; `cancel` frees a slot at once. A runner thread drives it for streaming.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field

import torch

from gepard.engine.base import Output, Request, check_request
from gepard.engine.cached_lm import CachedLM
from gepard.engine.sampling import apply_repetition_penalty, sample_tokens
from gepard.lm.speech_lm import SpeechLM


@dataclass
class Active:
    request_id: int
    request: Request
    slot: int
    uncond_slot: int | None
    generator: torch.Generator
    codes: list[int] = field(default_factory=list)
    last_token: int | None = None


class EngineCore:
    def __init__(self, model: SpeechLM, slots: int = 16, max_len: int = 2048, int8_head: bool = False,
                 prefill_budget: int = 64, batch_invariant: bool = False):
        self.model, self.vocab, self.prefill_budget = model, model.vocab, prefill_budget
        self.lm = CachedLM(model.lm, slots, max_len, int8_head, batch_invariant)
        self.free = list(range(slots))
        self.waiting: deque[tuple[int, Request]] = deque()
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
        self._release(state)
        return True

    @property
    def busy(self) -> bool:
        return bool(self.active or self.waiting)

    def step(self) -> list[Output]:
        """Admit what fits, then advance every active request by one frame.

        Prefills in one step stop at `prefill_budget` prompt positions (one request always goes in): 16
        prefills at once would stall the running streams for a step of ~120 ms and their audio would run dry.
        """
        outputs, budget = [], self.prefill_budget
        while self.waiting and len(self.free) >= self._slots_needed(self.waiting[0][1]):
            rid, request = self.waiting[0]
            cost = len(request.prefix) + len(request.prompt_ids)
            if budget < self.prefill_budget and cost > budget:
                break
            budget -= cost
            self.waiting.popleft()
            outputs += self._prefill(rid, request)
        decoding = [s for s in self.active.values() if s.last_token is not None]
        if decoding:
            outputs += self._decode(decoding)
        return outputs

    @staticmethod
    def _slots_needed(request: Request) -> int:
        return 2 if request.sampling.cfg_scale != 1.0 else 1

    def _prefill(self, rid: int, request: Request) -> list[Output]:
        slot = self.free.pop()
        uncond = self.free.pop() if self._slots_needed(request) == 2 else None
        state = Active(rid, request, slot, uncond, torch.Generator().manual_seed(request.sampling.seed))
        self.active[rid] = state
        logits = self._prompt_logits(slot, request.prefix, request.prompt_ids)
        uncond_logits = {}
        if uncond is not None:
            uncond_logits[rid] = self._prompt_logits(uncond, request.prefix, request.uncond_prompt_ids)
        return self._emit([state], logits[None], uncond_logits)

    def _prompt_logits(self, slot: int, prefix: torch.Tensor, ids: list[int]) -> torch.Tensor:
        self.lm.reset(slot)
        tokens = self.lm.embed(torch.tensor([ids], device=self.lm.device))
        embeds = torch.cat([prefix[None].to(tokens), tokens], dim=1)
        return self.lm.logits(self.lm.forward(embeds, torch.tensor([slot], device=self.lm.device))[:, -1])[0]

    def _decode(self, states: list[Active]) -> list[Output]:
        rows = [(s, s.slot) for s in states] + [(s, s.uncond_slot) for s in states if s.uncond_slot is not None]
        slots = torch.tensor([slot for _, slot in rows], device=self.lm.device)
        tokens = self.lm.embed(torch.tensor([[s.last_token] for s, _ in rows], device=self.lm.device))
        logits = self.lm.logits(self.lm.forward(tokens, slots)[:, -1])
        guided = [s for s in states if s.uncond_slot is not None]
        uncond = {s.request_id: logits[len(states) + i] for i, s in enumerate(guided)}
        return self._emit(states, logits[: len(states)], uncond)

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
        tokens = sample_tokens(logits, [s.request.sampling for s in states],
                               [s.generator for s in states])
        return [self._advance(state, token) for state, token in zip(states, tokens)]

    def _advance(self, state: Active, token: int) -> Output:
        """Record one sampled token of a request."""
        if token == self.vocab.special("<eos>"):
            return self._finish(state, "stop")
        code = token - self.vocab.audio_offset
        state.codes.append(code)
        state.last_token = token
        if len(state.codes) >= state.request.max_frames:
            self._finish(state, "length")
            return Output(state.request_id, code, "length")
        return Output(state.request_id, code)

    def _finish(self, state: Active, reason: str) -> Output:
        self.active.pop(state.request_id, None)
        self._release(state)
        return Output(state.request_id, None, reason)

    def _release(self, state: Active) -> None:
        self.free.append(state.slot)
        if state.uncond_slot is not None:
            self.free.append(state.uncond_slot)
