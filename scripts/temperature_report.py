"""One engine's sampling temperatures side by side, from `short_register_engines.py --sentences` runs.

Usage: python scripts/temperature_report.py OUT.md ENGINE T=RUN.json [T=RUN.json ...]

Writes OUT.md (a table: short-register failure over all seeds, held-out sentence WER per seed and their
mean), OUT.png (both against temperature, one dot per seed) and OUT.json (the runs' per-seed numbers).
"""

import argparse
import json
import shlex
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def summarize(run: dict) -> dict:
    """One engine's run -> per-seed short-register failure % and sentence WER %."""
    seeds = sorted(run["short"], key=int)
    return {"short": [100 * sum(run["short"][s]) / len(run["short"][s]) for s in seeds],
            "sentences": [run["sentences"][s]["wer"] for s in seeds]}


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("out", type=Path)
    args.add_argument("engine")
    args.add_argument("runs", nargs="+", help="TEMPERATURE=RUN.json")
    a = args.parse_args()
    rows = {}
    for item in a.runs:
        t, path = item.split("=", 1)
        rows[float(t)] = summarize(json.loads(Path(path).read_text())[a.engine])
    rows = dict(sorted(rows.items()))
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    lines = ["| temperature | short-register failure % (all seeds) | sentence WER % per seed | sentence WER % mean |",
             "|---|---|---|---|"]
    for t, r in rows.items():
        lines.append(f"| {t:g} | {mean(r['short']):.1f} | {' / '.join(f'{w:.1f}' for w in r['sentences'])} "
                     f"| {mean(r['sentences']):.2f} |")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.with_suffix(".json").write_text(json.dumps({a.engine: {str(t): r for t, r in rows.items()}}, indent=1))
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for ax, key, title in zip(axes, ("sentences", "short"), ("held-out sentence WER %", "short-register failure %")):
        for t, r in rows.items():
            ax.scatter([t] * len(r[key]), r[key], color="tab:blue", alpha=0.5, s=14)
        ax.plot(list(rows), [mean(r[key]) for r in rows.values()], color="tab:blue", marker="o")
        ax.set(xlabel="temperature", title=f"{title} ({a.engine} engine)")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(a.out.with_suffix(".png"), dpi=100)
    command = "python " + " ".join(shlex.quote(x) for x in sys.argv)
    a.out.write_text("\n".join([f"# Sampling temperature ({a.engine} engine)", "", f"Command: `{command}`", "",
                                *lines, "", f"![temperature]({a.out.with_suffix('.png').name})", ""]))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
