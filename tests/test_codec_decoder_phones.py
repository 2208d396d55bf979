"""A decoder that also reads the phone track: streams exactly, starts as the decoder it came from, keeps the
codes (and so the speech LM) valid, and learns in training to rely on the phones."""

import json
from dataclasses import replace

import numpy as np
import torch

from gepard.codec.model import Codec, StreamingDecoder
from gepard.codec.train import TrainConfig, load_init, train_codec
from gepard.lm.track import PHONES
from tests.conftest import tiny_codec_config
from tests.test_codec_phones import phone_manifest
from tests.test_codec_streaming import random_chunks

CLASSES = 1 + len(PHONES)


def phone_codec(seed: int = 0) -> Codec:
    """A tiny phone-reading codec whose phone embedding is random (as if trained)."""
    torch.manual_seed(seed)
    codec = Codec(replace(tiny_codec_config(), phone_classes=CLASSES)).eval()
    torch.nn.init.normal_(codec.decoder.phones.weight)
    return codec


def test_streaming_with_phones_equals_offline_across_segments_and_batches():
    codec = phone_codec()
    rng = np.random.default_rng(0)
    codes = torch.randint(0, codec.codebook_size, (1, 30), generator=torch.Generator().manual_seed(0))
    tracks = [torch.randint(1, CLASSES, (12,), generator=torch.Generator().manual_seed(s)).tolist() for s in (1, 2)]
    segments = [(0, 18, tracks[0]), (18, 30, tracks[1])]  # the first track is shorter than its speech
    phones = torch.tensor([tracks[0] + [0] * 6 + tracks[1]])  # frames past a track read "unknown"
    offline = codec.decode(codes, phones)
    assert (offline - codec.decode(codes)).abs().max() > 1e-3  # the phones change the sound
    for chunking in ("frames", "random"):
        stream, parts = codec.stream(), []
        for start, end, track in segments:
            stream.read(track)
            sizes = [1] * (end - start) if chunking == "frames" else random_chunks(end - start, rng, 7)
            for n in sizes:
                parts.append(stream.push(codes[:, start: start + n]))
                start += n
        streamed = torch.cat(parts + [stream.flush()], dim=1)
        assert (streamed - offline).abs().max().item() <= 1e-5
    decoders = [codec.stream() for _ in range(2)]
    for d, track in zip(decoders, tracks):
        d.read(track)
    together = StreamingDecoder.push_many(decoders, codes[:, :12].repeat(2, 1))
    for row, track in zip(together, tracks):
        alone = codec.stream()
        alone.read(track)
        assert (row - alone.push(codes[:, :12])[0]).abs().max().item() <= 1e-5


def test_a_phone_decoder_starts_as_the_plain_one_and_keeps_its_fingerprint():
    torch.manual_seed(0)
    plain = Codec(tiny_codec_config()).eval()
    reader = Codec(replace(tiny_codec_config(), phone_classes=CLASSES)).eval()
    load_init(reader, plain)
    codes = torch.randint(0, plain.codebook_size, (1, 9), generator=torch.Generator().manual_seed(2))
    phones = torch.randint(0, CLASSES, (1, 9), generator=torch.Generator().manual_seed(3))
    assert torch.equal(reader.decode(codes, phones), plain.decode(codes))  # a zero embedding: nothing changes yet
    assert reader.fingerprint() == plain.fingerprint()  # the codes mean what they meant: the LM stays valid


def test_decoder_training_with_phones_and_code_noise_keeps_every_code_and_learns_the_phones(speech_path, tmp_path):
    data = phone_manifest(speech_path, tmp_path)
    torch.manual_seed(4)
    Codec(tiny_codec_config()).save_pretrained(tmp_path / "plain", dtype=torch.float32)
    plain = Codec.from_pretrained(tmp_path / "plain")
    cfg = TrainConfig(run_dir=str(tmp_path / "run"), steps=6, batch_size=2, crop_frames=8, lr=3e-3, warmup=1,
                      checkpoint_every=3, val_every=3, threads=1, init=str(tmp_path / "plain"), freeze_encoder=True,
                      code_noise=0.5, codec=replace(tiny_codec_config(), phone_classes=CLASSES))
    model = train_codec(cfg, data, data, cache_dir=str(tmp_path / "cache"))
    assert model.fingerprint() == plain.fingerprint()
    assert all(torch.equal(v, plain.encoder.state_dict()[k]) for k, v in model.encoder.state_dict().items())
    learned = model.decoder.phones.weight.detach()
    used = {PHONES.index(p) + 1 for p in ("aa", "s")}  # the fixture's track (test_codec_phones.speech_track)
    assert any(learned[i].abs().sum() > 0 for i in used)  # (which of them the random crops showed varies)
    assert all(learned[i].abs().sum() == 0 for i in range(1, CLASSES) if i not in used)  # never read: untouched
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, 7)) and "val_loss" in log[-1]
