import json

import numpy as np
import torch

from gepard.cli import app
from gepard.codec.model import Codec
from gepard.data.prepare import read_shards
from tests.conftest import tiny_codec_config
from typer.testing import CliRunner


def test_prepare_writes_resumable_shards_matching_the_codec(tiny_codec, tiny_codec_dir, speech_path, tmp_path):
    rows = [{"audio": str(speech_path), "text": f"text {i}", "speaker": "cathy", "id": f"u{i}"} for i in range(5)]
    rows.append({"audio": str(tmp_path / "missing.wav"), "text": "gone", "speaker": "x", "id": "bad"})
    (tmp_path / "m.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    args = ["data", "prepare", str(tmp_path / "m.jsonl"), str(tmp_path / "shards"), "--codec", str(tiny_codec_dir),
            "--threads", "1"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    items = list(read_shards(tmp_path / "shards"))
    assert [i[0] for i in items] == [f"u{i}" for i in range(5)]
    assert items[2][1:3] == ("text 2", "cathy")
    from gepard.audio import load_audio

    expected = tiny_codec.encode(torch.from_numpy(load_audio(speech_path))[None])[0].numpy()
    assert np.array_equal(items[0][3], expected)
    assert "bad" in json.loads((tmp_path / "shards" / "skipped.json").read_text())
    meta = json.loads((tmp_path / "shards" / "codec.json").read_text())
    assert meta["fingerprint"] == tiny_codec.fingerprint() and meta["levels"] == tiny_codec.config.levels
    # a second run finds the shard done and leaves it untouched
    mtime = (tmp_path / "shards" / "shard_00000.npz").stat().st_mtime_ns
    assert CliRunner().invoke(app, args).exit_code == 0
    assert (tmp_path / "shards" / "shard_00000.npz").stat().st_mtime_ns == mtime


def test_prepare_refuses_to_add_another_codecs_shards_to_a_folder(tiny_codec_dir, speech_path, tmp_path):
    (tmp_path / "m.jsonl").write_text(json.dumps({"audio": str(speech_path), "text": "hi", "speaker": "c"}))
    torch.manual_seed(1)
    Codec(tiny_codec_config()).save_pretrained(tmp_path / "other", dtype=torch.float32)
    runs = [CliRunner().invoke(app, ["data", "prepare", str(tmp_path / "m.jsonl"), str(tmp_path / "shards"),
                                     "--codec", str(codec), "--threads", "1"])
            for codec in (tiny_codec_dir, tmp_path / "other")]
    assert runs[0].exit_code == 0, runs[0].output
    assert runs[1].exit_code != 0 and "holds shards of another codec" in runs[1].output
    assert "Traceback" not in runs[1].output
