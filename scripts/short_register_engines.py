"""Short-register failure of the shipped model per engine, over several seeds (the same items, voices and
sampling as `gepard eval lm --voices flite_awb,flite_kal16,flite_rms,flite_slt`).

Usage: python scripts/short_register_engines.py OUT.json [--seeds N] [--engines torch,torch-fp32-head,vllm]
                                                  [--temperature T]

Engines: the embedded torch engine with its int8 output head (the default), with the exact fp32 head, and
vLLM. Prints each engine's failure rate per seed and over all seeds; writes every item's outcome to OUT.json.
"""

import argparse
import json

from gepard.api import TTS
from gepard.data.manifests import shared_split
from gepard.engine.base import DEFAULT_TEMPERATURE, SamplingParams
from gepard.engine.process import EngineProcess
from gepard.eval.asr import get_transcriber
from gepard.eval.lm_report import VoicePicker, speak_short_register
from gepard.paths import lm_dir

VOICES = ["flite_awb", "flite_kal16", "flite_rms", "flite_slt"]
ENGINES = {"torch": lambda: "torch",  # each engine starts when its turn comes
           "torch-fp32-head": lambda: EngineProcess(lm_dir(None), 16, int8_head=False),
           "vllm": lambda: "vllm"}


def failures(name: str, engine, seeds: int, temperature: float) -> dict[int, list[bool]]:
    """Seed -> whether each short-register item failed (no stop before the guard, or utterance WER > 50 %)."""
    out = {}
    with TTS.load(None, None, engine=engine) as tts:
        asr, voice_of = get_transcriber(2), VoicePicker(tts, VOICES)
        short = shared_split("short_register")
        for seed in range(seeds):
            spoken = speak_short_register(tts, short, voice_of, asr, SamplingParams(temperature=temperature, seed=seed),
                                          None, f"{name}, seed {seed}")
            out[seed] = [g["failed"] for g in spoken]
            print(name, seed, f"{100 * sum(out[seed]) / len(short):.1f} %", flush=True)
    return out


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("out")
    args.add_argument("--seeds", type=int, default=4)
    args.add_argument("--engines", default=",".join(ENGINES))
    args.add_argument("--temperature", type=float, default=DEFAULT_TEMPERATURE)
    a = args.parse_args()
    if a.seeds < 1:
        args.error("--seeds must be at least 1")
    results = {name: failures(name, ENGINES[name](), a.seeds, a.temperature) for name in a.engines.split(",")}
    with open(a.out, "w") as f:
        json.dump(results, f)
    for name, by_seed in results.items():
        failed = [x for seed in by_seed.values() for x in seed]
        print(f"{name}: {100 * sum(failed) / len(failed):.2f} % of {len(failed)} generations")


if __name__ == "__main__":
    main()
