"""`gepard eval codec`: original vs. resynthesized speech on held-out sets -> docs/results/codec.md."""

from __future__ import annotations

import copy
import datetime
import json
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from gepard.audio import load_audio
from gepard.codec.model import Codec
from gepard.codec.train import SHARED_TRAINING_DATA
from gepard.data.manifests import Utterance, shared_split
from gepard.eval.asr import get_transcriber, wer
from gepard.eval.machine import describe_machine
from gepard.eval.mos import dnsmos_p808
from gepard.eval.similarity import get_speaker_encoder
from gepard.eval.speed import codec_speed
from gepard.precision import native_bf16

SETS = {"teacher_test": "teacher test set (24 voices, held-out sentences)",
        "teacher_flite": "the same, flite voices only (awb, kal16, rms, slt: the shipped LM's voices)",
        "real_heldout": "held-out real speakers (LibriSpeech test-other, 10 speakers)"}
TARGETS = {"wer_gap": 3.0, "cosine": 0.85, "decode_x_realtime": 100.0, "frame_ms": 10.0}


@torch.inference_mode()
def resynthesize(codec: Codec, audio: np.ndarray, rounded: bool = True) -> np.ndarray:
    """(T,) -> (T,) through encoder, FSQ (or, rounded=False, its values before rounding) and decoder."""
    values = codec.quantize(torch.from_numpy(audio)[None], rounded)
    return codec.decoder(values).float()[0, : len(audio)].clamp(-1, 1).numpy()


def evaluate_set(codec: Codec, utterances: list[Utterance], threads: int, rounded: bool = True) -> dict:
    """WER (orig/resynth), speaker cosine and DNSMOS over one set of utterances (`rounded`: see resynthesize)."""
    asr, speakers = get_transcriber(threads), get_speaker_encoder()
    rows = []
    for u in tqdm(utterances, desc="utterances", unit="utt"):
        original = load_audio(u.audio)
        resynth = resynthesize(codec, original, rounded)
        rows.append({
            "id": u.id, "reference": u.reference_text,
            "asr_original": asr.transcribe(original), "asr_resynth": asr.transcribe(resynth),
            "cosine": speakers.cosine(original, resynth),
            "mos_original": dnsmos_p808(original), "mos_resynth": dnsmos_p808(resynth),
            "seconds": len(original) / 16000,
        })
    refs = [r["reference"] for r in rows]
    return {
        "utterances": len(rows), "hours": sum(r["seconds"] for r in rows) / 3600,
        "wer_original": 100 * wer(refs, [r["asr_original"] for r in rows]),
        "wer_resynth": 100 * wer(refs, [r["asr_resynth"] for r in rows]),
        "cosine_mean": float(np.mean([r["cosine"] for r in rows])),
        "cosine_p10": float(np.percentile([r["cosine"] for r in rows], 10)),
        "mos_original": float(np.mean([r["mos_original"] for r in rows])),
        "mos_resynth": float(np.mean([r["mos_resynth"] for r in rows])),
        "rows": rows,
    }


def evaluation_set(name: str) -> list[Utterance]:
    """A shared split, or "teacher_flite": the teacher test set's flite voices."""
    if name == "teacher_flite":
        return [u for u in shared_split("teacher_test") if u.speaker.startswith("flite_")]
    return shared_split(name)


def timing_speech() -> np.ndarray:
    """(T,) the speech every codec speed in the reports is timed on: the first 10 held-out real clips (~67 s)."""
    return np.concatenate([load_audio(u.audio) for u in shared_split("real_heldout")[:10]])


def evaluate_codec(codec: Codec, limit: int = 0, threads: int = 2) -> dict:
    """Everything the codec report shows, measured now."""
    torch.set_num_threads(threads)
    sets = {}
    for name in SETS:
        utterances = evaluation_set(name)
        sets[name] = evaluate_set(codec, utterances[:limit] if limit else utterances, threads)
    speech = timing_speech()
    bf16 = codec.decoder.inp.weight.dtype == torch.bfloat16
    other = None
    if native_bf16("cpu"):  # the precision load_codec did not pick, timed beside it
        other = copy.deepcopy(codec)
        other.decoder.to(torch.float32 if bf16 else torch.bfloat16)
    return {
        "sets": sets,
        "decoder_dtype": "bf16" if bf16 else "fp32",
        "speed": codec_speed(codec, speech, threads=1),
        "speed_other": codec_speed(other, speech, threads=1) if other else None,
        "bitrate": codec.bitrate, "frame_rate": codec.config.frame_rate, "codebook_size": codec.codebook_size,
        "params": {part: sum(p.numel() for p in getattr(codec, part).parameters()) for part in ("encoder", "decoder")},
        "machine": describe_machine(), "date": datetime.date.today().isoformat(),
    }


def check(value: float, ok: bool) -> str:
    return f"{value:.2f} {'✅' if ok else '❌'}"


def write_report(results: dict, command: str, out: Path, train_log: Path | None = None) -> None:
    """Markdown report (+ JSON summary and plot beside it)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    s, sp, other = results["sets"], results["speed"], results.get("speed_other")
    decoder = results.get("decoder_dtype", "fp32")
    other_name = "fp32" if decoder == "bf16" else "bf16"
    lines = [
        "# Codec: original vs. resynthesized speech", "",
        f"Command: `{command}`", "",
        f"Machine: {results['machine']}. Date: {results['date']}.", "",
        f"Codec: {results['frame_rate']:g} frames/s, one FSQ index per frame (codebook {results['codebook_size']}), "
        f"{results['bitrate']:.0f} bit/s; parameters: encoder {results['params']['encoder'] / 1e6:.2f} M, "
        f"decoder {results['params']['decoder'] / 1e6:.2f} M.", "",
        "| set | utterances | hours | WER original % | WER resynth % | gap (≤ 3) | cosine mean (≥ 0.85) "
        "| cosine p10 | DNSMOS original | DNSMOS resynth |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in s.items():
        gap = r["wer_resynth"] - r["wer_original"]
        lines.append(f"| {SETS[name]} | {r['utterances']} | {r['hours']:.2f} | {r['wer_original']:.2f} "
                     f"| {r['wer_resynth']:.2f} | {check(gap, gap <= TARGETS['wer_gap'])} "
                     f"| {check(r['cosine_mean'], r['cosine_mean'] >= TARGETS['cosine'])} | {r['cosine_p10']:.2f} "
                     f"| {r['mos_original']:.2f} | {r['mos_resynth']:.2f} |")
    lines += [
        "", "| speed (batch 1, one thread) | value | target |", "|---|---|---|",
        f"| encode × real time | {sp['encode_x_realtime']:.0f} | — |",
        f"| decode × real time | {check(sp['decode_x_realtime'], sp['decode_x_realtime'] >= TARGETS['decode_x_realtime'])}"
        f" | ≥ {TARGETS['decode_x_realtime']:.0f} |",
        f"| streaming decode of one frame, ms p50 | {check(sp['frame_ms_p50'], sp['frame_ms_p50'] <= TARGETS['frame_ms'])}"
        f" | ≤ {TARGETS['frame_ms']:.0f} |",
        f"| streaming decode of one frame, ms p95 | {sp['frame_ms_p95']:.2f} | — |",
    ]
    if other:
        lines += [f"| decode × real time, {other_name} decoder | {other['decode_x_realtime']:.2f} | — |",
                  f"| streaming decode of one frame, {other_name} decoder, ms p50 "
                  f"| {other['frame_ms_p50']:.2f} | — |"]
    lines += [
        "", (f"Speed measured on {sp['seconds']:.1f} s of held-out real speech, best of 3; encoder fp32, decoder "
             f"{decoder} (`load_codec`'s default on this CPU, used for every number in this report"
             f"{f'; the {other_name} rows are the same weights in {other_name}' if other else ''})."), "",
        "WER: Whisper tiny.en (int8, beam 1) against the manifest text after normalization. The real held-out "
        "speakers have no human transcripts: their reference is the corpus's own Whisper tiny.en transcript of "
        "the original, so their 'WER original' is near 0 by construction and the gap is the WER the codec adds. "
        "Cosine: resemblyzer embedding of the original vs. the resynthesis. DNSMOS P.808 is only a rough guide.",
    ]
    if train_log and train_log.exists():
        log = [json.loads(line) for line in train_log.read_text().splitlines() if line.strip()]
        cfg_path = train_log.with_name("train_config.json")
        cfg = json.loads(cfg_path.read_text()) if cfg_path.exists() else {}
        losses = "multi-resolution log-mel L1 + STFT spectral convergence + log magnitude"
        if cfg.get("phase_weight"):
            losses += f", instantaneous-frequency/group-delay phase losses (weight {cfg['phase_weight']:g})"
        if cfg.get("adversarial_from", -1) >= 0:
            losses += (f", multi-resolution spectrogram discriminator (LSGAN + feature matching) from step "
                       f"{cfg['adversarial_from']}")
        if cfg.get("semantic_weight"):
            losses += f", semantic distillation of Whisper tiny.en's encoder (weight {cfg['semantic_weight']:g})"
        lines += ["", f"Training: {log[-1]['step']} steps of batch {cfg.get('batch_size', 16)} × "
                  f"{cfg.get('crop_frames', 40) / results['frame_rate']:.1f} s crops in "
                  f"{log[-1]['elapsed_s'] / 3600:.2f} h on this CPU ({log[-1].get('precision', 'bf16 autocast')}), "
                  f"on {training_data(train_log.parent, cfg)}; losses: {losses}.",
                  "", f"![training and similarity]({out.stem}.png)"]
        plot(results, train_log, out.with_suffix(".png"))
    out.write_text("\n".join(lines) + "\n")
    summary = {k: v for k, v in results.items() if k != "sets"}
    summary["sets"] = {name: {k: v for k, v in r.items() if k != "rows"} for name, r in s.items()}
    out.with_suffix(".json").write_text(json.dumps(summary, indent=2) + "\n")


def training_data(run: Path, cfg: dict) -> str:
    """'H h of speech (what it is)' from a run's data.json (runs from before it: the shared corpus, 6.36 h)."""
    hours = json.loads((run / "data.json").read_text())["hours"] if (run / "data.json").exists() else 6.36
    return f"{hours:.2f} h of speech ({cfg.get('train_data', SHARED_TRAINING_DATA)})"


def plot(results: dict, train_log: Path, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    log = [json.loads(line) for line in train_log.read_text().splitlines() if line.strip()]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    a.plot([r["step"] for r in log], [r["mel"] for r in log], alpha=0.4, label="train log-mel L1")
    val = [r for r in log if "val_mel" in r]
    a.plot([r["step"] for r in val], [r["val_mel"] for r in val], "o-", label="held-out log-mel L1")
    a.set_xlabel("step"), a.set_ylabel("loss"), a.legend(), a.set_title("codec training")
    for name, r in results["sets"].items():
        b.hist([row["cosine"] for row in r["rows"]], bins=30, alpha=0.6, label=name)
    b.axvline(TARGETS["cosine"], color="k", ls="--"), b.set_xlabel("resemblyzer cosine(original, resynthesis)")
    b.legend(), b.set_title("speaker similarity")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
