"""LM training on tiny random shards: one process, resume, and DDP with 2 gloo processes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM

from gepard.lm.alignment import AlignmentConfig
from gepard.lm.layout import Repetition
from gepard.lm.model import LMConfig
from gepard.lm.speech_lm import SpeechLM
from gepard.lm.data import LMDataset
from gepard.lm.train import LMTrainConfig, train_lm, validation_nll
from gepard.lm.voice import VoiceConfig

LEVELS = [5, 4, 3]


def write_shards(folder: Path, n: int = 24, levels: list[int] | None = None) -> None:
    """n random utterances; codec.json records `levels` when given (shards from before that record none)."""
    rng = np.random.default_rng(0)
    texts = ["yes", "no thanks", "see you at nine tomorrow", "okay", "the cat sat on the mat today"]
    codes = [rng.integers(0, 36, size=rng.integers(5, 30)).astype(np.uint16) for _ in range(n)]
    folder.mkdir(parents=True)
    meta = {"fingerprint": "feedfacefeedface", **({"levels": levels} if levels else {})}
    (folder / "codec.json").write_text(json.dumps(meta))
    np.savez(folder / "shard_00000.npz", codes=np.concatenate(codes), offsets=np.cumsum([0] + [len(c) for c in codes]),
             ids=np.array([f"u{i}" for i in range(n)]), texts=np.array([texts[i % 5] for i in range(n)]),
             speakers=np.array([f"s{i % 3}" for i in range(n)]))


def tiny_config(run_dir: Path, shards: Path, steps: int) -> LMTrainConfig:
    return LMTrainConfig(
        run_dir=str(run_dir), shards=[str(shards)], steps=steps, batch_frames=80, lr=3e-3, warmup=2, text_vocab=300,
        levels=LEVELS, checkpoint_every=5, threads=1,
        lm=LMConfig(hidden_size=32, layers=2, heads=2, kv_heads=1, head_dim=16, intermediate_size=64,
                    max_positions=512),
        voice=VoiceConfig(dim=16, heads=2, blocks=1, prefix_len=4), repetition=Repetition(),
        alignment=AlignmentConfig(layer=1, heads=1))


def test_a_new_model_takes_the_codebook_the_shards_record(tmp_path):
    write_shards(tmp_path / "shards", levels=[4, 3, 3])
    model = train_lm(tiny_config(tmp_path / "run", tmp_path / "shards", steps=1))
    assert model.vocab.codebook_size == 36 and model.voice.fsq.levels == [4, 3, 3]


def test_training_learns_resumes_and_exports_a_stock_checkpoint(tmp_path):
    write_shards(tmp_path / "shards")
    cfg = tiny_config(tmp_path / "run", tmp_path / "shards", steps=5)
    train_lm(cfg)
    cfg.steps, cfg.val_shards, cfg.val_every = 30, [str(tmp_path / "shards")], 10
    cfg.best_export = str(tmp_path / "best")
    model = train_lm(cfg)
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, 31))
    val = [r for r in log if "val_loss" in r]
    assert [r["step"] for r in val] == [10, 20, 30] and log[-1]["val_loss"] > 0
    new_lows = [r["step"] for i, r in enumerate(val) if r["val_loss"] < min([v["val_loss"] for v in val[:i]] or [1e9])]
    assert [r["step"] for r in val if r.get("best_exported")] == new_lows
    best = SpeechLM.from_pretrained(tmp_path / "best")
    best_nll = validation_nll(best.float(), LMDataset(cfg.val_shards, best.encode_training_text, best.vocab,
                                                      best.repetition), cfg.batch_frames, torch.device("cpu"))
    assert abs(best_nll - min(r["val_loss"] for r in val)) < 0.05  # the lowest one, in bf16
    assert np.mean([r["loss"] for r in log[-5:]]) < np.mean([r["loss"] for r in log[:5]])
    assert (tmp_path / "run" / "loss.png").exists()
    model.save_pretrained(tmp_path / "export")
    again = SpeechLM.from_pretrained(tmp_path / "export")
    assert again.repetition == model.repetition and again.vocab == model.vocab
    assert again.codec_fingerprint == "feedfacefeedface"  # the shards' codec, so TTS.load can check it
    assert type(AutoModelForCausalLM.from_pretrained(tmp_path / "export")).__name__ == "Qwen3ForCausalLM"


DDP_SCRIPT = """
import json, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_lm_train import tiny_config
from gepard.lm.train import train_lm
import torch.distributed as dist
model = train_lm(tiny_config(Path({run!r}), Path({shards!r}), steps=4))
w = next(model.lm.parameters()).detach().flatten()[:8]
gathered = [None, None]
dist.all_gather_object(gathered, w.tolist())
if dist.get_rank() == 0:
    Path({run!r}, "weights.json").write_text(json.dumps(gathered))
dist.destroy_process_group()
"""


def test_ddp_with_two_cpu_processes_keeps_replicas_identical(tmp_path):
    write_shards(tmp_path / "shards")
    script = tmp_path / "ddp.py"
    script.write_text(DDP_SCRIPT.format(tests=str(Path(__file__).parent), run=str(tmp_path / "run"),
                                        shards=str(tmp_path / "shards")))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29533",
                    str(script)], check=True, env=env, capture_output=True, timeout=300)
    a, b = json.loads((tmp_path / "run" / "weights.json").read_text())
    assert a == b  # gradients were all-reduced: both processes took the same optimizer steps
    assert len((tmp_path / "run" / "log.jsonl").read_text().splitlines()) == 4
