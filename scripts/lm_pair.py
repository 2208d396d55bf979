"""Two `gepard eval lm` reports on the same items, paired: which sentences and short replies got better.

Usage: python scripts/lm_pair.py OUT.md BASE.json OTHER.json

Both JSONs must hold the same held-out sentences and short-register items (same voices and seeds). Sentences are
paired by utterance WER (Whisper's transcript of each against its text); short replies by how many seeds each item
failed in. Each count comes with a two-sided sign test over the items that differ.
"""

import argparse
import datetime
import json
import shlex
import sys
from pathlib import Path

from scipy.stats import binomtest

from gepard.eval.asr import utterance_wer
from gepard.eval.machine import describe_machine


def sign_test(base: list[float], other: list[float]) -> str:
    """'N better, M worse, K alike (p = ...)' of paired scores where lower is better."""
    better = sum(o < b for b, o in zip(base, other))
    worse = sum(o > b for b, o in zip(base, other))
    p = binomtest(better, better + worse).pvalue if better + worse else 1.0
    return f"{better} better, {worse} worse, {len(base) - better - worse} alike (two-sided sign test p = {p:.3f})"


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("out", type=Path)
    args.add_argument("base", type=Path)
    args.add_argument("other", type=Path)
    a = args.parse_args()
    base, other = (json.loads(p.read_text()) for p in (a.base, a.other))
    for key in ("rows", "short_rows"):
        if [r["id"] for r in base[key]] != [r["id"] for r in other[key]]:
            raise SystemExit(f"the two reports hold different items ({key}): nothing to pair")
    sentences = [[utterance_wer(r["text"], r["asr"]) for r in run["rows"]] for run in (base, other)]
    short = [[sum(s["failed"] for s in r["repeated"]) for r in run["short_rows"]] for run in (base, other)]
    lines = [f"# {a.other.name} against {a.base.name}", "",
             f"Command: `python {' '.join(shlex.quote(x) for x in sys.argv)}`", "",
             f"Machine: {describe_machine()}. Date: {datetime.date.today().isoformat()}.", "",
             "| report | sentence WER % | short replies failing % |", "|---|---|---|",
             *[f"| `{p}` | {run['wer']:.2f} | {run['short_failure_repeated']:.1f} |"
               for p, run in ((a.base, base), (a.other, other))], "",
             f"Under the second report, by utterance WER: {len(sentences[0])} sentences {sign_test(*sentences)}; "
             f"by the number of seeds (of {base['short_seeds']}) an item fails in: {len(short[0])} short replies "
             f"{sign_test(*short)}.", ""]
    a.out.write_text("\n".join(lines))
    print(a.out.read_text())


if __name__ == "__main__":
    main()
