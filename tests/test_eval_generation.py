"""Evaluation's generation is reproducible: the same jobs and seed give the same codes in every run."""

from gepard.api import TTS
from gepard.eval.lm_report import generate_all


def test_generate_all_gives_the_same_codes_every_run(tiny_lm_dir, tiny_codec_dir):
    texts = ["hello there", "yes", "see you at nine", "hello", "see you"]
    with TTS.load(tiny_lm_dir, tiny_codec_dir, slots=4) as tts:
        prefix = tts.model.voice.null(1)
        jobs = [(text, prefix, None) for text in texts]
        runs = [generate_all(tts, jobs, "run", concurrency=4) for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]
    assert all(codes for codes, _ in runs[0])
