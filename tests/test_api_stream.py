"""TTS.stream / TTS.say through the engine with tiny random models."""

import numpy as np
import pytest

from gepard.api import TTS


@pytest.fixture
def tts(tiny_lm_dir, tiny_codec_dir):
    with TTS.load(tiny_lm_dir, tiny_codec_dir, slots=4) as tts:
        tts.codec.decoder.float()  # bit-exact audio to compare: a bf16 decoder (the default where it streams
        # faster) gives a stream's samples that differ in the last bits with the streams decoded beside it
        yield tts


def test_say_is_the_concatenation_of_stream(tts):
    text = "Hello there, how are you today? See you at 9."
    chunks = list(tts.stream(text, seed=5))
    assert len(chunks) > 2 and all(c.dtype == np.float32 and c.ndim == 1 for c in chunks)
    assert np.array_equal(np.concatenate(chunks), tts.say(text, seed=5))
    assert tts.engine.active == 0


def test_deltas_start_audio_before_the_text_is_complete(tts):
    sent = []
    words = "Yes, of course I can do that. It will be ready at nine tomorrow morning.".split()

    def deltas():
        for word in words:
            sent.append(word)
            yield word + " "

    stream = tts.stream(deltas())
    next(stream)
    assert len(sent) == 7  # first audio right after "that. ", while the rest of the text was still coming
    list(stream)
    assert len(sent) == len(words)


def test_leaving_a_stream_early_cancels_its_generation(tts):
    stream = tts.stream("This sentence will be interrupted after the first chunk of audio.")
    next(stream)
    stream.close()
    assert tts.engine.active == 0 and tts.engine.slots_in_use() == 0


@pytest.mark.parametrize("rendering", ["mean", "codes"])
def test_streamed_pcm_equals_rendering_the_same_frames_offline(tts, rendering):
    import torch

    from gepard.engine.base import SamplingParams
    from gepard.lm.generate import text_request

    tts.rendering = rendering
    text = "hello there, see you at nine"  # one segment
    streamed = np.concatenate(list(tts.stream(text, seed=3)))
    frames = list(tts.engine.submit(text_request(tts.model, text, tts.voice(None), SamplingParams(seed=3))).frames())
    offline = tts.render(frames).clip(-1, 1)
    assert len(frames) > 3 and np.allclose(streamed[: len(offline)], offline, atol=1e-5)
    if rendering == "codes":
        codes = torch.tensor([[code for code, _ in frames]])
        assert np.allclose(offline, tts.codec.decode(codes)[0].numpy().clip(-1, 1), atol=1e-5)
    else:  # the LM was not certain of every frame: the mean is not the sampled codes' rendering
        assert not np.allclose(offline, tts.render([(code, None) for code, _ in frames]).clip(-1, 1), atol=1e-3)
