"""The shipped speech LM: a stock checkpoint that transformers loads unchanged, and it speaks."""

import numpy as np
import torch
from transformers import AutoModelForCausalLM
from typer.testing import CliRunner

from gepard.cli import app
from gepard.codec.model import Codec
from gepard.engine.cached_lm import CachedLM
from gepard.lm.generate import text_prompt
from gepard.lm.speech_lm import SpeechLM
from gepard.lm.voices import list_voices, resolve_voice


def test_transformers_loads_it_without_custom_code_and_matches_our_forward(shipped_lm_dir):
    hf = AutoModelForCausalLM.from_pretrained(shipped_lm_dir, dtype=torch.float32)  # no trust_remote_code
    assert type(hf).__name__ == "Qwen3ForCausalLM"
    ours = SpeechLM.from_pretrained(shipped_lm_dir)
    prefix = resolve_voice(ours, None, shipped_lm_dir, "default")  # (1, K, H)
    ids, _ = text_prompt(ours, "Hello, how are you today?")
    embeds = ours.embed(prefix, torch.tensor([ids]))
    with torch.no_grad():
        reference = hf(inputs_embeds=embeds).logits[0]
        cached = CachedLM(ours.lm, slots=1, max_len=256)
        logits = cached.logits(cached.forward(embeds, torch.tensor([0])))[0]
    assert torch.allclose(logits, reference, atol=1e-4), (logits - reference).abs().max()


def test_it_names_the_shipped_codec_as_the_one_it_speaks(shipped_lm_dir, shipped_codec_dir):
    codec = Codec.from_pretrained(shipped_codec_dir)
    assert SpeechLM.from_pretrained(shipped_lm_dir).codec_fingerprint == codec.fingerprint()


def test_it_carries_named_voices_and_a_default(shipped_lm_dir):
    names = list_voices(shipped_lm_dir)
    assert "default" in names and len(names) >= 4


def test_say_speaks_a_sentence_with_named_and_reference_voices(shipped_lm_dir, shipped_codec_dir, speech_path,
                                                               tmp_path):
    import soundfile as sf

    for voice in ([], ["--voice", "slt"], ["--voice", str(speech_path)]):
        out = tmp_path / "hello.wav"
        r = CliRunner().invoke(app, ["say", "Hello there.", "-o", str(out), *voice])
        assert r.exit_code == 0, r.output
        audio, rate = sf.read(str(out))
        assert rate == 16000 and 0.3 < len(audio) / rate < 10 and np.sqrt(np.mean(audio ** 2)) > 1e-3
