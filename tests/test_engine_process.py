"""The torch engine in its own process: the same codes as in this process, cancel, and a lost child."""

import dataclasses

import pytest
import torch

from gepard.engine.base import SamplingParams
from gepard.engine.core import EngineCore
from gepard.engine.process import EngineProcess
from gepard.lm.generate import text_request
from gepard.lm.speech_lm import SpeechLM


@pytest.fixture
def engine(tiny_lm_dir):
    engine = EngineProcess(tiny_lm_dir, slots=4, threads=1)
    engine.wait_ready()
    yield engine
    engine.shutdown()


def requests(model: SpeechLM) -> list:
    prefix = torch.randn(1, 4, 32, generator=torch.Generator().manual_seed(0))
    return [text_request(model, text, prefix, SamplingParams(seed=seed))
            for seed, text in enumerate(["hello there", "yes", "see you at nine"])]


def test_the_process_samples_what_the_engine_core_samples_here(engine, tiny_lm_dir):
    model = SpeechLM.from_pretrained(tiny_lm_dir)
    core = EngineCore(model, slots=4, int8_head=True)
    ids = [core.add(r) for r in requests(model)]
    here: dict[int, list[int]] = {rid: [] for rid in ids}
    while core.busy:
        for out in core.step():
            if out.code is not None:
                here[out.request_id].append(out.code)
    assert sum(map(len, here.values())) > 10
    streams = [engine.submit(r) for r in requests(model)]  # all at once: batched in the child, as here
    assert [list(s) for s in streams] == [here[rid] for rid in ids]
    assert engine.active == 0 and engine.slots_in_use() == 0


def a_long_stream_under_way(engine: EngineProcess, model_dir) -> tuple:
    """A request that would run for 10,000 frames, after its first code -> (stream, its code iterator)."""
    request = requests(SpeechLM.from_pretrained(model_dir))[0]
    stream = engine.submit(dataclasses.replace(request, max_frames=10_000))
    codes = iter(stream)
    next(codes)
    return stream, codes


def test_closing_a_stream_frees_its_slot_in_the_child(engine, tiny_lm_dir):
    stream, _ = a_long_stream_under_way(engine, tiny_lm_dir)
    stream.close()
    assert stream.finished == "cancelled" and engine.active == 0 and engine.slots_in_use() == 0


def test_a_child_that_dies_fails_its_streams_instead_of_hanging(engine, tiny_lm_dir):
    _, codes = a_long_stream_under_way(engine, tiny_lm_dir)
    engine.process.kill()
    with pytest.raises(RuntimeError, match="engine process exited"):
        list(codes)
    with pytest.raises(RuntimeError, match="engine process"):
        list(engine.submit(requests(SpeechLM.from_pretrained(tiny_lm_dir))[0]))
