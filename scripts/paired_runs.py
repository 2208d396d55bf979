"""Two models side by side, item by item, from `short_register_engines.py --sentences` runs on the same seeds.

Usage: python scripts/paired_runs.py OUT.md ENGINE BASE_NAME=RUN.json OTHER_NAME=RUN.json

Writes OUT.md: per model, short-register failure per seed and over all seeds, held-out sentence WER per seed and
their mean; then the short-register items paired: how many fail less often (over the seeds) under the second
model and how many more, with a two-sided sign test over the items that differ.
"""

import argparse
import datetime
import json
import shlex
import sys
from pathlib import Path

from scipy.stats import binomtest

from gepard.eval.machine import describe_machine
from temperature_report import summarize


def failures_per_item(run: dict) -> list[int]:
    """How many seeds each short-register item failed in."""
    return [sum(seed) for seed in zip(*run["short"].values())]


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("out", type=Path)
    args.add_argument("engine")
    args.add_argument("runs", nargs=2, help="NAME=RUN.json (the base first)")
    a = args.parse_args()
    names, runs = zip(*[(n, json.loads(Path(p).read_text())[a.engine]) for n, p in (r.split("=", 1) for r in a.runs)])
    if sorted(runs[0]["short"]) != sorted(runs[1]["short"]):
        raise SystemExit("the two runs hold different seeds: nothing to pair")
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    lines = ["| model | short-register failure % per seed | all seeds | sentence WER % per seed | mean |",
             "|---|---|---|---|---|"]
    for name, run in zip(names, runs):
        s = summarize(run)
        lines.append(f"| {name} | {' / '.join(f'{x:.1f}' for x in s['short'])} | {mean(s['short']):.1f} | "
                     f"{' / '.join(f'{w:.1f}' for w in s['sentences'])} | {mean(s['sentences']):.2f} |")
    base, other = (failures_per_item(r) for r in runs)
    better = sum(o < b for b, o in zip(base, other))
    worse = sum(o > b for b, o in zip(base, other))
    p = binomtest(better, better + worse).pvalue if better + worse else 1.0
    same = len(base) - better - worse
    paired = (f"Short-register items, paired over {len(runs[0]['short'])} seeds: {better} fail less often under "
              f"{names[1]}, {worse} more often, {same} as often (two-sided sign test p = {p:.3f}).")
    command = "python " + " ".join(shlex.quote(x) for x in sys.argv)
    a.out.write_text("\n".join([f"# {names[1]} against {names[0]} ({a.engine} engine)", "", f"Command: `{command}`",
                                "", f"Machine: {describe_machine()}. Date: {datetime.date.today().isoformat()}.", "",
                                *lines, "", paired, ""]))
    print(a.out.read_text())


if __name__ == "__main__":
    main()
