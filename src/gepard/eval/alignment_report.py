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
from gepard.lm.tokenizer import encode_text
from gepard.lm.voices import prefix_from_audio


@torch.inference_mode()
def text_attention(model: SpeechLM, text: str, codes: torch.Tensor, prefix: torch.Tensor) -> torch.Tensor:
    """Teacher-forced (layers, heads, frames, N): how much the query predicting each of the `codes` (J,) attends
    to each of the N tokens of the voiced text copy, after a (1, K, H) prefix."""
    text_ids = encode_text(model.tokenizer, text)
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
    text_ids = encode_text(model.tokenizer, text)
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


def evaluate_alignment(models: dict[str, SpeechLM], codec: Codec, limit: int = 24,
                       train_shards: str | Path = "shards/train") -> dict:
    """Mean reading scores per model over the first `limit` held-out sentences of 12+ words, each with a
    reference from another utterance of its voice; each model's best head's map of the first one; the
    audio's NLL given its own text vs. the next sentence's text (equal NLLs: the text is not used); and the
    unigram NLL of the same codes for scale."""
    by = references_by_speaker(shared_split("teacher_test"))
    test = [u for u in shared_split("teacher_test") if len(u.text.split()) >= 12][:limit]
    codes = [codec.encode(torch.from_numpy(load_audio(u.audio))[None])[0] for u in tqdm(test, desc="encode")]
    results = {}
    for name, model in models.items():
        shares, correlations, example, nll_own, nll_other = [], [], None, [], []
        for i, u in enumerate(tqdm(test, desc=f"alignment {name}", unit="utt")):
            prefix = prefix_from_audio(model, codec, load_audio(pick_reference(u, by).audio), u.id)[None]
            attention = text_attention(model, u.text, codes[i], prefix)
            nll_own.append(audio_nll(model, u.text, codes[i], prefix))
            nll_other.append(audio_nll(model, test[(i + 1) % len(test)].text, codes[i], prefix))
            share, correlation = reading_scores(attention)
            shares.append(share), correlations.append(correlation)
            example = attention if example is None else example
        share, correlation = np.mean(shares, 0), np.mean(correlations, 0)
        best = np.unravel_index(np.argmax(correlation), correlation.shape)
        results[name] = {"text_share": share.tolist(), "correlation": correlation.tolist(),
                         "best_head": [int(best[0]), int(best[1])], "example": example[best].numpy().tolist(),
                         "example_text": test[0].text, "nll_own_text": float(np.mean(nll_own)),
                         "nll_other_text": float(np.mean(nll_other))}
    return {"models": results, "utterances": len(test), "machine": describe_machine(),
            "unigram_nll": unigram_nll(train_shards, codec.fsq.codebook_size, codes),
            "date": datetime.date.today().isoformat()}


def write_alignment_report(r: dict, command: str, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# Does the LM read its text?", "", f"Command: `{command}`", "",
             f"Machine: {r['machine']}. Date: {r['date']}. {r['utterances']} held-out sentences (12+ words), "
             "teacher-forced with their own codec codes, voice prefix from another utterance of the voice.", "",
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
        lines += ["", f"Best head: layer {layer}, head {head} (correlation {correlation[layer, head]:+.2f}). "
                  f"Audio NLL given its own text {m['nll_own_text']:.3f}, given another sentence's text "
                  f"{m['nll_other_text']:.3f} nats per frame (the gap is what the text tells the model).", ""]
        example = np.array(m["example"]).T
        ax.imshow(example, origin="lower", aspect="auto", cmap="viridis", vmax=np.quantile(example, 0.995))
        ax.set_title(f"{name}: layer {layer} head {head}", fontsize=9)
        ax.set_xlabel("audio frame"), ax.set_ylabel("text token")
    if r.get("unigram_nll") is not None:
        lines += [f"For scale: the same codes cost {r['unigram_nll']:.3f} nats per frame under the training "
                  "codes' frequencies alone (no text, no history).", ""]
    lines += ["Cells: text share / correlation.", "",
              f"![best head's attention on: {next(iter(models.values()))['example_text']}]({out.stem}.png)", ""]
    fig.tight_layout()
    fig.savefig(out.with_suffix(".png"), dpi=100)
    plt.close(fig)
    out.write_text("\n".join(lines))
    out.with_suffix(".json").write_text(json.dumps({**r, "models": {n: {k: v for k, v in m.items() if k != "example"}
                                                                    for n, m in models.items()}}, indent=2))
