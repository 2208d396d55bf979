"""Does the decoder render the LM's speech more clearly from the LM's expected FSQ values than from its sampled codes?

Usage: python scripts/soft_render.py OUT.md [--seeds N] [--short] [--limit N] [--asr whisper|sphinx]

One rollout per item and seed (the shipped sampling; the LM always reads back its sampled code), rendered two
or more ways from the same steps: the sampled codes, and the mean FSQ values of the LM's distribution over codes
at a rendering temperature (top-k as sampled). A paired comparison where only the decoder's input differs.
"""

import argparse
import datetime
import shlex
import sys
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from gepard.api import TTS
from gepard.codec.render import frame_values
from gepard.data.manifests import shared_split
from gepard.engine.base import SamplingParams
from gepard.engine.sampling import block_topk, sample_tokens
from gepard.eval.asr import get_sphinx, get_transcriber
from gepard.eval.lm_report import VoicePicker
from gepard.eval.machine import describe_machine
from gepard.eval.mos import get_dnsmos
from gepard.eval.similarity import cosine_embeddings, get_speaker_encoder
from gepard.lm.frontend import segment_chars
from gepard.lm.generate import text_prompt
from gepard.stream.text import segment_stream
from decoder_wer import FLITE_VOICES, failing, scored

RECOGNIZERS = {"whisper": lambda: get_transcriber(2), "sphinx": get_sphinx}


@torch.inference_mode()
def rollout(tts: TTS, text: str, prefix: torch.Tensor, sampling: SamplingParams, top_k: int):
    """-> (sampled codes (J,), top-k logits (J, k) before temperature, their code ids (J, k), stopped)."""
    model, vocab = tts.model, tts.model.vocab
    ids, guard = text_prompt(model, text)
    allowed = torch.full((vocab.size,), float("-inf"))
    allowed[vocab.audio_offset:] = 0.0
    allowed[vocab.special("<eos>")] = 0.0
    gen = torch.Generator().manual_seed(sampling.seed)
    out = model.lm(inputs_embeds=model.embed(prefix, torch.tensor([ids])), use_cache=True)
    codes, logits_k, ids_k = [], [], []
    while len(codes) < guard:
        logits = out.logits[0, -1].float() + allowed
        [token] = sample_tokens(logits[None], [sampling], [gen])
        if token == vocab.special("<eos>"):
            return codes, torch.stack(logits_k) if codes else None, torch.stack(ids_k) if codes else None, True
        audio = logits[vocab.audio_offset:]
        values, at = block_topk(audio[None], top_k)
        logits_k.append(values[0])
        ids_k.append(at[0])
        codes.append(token - vocab.audio_offset)
        out = model.lm(input_ids=torch.tensor([[token]]), past_key_values=out.past_key_values, use_cache=True)
    return codes, torch.stack(logits_k), torch.stack(ids_k), False


def utterance(tts: TTS, text: str, prefix: torch.Tensor, seed: int, top_k: int):
    """A text cut into segments as `TTS.stream` cuts it (segment i with seed + i) -> concatenated rollout."""
    parts = [rollout(tts, s, prefix, SamplingParams(seed=seed + i), top_k)
             for i, s in enumerate(segment_stream([text], segment_chars(tts.model.text_front_end)))]
    codes = sum((p[0] for p in parts), [])
    logits = torch.cat([p[1] for p in parts if p[1] is not None])
    ids = torch.cat([p[2] for p in parts if p[2] is not None])
    return codes, logits, ids, all(p[3] for p in parts)


@torch.inference_mode()
def render(codec, codes, logits, ids, rendering) -> np.ndarray:
    """Sampled codes (rendering None) or the mean FSQ values of the top n codes at temperature t (rendering
    (t, n)) -> (T,) audio."""
    if not codes:
        return np.zeros(0, np.float32)
    if rendering is None:
        values = frame_values(codec.fsq, [(c, None) for c in codes], "codes")
    else:
        t, n = rendering
        tops = [(tuple(i[:n].tolist()), tuple(v[:n].tolist())) for i, v in zip(ids, logits)]
        values = frame_values(codec.fsq, list(zip(codes, tops)), "mean", t)
    return codec.decoder(values[None]).float()[0].numpy()


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("out", type=Path)
    args.add_argument("--seeds", type=int, default=1)
    args.add_argument("--short", action="store_true")
    args.add_argument("--limit", type=int, default=0)
    args.add_argument("--renderings", default="0.3:100,1.0:100",
                      help="T:N,...: mean values of the top N codes at temperature T")
    args.add_argument("--asr", default="whisper", help="whisper, sphinx or both (comma-separated), or none")
    args.add_argument("--quality", action="store_true",
                      help="also DNSMOS P.808 and resemblyzer cosine to the reference, on the sentences")
    a = args.parse_args()
    torch.set_num_threads(2)
    voices = FLITE_VOICES.split(",")
    test = [u for u in shared_split("teacher_test") if u.speaker in voices][: a.limit or None]
    short = shared_split("short_register")[: a.limit or None] if a.short else []
    renderings = [None] + [(float(r.split(":")[0]), int(r.split(":")[1])) for r in a.renderings.split(",")]
    with TTS.load() as tts:
        voice_of = VoicePicker(tts, voices)
        top_k = SamplingParams().top_k
        runs = {name: [[utterance(tts, u.text, voice_of(u)[0], seed, top_k)
                        for u in tqdm(items, desc=f"{name}, seed {seed}")] for seed in range(a.seeds)]
                for name, items in (("sentences", test), ("short", short)) if items}
        codec = tts.codec
        rows = []
        for ear, t in [(ear, t) for ear in a.asr.split(",") if ear != "none" for t in renderings]:
            asr = RECOGNIZERS[ear]()
            heard = {name: [[asr.transcribe(render(codec, *r[:3], t)) for r in seed] for seed in seeds]
                     for name, seeds in runs.items()}
            sentences = " / ".join(scored([u.text for u in test], h) for h in heard["sentences"])
            name = "sampled codes" if t is None else f"mean values, T = {t[0]:g}, top {t[1]}"
            cells = f"| {ear} | {name} | {sentences} |"
            if short:
                cells += " " + " / ".join(f"{failing([u.reference_text for u in short], h, [r[3] for r in seed]):.1f}"
                                          for h, seed in zip(heard["short"], runs["short"])) + " |"
            rows.append(cells)
            print(cells, flush=True)
        quality = []
        if a.quality:
            mos, speaker = get_dnsmos(2), get_speaker_encoder()
            refs = [speaker.embed(voice_of(u)[1]) for u in test]
            for t in renderings:
                audio = [render(codec, *r[:3], t) for seed in runs["sentences"] for r in seed]
                cos = [cosine_embeddings(speaker.embed(x), ref) for x, ref in zip(audio, refs * a.seeds)]
                name = "sampled codes" if t is None else f"mean values, T = {t[0]:g}, top {t[1]}"
                quality.append(f"| {name} | {np.mean([mos.score(x) for x in audio]):.2f} | {np.mean(cos):.3f} |")
                print(quality[-1], flush=True)
    lines = ["# The LM's speech rendered from sampled codes or from its expected values", "",
             f"Command: `python {' '.join(shlex.quote(x) for x in sys.argv)}`", "",
             f"Machine: {describe_machine()}. Date: {datetime.date.today().isoformat()}.", "",
             f"{len(test)} held-out sentences ({', '.join(voices)}); seeds 0–{a.seeds - 1}."
             + (f" Short replies: {len(short)} items, failing = no stop or over 50 % WER." if short else ""), "",
             "| ear | decoder input | WER % sentences per seed (utterances over 50 %) |"
             + (" short failing % per seed |" if short else ""), "|---|---|---|" + ("---|" if short else "")] + rows
    if quality:
        lines += ["", "| decoder input | DNSMOS P.808, sentences | resemblyzer cosine to the reference |", "|---|---|---|"]
        lines += quality
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text("\n".join(lines) + "\n")
    print(a.out.read_text())


if __name__ == "__main__":
    main()
