"""Store the shipped model's named voices: one training clip (4-8 s) of each chosen corpus voice.

Usage: python scripts/ship_voices.py MODEL_DIR DEFAULT_NAME   (needs the shared corpus)
"""

import sys

from gepard.api import TTS
from gepard.data.manifests import shared_split
from gepard.lm.voices import save_voice

VOICES = {"cathy": "cathy", "alpha": "kokoro_jf_alpha", "kumo": "kokoro_jm_kumo", "joe": "piper_joe",
          "slt": "flite_slt"}

model_dir, default = sys.argv[1], sys.argv[2]
tts = TTS.load(model_dir, slots=1)
train = shared_split("codec_train")
for name, speaker in VOICES.items():
    clip = next(u for u in train if u.speaker == speaker and 4.0 <= (u.duration or 0) <= 8.0)
    prefix = tts.voice(str(clip.audio))[0]
    save_voice(model_dir, name, prefix)
    if name == default:
        save_voice(model_dir, "default", prefix)
    print(f"{name}: {clip.id}")
