"""Teacher-forced speech-LM codes, frame-aligned to an audio cache: training data for a decoder that renders
what the LM says, not only what the encoder says.

The codec analogue of fine-tuning a vocoder on a TTS model's ground-truth-aligned predictions: for each training
clip the LM sees the text, the voice and every true frame before frame j, and a code drawn from its prediction
stands in for frame j. The decoder (encoder frozen, so every code keeps its meaning) then learns to turn those
slightly-off codes into the true audio.
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

from gepard.data.prepare import read_shards
from gepard.lm.speech_lm import SpeechLM
from gepard.lm.teacher_forced import audio_logits, sample_codes
from gepard.paths import lm_dir

CODES_FILE = "codes.int32"


def build_lm_code_cache(audio_folder: str | Path, shards: str | Path, model_path: str | Path, frame_samples: int,
                        codec_fingerprint: str, temperature: float = 0.5, seed: int = 0,
                        ref_frames: int = 100) -> Path:
    """Teacher-forced LM codes for every span of an audio cache (dataset.build_audio_cache) that the token shards
    hold (matched by utterance id); returns their folder: codes.int32 ((sum of frames, 1), code + 1, 0 = none: the
    span is not in the shards or the frame is past its codes) + index.json (frame offset per span). The voice
    reference is the first `ref_frames` codes of another utterance of the same speaker. The LM must speak the
    codes of the codec with `codec_fingerprint` (ValueError otherwise)."""
    folder = Path(audio_folder)
    key = hashlib.sha1(json.dumps([str(Path(shards).resolve()), str(lm_dir(model_path).resolve()), temperature, seed,
                                   ref_frames, frame_samples]).encode()).hexdigest()
    out = folder / f"lm-codes-{key[:12]}"
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
    rng, generator = random.Random(seed), torch.Generator().manual_seed(seed)
    out.mkdir(exist_ok=True)
    offsets, total, matched = [], 0, 0
    with open(out / (CODES_FILE + ".partial"), "wb") as f:
        for uid, _, n in tqdm(spans, desc="teacher-forced LM codes", unit="clip"):
            codes = np.zeros(-(-n // frame_samples), dtype=np.int32)
            if uid in rows:
                text, speaker, true = rows[uid]
                others = [u for u in by_speaker[speaker] if u != uid] or [uid]
                ref = rows[rng.choice(others)][2][:ref_frames]
                drawn = sample_codes(audio_logits(model, text, torch.from_numpy(true), torch.from_numpy(ref)),
                                     temperature, generator).numpy()
                k = min(len(codes), len(drawn))
                codes[:k] = drawn[:k] + 1
                matched += 1
            f.write(codes.tobytes())
            offsets.append(total)
            total += len(codes)
    if not matched:
        raise ValueError(f"none of the {len(spans)} training clips is in the token shards {shards} "
                         "(they must be made from the same manifest)")
    (out / (CODES_FILE + ".partial")).rename(out / CODES_FILE)
    (out / "index.json").write_text(json.dumps({"frame_samples": frame_samples, "offsets": offsets, "frames": total,
                                                "matched": matched, "model": str(model_path),
                                                "temperature": temperature}))
    return out


def load_lm_codes(folder: str | Path) -> tuple[np.ndarray, list[int], int]:
    """-> (frames, 1) int32 memmap of code + 1 (0: none), per-span frame offsets, samples per frame."""
    folder = Path(folder)
    index = json.loads((folder / "index.json").read_text())
    codes = np.memmap(folder / CODES_FILE, dtype=np.int32, mode="r").reshape(index["frames"], 1)
    return codes, index["offsets"], index["frame_samples"]


def with_lm_codes(values: torch.Tensor, lm_codes: torch.Tensor, fsq, share: float,
                  generator: torch.Generator | None = None) -> torch.Tensor:
    """(B, J, D) encoder values, (B, J, 1) LM codes + 1 -> (B, J, D) values where a `share` of the items (drawn
    at random) take the LM's code at every frame that has one."""
    chosen = torch.rand(values.shape[0], 1, 1, generator=generator) < share
    present = chosen & (lm_codes > 0)
    lm_values = fsq.index_to_values((lm_codes[..., 0].long() - 1).clamp(min=0)).to(values.dtype)
    return torch.where(present.to(values.device), lm_values.to(values.device), values)
