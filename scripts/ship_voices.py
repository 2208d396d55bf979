"""Store the shipped model's named voices, and make the most intelligible one the default.

Each voice is one training clip (4-8 s) of a corpus voice. The default is the voice with the lowest
Whisper tiny.en WER on 8 held-out test sentences (default sampling, seed 0).

Usage: python scripts/ship_voices.py MODEL_DIR [NAME=SPEAKER ...]   (needs the shared corpus)
The voices default to VOICES; a model trained on a few voices names its own (e.g. slt=flite_slt).
"""

import sys

import numpy as np

from gepard.api import TTS
from gepard.data.manifests import shared_split
from gepard.eval.asr import get_transcriber, wer
from gepard.lm.voices import save_voice

VOICES = {"cathy": "cathy", "alpha": "kokoro_jf_alpha", "kumo": "kokoro_jm_kumo", "joe": "piper_joe",
          "slt": "flite_slt"}

model_dir = sys.argv[1]
VOICES = dict(arg.split("=", 1) for arg in sys.argv[2:]) or VOICES
tts = TTS.load(model_dir, slots=8)
train = shared_split("codec_train")
sentences = [u.text for u in shared_split("teacher_test")[::50][:8]]
asr = get_transcriber()
scores = {}
for name, speaker in VOICES.items():
    clip = next(u for u in train if u.speaker == speaker and 4.0 <= (u.duration or 0) <= 8.0)
    prefix = tts.voice(str(clip.audio))
    save_voice(model_dir, name, prefix[0])
    heard = [asr.transcribe(tts.say(text, voice=prefix)) for text in sentences]
    scores[name] = 100 * wer(sentences, heard)
    print(f"{name:6s} {clip.id:40s} WER {scores[name]:.1f} %", flush=True)
best = min(scores, key=scores.get)
save_voice(model_dir, "default", tts.voice(best)[0])
print(f"default = {best} (mean WER over voices {np.mean(list(scores.values())):.1f} %)")
