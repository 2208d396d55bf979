"""SpeechLM: the stock LM + the reference compressor + the layout they were trained with, saved as one folder.

Folder: config.json + model.safetensors (stock Qwen3, loadable by transformers and vLLM), tokenizer.json,
compressor/model.safetensors + gepard.json (compressor, vocabulary layout, text repetition, codec facts),
codes/model.safetensors (factorized audio-code tables, when trained with them), voices/. Only the stock LM's weights sit at the top level: vLLM loads every *.safetensors found there.
"""

from __future__ import annotations

import copy
import json
from dataclasses import asdict
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer
from torch import nn
from transformers import AutoModelForCausalLM
from transformers.utils import logging as hf_logging

from gepard.lm.audio_codes import FactorizedCodes
from gepard.lm.layout import IGNORE, Repetition, Vocab
from gepard.lm.tokenizer import load_tokenizer, vocab_for
from gepard.lm.voice import ReferenceCompressor, VoiceConfig


COMPRESSOR = "compressor/model.safetensors"  # the reference compressor's weights, inside a model folder
CODES = "codes/model.safetensors"  # factorized audio-code tables (training state; the stock rows hold their sums)
hf_logging.disable_progress_bar()  # loading a few-MB model needs no progress bars in the middle of our output


class SpeechLM(nn.Module):
    def __init__(self, lm, voice: ReferenceCompressor, tokenizer: Tokenizer, repetition: Repetition,
                 codec_frame_rate: float, codes: FactorizedCodes | None = None):
        super().__init__()
        self.lm, self.voice, self.codes = lm, voice, codes
        self.tokenizer, self.repetition, self.codec_frame_rate = tokenizer, repetition, codec_frame_rate
        self.vocab: Vocab = vocab_for(tokenizer, voice.fsq.codebook_size)

    def prefix(self, ref_codes: torch.Tensor, ref_lengths: torch.Tensor | None = None,
               use_null: torch.Tensor | None = None) -> torch.Tensor:
        """(B, R) reference codes -> (B, K, H); rows with use_null get the null prefix."""
        prefix = self.voice(ref_codes, ref_lengths)
        if use_null is not None:
            prefix = torch.where(use_null[:, None, None], self.voice.null(len(prefix)).to(prefix.dtype), prefix)
        return prefix

    def embed(self, prefix: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """(B, K, H) prefix + (B, L) ids -> (B, K + L, H) input embeddings."""
        tokens = self.lm.get_input_embeddings()(ids)
        if self.codes is not None:  # audio rows come from the factorized tables (equal to the stock rows at export)
            audio = ids >= self.vocab.audio_offset
            codes = self.codes.embed((ids - self.vocab.audio_offset).clamp(min=0)).to(tokens.dtype)
            tokens = torch.where(audio[..., None], codes, tokens)
        return torch.cat([prefix.to(tokens.dtype), tokens], dim=1)

    def loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Mean next-token cross-entropy over audio tokens and <eos> (batch from LMDataset.batch); with factorized
        codes, the softmax runs over audio codes + <eos> only, as generation samples."""
        prefix = self.prefix(batch["ref_codes"], batch["ref_lengths"], batch["use_null"])
        k, length = prefix.shape[1], batch["ids"].shape[1]
        device = batch["ids"].device
        mask = torch.cat([torch.ones(len(prefix), k, dtype=torch.long, device=device),
                          (torch.arange(length, device=device)[None] < batch["lengths"][:, None]).long()], dim=1)
        hidden = self.lm.model(inputs_embeds=self.embed(prefix, batch["ids"]), attention_mask=mask).last_hidden_state
        labels = batch["labels"]
        selected, targets = hidden[:, k:][labels != IGNORE], labels[labels != IGNORE]
        if self.codes is not None:
            eos = self.lm.get_input_embeddings().weight[self.vocab.special("<eos>")]
            codes = torch.where(targets >= self.vocab.audio_offset, targets - self.vocab.audio_offset, -1)
            return self.codes.nll(selected, codes, eos.to(selected.dtype)).mean()
        return F.cross_entropy(self.lm.lm_head(selected).float(), targets)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.loss(batch)

    def save_pretrained(self, path: str | Path, dtype: torch.dtype = torch.bfloat16) -> None:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        lm = copy.deepcopy(self.lm)
        if self.codes is not None:
            with torch.no_grad():
                lm.get_input_embeddings().weight[self.vocab.audio_offset:] = self.codes.materialize()
            (path / CODES).parent.mkdir(exist_ok=True)
            save_file({"table": self.codes.table.detach().to(dtype).contiguous()}, str(path / CODES))
        lm.to(dtype).save_pretrained(path)
        self.tokenizer.save(str(path / "tokenizer.json"))
        (path / COMPRESSOR).parent.mkdir(exist_ok=True)
        save_file({k: v.to(dtype).contiguous() for k, v in self.voice.state_dict().items()}, str(path / COMPRESSOR))
        meta = {"voice": asdict(self.voice.config), "repetition": asdict(self.repetition),
                "vocab": asdict(self.vocab), "codec_frame_rate": self.codec_frame_rate}
        (path / "gepard.json").write_text(json.dumps(meta, indent=2))

    @classmethod
    def from_pretrained(cls, path: str | Path, dtype: torch.dtype = torch.float32) -> "SpeechLM":
        path = Path(path)
        meta = json.loads((path / "gepard.json").read_text())
        voice = ReferenceCompressor(VoiceConfig(**meta["voice"]))
        voice.load_state_dict({k: v.to(dtype) for k, v in load_file(str(path / COMPRESSOR)).items()})
        lm = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
        codes = None
        if (path / CODES).is_file():
            codes = FactorizedCodes(meta["voice"]["levels"], lm.config.hidden_size)
            codes.load_state_dict({k: v.to(dtype) for k, v in load_file(str(path / CODES)).items()})
        model = cls(lm, voice.to(dtype), load_tokenizer(path), Repetition(**meta["repetition"]),
                    meta["codec_frame_rate"], codes)
        if asdict(model.vocab) != meta["vocab"]:
            raise ValueError(f"{path}: tokenizer and gepard.json disagree on the vocabulary")
        return model.eval()
