"""Short-register failure of the shipped model (or --model) per engine, over several seeds (the same items,
voices and sampling as `gepard eval lm --voices flite_awb,flite_kal16,flite_rms,flite_slt`); with --sentences,
also the corpus WER of the held-out test sentences of those voices, per seed.

Usage: python scripts/short_register_engines.py OUT.json [--seeds N] [--engines torch,torch-fp32-head,vllm]
                                                  [--temperature T] [--cfg-scale S] [--sentences] [--model DIR]
                                                  [--codec DIR]

Engines: the embedded torch engine with its int8 output head (the default), with the exact fp32 head, and
vLLM; --cfg-scale S != 1: two-pass text CFG over the first 20 frames (embedded engine only). Prints each
engine's results per seed and over all seeds; writes every item's outcome to OUT.json as
{engine: {"short": {seed: [failed]}, "sentences": {seed: {"wer": %, "asr": [transcripts]}}}}.
"""

import argparse
import json

from gepard.api import TTS
from gepard.data.manifests import shared_split
from gepard.engine.base import DEFAULT_TEMPERATURE, SamplingParams
from gepard.engine.process import EngineProcess
from gepard.eval.asr import get_transcriber, wer
from gepard.eval.lm_report import VoicePicker, speak_short_register, synthesize_all
from gepard.paths import lm_dir

VOICES = ["flite_awb", "flite_kal16", "flite_rms", "flite_slt"]
ENGINES = {"torch": lambda model: "torch",  # each engine starts when its turn comes
           "torch-fp32-head": lambda model: EngineProcess(lm_dir(model), 16, int8_head=False),
           "vllm": lambda model: "vllm"}


def run_engine(name: str, engine, model: str | None, seeds: int, temperature: float, sentences: bool,
               cfg_scale: float = 1.0, codec: str | None = None) -> dict:
    """{"short": seed -> whether each short-register item failed (no stop before the guard, or utterance WER
    > 50 %), "sentences": seed -> corpus WER % and transcripts of the held-out sentences (if asked)}."""
    out = {"short": {}, "sentences": {}}
    with TTS.load(model, codec, engine=engine) as tts:
        asr, voice_of = get_transcriber(2), VoicePicker(tts, VOICES)
        short = shared_split("short_register")
        test = [u for u in shared_split("teacher_test") if u.speaker in VOICES]
        for seed in range(seeds):
            sampling = SamplingParams(temperature=temperature, seed=seed, cfg_scale=cfg_scale)
            spoken = speak_short_register(tts, short, voice_of, asr, sampling, None, f"{name}, seed {seed}")
            out["short"][seed] = [g["failed"] for g in spoken]
            line = f"{name} seed {seed}: short failure {100 * sum(out['short'][seed]) / len(short):.1f} %"
            if sentences:
                audio = synthesize_all(tts, [(u.text, voice_of(u)[0], None) for u in test], f"{name}, sentences",
                                       sampling)
                heard = [asr.transcribe(a) for a, _ in audio]
                out["sentences"][seed] = {"wer": 100 * wer([u.text for u in test], heard), "asr": heard}
                line += f", sentence WER {out['sentences'][seed]['wer']:.2f} %"
            print(line, flush=True)
    return out


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("out")
    args.add_argument("--seeds", type=int, default=4)
    args.add_argument("--engines", default=",".join(ENGINES))
    args.add_argument("--temperature", type=float, default=DEFAULT_TEMPERATURE)
    args.add_argument("--cfg-scale", type=float, default=1.0)
    args.add_argument("--sentences", action="store_true")
    args.add_argument("--model", default=None, help="Speech LM folder (default: the shipped models/lm).")
    args.add_argument("--codec", default=None, help="Codec folder (default: the shipped models/codec).")
    a = args.parse_args()
    if a.seeds < 1:
        args.error("--seeds must be at least 1")
    results = {name: run_engine(name, ENGINES[name](a.model), a.model, a.seeds, a.temperature, a.sentences,
                                a.cfg_scale, a.codec) for name in a.engines.split(",")}
    with open(a.out, "w") as f:
        json.dump(results, f)
    for name, r in results.items():
        failed = [x for seed in r["short"].values() for x in seed]
        line = f"{name}: short failure {100 * sum(failed) / len(failed):.2f} % of {len(failed)} generations"
        if a.sentences:
            line += f", sentence WER {sum(s['wer'] for s in r['sentences'].values()) / a.seeds:.2f} % (mean of seeds)"
        print(line)


if __name__ == "__main__":
    main()
