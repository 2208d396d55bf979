"""The speech LM's teacher-forced beliefs, frame-aligned to an audio cache: decoder input as the LM gives it.

At inference the decoder renders the mean FSQ values of the LM's likeliest codes (render.py), values it never
saw in training, where it only met the encoder's grid values. This is the codec analogue of fine-tuning a vocoder
on a TTS model's ground-truth-aligned predictions: for each training clip the LM sees the text, the voice and every
true frame before frame j, and the mean values of its prediction for frame j stand in for the encoder's. The
decoder (encoder frozen, so every code keeps its meaning) then learns to turn those values into the true audio.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from gepard.codec.fsq import FSQ
from gepard.codec.render import MEAN_TEMPERATURE, mean_values
from gepard.data.prepare import read_shards
from gepard.engine.base import TOP_CODES
from gepard.lm.speech_lm import SpeechLM
from gepard.lm.teacher_forced import audio_logits
from gepard.paths import lm_dir

VALUES_FILE = "values.float32"


def build_lm_value_cache(audio_folder: str | Path, shards: str | Path, model_path: str | Path, fsq: FSQ,
                         frame_samples: int, codec_fingerprint: str, seed: int = 0, ref_frames: int = 100) -> Path:
    """Teacher-forced mean values for every span of an audio cache (dataset.build_audio_cache) that the token
    shards hold (matched by utterance id); returns their folder: values.float32 ((sum of frames, D + 1): the mean
    values of the LM's TOP_CODES likeliest codes at MEAN_TEMPERATURE, then 1 where the frame has them and 0 where
    the span is not in the shards or the frame is past its codes) + index.json (frame offset per span). The voice
    reference is the first `ref_frames` codes of another utterance of the same speaker. The LM must speak the
    codes of the codec with `codec_fingerprint` (ValueError otherwise)."""
    folder = Path(audio_folder)
    key = hashlib.sha1(json.dumps([str(Path(shards).resolve()), str(lm_dir(model_path).resolve()), seed, ref_frames,
                                   frame_samples, TOP_CODES, MEAN_TEMPERATURE]).encode()).hexdigest()
    out = folder / f"lm-values-{key[:12]}"
    if (out / "index.json").exists():
        return out
    rows = {uid: (text, speaker, codes) for uid, text, speaker, codes in read_shards(shards)}
    if not rows:
        raise ValueError(f"no token shards in {shards} (make them with `gepard data prepare`)")
    by_speaker = defaultdict(list)
    for uid, (_, speaker, _) in rows.items():
        by_speaker[speaker].append(uid)
    spans = json.loads((folder / "index.json").read_text())["spans"]
    model = SpeechLM.from_pretrained(lm_dir(model_path)).eval()
    if model.codec_fingerprint not in ("", codec_fingerprint):
        raise ValueError(f"the speech LM at {model_path} speaks another codec's codes (fingerprint "
                         f"{model.codec_fingerprint}, this codec's is {codec_fingerprint})")
    rng, dim = random.Random(seed), len(fsq.levels)
    out.mkdir(exist_ok=True)
    offsets, total, matched = [], 0, 0
    with open(out / (VALUES_FILE + ".partial"), "wb") as f:
        for uid, _, n in tqdm(spans, desc="teacher-forced LM values", unit="clip"):
            frames = np.zeros((-(-n // frame_samples), dim + 1), dtype=np.float32)
            if uid in rows:
                text, speaker, true = rows[uid]
                others = [u for u in by_speaker[speaker] if u != uid] or [uid]
                ref = rows[rng.choice(others)][2][:ref_frames]
                logits = audio_logits(model, text, torch.from_numpy(true), torch.from_numpy(ref))  # (J, codebook)
                top = logits.topk(TOP_CODES, -1)
                k = min(len(frames), len(true))
                frames[:k, :dim] = mean_values(fsq, top.indices[:k], top.values[:k]).numpy()
                frames[:k, dim] = 1.0
                matched += 1
            f.write(frames.tobytes())
            offsets.append(total)
            total += len(frames)
    if not matched:
        raise ValueError(f"none of the {len(spans)} training clips is in the token shards {shards} "
                         "(they must be made from the same manifest)")
    (out / (VALUES_FILE + ".partial")).rename(out / VALUES_FILE)
    (out / "index.json").write_text(json.dumps({"frame_samples": frame_samples, "offsets": offsets, "frames": total,
                                                "dim": dim, "matched": matched, "model": str(model_path)}))
    return out


def load_lm_values(folder: str | Path) -> tuple[np.ndarray, list[int], int]:
    """-> ((frames, D + 1) float32 memmap: mean values, then 1 where present), per-span frame offsets, samples
    per frame: a frame target for dataset.RandomCrops."""
    folder = Path(folder)
    index = json.loads((folder / "index.json").read_text())
    values = np.memmap(folder / VALUES_FILE, dtype=np.float32, mode="r").reshape(index["frames"], index["dim"] + 1)
    return values, index["offsets"], index["frame_samples"]


def with_lm_values(values: torch.Tensor, lm: torch.Tensor, share: float,
                   generator: torch.Generator | None = None) -> torch.Tensor:
    """(B, J, D) encoder values, (B, J, D + 1) LM values + presence -> (B, J, D) values where a `share` of the
    items (drawn at random) take the LM's values at every frame that has them."""
    chosen = torch.rand(values.shape[0], 1, 1, generator=generator) < share
    present = (chosen & (lm[..., -1:] > 0)).to(values.device)
    return torch.where(present, lm[..., :-1].to(values.device, values.dtype), values)
