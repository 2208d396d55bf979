"""`gepard train dpo`: distil two-pass text CFG into single-pass weights with DPO.

Stages, each resumable, all in one run folder:
1. prompts.json    prompts from the training shards, weighted toward short texts (the short register), each
                   with reference codes from another utterance of its speaker (the voice prefix's source).
2. rollouts.jsonl  per prompt, `samples` single-pass and `samples` two-pass-CFG rollouts on the torch engine,
                   each scored (ASR WER, duration against the expected one, speaker cosine -> reward).
3. pairs.pt        chosen/rejected pairs with the reference model's log-probs, computed once, so that only
                   the policy sits in memory while training.
4. checkpoint/, log.jsonl, export/   DPO on the LM (the voice compressor stays frozen) -> a release folder.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from tqdm import tqdm

from gepard.dpo.loss import dpo_loss
from gepard.dpo.pairs import Rollout, build_pairs
from gepard.dpo.rewards import RewardWeights, expected_duration, reward
from gepard.lm.frontend import segment_chars
from gepard.precision import autocast
from gepard.stream.text import MAX_CHARS


@dataclass
class DPOConfig:
    run_dir: str = "runs/dpo"
    model: str = "models/lm"
    codec: str | None = None  # the shipped codec unless given
    shards: list[str] = field(default_factory=lambda: ["shards/train"])
    texts: str | None = None  # one text per line for the prompts (else the shards' own; a track model's are tracks)
    prompts: int = 200
    short_share: float = 0.6  # share of prompts with at most 3 words
    samples: int = 4  # rollouts per prompt and mode (single-pass, two-pass CFG)
    cfg_scale: float = 3.0
    cfg_frames: int = 20
    min_margin: float = 0.2
    beta: float = 2.0
    nll_weight: float = 0.0  # weight of the chosen rollouts' NLL added to the DPO loss (dpo_loss)
    lr: float = 1e-5
    steps: int = 200
    batch_pairs: int = 4
    checkpoint_every: int = 50
    threads: int = 2
    seed: int = 0
    weights: RewardWeights = field(default_factory=RewardWeights)


def make_prompts(cfg: DPOConfig, max_chars: int = MAX_CHARS) -> list[dict]:
    """[{text, speaker, ref_codes}], `short_share` of them with at most 3 words. Texts come from `cfg.texts`
    (each given a random voice of the shards; only those one utterance of at most `max_chars` holds) or from
    the shards; the reference is another utterance of the voice."""
    from gepard.data.prepare import read_shards

    rng = random.Random(cfg.seed)
    by_speaker: dict[str, list[np.ndarray]] = defaultdict(list)
    items = []
    for folder in cfg.shards:
        for _, text, speaker, codes in read_shards(folder):
            by_speaker[speaker].append(codes)
            if text.strip() and not cfg.texts:
                items.append((text, speaker, codes))
    if cfg.texts:
        voices = sorted(by_speaker)
        lines = [line.strip() for line in Path(cfg.texts).read_text(encoding="utf-8").splitlines()]
        items = [(line, rng.choice(voices), None) for line in lines if 0 < len(line) <= max_chars]
    if not items:
        raise ValueError("no prompt texts: the shards hold no transcribed utterance and no --texts file was given")
    short = [it for it in items if len(it[0].split()) <= 3]
    normal = [it for it in items if len(it[0].split()) > 3]
    n_short = min(len(short), round(cfg.prompts * cfg.short_share)) if short else 0
    chosen = rng.sample(short, n_short) + rng.sample(normal, min(len(normal), cfg.prompts - n_short))
    prompts = []
    for text, speaker, codes in chosen:
        pool = [c for c in by_speaker[speaker] if c is not codes] or by_speaker[speaker]
        ref = pool[rng.randrange(len(pool))]
        n = min(len(ref), rng.randint(50, 150))
        start = rng.randint(0, len(ref) - n)
        prompts.append({"text": text, "speaker": speaker, "ref_codes": ref[start: start + n].tolist()})
    return prompts


def expected_seconds(model, cfg: DPOConfig) -> Callable[[str], float]:
    """text -> the duration the length penalty expects: a phone track's own length for a track model, else
    the text's characters at the median speaking rate of the training speech."""
    from gepard.data.prepare import read_shards
    from gepard.eval.asr import normalize_text
    from gepard.lm.track import track_seconds

    if model.text_front_end == "track":
        return track_seconds
    rates = [len(normalize_text(text)) * model.codec_frame_rate / len(codes) for folder in cfg.shards
             for _, text, _, codes in read_shards(folder) if text.strip() and len(codes)]
    rate = float(np.median(rates))
    return lambda text: expected_duration(text, rate)


def roll_out(tts, cfg: DPOConfig, prompts: list[dict], out: Path) -> list[Rollout]:
    """Generate and score the rollouts of every prompt not yet in `out` (appended per prompt)."""
    from gepard.engine.base import SamplingParams
    from gepard.eval.asr import get_transcriber, utterance_wer
    from gepard.eval.similarity import get_speaker_encoder
    from gepard.lm.generate import text_request
    from gepard.stream.normalize import normalize_for_speech

    done = {r["prompt"] for r in read_jsonl(out)}
    asr, speakers = get_transcriber(cfg.threads), get_speaker_encoder()
    expected, frame_rate = expected_seconds(tts.model, cfg), tts.model.codec_frame_rate
    with open(out, "a") as f:
        for i, p in enumerate(tqdm(prompts, desc="rollouts", unit="prompt")):
            if i in done:
                continue
            ref = torch.tensor([p["ref_codes"]])
            with torch.no_grad():
                prefix = tts.model.prefix(ref)
            ref_audio = tts.codec.decode(ref)[0].numpy()
            text, expected_s = normalize_for_speech(p["text"]), expected(p["text"])
            # the text front end runs once a prompt: the single-pass request is the CFG one without its branch
            guided = text_request(tts.model, text, prefix, SamplingParams(cfg_scale=cfg.cfg_scale,
                                                                          cfg_frames=cfg.cfg_frames))
            requests = {True: guided, False: replace(guided, sampling=replace(guided.sampling, cfg_scale=1.0),
                                                     uncond_prompt_ids=None)}
            modes = [(seed, False) for seed in range(cfg.samples)] + [(seed, True) for seed in range(cfg.samples)]
            streams = [tts.engine.submit(replace(requests[on], sampling=replace(requests[on].sampling, seed=seed)))
                       for seed, on in modes]
            for (seed, cfg_on), stream in zip(modes, streams):
                frames = list(stream.frames())
                codes, audio = [code for code, _ in frames], tts.render(frames)  # heard as `tts` plays it
                wer = utterance_wer(p["text"], asr.transcribe(audio)) if codes else 1.0
                cosine = speakers.cosine(audio, ref_audio) if codes else 0.0
                duration = len(codes) / frame_rate
                row = {"prompt": i, "seed": seed, "cfg": cfg_on, "codes": codes, "stopped": stream.finished == "stop",
                       "wer": wer, "cosine": cosine, "duration_s": duration,
                       "reward": reward(wer, duration, expected_s, cosine, cfg.weights)}
                f.write(json.dumps(row) + "\n")
            f.flush()
    return [Rollout(**{k: r[k] for k in ("prompt", "seed", "cfg", "codes", "stopped", "reward")})
            for r in read_jsonl(out)]


def pair_data(model, prompts: list[dict], pairs: list[tuple[Rollout, Rollout]], batch: int = 8) -> list[dict]:
    """Each pair's prefix, chosen/rejected sequences and their reference log-probs (the model as it is now)."""
    from gepard.lm.layout import training_sequence
    from gepard.stream.normalize import normalize_for_speech

    data, encoded = [], {}  # prompt index -> (text ids, copies, (K, H) prefix): the front end runs once a prompt
    for chosen, rejected in pairs:
        if chosen.prompt not in encoded:
            p = prompts[chosen.prompt]
            ids = model.encode_text(normalize_for_speech(p["text"]))
            with torch.no_grad():
                encoded[chosen.prompt] = ids, model.repetition.copies(len(ids)), model.prefix(
                    torch.tensor([p["ref_codes"]]))[0]
        ids, copies, prefix = encoded[chosen.prompt]
        data.append({"prefix": prefix,
                     "chosen": training_sequence(ids, chosen.codes, model.vocab, copies, chosen.stopped),
                     "rejected": training_sequence(ids, rejected.codes, model.vocab, copies, rejected.stopped)})
    for start in tqdm(range(0, len(data), batch), desc="reference log-probs", unit="batch"):
        part = data[start: start + batch]
        with torch.no_grad():
            chosen, rejected = pair_logprobs(model, part)
        for d, c, r in zip(part, chosen.tolist(), rejected.tolist()):
            d["ref_chosen"], d["ref_rejected"] = c, r
    return data


def pair_logprobs(model, part: list[dict]) -> tuple[torch.Tensor, torch.Tensor]:
    """Length-normalized log-probs (B,) of the chosen and of the rejected sequences of B pairs (under
    gepard.precision.autocast)."""
    from gepard.lm.layout import pad_sequences

    seqs = [d["chosen"] for d in part] + [d["rejected"] for d in part]
    batch = pad_sequences(seqs, model.vocab)
    prefix = torch.stack([d["prefix"] for d in part] * 2)
    with autocast("cpu"):
        logprobs = model.sequence_logprobs(prefix, batch["ids"], batch["labels"], batch["lengths"])
    return logprobs[: len(part)], logprobs[len(part):]


def train_dpo(cfg: DPOConfig) -> Path:
    """Run (or resume) every stage; returns the exported release folder."""
    from gepard.api import TTS
    from gepard.lm.speech_lm import SpeechLM
    from gepard.lm.train import save_checkpoint

    torch.set_num_threads(cfg.threads)
    run = Path(cfg.run_dir)
    run.mkdir(parents=True, exist_ok=True)
    (run / "dpo_config.json").write_text(json.dumps(asdict(cfg), indent=2))
    if not (run / "pairs.pt").exists():
        with TTS.load(cfg.model, cfg.codec, slots=3 * cfg.samples) as tts:  # a CFG rollout takes two slots
            if tts.model.text_front_end == "track" and not cfg.texts:
                raise ValueError("a phone-track model's shards hold tracks, not text: give the prompts' texts "
                                 "with --texts FILE")
            if not (run / "prompts.json").exists():
                max_chars = segment_chars(tts.model.text_front_end)
                (run / "prompts.json").write_text(json.dumps(make_prompts(cfg, max_chars)))
            prompts = json.loads((run / "prompts.json").read_text())
            rollouts = roll_out(tts, cfg, prompts, run / "rollouts.jsonl")
            pairs = build_pairs(rollouts, cfg.min_margin)
            if not pairs:
                raise ValueError("no rollouts differ enough in reward to make a pair; raise --samples or --prompts")
            torch.save(pair_data(tts.model, prompts, pairs), run / "pairs.pt")
    data = torch.load(run / "pairs.pt", weights_only=False)
    ckpt = run / "checkpoint"
    model = SpeechLM.from_pretrained(ckpt if (ckpt / "gepard.json").exists() else cfg.model).train()
    model.voice.requires_grad_(False)
    opt = torch.optim.AdamW(model.lm.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=0.0, fused=True)
    step = 0
    if (ckpt / "trainer.pt").exists():
        state = torch.load(ckpt / "trainer.pt", weights_only=False)
        opt.load_state_dict(state["optimizer"])
        step = state["step"]
    rng = random.Random(cfg.seed + step)
    t0 = time.time()
    with open(run / "log.jsonl", "a") as log, tqdm(total=cfg.steps, initial=step, desc="dpo", unit="step") as bar:
        while step < cfg.steps:
            part = rng.sample(data, min(cfg.batch_pairs, len(data)))
            chosen, rejected = pair_logprobs(model, part)
            ref_c = torch.tensor([d["ref_chosen"] for d in part])
            ref_r = torch.tensor([d["ref_rejected"] for d in part])
            loss = dpo_loss(chosen, rejected, ref_c, ref_r, cfg.beta, cfg.nll_weight)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.lm.parameters(), 1.0)
            opt.step()
            step += 1
            accuracy = float(((chosen - ref_c) > (rejected - ref_r)).float().mean())
            log.write(json.dumps({"step": step, "loss": loss.item(), "accuracy": accuracy,
                                  "elapsed_s": time.time() - t0}) + "\n")
            log.flush()
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.3f}", acc=f"{accuracy:.2f}")
            if step % cfg.checkpoint_every == 0 or step == cfg.steps:
                save_checkpoint(model, opt, step, time.time() - t0, ckpt)
    export = run / "export"
    model.eval().save_pretrained(export)
    if (Path(cfg.model) / "voices").is_dir():  # the compressor is unchanged, so the named voices still hold
        shutil.copytree(Path(cfg.model) / "voices", export / "voices", dirs_exist_ok=True)
    return export


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
