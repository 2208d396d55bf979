"""What do a codec's codes carry? How well each frame's code names its flite phone, and how many codes moved.

Usage: python scripts/phone_probe.py OUT.md CODEC [CODEC ...] [--train N] [--steps S]

On phone-track clips (scripts/flite_track.py: the manifest's `text` names the phone at every 25 Hz frame), a
small MLP learns to read the phone from the quantized values of a frame and its ±k neighbours (first N clips
of data/ft), and is scored on the held-out sentences (data/ft_test). The same probe, clips and seed for every
codec. "Same code" is the share of held-out frames whose code equals the first codec's: how much of what a
speech LM learned on the first codec's codes still holds.
"""

import argparse
import datetime
import json
import shlex
import sys
from pathlib import Path

import torch
from torch import nn

from gepard.audio import load_audio
from gepard.codec.files import load_codec
from gepard.codec.phones import phone_labels
from gepard.eval.machine import describe_machine

CONTEXTS = (0, 1, 2)


def clips(manifest: Path, limit: int) -> list[tuple[Path, str]]:
    rows = [json.loads(line) for line in open(manifest, encoding="utf-8")][:limit]
    return [(manifest.parent / r["audio"], r["text"]) for r in rows]


@torch.no_grad()
def encode(codec, items) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """-> (N, D) quantized values, (N,) codes and (N,) phone labels of every frame that has a phone."""
    values, codes, labels = [], [], []
    for path, track in items:
        v = codec.quantize(torch.from_numpy(load_audio(path, codec.config.sample_rate))[None])[0]
        y = torch.from_numpy(phone_labels(track, len(v))).long()
        values.append(v[y > 0]), codes.append(codec.fsq.values_to_index(v)[y > 0]), labels.append(y[y > 0])
    return torch.cat(values), torch.cat(codes), torch.cat(labels)


def with_context(x: torch.Tensor, k: int) -> torch.Tensor:
    """(N, D) -> (N, (2k + 1) D): each frame beside its k neighbours on either side (edges repeated)."""
    padded = torch.cat([x[:1].repeat(k, 1), x, x[-1:].repeat(k, 1)])
    return torch.cat([padded[i: i + len(x)] for i in range(2 * k + 1)], 1)


def probe(train: tuple, test: tuple, k: int, steps: int) -> float:
    """Held-out accuracy of a 2-layer MLP that reads the phone from frames j-k..j+k."""
    torch.manual_seed(0)
    x, y = with_context(train[0], k), train[2]
    net = nn.Sequential(nn.Linear(x.shape[1], 256), nn.GELU(), nn.Linear(256, 256), nn.GELU(),
                        nn.Linear(256, int(y.max()) + 1))
    opt = torch.optim.Adam(net.parameters(), 2e-3)
    for _ in range(steps):
        i = torch.randint(len(x), (1024,))
        loss = nn.functional.cross_entropy(net(x[i]), y[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        return (net(with_context(test[0], k)).argmax(-1) == test[2]).float().mean().item()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("codecs", nargs="+")
    ap.add_argument("--train", type=int, default=600, help="clips of data/ft the probe learns from")
    ap.add_argument("--steps", type=int, default=2000)
    a = ap.parse_args()
    torch.set_num_threads(2)
    train_items = clips(Path("data/ft/manifest.jsonl"), a.train)
    test_items = clips(Path("data/ft_test/manifest.jsonl"), 10**6)
    rows, first = [], None
    for path in a.codecs:
        codec = load_codec(path, bf16_decoder=False)
        train, test = encode(codec, train_items), encode(codec, test_items)
        first = first if first is not None else test[1]
        accuracy = [probe(train, test, k, a.steps) for k in CONTEXTS]
        same = (test[1] == first).float().mean().item()
        rows.append(f"| {path} | " + " | ".join(f"{100 * acc:.1f}" for acc in accuracy) + f" | {100 * same:.1f} |")
        print(rows[-1], flush=True)
    lines = ["# What the codes carry: phones per frame", "",
             f"Command: `python {' '.join(shlex.quote(x) for x in sys.argv)}`", "",
             f"Machine: {describe_machine()}. Date: {datetime.date.today().isoformat()}.", "",
             f"Probe: a 2-layer MLP (256 wide, {a.steps} Adam steps of 1,024 frames) reads the flite phone from a "
             f"frame's quantized values and its ±k neighbours; trained on the first {a.train} clips of data/ft "
             f"({len(train[2])} frames), scored on the {len(test_items)} held-out clips of data/ft_test "
             f"({len(test[2])} frames). Same code: share of held-out frames whose code equals the first codec's.", "",
             "| codec | phone accuracy % (frame alone) | ±1 frame | ±2 frames | same code % |",
             "|---|---|---|---|---|", *rows]
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
