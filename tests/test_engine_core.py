"""Continuous batching: batched equals alone, joins and leaves do not disturb others, cancel frees slots."""

import pytest
import torch

from gepard.engine.base import TOP_CODES, Request, SamplingParams
from gepard.engine.core import EngineCore
from gepard.engine.runner import EngineRunner
from gepard.lm.generate import generate_codes, text_prompt
from gepard.lm.layout import prompt_tokens
from tests.conftest import tiny_speech_lm

MODEL = tiny_speech_lm()
GREEDY = SamplingParams(temperature=0)


def request(text_ids, frames=12, sampling=GREEDY, seed_prefix=0, **kw) -> Request:
    gen = torch.Generator().manual_seed(seed_prefix)
    prefix = torch.randn(4, 32, generator=gen)
    return Request(prefix, prompt_tokens(text_ids, MODEL.vocab, 1), frames, sampling, **kw)


def run(core: EngineCore, until_idle=True, steps=None) -> dict[int, list]:
    out: dict[int, list] = {}
    n = 0
    while (core.busy if until_idle else n < steps):
        for o in core.step():
            out.setdefault(o.request_id, []).append((o.code, o.finished))
        n += 1
    return out


def codes(events) -> list[int]:
    return [c for c, _ in events if c is not None]


def alone(req: Request) -> list[int]:
    core = EngineCore(MODEL, slots=1, max_len=128)
    rid = core.add(req)
    return codes(run(core)[rid])


REQS = [request([5, 6, 7], seed_prefix=1), request([9], seed_prefix=2), request([3, 4, 5, 6, 7, 8], seed_prefix=3)]


def test_batched_greedy_tokens_equal_unbatched():
    core = EngineCore(MODEL, slots=4, max_len=128)
    ids = [core.add(r) for r in REQS]
    together = run(core)
    for rid, req in zip(ids, REQS):
        assert codes(together[rid]) == alone(req)
        assert together[rid][-1][1] in ("stop", "length")


def test_engine_equals_the_hf_generation_loop():
    prefix = torch.randn(1, 4, 32, generator=torch.Generator().manual_seed(7))
    reference, _ = generate_codes(MODEL, "hello there", prefix, GREEDY, max_frames=15)
    prompt, _ = text_prompt(MODEL, "hello there")
    assert alone(Request(prefix[0], prompt, 15, GREEDY)) == reference


def test_each_code_comes_with_its_steps_likeliest_codes_and_their_logits():
    req = REQS[0]
    core = EngineCore(MODEL, slots=1, max_len=128)
    core.add(req)
    first = next(o for o in core.step() if o.code is not None)
    with torch.inference_mode():  # the model's own first step
        logits = MODEL.lm(inputs_embeds=MODEL.embed(req.prefix[None], torch.tensor([req.prompt_ids]))).logits[0, -1]
    want = logits[MODEL.vocab.audio_offset:].topk(TOP_CODES)
    ids, top_logits = first.top
    assert list(ids) == want.indices.tolist() and ids[0] == first.code  # greedy: the likeliest code
    assert torch.allclose(torch.tensor(top_logits), want.values, atol=1e-4)


def test_joining_and_leaving_mid_batch_does_not_disturb_others():
    core = EngineCore(MODEL, slots=4, max_len=128)
    a = core.add(REQS[0])
    events = run(core, until_idle=False, steps=3)
    b = core.add(REQS[1])
    c = core.add(REQS[2])
    more = run(core, until_idle=False, steps=2)
    assert core.cancel(c)
    rest = run(core)
    got_a = codes(events.get(a, []) + more.get(a, []) + rest.get(a, []))
    got_b = codes(more.get(b, []) + rest.get(b, []))
    assert got_a == alone(REQS[0]) and got_b == alone(REQS[1])


def test_cancel_frees_the_slot_for_the_next_request():
    core = EngineCore(MODEL, slots=1, max_len=128)
    a = core.add(request([5, 6], frames=50))
    b = core.add(request([7, 8], frames=3))
    first = run(core, until_idle=False, steps=2)
    assert a in first and b not in first  # b waits: the only slot is taken
    assert core.cancel(a) and not core.cancel(a)
    rest = run(core)
    assert a not in rest and len(codes(rest[b])) <= 3 and core.free == [0]


def test_seeds_make_sampling_reproducible():
    s1, s2 = SamplingParams(seed=1), SamplingParams(seed=2)
    assert alone(request([5, 6], frames=20, sampling=s1)) == alone(request([5, 6], frames=20, sampling=s1))
    assert alone(request([5, 6], frames=20, sampling=s1)) != alone(request([5, 6], frames=20, sampling=s2))


def test_two_pass_cfg_uses_a_second_slot_only_for_the_first_frames():
    uncond = prompt_tokens([], MODEL.vocab, 1)
    cfg = request([5, 6, 7], frames=12, sampling=SamplingParams(temperature=0, cfg_scale=3.0, cfg_frames=4),
                  uncond_prompt_ids=uncond)
    core = EngineCore(MODEL, slots=2, max_len=128)
    core.add(cfg)
    core.step()
    assert core.free == []  # conditional + unconditional branch
    run(core, until_idle=False, steps=4)
    assert len(core.free) >= 1  # guidance over: the second slot is back
    plain = request([5, 6, 7], frames=12, sampling=SamplingParams(temperature=0, cfg_scale=1.0))
    assert alone(plain) == alone(request([5, 6, 7], frames=12))


def test_a_failing_step_fails_its_requests_and_the_engine_serves_on():
    runner = EngineRunner(EngineCore(MODEL, slots=2, max_len=40))
    try:
        doomed = runner.submit(request([5, 6, 7], frames=100))  # outgrows the 40 positions mid-generation
        with pytest.raises(RuntimeError, match="generation failed: .*longer than"):
            list(doomed)
        assert len(list(runner.submit(request([5], frames=3)))) == 3
        assert runner.active == 0 and runner.slots_in_use() == 0
    finally:
        runner.shutdown()


def test_a_prompt_arriving_while_others_decode_goes_in_chunk_by_chunk_and_samples_as_alone():
    core = EngineCore(MODEL, slots=2, max_len=128, prefill_chunk=3)
    a = core.add(REQS[0])
    events = run(core, until_idle=False, steps=1)  # nothing decoding yet: a's whole prompt goes in
    assert int(core.lm.lengths[core.active[a].slot]) == len(REQS[0].prefix) + len(REQS[0].prompt_ids)
    b = core.add(REQS[2])
    prompt = len(REQS[2].prefix) + len(REQS[2].prompt_ids)
    b_slot, written = core.free[0], []
    while b not in events:  # each step: a decodes one frame, b's prompt gains 3 positions
        for o in core.step():
            events.setdefault(o.request_id, []).append((o.code, o.finished))
        written.append(int(core.lm.lengths[b_slot]))
    assert written == [min(3 * (i + 1), prompt) for i in range(-(-prompt // 3))]
    for rid, more in run(core).items():
        events.setdefault(rid, []).extend(more)
    assert codes(events[a]) == alone(REQS[0]) and codes(events[b]) == alone(REQS[2])

