"""Does a phone-track LM (front end "track") speak held-out sentences in the voices it was trained on?

Usage: python scripts/track_wer.py OUT.md MANIFEST MODEL [MODEL ...] --codec DIR [--n 30]

MANIFEST is a scripts/flite_track.py manifest of sentences the models never saw (e.g. the teacher test
set's flite rows): each row's `words` are spoken (the front end makes their track) and are the WER
reference; the voice reference is another row of the same voice. Free-running, default sampling, seed 0.
"""

import argparse
import json
import datetime
import shlex
import sys
import zlib
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from gepard.api import TTS
from gepard.audio import load_audio
from gepard.codec.files import decode_codes
from gepard.data.manifests import read_jsonl
from gepard.engine.base import SamplingParams
from gepard.eval.asr import get_transcriber, wer
from gepard.eval.machine import describe_machine
from gepard.eval.similarity import get_speaker_encoder
from gepard.lm.generate import text_request
from gepard.lm.voices import prefix_from_audio


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("out", type=Path)
    args.add_argument("manifest", type=Path)
    args.add_argument("models", nargs="+")
    args.add_argument("--codec", required=True)
    args.add_argument("--n", type=int, default=30)
    a = args.parse_args()
    torch.set_num_threads(2)
    rows = read_jsonl(a.manifest)
    words = {r["id"]: r["words"] for r in map(json.loads, a.manifest.read_text().splitlines())}
    test = rows[:: max(1, len(rows) // a.n)][: a.n]
    by = defaultdict(list)
    for u in rows:
        by[u.speaker].append(u)
    asr, encoder = get_transcriber(2), get_speaker_encoder()
    sampling = SamplingParams(seed=0)
    lines = ["# Phone-track LM, held-out sentences, free-running", "",
             f"Command: `python {shlex.join(sys.argv)}`", "",
             f"Machine: {describe_machine()}. Date: {datetime.date.today().isoformat()}. {len(test)} sentences; "
             f"voice reference another clip of the same voice; temperature {sampling.temperature}, top-k "
             f"{sampling.top_k}, top-p {sampling.top_p}, seed 0.", ""]
    for model in a.models:
        heard, cosines, stops = [], [], 0
        with TTS.load(model, a.codec, engine="torch") as tts:
            for u in tqdm(test, desc=model, unit="utt"):
                others = [r for r in by[u.speaker] if r.id != u.id]
                ref = others[zlib.crc32(u.id.encode()) % len(others)]
                ref_audio = load_audio(ref.audio)
                prefix = prefix_from_audio(tts.model, tts.codec, ref_audio, ref.id)[None]
                stream = tts.engine.submit(text_request(tts.model, words[u.id], prefix, sampling))
                codes = list(stream)
                stops += stream.finished == "stop"
                audio = decode_codes(tts.codec, codes)
                heard.append(asr.transcribe(audio))
                cosines.append(encoder.cosine(ref_audio, audio) if len(audio) > 8000 else 0.0)
        score = 100 * wer([words[u.id] for u in test], heard)
        lines += [f"## {model}: WER {score:.1f} %, cosine {np.mean(cosines):.3f}, stopped {stops}/{len(test)}", "",
                  "| text | heard (Whisper tiny.en) |", "|---|---|",
                  *[f"| {words[u.id]} | {h} |" for u, h in zip(test, heard)], ""]
    a.out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
