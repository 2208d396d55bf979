import threading

import numpy as np
import pytest
import torch

from gepard.codec.model import Codec, StreamingDecoder
from gepard.stream.codec_batcher import CodecBatcher
from tests.conftest import tiny_codec_config


def random_chunks(total: int, rng: np.random.Generator, max_chunk: int) -> list[int]:
    sizes = []
    while sum(sizes) < total:
        sizes.append(int(min(rng.integers(1, max_chunk + 1), total - sum(sizes))))
    return sizes


def stream_decode(codec: Codec, codes: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    stream, parts, i = codec.stream(codes.shape[0]), [], 0
    for n in sizes:
        parts.append(stream.push(codes[:, i: i + n]))
        i += n
    parts.append(stream.flush())
    return torch.cat(parts, dim=1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_streaming_decode_equals_offline_for_random_chunkings(tiny_codec, seed):
    rng = np.random.default_rng(seed)
    codes = torch.randint(0, tiny_codec.codebook_size, (2, 37), generator=torch.Generator().manual_seed(seed))
    offline = tiny_codec.decode(codes)
    assert offline.shape == (2, 37 * tiny_codec.config.samples_per_frame)
    for sizes in ([1] * 37, random_chunks(37, rng, 8), [37]):
        streamed = stream_decode(tiny_codec, codes, sizes)
        assert streamed.shape == offline.shape
        assert (streamed - offline).abs().max().item() <= 1e-5


def test_streaming_decode_equals_offline_at_full_size():
    torch.manual_seed(0)
    codec = Codec().eval()  # the shipped architecture, random weights, fp32
    codes = torch.randint(0, codec.codebook_size, (1, 30))
    offline = codec.decode(codes)
    streamed = stream_decode(codec, codes, random_chunks(30, np.random.default_rng(5), 4))
    assert (streamed - offline).abs().max().item() <= 1e-5


def test_each_frame_releases_its_samples_after_a_fixed_delay(tiny_codec):
    c = tiny_codec.config
    stream = tiny_codec.stream()
    first = stream.push(torch.zeros(1, 1, dtype=torch.long))
    second = stream.push(torch.zeros(1, 1, dtype=torch.long))
    assert first.shape[1] == c.samples_per_frame - (c.n_fft - c.hop)
    assert second.shape[1] == c.samples_per_frame
    assert stream.flush().shape[1] == c.n_fft - c.hop


def test_changing_future_audio_never_changes_past_codes_or_released_output(tiny_codec):
    spf = tiny_codec.config.samples_per_frame
    torch.manual_seed(0)
    audio = torch.randn(1, 20 * spf) * 0.3
    changed = audio.clone()
    cut = 12
    changed[:, cut * spf:] = torch.randn(1, 8 * spf)
    codes_a, codes_b = tiny_codec.encode(audio), tiny_codec.encode(changed)
    assert torch.equal(codes_a[:, :cut], codes_b[:, :cut])
    assert not torch.equal(codes_a[:, cut:], codes_b[:, cut:])
    released = tiny_codec.stream().push(codes_a[:, :cut])  # what a listener has heard after `cut` frames
    assert torch.equal(released, tiny_codec.decode(codes_b)[:, : released.shape[1]])


def test_chunked_encoder_equals_offline_encoder(tiny_codec):
    spf = tiny_codec.config.samples_per_frame
    audio = torch.randn(1, 25 * spf) * 0.3
    state = tiny_codec.encoder.initial_state(1)
    parts = []
    with torch.inference_mode():
        for a, b in [(0, 3), (3, 4), (4, 17), (17, 25)]:
            latents, state = tiny_codec.encoder.step(audio[:, a * spf: b * spf], state)
            parts.append(latents)
        offline = tiny_codec.encoder(audio)
    assert (torch.cat(parts, dim=1) - offline).abs().max().item() <= 1e-5


def test_save_load_identity(tiny_codec, tmp_path):
    tiny_codec.save_pretrained(tmp_path / "fp32", dtype=torch.float32)
    loaded = Codec.from_pretrained(tmp_path / "fp32")
    assert loaded.config == tiny_codec.config
    for (k, v), (k2, v2) in zip(tiny_codec.state_dict().items(), loaded.state_dict().items()):
        assert k == k2 and torch.equal(v, v2)
    codes = torch.randint(0, tiny_codec.codebook_size, (1, 9))
    assert torch.equal(loaded.decode(codes), tiny_codec.decode(codes))


def test_bf16_export_keeps_weights_to_bf16_precision(tiny_codec, tmp_path):
    tiny_codec.save_pretrained(tmp_path / "bf16")
    loaded = Codec.from_pretrained(tmp_path / "bf16")
    for k, v in tiny_codec.state_dict().items():
        assert torch.equal(loaded.state_dict()[k], v.to(torch.bfloat16).float())


def test_config_defaults_to_one_codebook_under_65536_at_25_hz():
    codec = Codec()
    assert codec.codebook_size <= 65536
    assert codec.config.frame_rate == 25.0
    assert codec.bitrate == pytest.approx(25 * np.log2(64000))
    assert tiny_codec_config().frame_rate == 25.0


def test_streams_pushed_together_equal_streams_decoded_alone(tiny_codec):
    """push_many (the codec batcher's batch) gives each stream the samples it gets on its own."""
    codes = torch.randint(0, tiny_codec.codebook_size, (3, 9), generator=torch.Generator().manual_seed(3))
    alone = [stream_decode(tiny_codec, codes[i: i + 1], [1, 2, 2, 2, 2]) for i in range(3)]
    decoders = [tiny_codec.stream() for _ in range(3)]
    parts, i = [], 0
    for n in [1, 2, 2, 2, 2]:
        parts.append(StreamingDecoder.push_many(decoders, codes[:, i: i + n]))
        i += n
    together = torch.cat(parts + [torch.cat([d.flush() for d in decoders])], dim=1)
    assert (together - torch.cat(alone)).abs().max().item() <= 1e-5
    with pytest.raises(ValueError, match="pre-roll"):  # a fresh stream cannot join one already past its pre-roll
        StreamingDecoder.push_many([decoders[0], tiny_codec.stream()], codes[:2, :1])


def test_codec_batcher_serves_concurrent_streams_exactly(tiny_codec):
    batcher = CodecBatcher()
    codes = torch.randint(0, tiny_codec.codebook_size, (6, 8), generator=torch.Generator().manual_seed(4))
    expected = [stream_decode(tiny_codec, codes[i: i + 1], [1] * 8)[0, :-tiny_codec.config.n_fft + tiny_codec.config.hop]
                for i in range(6)]
    results = [None] * 6

    def speak(i):
        decoder = tiny_codec.stream()
        results[i] = np.concatenate([batcher.push(decoder, tiny_codec.fsq.index_to_values(c[None])) for c in codes[i]])

    threads = [threading.Thread(target=speak, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    batcher.close()
    assert not batcher.thread.is_alive()
    for got, want in zip(results, expected):
        assert np.abs(got - want.clamp(-1, 1).numpy()).max() <= 1e-5


def test_bf16_decoder_stays_close_to_fp32_in_any_chunking(tiny_codec_dir, speech_path):
    from gepard.audio import load_audio
    from gepard.codec.files import load_codec

    exact, fast = load_codec(tiny_codec_dir, bf16_decoder=False), load_codec(tiny_codec_dir, bf16_decoder=True)
    assert fast.decoder.inp.weight.dtype == torch.bfloat16 and fast.encoder.inp.weight.dtype == torch.float32
    audio = torch.from_numpy(load_audio(speech_path))[None]
    codes = exact.encode(audio)
    assert torch.equal(fast.encode(audio), codes)  # the codes never depend on the decoder's precision
    reference = exact.decode(codes)
    for sizes in ([codes.shape[1]], [1] * codes.shape[1], random_chunks(codes.shape[1], np.random.default_rng(0), 8)):
        streamed = stream_decode(fast, codes, sizes)
        assert streamed.dtype == torch.float32 and streamed.shape == reference.shape
        assert (streamed - reference).norm() / reference.norm() < 0.02


def test_values_stream_exactly_as_the_codes_they_name(tiny_codec):
    codes = torch.randint(0, tiny_codec.codebook_size, (1, 9), generator=torch.Generator().manual_seed(5))
    by_codes, by_values = tiny_codec.stream(), tiny_codec.stream()
    values = tiny_codec.fsq.index_to_values(codes)  # (1, 9, D)
    for i in range(0, 9, 3):
        assert torch.equal(by_codes.push(codes[:, i: i + 3]), by_values.push(values[:, i: i + 3]))
    assert torch.equal(by_codes.flush(), by_values.flush())
