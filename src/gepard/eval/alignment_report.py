"""`gepard eval alignment`: does the LM read its text? Teacher-forced attention from the audio frames onto the
voiced text copy, per layer and head, on held-out sentences -> docs/results/alignment.md (+ .png)."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from gepard.audio import load_audio
from gepard.codec.model import Codec
from gepard.data.manifests import shared_split
from gepard.data.prepare import read_shards
from gepard.eval.lm_report import pick_reference, references_by_speaker
from gepard.eval.machine import describe_machine
from gepard.lm.alignment import AttentionTap
from gepard.lm.layout import training_sequence, voiced_span
from gepard.lm.speech_lm import SpeechLM


@torch.inference_mode()
def text_attention(model: SpeechLM, text: str, codes: torch.Tensor, prefix: torch.Tensor) -> torch.Tensor:
    """Teacher-forced (layers, heads, frames, N): how much the query predicting each of the `codes` (J,) attends
    to each of the N tokens of the voiced text copy, after a (1, K, H) prefix."""
    text_ids = model.encode_text(text)
    copies = model.repetition.copies(len(text_ids))
    ids, _ = training_sequence(text_ids, codes.tolist(), model.vocab, copies)
    t0, n, sos, frames = voiced_span(len(text_ids), copies, len(codes))
    k = prefix.shape[1]
    taps = [AttentionTap(layer.self_attn) for layer in model.lm.model.layers]
    try:
        model.lm.model(inputs_embeds=model.embed(prefix, torch.tensor([ids])))
        heads = model.lm.config.num_attention_heads
        probs = [tap.probabilities(heads, torch.tensor([k + len(ids)]))[0] for tap in taps]
    finally:
        for tap in taps:
            tap.remove()
    return torch.stack([p[:, k + sos: k + sos + frames, k + t0: k + t0 + n] for p in probs])


@torch.inference_mode()
def audio_nll(model: SpeechLM, text: str, codes: torch.Tensor, prefix: torch.Tensor) -> float:
    """Teacher-forced mean NLL (nats) of the codes (J,) and <eos> after a (1, K, H) prefix and `text`."""
    text_ids = model.encode_text(text)
    ids, labels = training_sequence(text_ids, codes.tolist(), model.vocab, model.repetition.copies(len(text_ids)))
    logprobs, _ = model.label_logprobs(prefix, torch.tensor([ids]), torch.tensor([labels]), torch.tensor([len(ids)]))
    return -logprobs.mean().item()


def reading_scores(attention: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """(layers, heads, frames, N) -> per head (layers, heads): the share of attention on the text, and the
    correlation of the text attention's centroid with time (1 = reads the text left to right)."""
    share = attention.sum(-1)
    position = (attention * torch.arange(attention.shape[-1])).sum(-1) / share.clamp_min(1e-9)
    time = torch.arange(attention.shape[2], dtype=torch.float32)
    centred, t = position - position.mean(-1, keepdim=True), time - time.mean()
    correlation = (centred * t).sum(-1) / (centred.norm(dim=-1) * t.norm()).clamp_min(1e-9)
    return share.mean(-1).numpy(), correlation.numpy()


def unigram_nll(train_shards: str | Path, codebook_size: int, codes: list[torch.Tensor]) -> float | None:
    """NLL (nats per frame) of the `codes` (J,) under the training shards' code frequencies (add-1/2): what
    a model that uses neither the text nor the audio so far would reach. None without the shards."""
    if not Path(train_shards).is_dir():
        return None
    counts = np.full(codebook_size, 0.5)
    for _, text, _, train_codes in read_shards(train_shards):
        if text.strip():
            counts += np.bincount(train_codes, minlength=codebook_size)
    held_out = torch.cat(codes).numpy()
    return float(-np.log(counts[held_out] / counts.sum()).mean())


Sample = tuple[str, torch.Tensor, torch.Tensor]  # text, its codes (J,), a reference clip's codes (R,)


def held_out_samples(codec: Codec, limit: int) -> list[Sample]:
    """The first `limit` held-out sentences of 12+ words, each with another utterance of its voice."""
    by = references_by_speaker(shared_split("teacher_test"))
    test = [u for u in shared_split("teacher_test") if len(u.text.split()) >= 12][:limit]
    encode = lambda path: codec.encode(torch.from_numpy(load_audio(path))[None])[0]  # noqa: E731
    return [(u.text, encode(u.audio), encode(pick_reference(u, by).audio)) for u in tqdm(test, desc="encode")]


def training_samples(train_shards: str | Path, limit: int) -> list[Sample]:
    """`limit` training utterances of 12+ words spread over the shards, each with another of its speaker."""
    rows = [(t, s, c) for _, t, s, c in read_shards(train_shards) if len(t.split()) >= 12]
    picked = rows[:: max(1, len(rows) // limit)][:limit]
    reference = lambda t, s: next(c for t2, s2, c in rows if s2 == s and t2 != t)  # noqa: E731
    return [(t, torch.from_numpy(c), torch.from_numpy(reference(t, s))) for t, s, c in picked]


def nll_own_and_other_text(model: SpeechLM, samples: list[Sample]) -> tuple[float, float]:
    """Mean audio NLL given its own text, and given the next sample's text."""
    own, other = [], []
    for i, (text, codes, ref) in enumerate(samples):
        prefix = model.prefix(ref[None])
        own.append(audio_nll(model, text, codes, prefix))
        other.append(audio_nll(model, samples[(i + 1) % len(samples)][0], codes, prefix))
    return float(np.mean(own)), float(np.mean(other))


@torch.inference_mode()
def evaluate_alignment(models: dict[str, SpeechLM], codec: Codec, limit: int = 24,
                       train_shards: str | Path = "shards/train") -> dict:
    """Per model: mean reading scores over held-out sentences and its best head's map of the first one; the
    audio's NLL given its own text vs. another sentence's text, on held-out and on training utterances
    (a gap on training utterances only: the text serves to recall them, not to read); the unigram NLL of
    the held-out codes for scale."""
    held_out = held_out_samples(codec, limit)
    training = training_samples(train_shards, limit) if Path(train_shards).is_dir() else []
    results = {}
    for name, model in models.items():
        shares, correlations, example = [], [], None
        for text, codes, ref in tqdm(held_out, desc=f"alignment {name}", unit="utt"):
            attention = text_attention(model, text, codes, model.prefix(ref[None]))
            share, correlation = reading_scores(attention)
            shares.append(share), correlations.append(correlation)
            example = attention if example is None else example
        share, correlation = np.mean(shares, 0), np.mean(correlations, 0)
        best = np.unravel_index(np.argmax(correlation), correlation.shape)
        results[name] = {"text_share": share.tolist(), "correlation": correlation.tolist(),
                         "best_head": [int(best[0]), int(best[1])], "example": example[best].numpy().tolist(),
                         "example_text": held_out[0][0], "held_out_nll": nll_own_and_other_text(model, held_out),
                         "training_nll": nll_own_and_other_text(model, training) if training else None}
    return {"models": results, "utterances": len(held_out), "training_utterances": len(training),
            "unigram_nll": unigram_nll(train_shards, codec.fsq.codebook_size, [c for _, c, _ in held_out]),
            "machine": describe_machine(), "date": datetime.date.today().isoformat()}


def write_alignment_report(r: dict, command: str, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# Does the LM read its text?", "", f"Command: `{command}`", "",
             f"Machine: {r['machine']}. Date: {r['date']}. {r['utterances']} held-out sentences and "
             f"{r['training_utterances']} training utterances (12+ words each), teacher-forced with their own codec "
             "codes, the voice prefix from another utterance of the same voice.", "",
             "Per layer and head: the share of the audio frames' attention on the voiced text, and the "
             "correlation of the text attention's centroid with time (1: the head reads the text left to right "
             "as the audio goes on; 0: it does not follow it).", ""]
    models = r["models"]
    fig, axes = plt.subplots(1, len(models), figsize=(5 * len(models), 4), squeeze=False)
    for ax, (name, m) in zip(axes[0], models.items()):
        share, correlation = np.array(m["text_share"]), np.array(m["correlation"])
        layer, head = m["best_head"]
        lines += [f"## {name}", "", "| layer | " + " | ".join(f"head {h}" for h in range(share.shape[1])) + " |",
                  "|---" * (share.shape[1] + 1) + "|"]
        lines += [f"| {i} | " + " | ".join(f"{s:.2f} / {c:+.2f}" for s, c in zip(share[i], correlation[i])) + " |"
                  for i in range(share.shape[0])]
        lines += ["", f"Best head: layer {layer}, head {head} (correlation {correlation[layer, head]:+.2f}).", "",
                  "| audio NLL, nats per frame | given its own text | given another sentence's text | gap |",
                  "|---|---|---|---|"]
        for label, key in (("held-out sentences", "held_out_nll"), ("training utterances", "training_nll")):
            if m[key]:
                own, other = m[key]
                lines.append(f"| {label} | {own:.3f} | {other:.3f} | {other - own:+.3f} |")
        lines.append("")
        example = np.array(m["example"]).T
        ax.imshow(example, origin="lower", aspect="auto", cmap="viridis", vmax=np.quantile(example, 0.995))
        ax.set_title(f"{name}: layer {layer} head {head}", fontsize=9)
        ax.set_xlabel("audio frame"), ax.set_ylabel("text token")
    if r.get("unigram_nll") is not None:
        lines += [f"For scale: the held-out codes cost {r['unigram_nll']:.3f} nats per frame under the training "
                  "codes' frequencies alone (no text, no history).", ""]
    lines += ["Cells: text share / correlation.", "",
              f"![best head's attention on: {next(iter(models.values()))['example_text']}]({out.stem}.png)", ""]
    fig.tight_layout()
    fig.savefig(out.with_suffix(".png"), dpi=100)
    plt.close(fig)
    out.write_text("\n".join(lines))
    out.with_suffix(".json").write_text(json.dumps({**r, "models": {n: {k: v for k, v in m.items() if k != "example"}
                                                                    for n, m in models.items()}}, indent=2))
