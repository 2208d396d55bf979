"""SpeechLM: the stock LM + the reference compressor + the layout they were trained with, saved as one folder.

Folder: config.json + model.safetensors (stock Qwen3, loadable by transformers and vLLM), tokenizer.json,
compressor/model.safetensors + gepard.json (compressor, vocabulary layout, text front end and repetition, codec facts),
voices/. Only the stock LM's weights sit at the top level: vLLM loads every *.safetensors found there.
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

from gepard.lm.frontend import check_front_end, null_units, to_units, training_units
from gepard.lm.layout import IGNORE, Repetition, Vocab
from gepard.lm.tokenizer import encode_text, load_tokenizer, vocab_for
from gepard.lm.voice import ReferenceCompressor, VoiceConfig


COMPRESSOR = "compressor/model.safetensors"  # the reference compressor's weights, inside a model folder
hf_logging.disable_progress_bar()  # loading a few-MB model needs no progress bars in the middle of our output


class SpeechLM(nn.Module):
    def __init__(self, lm, voice: ReferenceCompressor, tokenizer: Tokenizer, repetition: Repetition,
                 codec_frame_rate: float, text_front_end: str = "text", codec_fingerprint: str = ""):
        super().__init__()
        self.lm, self.voice = lm, voice
        self.tokenizer, self.repetition, self.codec_frame_rate = tokenizer, repetition, codec_frame_rate
        self.codec_fingerprint = codec_fingerprint  # Codec.fingerprint() of the codec it speaks ("": unrecorded)
        self.text_front_end = check_front_end(text_front_end)
        self.vocab: Vocab = vocab_for(tokenizer, voice.fsq.codebook_size)

    def encode_text(self, text: str) -> list[int]:
        """Text as the user wrote it -> text token ids, through the front end the model was trained with."""
        return encode_text(self.tokenizer, to_units(text, self.text_front_end))

    def null_text(self) -> list[int]:
        """Text token ids of the unconditional branch of text CFG (`null_units`)."""
        return encode_text(self.tokenizer, null_units(self.text_front_end))

    def encode_training_text(self, text: str) -> list[int]:
        """A token shard's text -> text token ids (`training_units`)."""
        return encode_text(self.tokenizer, training_units(text, self.text_front_end))

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
        return torch.cat([prefix.to(tokens.dtype), tokens], dim=1)

    def label_logprobs(self, prefix: torch.Tensor, ids: torch.Tensor, labels: torch.Tensor,
                       lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, K, H) prefix, (B, L) ids/labels, (B,) lengths -> log-probs (N,) of the N labelled next tokens
        (audio and <eos>) and the batch row (N,) each belongs to."""
        k, length = prefix.shape[1], ids.shape[1]
        mask = torch.cat([torch.ones(len(prefix), k, dtype=torch.long, device=ids.device),
                          (torch.arange(length, device=ids.device)[None] < lengths[:, None]).long()], dim=1)
        hidden = self.lm.model(inputs_embeds=self.embed(prefix, ids), attention_mask=mask).last_hidden_state
        keep = labels != IGNORE
        logits = self.lm.lm_head(hidden[:, k:][keep]).float()
        logprobs = -F.cross_entropy(logits, labels[keep], reduction="none")
        return logprobs, keep.nonzero()[:, 0]

    def forward(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean next-token cross-entropy over audio tokens and <eos> (batch from LMDataset.batch), and the
        (B, K, H) voice prefixes it used (for the prefix regularizers)."""
        prefix = self.prefix(batch["ref_codes"], batch["ref_lengths"], batch["use_null"])
        return -self.label_logprobs(prefix, batch["ids"], batch["labels"], batch["lengths"])[0].mean(), prefix

    def sequence_logprobs(self, prefix: torch.Tensor, ids: torch.Tensor, labels: torch.Tensor,
                          lengths: torch.Tensor) -> torch.Tensor:
        """Per row, the mean log-prob of its labelled tokens (length-normalized, as DPO uses it) -> (B,)."""
        logprobs, rows = self.label_logprobs(prefix, ids, labels, lengths)
        total = torch.zeros(len(ids), device=ids.device).index_add(0, rows, logprobs)
        count = torch.zeros(len(ids), device=ids.device).index_add(0, rows, torch.ones_like(logprobs))
        return total / count

    def save_pretrained(self, path: str | Path, dtype: torch.dtype = torch.bfloat16) -> None:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        copy.deepcopy(self.lm).to(dtype).save_pretrained(path)
        self.tokenizer.save(str(path / "tokenizer.json"))
        (path / COMPRESSOR).parent.mkdir(exist_ok=True)
        save_file({k: v.to(dtype).contiguous() for k, v in self.voice.state_dict().items()}, str(path / COMPRESSOR))
        meta = {"voice": asdict(self.voice.config), "repetition": asdict(self.repetition),
                "vocab": asdict(self.vocab), "codec_frame_rate": self.codec_frame_rate,
                "text_front_end": self.text_front_end, "codec_fingerprint": self.codec_fingerprint}
        (path / "gepard.json").write_text(json.dumps(meta, indent=2))

    @classmethod
    def from_pretrained(cls, path: str | Path, dtype: torch.dtype = torch.float32) -> "SpeechLM":
        path = Path(path)
        meta = json.loads((path / "gepard.json").read_text())
        voice = ReferenceCompressor(VoiceConfig(**meta["voice"]))
        voice.load_state_dict({k: v.to(dtype) for k, v in load_file(str(path / COMPRESSOR)).items()})
        lm = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
        model = cls(lm, voice.to(dtype), load_tokenizer(path), Repetition(**meta["repetition"]),
                    meta["codec_frame_rate"], meta.get("text_front_end", "text"), meta.get("codec_fingerprint", ""))
        if asdict(model.vocab) != meta["vocab"]:
            raise ValueError(f"{path}: tokenizer and gepard.json disagree on the vocabulary")
        return model.eval()
