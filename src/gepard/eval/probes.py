"""`gepard eval probes`: the short-register failure mode, measured -> docs/results/probes.md.

Per generation: the belief entropy and the NLL of each frame (a run that locks onto the text drops within
its first frames; a derailed one stays flat), its onset entropy (mean over the first ONSET frames), whether
it stopped before the guard, and its ASR WER. Per item: the min-WER over N rollouts (can the model say it
at all?). Over items: the failure rate against the text-token budget, with and without text repetition.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from gepard.api import TTS
from gepard.codec.files import decode_codes
from gepard.data.manifests import shared_split
from gepard.engine.base import SamplingParams
from gepard.eval.asr import get_transcriber, utterance_wer
from gepard.eval.lm_report import FAIL_WER, NO_REPETITION, VoicePicker
from gepard.eval.machine import describe_machine
from gepard.lm.frontend import segment_chars
from gepard.lm.generate import generate_codes
from gepard.stream.text import segment_stream

ONSET = 10  # frames whose mean entropy is a generation's onset entropy
BUDGETS = [(1, 1), (2, 2), (3, 3), (4, 6), (7, 12), (13, 10_000)]  # text-token budget buckets
MODES = ("repeated", "plain")
SPLITS = {"short_register": "short-register list", "teacher_test": "held-out sentences"}


def run_probes(tts: TTS, limit: int = 0, rollouts: int = 4, threads: int = 2,
               voices: list[str] | None = None) -> list[dict]:
    """Every item of the short-register list and of the held-out sentences that one utterance holds (a
    phone track holds 8 s), `rollouts` seeds, with and without repetition -> one row per generation.
    A track model's prompt is always one full track: its budget is counted in words, and it has no
    repetition to switch off. `voices`: as in `evaluate_lm`."""
    torch.set_num_threads(threads)
    asr = get_transcriber(threads)
    voice_of = VoicePicker(tts, voices)
    track = tts.model.text_front_end == "track"
    max_chars = segment_chars(tts.model.text_front_end)
    items = []
    for split in ("short_register", "teacher_test"):
        pool = [u for u in shared_split(split) if split == "short_register" or not voices or u.speaker in voices]
        pool = [u for u in pool if len(list(segment_stream([u.text], max_chars))) == 1]
        items += [(split, u) for u in (pool[:limit] if limit else pool)]
    rows = []
    for split, u in tqdm(items, desc="probes", unit="item"):
        prefix = voice_of(u)[0]
        budget = len(u.text.split()) if track else len(tts.model.encode_text(u.text))
        for mode, repetition in (("repeated", None), ("plain", NO_REPETITION))[: 1 if track else 2]:
            for seed in range(rollouts):
                trace: list[tuple[float, float]] = []
                codes, stopped = generate_codes(tts.model, u.text, prefix, SamplingParams(seed=seed),
                                                repetition=repetition, trace=trace)
                audio = decode_codes(tts.codec, codes)
                wer = utterance_wer(u.reference_text, asr.transcribe(audio))
                entropy = [e for e, _ in trace]
                rows.append({"id": u.id, "split": split, "text": u.text, "budget": budget,
                             "budget_unit": "words" if track else "text tokens", "mode": mode,
                             "seed": seed, "stopped": stopped, "wer": wer, "failed": not stopped or wer > FAIL_WER,
                             "onset_entropy": float(np.mean(entropy[:ONSET])) if entropy else float("nan"),
                             "entropy": entropy, "nll": [n for _, n in trace]})
    return rows


def summarize(rows: list[dict]) -> dict:
    """Failure rate per budget and mode, onset entropy of clean vs failed runs, min-WER vs mean WER per set
    (None where a mode was not run)."""
    def mean(values: list[float]) -> float | None:
        return 100 * float(np.mean(values)) if values else None

    budgets = [{"budget": f"{lo}" if lo == hi else f"{lo}+" if hi >= 10_000 else f"{lo}-{hi}",
                **{mode: mean([r["failed"] for r in rows if r["mode"] == mode and lo <= r["budget"] <= hi])
                   for mode in MODES},
                "items": len({r["id"] for r in rows if lo <= r["budget"] <= hi})} for lo, hi in BUDGETS]
    by_item: dict[tuple[str, str, str], list[float]] = {}
    for r in rows:
        by_item.setdefault((r["split"], r["id"], r["mode"]), []).append(r["wer"])
    onset = {kind: [r["onset_entropy"] for r in rows if r["failed"] == failed and not np.isnan(r["onset_entropy"])]
             for kind, failed in (("clean", False), ("failed", True))}
    return {
        "budgets": budgets, "budget_unit": rows[0]["budget_unit"],
        "onset_entropy": {k: float(np.mean(v)) if v else None for k, v in onset.items()},
        **{f"{stat}_wer": {split: {mode: mean([reduce(w) for (sp, _, m), w in by_item.items()
                                                if sp == split and m == mode]) for mode in MODES} for split in SPLITS}
           for stat, reduce in (("min", min), ("mean", np.mean))},
        "generations": len(rows), "rollouts": max(r["seed"] for r in rows) + 1,
    }


def write_probes_report(rows: list[dict], command: str, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = summarize(rows)
    fmt = lambda v: "—" if v is None else f"{v:.1f}"  # noqa: E731
    modes = [m for m in MODES if any(r["mode"] == m for r in rows)]  # a track model runs its own prompt only
    both = len(modes) == 2
    titles = {"repeated": "with repetition", "plain": "without"} if both else {modes[0]: "value"}
    lines = ["# Short-register probes", "", f"Command: `{command}`", "",
             f"Machine: {describe_machine()}. Date: {datetime.date.today().isoformat()}.", "",
             f"{s['generations']} generations: every item of the short-register list and of the held-out sentences "
             f"that one utterance holds, {s['rollouts']} seeds each{', with and without text repetition' * both} "
             f"(plain HF loop, {SamplingParams().describe()}). Failure: no stop before the max-frame guard, "
             f"or utterance WER > {FAIL_WER:.0%}." + (" The model reads a phone track, one full track per prompt "
                                                      "whatever the text: its budget is counted in words, and it has "
                                                      "no text repetition to switch off."
                                                      if s["budget_unit"] == "words" else ""), "",
             f"| {s['budget_unit']} | items | " + " | ".join(f"failure % {titles[m]}" if both else "failure %"
                                                           for m in modes) + " |",
             "|---|---|" + "---|" * len(modes)]
    lines += [f"| {b['budget']} | {b['items']} | " + " | ".join(fmt(b[m]) for m in modes) + " |" for b in s["budgets"]]
    lines += ["", "| measure | " + " | ".join(titles[m] for m in modes) + " |", "|---|" + "---|" * len(modes)]
    for split, name in SPLITS.items():
        lines += [f"| {name}: min-WER over {s['rollouts']} rollouts, mean over items % | "
                  + " | ".join(fmt(s["min_wer"][split][m]) for m in modes) + " |",
                  f"| {name}: WER of one rollout, mean % | " + " | ".join(fmt(s["mean_wer"][split][m]) for m in modes)
                  + " |"]
    lines += ["", f"Onset entropy (mean belief entropy of the first {ONSET} frames, nats): clean runs "
              f"{fmt(s['onset_entropy']['clean'])}, failed runs {fmt(s['onset_entropy']['failed'])}.", "",
              f"![probes]({out.stem}.png)"]
    fig, ax = plt.subplots(1, 3, figsize=(14, 3.8))
    for failed, color in ((False, "tab:green"), (True, "tab:red")):
        curves = [r for r in rows if r["failed"] == failed and r["entropy"]]
        for key, axis in (("entropy", ax[0]), ("nll", ax[1])):
            if curves:
                n = min(100, max(len(r[key]) for r in curves))
                mean = [np.mean([r[key][i] for r in curves if len(r[key]) > i]) for i in range(n)]
                axis.plot(mean, color=color, label=f"{'failed' if failed else 'clean'} ({len(curves)})")
    for axis, title in ((ax[0], "belief entropy per frame (nats)"), (ax[1], "NLL of the sampled code per frame")):
        axis.set_xlabel("frame"), axis.set_title(title), axis.legend()
    for mode, style in zip(modes, ("o-", "s--")):
        failure = [b[mode] if b[mode] is not None else np.nan for b in s["budgets"]]
        ax[2].plot([b["budget"] for b in s["budgets"]], failure, style, label=titles[mode] if both else "failure")
    ax[2].set_xlabel(s["budget_unit"]), ax[2].set_ylabel("failure %"), ax[2].set_title("failure vs text budget")
    ax[2].legend()
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out.with_suffix(".png"), dpi=100)
    plt.close(fig)
    out.write_text("\n".join(lines) + "\n")
    curves = ("entropy", "nll")  # in the plot; the JSON keeps each generation's numbers
    out.with_suffix(".json").write_text(json.dumps(
        {"summary": s, "rows": [{k: v for k, v in r.items() if k not in curves} for r in rows]}, indent=1))
