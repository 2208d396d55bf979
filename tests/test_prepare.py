import json

import numpy as np
import torch

from gepard.cli import app
from gepard.data.prepare import read_shards
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
    assert json.loads((tmp_path / "shards" / "codec.json").read_text())["fingerprint"] == tiny_codec.fingerprint()
    # a second run finds the shard done and leaves it untouched
    mtime = (tmp_path / "shards" / "shard_00000.npz").stat().st_mtime_ns
    assert CliRunner().invoke(app, args).exit_code == 0
    assert (tmp_path / "shards" / "shard_00000.npz").stat().st_mtime_ns == mtime
