"""`gepard data prepare`: encode a manifest with the codec into token shards (resumable)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from gepard.audio import AudioError, load_audio
from gepard.codec.model import Codec
from gepard.data.manifests import Utterance


def prepare_shards(codec: Codec, utterances: list[Utterance], out: str | Path, shard_size: int = 256) -> Path:
    """Write out/shard_NNNNN.npz (codes, offsets, ids, texts, speakers); existing shards are kept.

    A shard holds `codes` (sum J,) uint16 for all its utterances, `offsets` (n + 1,) into it, and the
    utterances' `ids`, `texts`, `speakers`. Unreadable audio is skipped and listed in skipped.json.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if codec.codebook_size > 65536:
        raise ValueError("shards store codes as uint16: the codebook must have at most 65536 entries")
    meta = {"frame_rate": codec.config.frame_rate, "codebook_size": codec.codebook_size,
            "levels": codec.config.levels, "fingerprint": codec.fingerprint()}
    if (old := shards_codec([out])) and old != meta["fingerprint"]:
        raise ValueError(f"{out} holds shards of another codec ({old}, this one is {meta['fingerprint']}): "
                         "use a new folder")
    (out / "codec.json").write_text(json.dumps(meta))  # first, so a resumed run is checked too
    skipped: dict[str, str] = {}
    starts = range(0, len(utterances), shard_size)
    for n, start in enumerate(tqdm(starts, desc="encoding shards", unit="shard")):
        path = out / f"shard_{n:05d}.npz"
        if path.exists():
            continue
        rows, codes = [], []
        for u in utterances[start: start + shard_size]:
            try:
                audio = load_audio(u.audio, codec.config.sample_rate)
            except AudioError as e:
                skipped[u.id] = str(e)
                continue
            codes.append(codec.encode(torch.from_numpy(audio)[None])[0].numpy().astype(np.uint16))
            rows.append(u)
        offsets = np.cumsum([0] + [len(c) for c in codes])
        tmp = out / f"shard_{n:05d}.tmp.npz"
        np.savez(tmp, codes=np.concatenate(codes) if codes else np.zeros(0, np.uint16), offsets=offsets,
                 ids=np.array([u.id for u in rows]), texts=np.array([u.text for u in rows]),
                 speakers=np.array([u.speaker for u in rows]))
        tmp.replace(path)
    (out / "skipped.json").write_text(json.dumps(skipped, indent=1))
    return out


def shards_meta(folders: list[str | Path]) -> dict:
    """What the shard folders' codec.json records about the codec that encoded them ({} if none does); raises
    if they came from different codecs, whose codes mean different sounds."""
    metas = {}
    for folder in folders:
        path = Path(folder) / "codec.json"
        if path.exists() and "fingerprint" in (info := json.loads(path.read_text())):
            metas[str(folder)] = info
    if len({m["fingerprint"] for m in metas.values()}) > 1:
        raise ValueError("these shard folders were encoded by different codecs: "
                         + ", ".join(f"{f} ({m['fingerprint']})" for f, m in metas.items()))
    return next(iter(metas.values()), {})


def shards_codec(folders: list[str | Path]) -> str:
    """The fingerprint of the codec that encoded these shard folders ("" if none recorded one)."""
    return shards_meta(folders).get("fingerprint", "")


def read_shards(folder: str | Path):
    """Yield (id, text, speaker, codes (J,) int64) for every utterance in a shard folder."""
    for path in sorted(Path(folder).glob("shard_[0-9]*.npz")):
        if path.name.endswith(".tmp.npz"):
            continue
        with np.load(path) as z:
            offsets = z["offsets"]
            for i, (uid, text, speaker) in enumerate(zip(z["ids"], z["texts"], z["speakers"])):
                yield str(uid), str(text), str(speaker), z["codes"][offsets[i]: offsets[i + 1]].astype(np.int64)
