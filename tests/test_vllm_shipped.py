"""The shipped model on vLLM speaks as intelligibly as on the torch engine (Whisper tiny.en, same texts and seeds).

The two engines sample with different random streams, so their codes differ; the check is the same for both:
corpus WER over the sentences below, each spoken with seeds 0-2, at most MAX_WER, and vLLM's at most MAX_GAP
points above the torch engine's in the same run (measured on one seed alone, the two engines' WER differed by up
to 10 points either way; over three seeds the differences average out). MAX_WER guards against a broken engine
(babble scores ~100 %); the quality targets and the full evaluation live in `gepard eval lm` (docs/results/lm.md,
lm_vllm.md).
"""

import pytest

from gepard.api import TTS
from gepard.codec.files import decode_codes
from gepard.engine.base import SamplingParams
from gepard.eval.asr import get_transcriber, wer
from gepard.eval.lm_report import generate_all

pytest.importorskip("vllm", reason="vLLM is not installed (pip install 'gepard[vllm]')")
pytest.importorskip("faster_whisper", reason="the eval extra is not installed (pip install 'gepard[eval]')")

SENTENCES = [
    "The train to the city leaves at half past seven.",
    "Please close the window before you go to bed.",
    "She bought fresh bread and a bottle of milk.",
    "We will meet again next week to finish the plan.",
    "The garden looks beautiful after the summer rain.",
    "He could not find his keys this morning.",
    "My brother plays the guitar in a small band.",
    "It is much colder today than it was yesterday.",
    "Turn left at the corner and walk for two minutes.",
    "The children were laughing in the back of the room.",
    "Can you tell me where the nearest station is?",
    "Thank you for calling, I will send the details soon.",
]
SEEDS = (0, 1, 2)
MAX_WER = 70.0
MAX_GAP = 10.0


def engine_wer(tts: TTS) -> float:
    """Corpus WER (%) of the sentences spoken in the default voice with each seed (default sampling)."""
    prefix = tts.voice(None)
    jobs = [(text, prefix, None) for text in SENTENCES]
    asr = get_transcriber()
    hypotheses = []
    for seed in SEEDS:
        codes = generate_all(tts, jobs, tts.engine_name, SamplingParams(seed=seed))
        hypotheses += [asr.transcribe(decode_codes(tts.codec, c)) for c, _ in codes]
    return 100 * wer(SENTENCES * len(SEEDS), hypotheses)


def test_vllm_audio_passes_the_same_wer_check_as_the_torch_engine(shipped_lm_dir, shipped_codec_dir):
    with TTS.load(shipped_lm_dir, shipped_codec_dir, slots=len(SENTENCES)) as tts:
        torch_wer = engine_wer(tts)
    with TTS.load(shipped_lm_dir, shipped_codec_dir, slots=len(SENTENCES), engine="vllm") as tts:
        vllm_wer = engine_wer(tts)
    assert torch_wer <= MAX_WER, f"torch engine: WER {torch_wer:.1f} %"
    assert vllm_wer <= MAX_WER and vllm_wer <= torch_wer + MAX_GAP, \
        f"vLLM WER {vllm_wer:.1f} % against the torch engine's {torch_wer:.1f} %"
