"""Teacher forcing: the LM's prediction of each true frame, given the text, the voice and every true frame before."""

from __future__ import annotations

import torch

from gepard.lm.layout import IGNORE, training_sequence
from gepard.lm.speech_lm import SpeechLM
from gepard.precision import autocast


@torch.inference_mode()
def audio_logits(model: SpeechLM, text: str, codes: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """(J,) true codes, (R,) reference codes -> (J, codebook) teacher-forced logits over the audio codes."""
    ids = model.encode_training_text(text)
    seq, labels = training_sequence(ids, codes.tolist(), model.vocab, model.repetition.copies(len(ids)))
    with autocast("cpu"):
        prefix = model.prefix(ref[None])
        hidden = model.lm.model(inputs_embeds=model.embed(prefix, torch.tensor([seq]))).last_hidden_state[0]
        keep = torch.tensor(labels) != IGNORE
        logits = model.lm.lm_head(hidden[prefix.shape[1]:][keep]).float()
    return logits[:-1, model.vocab.audio_offset:]  # the last labelled position predicts <eos>
