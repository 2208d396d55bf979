"""Can a score computed without ASR pick the clear one among several rollouts of a short reply?

Usage: python scripts/rerank_short.py OUT.md [--model DIR] [--codec DIR] [--listener DIR] [--rollouts N]
       [--limit N] [--sentences] [--temperature T]

Every item of the shared short-register list (with --sentences: the held-out flite sentences instead) is
spoken N times (seeds 0..N-1), each item in the flite voice `gepard eval lm --voices` gives it. Each rollout is
scored two ways without ASR: `listener`, the phone listener's (codec/listener.py) mean over frames of the
log-probability of the phone the track asked for at that frame (the LM's audio frame j answers track entry j);
`lm`, the LM's own teacher-forced mean log-probability of its codes and <eos>. Failure as in `gepard eval lm`
(no stop before the frame guard, or utterance WER > 50 % by Whisper tiny.en). The report compares one rollout,
each score's pick among the first k, and the oracle pick (the rollout Whisper hears best).
"""

import argparse
import datetime
import json
import shlex
import sys
from pathlib import Path

import numpy as np
import torch

from gepard.api import TTS
from gepard.codec.files import decode_codes
from gepard.codec.listener import PhoneListener
from gepard.codec.phones import PHONE_IDS
from gepard.data.manifests import shared_split
from gepard.engine.base import DEFAULT_TEMPERATURE, SamplingParams
from gepard.eval.alignment_report import audio_nll
from gepard.eval.asr import get_transcriber, utterance_wer
from gepard.eval.lm_report import FAIL_WER, VoicePicker, generate_all
from gepard.eval.machine import describe_machine
from gepard.lm.track import TRACK_VOICE, aligned_flite
from listener_lm import FLITE_VOICES

SCORES = ("listener", "lm")


def within_item_auc(score: np.ndarray, failed: np.ndarray) -> float:
    """(items, rollouts) scores and failures -> the share of (clean, failed) rollout pairs of the same item in
    which the clean one scores higher (ties count half): 0.5 is a score that cannot tell them apart."""
    wins = pairs = 0.0
    for s, f in zip(score, failed):
        diff = s[~f][:, None] - s[f][None, :]
        wins += (diff > 0).sum() + 0.5 * (diff == 0).sum()
        pairs += diff.size
    return wins / pairs if pairs else float("nan")


def listener_score(ear: PhoneListener, audio: np.ndarray, wanted: np.ndarray) -> float:
    """(T,) audio, (J,) asked phone ids -> mean over frames of log p(asked phone) by the listener."""
    logp = ear.log_beliefs(audio, len(wanted))
    return float(logp[torch.arange(len(wanted)), torch.from_numpy(wanted)].mean())


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("out", type=Path)
    args.add_argument("--model", default=None)
    args.add_argument("--codec", default=None)
    args.add_argument("--listener", default="runs/listener")
    args.add_argument("--rollouts", type=int, default=4)
    args.add_argument("--limit", type=int, default=0)
    args.add_argument("--sentences", action="store_true")
    args.add_argument("--temperature", type=float, default=DEFAULT_TEMPERATURE)
    a = args.parse_args()
    torch.set_num_threads(2)
    voices = FLITE_VOICES.split(",")
    items = ([u for u in shared_split("teacher_test") if u.speaker in voices] if a.sentences
             else shared_split("short_register"))[: a.limit or None]
    ear, asr = PhoneListener.load(a.listener), get_transcriber(2)
    wanted = [np.array([PHONE_IDS[p] for p in aligned_flite(TRACK_VOICE, u.text)[1]]) for u in items]
    failed = np.zeros((len(items), a.rollouts), bool)
    score = {name: np.zeros((len(items), a.rollouts)) for name in SCORES}
    with TTS.load(a.model, a.codec) as tts:
        voice_of = VoicePicker(tts, voices)
        for seed in range(a.rollouts):
            spoken = generate_all(tts, [(u.text, voice_of(u)[0], None) for u in items], f"rollout {seed}",
                                  SamplingParams(temperature=a.temperature, seed=seed))
            for i, (u, (codes, stopped)) in enumerate(zip(items, spoken)):
                audio = decode_codes(tts.codec, codes)
                score["listener"][i, seed] = listener_score(ear, audio, wanted[i])
                score["lm"][i, seed] = -audio_nll(tts.model, u.text, torch.tensor(codes), voice_of(u)[0])
                failed[i, seed] = (not stopped) or utterance_wer(u.reference_text, asr.transcribe(audio)) > FAIL_WER
    rows = [("one rollout (mean over seeds)", 100 * failed.mean())]
    for k in range(2, a.rollouts + 1):
        for name in SCORES:
            pick = score[name][:, :k].argmax(1)
            rows.append((f"`{name}` pick of {k}", 100 * failed[np.arange(len(items)), pick].mean()))
        rows.append((f"oracle pick of {k} (Whisper)", 100 * failed[:, :k].all(1).mean()))
    what = "held-out flite sentences" if a.sentences else "short-register list"
    lines = ["# Picking the clear rollout without ASR", "",
             f"Command: `python {' '.join(shlex.quote(x) for x in sys.argv)}`", "",
             f"Machine: {describe_machine()}. Date: {datetime.date.today().isoformat()}.", "",
             f"{len(items)} items of the {what}, {a.rollouts} rollouts each (seeds 0–{a.rollouts - 1}, temperature "
             f"{a.temperature:g}), each item in the flite voice `gepard eval lm --voices {FLITE_VOICES}` gives it; LM: "
             f"{a.model or 'models/lm'}, codec: {a.codec or 'models/codec'}, listener: {a.listener}. Scores: "
             "`listener`, its mean log-probability of the asked-for phone per frame; `lm`, the LM's mean "
             "log-probability of its own codes and <eos>. Failure: no stop before the frame guard, or utterance "
             "WER > 50 % (Whisper tiny.en).", "",
             "| selection | failing % |", "|---|---|"]
    lines += [f"| {name} | {value:.1f} |" for name, value in rows]
    lines += ["", "| score | clean rollouts, mean | failed rollouts, mean | within-item AUC |", "|---|---|---|---|"]
    lines += [f"| `{name}` | {score[name][~failed].mean():.3f} | {score[name][failed].mean():.3f} | "
              f"{within_item_auc(score[name], failed):.3f} |" for name in SCORES]
    lines += ["", f"{(~failed).sum()} clean and {failed.sum()} failed rollouts; within-item AUC: the share of (clean, "
              "failed) rollout pairs of one item in which the clean one scores higher (0.5: chance)."]
    a.out.write_text("\n".join(lines) + "\n")
    a.out.with_suffix(".json").write_text(json.dumps({"ids": [u.id for u in items], "failed": failed.tolist(),
                                                      "score": {name: v.tolist() for name, v in score.items()}}))
    print(a.out.read_text())


if __name__ == "__main__":
    main()
