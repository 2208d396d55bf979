"""The engine interface on an unmodified vLLM (`AsyncLLM`): the same requests in, the same Streams out.

The voice prefix and the text layout go in as one `EmbedsPrompt` (prefix vectors + token embeddings, the
exact input the torch engine prefills), sampling is restricted to audio codes + <eos> with
`allowed_token_ids`, tokens stream back as DELTA outputs, and `Stream.close` aborts the request. vLLM runs
its asyncio loop in a thread of its own, so callers keep the blocking Stream API of the torch engine.

Differences from the torch engine: vLLM's repetition penalty looks at every generated code rather than a
recent window, and two-pass CFG is not available (serve the DPO-distilled single-pass model instead).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import threading
from pathlib import Path

import torch

from gepard.engine.base import TOP_CODES, Output, Request, Top
from gepard.engine.runner import Stream
from gepard.lm.speech_lm import SpeechLM
from gepard.paths import cache_dir
from gepard.precision import native_bf16


class VLLMEngine:
    def __init__(self, model: SpeechLM, model_dir: str | Path, max_streams: int = 64, dtype: str | None = None,
                 kv_cache_gib: int = 2):
        """dtype: the checkpoint's own (config.json) unless given, fp32 for a bf16 checkpoint on a CPU that
        emulates bf16 (gepard/precision.py); the context is the model's max positions."""
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(kv_cache_gib))
        os.environ.setdefault("VLLM_CACHE_ROOT", str(cache_dir() / "vllm"))
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        self.model, self.vocab = model, model.vocab
        self.allowed = [*range(self.vocab.audio_offset, self.vocab.size), self.vocab.special("<eos>")]
        self.streams: dict[int, Stream] = {}
        self.ids = itertools.count()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="gepard-vllm", daemon=True)
        self.thread.start()
        dtype = dtype or json.loads((Path(model_dir) / "config.json").read_text()).get("dtype", "bfloat16")
        if dtype == "bfloat16" and not torch.cuda.is_available() and not native_bf16("cpu"):
            dtype = "float32"
        max_len = model.lm.config.max_position_embeddings
        # On a CPU, vLLM (0.32) crashes the engine when a prompt split by chunked prefill belongs to a seeded
        # request ("CPU Generator does not use offset"): there, prompts are prefilled whole.
        chunked = torch.cuda.is_available()
        args = AsyncEngineArgs(model=str(model_dir), skip_tokenizer_init=True, enable_prompt_embeds=True, dtype=dtype,
                               max_model_len=max_len, max_num_seqs=max_streams, enforce_eager=True, seed=0,
                               enable_chunked_prefill=chunked, max_num_batched_tokens=None if chunked else max_len,
                               logprobs_mode="processed_logits", max_logprobs=TOP_CODES + 1)  # + <eos>
        self.llm = asyncio.run_coroutine_threadsafe(self._start(AsyncLLM, args), self.loop).result()

    @staticmethod
    async def _start(cls, args):
        """AsyncLLM binds to the running loop it is created in: create it in ours."""
        return cls.from_engine_args(args)

    def submit(self, request: Request) -> Stream:
        from vllm.sampling_params import RequestOutputKind, SamplingParams

        s = request.sampling
        if s.cfg_scale != 1.0:
            raise ValueError("two-pass CFG runs on the torch engine only; vLLM serves single-pass models")
        with torch.no_grad():  # (K + L, H): exactly what the torch engine prefills
            embeds = self.model.embed(request.prefix[None], torch.tensor([request.prompt_ids]))[0].float()
        params = SamplingParams(
            temperature=s.temperature, top_k=s.top_k if s.top_k > 0 else -1, top_p=s.top_p,
            repetition_penalty=s.repetition_penalty, seed=s.seed, max_tokens=request.max_frames,
            stop_token_ids=[self.vocab.special("<eos>")], allowed_token_ids=self.allowed, detokenize=False,
            logprobs=TOP_CODES + 1, output_kind=RequestOutputKind.DELTA)
        stream = Stream(self.cancel, next(self.ids))
        self.streams[stream.request_id] = stream
        temperature = s.temperature if s.temperature > 0 else 1.0  # vLLM divides greedy rows by 1
        asyncio.run_coroutine_threadsafe(self._generate(stream, embeds, params, temperature), self.loop)
        return stream

    async def _generate(self, stream: Stream, embeds: torch.Tensor, params, temperature: float) -> None:
        rid, eos = stream.request_id, self.vocab.special("<eos>")
        try:
            async for out in self.llm.generate({"prompt_embeds": embeds}, params, str(rid)):
                completion = out.outputs[0]
                for token, logprobs in zip(completion.token_ids, completion.logprobs):
                    if token != eos:
                        top = self._top(logprobs, temperature)
                        stream.events.put(Output(rid, token - self.vocab.audio_offset, top=top))
                if out.finished:
                    reason = "stop" if completion.finish_reason == "stop" else "length"
                    stream.events.put(Output(rid, None, reason))
        except asyncio.CancelledError:
            stream.events.put(Output(rid, None, "cancelled"))
        except Exception as e:  # noqa: BLE001 - the caller must hear of it, or it waits forever
            stream.events.put(Output(rid, None, "error", repr(e)))
        finally:
            self.streams.pop(rid, None)

    def _top(self, logits: dict, temperature: float) -> Top:
        """vLLM's processed logits of one step (token id -> Logprob: logit / temperature after the allowed-token
        mask and penalties) -> its TOP_CODES likeliest audio codes and their logits, as the torch engine reports
        them (engine/base.py `Output.top`)."""
        audio = sorted(((p.logprob * temperature, t - self.vocab.audio_offset) for t, p in logits.items()
                        if t >= self.vocab.audio_offset), reverse=True)[:TOP_CODES]
        return tuple(c for _, c in audio), tuple(p for p, _ in audio)

    async def _stop_output_handler(self) -> None:
        handler = self.llm.output_handler
        if handler is not None:
            handler.cancel()
            await asyncio.gather(handler, return_exceptions=True)

    def cancel(self, request_id: int) -> None:
        if self.streams.pop(request_id, None) is not None:
            asyncio.run_coroutine_threadsafe(self.llm.abort(str(request_id)), self.loop)

    @property
    def active(self) -> int:
        return len(self.streams)

    def shutdown(self) -> None:
        for rid in list(self.streams):
            self.cancel(rid)
        # stop the output handler first: vLLM stops the engine process before it, and the handler would
        # report the engine's exit as a crash
        asyncio.run_coroutine_threadsafe(self._stop_output_handler(), self.loop).result()
        self.llm.shutdown()
        self.llm = None  # its finalizer would shut it down again at interpreter exit, when that fails
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
