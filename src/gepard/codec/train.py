"""Codec training: spectral losses, bf16 autocast where native, resumable checkpoints, loss log and curve."""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn
from tqdm import tqdm

from gepard.codec.dataset import RandomCrops, build_audio_cache, cache_summary
from gepard.codec.discriminator import MultiResolutionDiscriminator, discriminator_loss, generator_losses
from gepard.codec.listener import PhoneListener
from gepard.codec.lm_values import build_lm_value_cache, load_lm_values, with_lm_values
from gepard.codec.losses import SpectralLoss
from gepard.codec.model import Codec, CodecConfig
from gepard.codec.phones import PhoneHead, build_phone_cache, load_phones
from gepard.codec.semantic import SemanticHead, build_feature_cache, load_features
from gepard.codec.whisper_ear import WhisperEar
from gepard.data.manifests import Utterance
from gepard.precision import autocast, precision_name

HEADS = {"semantic": SemanticHead, "phones": PhoneHead}  # training-only heads on the quantized values
SHARED_TRAINING_DATA = "the shared corpus: teacher train + real speech except the held-out speakers"


@dataclass
class TrainConfig:
    run_dir: str = "runs/codec"
    steps: int = 4500  # length of the learning-rate schedule
    stop_at: int = 4500  # stop here (< steps for a shortened run on the same schedule)
    batch_size: int = 16
    crop_frames: int = 40  # crop length in codec frames
    lr: float = 1e-3
    warmup: int = 300
    weight_decay: float = 0.01
    checkpoint_every: int = 250
    val_every: int = 250
    phase_weight: float = 0.0  # instantaneous-frequency + group-delay losses (0: off)
    adversarial_from: int = -1  # step from which the discriminator trains with the codec (-1: never)
    feature_weight: float = 2.0
    adversarial_scale: float = 1 / 15  # (adversarial + feature_weight * feature matching) x this
    adversarial_batch: int = 4  # the discriminator sees this many items of each batch (it costs more than the codec)
    freeze_encoder: bool = False  # train the decoder only: every code stays as it was
    semantic_weight: float = 0.0  # distil Whisper's encoder into the codes (semantic.py; 0: off)
    phone_weight: float = 0.0  # the codes name their frame's phone (phones.py; phone-track data; 0: off)
    listener: str = ""  # a phone listener (listener.py): its beliefs on the resynthesis match the original's
    listener_weight: float = 1.0  # (with a listener)
    whisper_weight: float = 0.0  # Whisper tiny.en's encoder hears the resynthesis as the original (whisper_ear.py)
    lm_values: str = ""  # token shards of the training clips: decode the LM's teacher-forced beliefs too (lm_values.py)
    lm_model: str = ""  # the speech LM giving them ("": the shipped one)
    lm_share: float = 0.5  # share of the batch items decoded from the LM's beliefs
    init: str = ""  # a saved codec to start from (its FSQ levels may differ from cfg.codec's)
    train_data: str = SHARED_TRAINING_DATA  # what the training speech is, for reports
    threads: int = 2
    seed: int = 0
    codec: CodecConfig = field(default_factory=CodecConfig)


def lr_at(step: int, cfg: TrainConfig) -> float:
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def train_codec(cfg: TrainConfig, train: list[Utterance], val: list[Utterance], cache_dir: str = ".cache") -> Codec:
    """Train (or resume) the codec in cfg.run_dir on `train` (monitoring `val`); returns it after cfg.stop_at steps."""
    torch.set_num_threads(cfg.threads)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    run = Path(cfg.run_dir)
    run.mkdir(parents=True, exist_ok=True)
    ckpt_path = run / "checkpoint.pt"
    ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=False) if ckpt_path.exists() else {}
    if ckpt:
        cfg.codec = CodecConfig(**ckpt["codec"])
    (run / "train_config.json").write_text(json.dumps(asdict(cfg), indent=2))

    torch.manual_seed(cfg.seed)
    model = Codec(cfg.codec).to(device)
    model.encoder.requires_grad_(not cfg.freeze_encoder)  # frozen: no gradients, so AdamW leaves it untouched
    loss_fn = SpectralLoss(cfg.codec.sample_rate, phase_weight=cfg.phase_weight).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.8, 0.99), weight_decay=cfg.weight_decay)
    disc = MultiResolutionDiscriminator().to(device)
    opt_d = torch.optim.AdamW(disc.parameters(), lr=cfg.lr, betas=(0.8, 0.99), weight_decay=cfg.weight_decay)
    weights = {name: w for name, w in (("semantic", cfg.semantic_weight), ("phones", cfg.phone_weight)) if w > 0}
    heads = nn.ModuleDict({name: HEADS[name](len(cfg.codec.levels)) for name in weights}).to(device)
    opt_h = torch.optim.AdamW(heads.parameters(), lr=cfg.lr, betas=(0.8, 0.99), weight_decay=cfg.weight_decay) \
        if weights else None
    ear = PhoneListener.load(cfg.listener).to(device) if cfg.listener else None
    whisper = WhisperEar.load().to(device) if cfg.whisper_weight > 0 else None
    step, elapsed, fitted = 0, 0.0, False
    if ckpt:
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        step, elapsed = ckpt["step"], ckpt.get("elapsed_s", 0.0)
        if "discriminator" in ckpt:
            disc.load_state_dict(ckpt["discriminator"])
            opt_d.load_state_dict(ckpt["opt_discriminator"])
        if "heads" in ckpt and ckpt["heads"].keys() == heads.state_dict().keys():  # else new heads start fresh
            heads.load_state_dict(ckpt["heads"])
            opt_h.load_state_dict(ckpt["opt_heads"])
            fitted = True
    elif cfg.init:
        model.load_state_dict(Codec.from_pretrained(cfg.init).state_dict())  # FSQ levels have no weights

    if cfg.lm_values and (weights or not cfg.freeze_encoder):
        raise ValueError("training on the LM's beliefs needs --freeze-encoder (every code must keep its meaning) "
                         "and no frame heads")
    spf = cfg.codec.samples_per_frame
    folders = [build_audio_cache(utts, cache_dir, cfg.codec.sample_rate) for utts in (train, val)]
    (run / "data.json").write_text(json.dumps(cache_summary(folders[0])))
    targets = [{} for _ in folders]
    for folder, utts, found in zip(folders, (train, val), targets):
        if "semantic" in weights:
            found["semantic"] = load_features(build_feature_cache(folder, spf, cfg.threads))
        if "phones" in weights:
            found["phones"] = load_phones(build_phone_cache(folder, utts, spf))
    if cfg.lm_values:
        targets[0]["lm"] = load_lm_values(build_lm_value_cache(folders[0], cfg.lm_values, cfg.lm_model, model.fsq,
                                                               spf, model.fingerprint(), cfg.seed))
    if "semantic" in weights and not fitted:
        heads["semantic"].fit_targets(targets[0]["semantic"][0])
    crops = RandomCrops(folders[0], cfg.crop_frames * spf, seed=cfg.seed + step, frame_targets=targets[0])
    val_crops = RandomCrops(folders[1], cfg.crop_frames * spf, seed=123, frame_targets=targets[1])
    val_audio, val_targets = val_crops.batch(32, augment=False)
    val_audio, val_targets = val_audio.to(device), {k: v.to(device) for k, v in val_targets.items()}
    mixing = torch.Generator().manual_seed(cfg.seed + step)

    log = open(run / "log.jsonl", "a")
    bar = tqdm(total=min(cfg.steps, cfg.stop_at), initial=step, desc="codec", unit="step")
    t0 = time.time() - elapsed
    while step < min(cfg.steps, cfg.stop_at):
        for g in (*opt.param_groups, *opt_d.param_groups, *(opt_h.param_groups if opt_h else ())):
            g["lr"] = lr_at(step, cfg)
        # the LM's beliefs were computed on the clips as they are: no random gain then
        audio, frame_targets = crops.batch(cfg.batch_size, augment=not cfg.lm_values)
        audio = audio.to(device)
        with autocast(device.type):
            values = model.quantize(audio)
            if cfg.lm_values:
                values = with_lm_values(values, frame_targets["lm"], cfg.lm_share, mixing)
            recon = model.decoder(values)
        loss, parts = loss_fn(recon, audio)
        for name, weight in weights.items():
            with autocast(device.type):
                head_loss = heads[name].loss(values, frame_targets[name].to(device))
            loss = loss + weight * head_loss
            parts[name] = head_loss.item()
        if ear:
            with autocast(device.type):
                heard = ear.divergence(recon, audio)
            loss = loss + cfg.listener_weight * heard
            parts["listener"] = heard.item()
        if whisper:
            with autocast(device.type):
                heard = whisper.divergence(recon, audio)
            loss = loss + cfg.whisper_weight * heard
            parts["whisper"] = heard.item()
        if 0 <= cfg.adversarial_from <= step:
            real, fake = audio[: cfg.adversarial_batch], recon[: cfg.adversarial_batch]
            parts["disc"] = train_discriminator(disc, opt_d, real, fake.detach(), device)
            with autocast(device.type):
                adv, fm = generator_losses(disc(real), disc(fake))
            loss = loss + cfg.adversarial_scale * (adv + cfg.feature_weight * fm)
            parts["adv"], parts["fm"] = adv.item(), fm.item()
        opt.zero_grad(set_to_none=True)
        heads.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).item()
        opt.step()
        if opt_h:
            opt_h.step()
        step += 1
        record = {"step": step, "loss": loss.item(), **parts, "grad_norm": grad_norm, "lr": lr_at(step, cfg),
                  "elapsed_s": time.time() - t0, "precision": precision_name(device.type)}
        if step % cfg.val_every == 0 or step == cfg.stop_at:
            record["val_loss"], val_parts = evaluate(model, heads, (ear, whisper), loss_fn, val_audio, val_targets,
                                                     device)
            record.update({f"val_{k}": v for k, v in val_parts.items()
                           if k in ("mel", *HEADS, "phone_accuracy", "listener", "whisper")})
        log.write(json.dumps(record) + "\n")
        log.flush()
        bar.update(1)
        bar.set_postfix(loss=f"{loss.item():.3f}", mel=f"{parts['mel']:.3f}")
        if step % cfg.checkpoint_every == 0 or step == cfg.stop_at:
            save_checkpoint(ckpt_path, model, opt, disc, opt_d, heads, opt_h, step, cfg, time.time() - t0)
    bar.close()
    return model.eval()


def train_discriminator(disc, opt_d, real: torch.Tensor, fake: torch.Tensor, device: torch.device) -> float:
    """One least-squares GAN step for the discriminator; returns its loss."""
    with autocast(device.type):
        loss = discriminator_loss(disc(real), disc(fake))
    opt_d.zero_grad(set_to_none=True)
    loss.backward()
    opt_d.step()
    return loss.item()


@torch.no_grad()
def evaluate(model: Codec, heads: nn.ModuleDict, ears: tuple[PhoneListener | None, WhisperEar | None],
             loss_fn: SpectralLoss, audio: torch.Tensor, targets: dict[str, torch.Tensor], device: torch.device):
    """Spectral loss, each frame head's loss (+ the phone head's accuracy) and each ear's divergence (the phone
    listener's, Whisper's) on a fixed validation batch."""
    model.eval()
    with autocast(device.type):
        values = model.quantize(audio)
        recon = model.decoder(values)
    model.train()
    loss, parts = loss_fn(recon, audio)
    with autocast(device.type):
        for name, head in heads.items():
            parts[name] = head.loss(values, targets[name]).item()
            if name == "phones":
                parts["phone_accuracy"] = head.accuracy(values, targets[name])
        for name, ear in zip(("listener", "whisper"), ears):
            if ear:
                parts[name] = ear.divergence(recon, audio).item()
    return loss.item(), parts


def save_checkpoint(path: Path, model: Codec, opt, disc, opt_d, heads: nn.ModuleDict, opt_h, step: int,
                    cfg: TrainConfig, elapsed_s: float):
    """Atomic: a crash while saving leaves the previous checkpoint intact. The frame heads are training-only
    (not part of the exported codec)."""
    tmp = path.with_suffix(".tmp")
    state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step,
             "codec": asdict(cfg.codec), "elapsed_s": elapsed_s,
             "discriminator": disc.state_dict(), "opt_discriminator": opt_d.state_dict()}
    if opt_h:
        state["heads"], state["opt_heads"] = heads.state_dict(), opt_h.state_dict()
    torch.save(state, tmp)
    tmp.replace(path)
