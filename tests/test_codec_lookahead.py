"""A decoder with lookahead L renders frame j from frames j .. j+L and still streams exactly."""

import dataclasses

import numpy as np
import pytest
import torch

from gepard.codec.model import Codec, StreamingDecoder
from gepard.stream.audio import pcm_chunks
from tests.conftest import tiny_codec_config
from tests.test_codec_streaming import random_chunks, stream_decode


def lookahead_codec(lookahead: int, seed: int = 0) -> Codec:
    torch.manual_seed(seed)
    return Codec(dataclasses.replace(tiny_codec_config(), lookahead=lookahead)).eval()


@pytest.mark.parametrize("lookahead", [1, 3])
def test_streaming_decode_equals_offline_for_random_chunkings(lookahead):
    codec = lookahead_codec(lookahead)
    codes = torch.randint(0, codec.codebook_size, (2, 23), generator=torch.Generator().manual_seed(lookahead))
    offline = codec.decode(codes)
    assert offline.shape == (2, 23 * codec.config.samples_per_frame)
    for sizes in ([1] * 23, random_chunks(23, np.random.default_rng(lookahead), 6), [23], [2]):
        streamed = stream_decode(codec, codes[:, : sum(sizes)], sizes)
        assert (streamed - codec.decode(codes[:, : sum(sizes)])).abs().max().item() <= 1e-5


def test_a_frame_is_rendered_once_its_lookahead_has_arrived():
    codec = lookahead_codec(2)
    c = codec.config
    stream = codec.stream()
    frame = torch.zeros(1, 1, dtype=torch.long)
    assert [stream.push(frame).shape[1] for _ in range(4)] == [0, 0, c.samples_per_frame - (c.n_fft - c.hop),
                                                               c.samples_per_frame]
    assert stream.phase == (0, 2)
    assert stream.flush().shape[1] == 2 * c.samples_per_frame + c.n_fft - c.hop


def test_the_frames_ahead_change_the_frame_rendered():
    codec = lookahead_codec(1)
    torch.nn.init.normal_(codec.decoder.inp.weight)
    codes = torch.randint(0, codec.codebook_size, (1, 6), generator=torch.Generator().manual_seed(0))
    changed = codes.clone()
    changed[0, 3] = (codes[0, 3] + 1) % codec.codebook_size
    c = codec.config
    reach = [j * c.samples_per_frame - (c.n_fft - c.hop) for j in (2, 3)]  # first sample frame 2 / 3 writes
    a, b = codec.decode(codes), codec.decode(changed)
    assert torch.equal(a[:, : reach[0]], b[:, : reach[0]])  # frames 0 and 1 never see frame 3
    assert not torch.equal(a[:, reach[0]: reach[1]], b[:, reach[0]: reach[1]])  # frame 2 sees it


def test_more_lookahead_starts_from_less_and_renders_the_same():
    narrow, wide = lookahead_codec(0), lookahead_codec(2, seed=1)
    wide.load_weights(narrow)
    codes = torch.randint(0, narrow.codebook_size, (1, 11), generator=torch.Generator().manual_seed(2))
    assert (wide.decode(codes) - narrow.decode(codes)).abs().max().item() <= 1e-6
    assert wide.fingerprint() == narrow.fingerprint()  # the decoder alone changed: every code means the same
    with pytest.raises(ValueError, match="less lookahead"):
        narrow.load_weights(wide)


def test_streams_with_lookahead_push_together_exactly():
    codec = lookahead_codec(2)
    codes = torch.randint(0, codec.codebook_size, (3, 9), generator=torch.Generator().manual_seed(3))
    alone = [stream_decode(codec, codes[i: i + 1], [1, 2, 2, 2, 2]) for i in range(3)]
    decoders = [codec.stream() for _ in range(3)]
    parts, i = [], 0
    for n in [1, 2, 2, 2, 2]:
        parts.append(StreamingDecoder.push_many(decoders, codes[:, i: i + n]))
        i += n
    together = torch.cat(parts + [torch.cat([d.flush() for d in decoders])], dim=1)
    assert (together - torch.cat(alone)).abs().max().item() <= 1e-5
    waiting = codec.stream()
    waiting.push(codes[:1, :1])  # one frame waiting for its lookahead, still in the pre-roll
    with pytest.raises(ValueError, match="pre-roll"):
        StreamingDecoder.push_many([waiting, codec.stream()], codes[:2, :1])


def test_the_first_chunk_waits_for_the_lookahead_and_plays_as_long():
    def chunks(codec, held):
        decoder = codec.stream()
        push = lambda frames: decoder.push(torch.tensor(frames)[None])[0].numpy()  # noqa: E731
        return [len(c) for c in pcm_chunks(push, iter(range(9)), held=held)]

    plain, ahead = chunks(lookahead_codec(0), 0), chunks(lookahead_codec(2), 2)
    assert ahead[0] == plain[0] and sum(ahead) == sum(plain) - 2 * lookahead_codec(0).config.samples_per_frame
