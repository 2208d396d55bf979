"""Training data for the phone-track front end (gepard/lm/track.py): flite speech with its own timing.

python scripts/flite_track.py OUT (--texts FILE | --split teacher_test) [--voices awb,rms,slt,kal16] [--limit N]

Speaks text i in flite voice i mod len(voices) (or, with --split, re-speaks a shared split's flite rows in
their own voices: flite is deterministic, so the audio is the corpus's) and writes OUT/manifest.jsonl whose
`text` is the padded track and `words` the sentence. Clips longer than one track are dropped.
"""

from __future__ import annotations

import argparse
import json
from multiprocessing import get_context
from pathlib import Path

from tqdm import tqdm

from gepard.audio import save_audio
from gepard.data.manifests import shared_split
from gepard.data.synthesize import SAMPLE_RATE
from gepard.lm.track import TRACK_FRAMES, aligned_flite, padded_track


def speak_aligned(task: tuple[str, str, str, str]) -> dict | None:
    uid, text, voice, out = task
    audio, frames = aligned_flite(voice, text)
    if len(frames) > TRACK_FRAMES:
        return None
    path = Path(out) / voice / f"{uid}.flac"
    save_audio(path, audio, SAMPLE_RATE)
    return {"id": uid, "audio": str(path.relative_to(out)), "text": padded_track(frames), "words": text,
            "speaker": f"flite_{voice}", "kind": "teacher", "source": "flite",
            "duration": round(len(audio) / SAMPLE_RATE, 3)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--texts", help="one sentence per line")
    ap.add_argument("--split", help="a shared split whose flite rows are re-spoken with timing")
    ap.add_argument("--voices", default="awb,rms,slt,kal16")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    out, voices = Path(args.out), args.voices.split(",")
    if args.split:
        tasks = [(u.id, u.text, u.speaker.removeprefix("flite_"), str(out))
                 for u in shared_split(args.split) if u.speaker.startswith("flite_")]
    else:
        texts = [t.strip() for t in open(args.texts, encoding="utf-8") if t.strip()]
        tasks = [(f"flite_{voices[i % len(voices)]}_track_{i:05d}", t, voices[i % len(voices)], str(out))
                 for i, t in enumerate(texts)]
    tasks = tasks[: args.limit or None]
    out.mkdir(parents=True, exist_ok=True)
    kept = 0
    with get_context("spawn").Pool(args.jobs) as pool, open(out / "manifest.jsonl", "w", encoding="utf-8") as f:
        for row in tqdm(pool.imap(speak_aligned, tasks, chunksize=16), total=len(tasks), desc="flite", unit="utt"):
            if row:
                f.write(json.dumps(row) + "\n")
                kept += 1
    print(f"{kept} of {len(tasks)} clips kept (at most {TRACK_FRAMES} frames)")


if __name__ == "__main__":
    main()
