"""Prefill chunk sizes against the engine before chunked prefill, on this machine.

Each run is `gepard bench --concurrency 4,16` (embedded engine), with GEPARD_PREFILL_CHUNK set, or, for
"before", the code of BASE_COMMIT in a temporary git worktree. Variants alternate round by round, so that a
machine that speeds up or slows down mid-run (shared CPUs do) touches every variant alike. Reports go to
OUT_DIR/<variant>_<round>.md (+ .json); runs whose .json is already there are kept (resumable). Prints the
mean of the rounds per variant as a Markdown table.

Usage: python scripts/bench_prefill_chunk.py OUT_DIR [BASE_COMMIT] [ROUNDS]
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHUNKS = (64, 128, 192, 4096)  # 4096: longer than any prompt, i.e. whole prompts in the decode step


def bench(out: Path, cwd: Path, env: dict) -> None:
    if out.with_suffix(".json").exists():
        return
    with open(out.with_suffix(".log"), "w") as log:
        subprocess.run(["gepard", "bench", "--concurrency", "4,16", "--out", str(out)], cwd=cwd, env=env,
                       stdout=log, stderr=subprocess.STDOUT, check=True)


def run_all(out_dir: Path, base: str, rounds: int) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    worktree = Path(tempfile.mkdtemp(prefix="gepard_base_"))
    subprocess.run(["git", "worktree", "add", "-q", "--detach", str(worktree), base], check=True)
    try:
        if Path(".cache/decoder_precision.json").exists():  # the same decoder precision for both
            (worktree / ".cache").mkdir()
            shutil.copy(".cache/decoder_precision.json", worktree / ".cache")
        for r in range(1, rounds + 1):
            bench(out_dir / f"before_{r}.md", worktree, {**os.environ, "PYTHONPATH": str(worktree / "src")})
            for chunk in CHUNKS:
                bench(out_dir / f"chunk{chunk}_{r}.md", Path.cwd(), {**os.environ, "GEPARD_PREFILL_CHUNK": str(chunk)})
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], check=True)


def summary(out_dir: Path) -> str:
    rows = ["| variant | rounds | single stream: RTF | TTFA p50 ms | 4 streams: TTFA p50 ms | stall ms per stream | "
            "16 streams: aggregate × real time | TTFA p50 ms | TTFA p95 ms | streams that stalled | "
            "stall ms per stream, mean (max) |", "|---" * 11 + "|"]
    for variant in ["before"] + [f"chunk{c}" for c in CHUNKS]:
        runs = [json.loads(p.read_text())["engines"]["torch"] for p in sorted(out_dir.glob(f"{variant}_*.json"))]
        if not runs:
            continue
        four, sixteen = ([next(s for s in r["sweep"] if s["streams"] == n) for r in runs] for n in (4, 16))

        def mean(items, key):
            return statistics.mean(item[key] for item in items)

        rows.append(f"| {variant} | {len(runs)} | {mean([r['single'] for r in runs], 'rtf'):.3f} | "
                    f"{mean([r['single'] for r in runs], 'ttfa_p50_ms'):.0f} | {mean(four, 'ttfa_p50_ms'):.0f} | "
                    f"{mean(four, 'stall_ms_mean'):.1f} | {mean(sixteen, 'aggregate_x_realtime'):.1f} | "
                    f"{mean(sixteen, 'ttfa_p50_ms'):.0f} | {mean(sixteen, 'ttfa_p95_ms'):.0f} | "
                    f"{sum(s['underruns'] for s in sixteen)}/{sum(s['requests'] for s in sixteen)} | "
                    f"{mean(sixteen, 'stall_ms_mean'):.1f} ({max(s['stall_ms_max'] for s in sixteen):.0f}) |")
    return "\n".join(rows)


if __name__ == "__main__":
    out_dir = Path(sys.argv[1]).resolve()  # the "before" runs write from the worktree
    run_all(out_dir, sys.argv[2] if len(sys.argv) > 2 else "0d2bc34", int(sys.argv[3]) if len(sys.argv) > 3 else 3)
    print(summary(out_dir))
