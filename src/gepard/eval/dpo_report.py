"""`gepard eval dpo`: single-pass base vs. two-pass CFG base vs. single-pass DPO -> docs/results/dpo.md."""

from __future__ import annotations

import json
from pathlib import Path

from gepard.engine.base import SamplingParams
from gepard.eval.lm_report import FAIL_WER

COLUMNS = [("wer", "WER %", "{:.1f}"), ("short_failure_repeated", "short-register failure %", "{:.1f}"),
           ("runaway_rate", "runaway %", "{:.2f}"), ("cosine_mean", "speaker cosine", "{:.3f}"),
           ("duration_error", "duration error %", "{:.1f}"),
           ("decode_passes_per_audio_s", "LM passes per audio s", "{:.1f}"),
           ("wall_s_per_audio_s", "wall s per audio s", "{:.3f}")]


def configurations(base: Path, dpo: Path, cfg_scale: float, cfg_frames: int) -> list[tuple[str, Path, SamplingParams]]:
    """(name, model folder, sampling) of the three systems compared; seed 0 for all."""
    return [("base, single pass", base, SamplingParams(seed=0)),
            (f"base, two-pass CFG {cfg_scale:g} (first {cfg_frames} frames)", base,
             SamplingParams(seed=0, cfg_scale=cfg_scale, cfg_frames=cfg_frames)),
            ("DPO, single pass", dpo, SamplingParams(seed=0))]


def verdict(results: dict[str, dict]) -> list[str]:
    """The issue's targets, checked on the measured numbers."""
    base, cfg, dpo = results.values()
    ok = lambda good: "✅" if good else "❌"  # noqa: E731
    return [
        f"- DPO single pass WER ≤ two-pass CFG base: {dpo['wer']:.1f} vs {cfg['wer']:.1f} {ok(dpo['wer'] <= cfg['wer'])}",
        f"- DPO short-register failure ≤ two-pass CFG base: {dpo['short_failure_repeated']:.1f} vs "
        f"{cfg['short_failure_repeated']:.1f} {ok(dpo['short_failure_repeated'] <= cfg['short_failure_repeated'])}",
        f"- DPO short-register failure ≤ 2 %: {ok(dpo['short_failure_repeated'] <= 2)}",
        f"- DPO compute ≤ half of two-pass CFG (LM passes per audio second): "
        f"{dpo['decode_passes_per_audio_s']:.1f} vs {cfg['decode_passes_per_audio_s']:.1f} "
        f"{ok(dpo['decode_passes_per_audio_s'] <= cfg['decode_passes_per_audio_s'] / 2)}",
    ]


def write_dpo_report(results: dict[str, dict], command: str, out: Path, train_log: Path | None) -> None:
    first = next(iter(results.values()))
    lines = ["# DPO: two-pass CFG distilled into single-pass weights", "", f"Command: `{command}`", "",
             f"Machine: {first['machine']}. Date: {first['date']}.", "",
             f"Held out: {first['test_utterances']} sentences of the teacher test set (voices heard in training, "
             f"sentences not), and {first['short_items']} items of the short-register list, with the model's "
             f"text repetition. Failure: no stop before the max-frame guard, or utterance WER > {FAIL_WER:.0%}. "
             f"Sampling: {SamplingParams().describe()}, seed 0; torch engine. LM passes per audio second "
             "count decode steps (two per frame while CFG runs)."
             + (f" Voices: {', '.join(first['voices'])} (test sentences of these voices only; short-register items "
                "spoken in one of them)." if first.get("voices") else ""), "",
             "| system | " + " | ".join(title for _, title, _ in COLUMNS) + " |",
             "|---|" + "---|" * len(COLUMNS)]
    lines += [f"| {name} | " + " | ".join(fmt.format(r[key]) for key, _, fmt in COLUMNS) + " |"
              for name, r in results.items()]
    lines += ["", "Targets:", "", *verdict(results)]
    if train_log and train_log.exists():
        log = [json.loads(line) for line in train_log.read_text().splitlines() if line.strip()]
        lines += ["", f"DPO training: {log[-1]['step']} steps in {log[-1]['elapsed_s'] / 60:.1f} min; "
                  f"last loss {log[-1]['loss']:.3f}, preference accuracy {log[-1]['accuracy']:.2f}."]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps(
        {name: {k: v for k, v in r.items() if not k.endswith("rows")} for name, r in results.items()}, indent=2))
