"""Starting from another model whose tokenizer or codebook differs."""

import pytest
import torch

from tests.conftest import tiny_speech_lm
from gepard.lm.layout import Repetition
from gepard.lm.model import LMConfig
from gepard.lm.train import LMTrainConfig, build
from gepard.lm.transplant import transplant
from gepard.lm.voice import VoiceConfig

TEXTS = ["hello there", "yes", "see you at nine"]


def built(text_vocab: int, layers: int = 2, levels: tuple[int, ...] = (5, 4, 3)):
    torch.manual_seed(1)
    cfg = LMTrainConfig(text_vocab=text_vocab, levels=list(levels), repetition=Repetition(),
                        lm=LMConfig(hidden_size=32, layers=layers, heads=2, kv_heads=1, head_dim=16,
                                    intermediate_size=64, max_positions=2048),
                        voice=VoiceConfig(dim=16, heads=2, blocks=1, prefix_len=4))
    return build(cfg, TEXTS).eval()


def test_everything_but_the_unshared_text_tokens_carries_over():
    src, dst = tiny_speech_lm(), built(256)  # 300 text tokens -> one per byte
    assert dst.vocab.text_size == 256 and src.vocab.text_size > 256
    shared = transplant(src, dst)
    assert shared == 256  # every byte is also a token of the larger tokenizer
    old, new = src.lm.get_input_embeddings().weight, dst.lm.get_input_embeddings().weight
    assert torch.equal(new[dst.vocab.audio_offset:], old[src.vocab.audio_offset:])
    assert torch.equal(new[dst.vocab.special("<sos>")], old[src.vocab.special("<sos>")])
    byte = dst.tokenizer.token_to_id("h")
    assert torch.equal(new[byte], old[src.tokenizer.token_to_id("h")])
    assert torch.equal(dst.lm.model.layers[1].mlp.up_proj.weight, src.lm.model.layers[1].mlp.up_proj.weight)
    assert all(torch.equal(a, b) for a, b in zip(dst.voice.state_dict().values(), src.voice.state_dict().values()))
    assert dst.lm.lm_head.weight.data_ptr() == dst.lm.get_input_embeddings().weight.data_ptr()  # still tied


def test_another_codebook_keeps_its_own_audio_embeddings():
    src, dst = tiny_speech_lm(), built(256, levels=(4, 4, 3))
    before = dst.lm.get_input_embeddings().weight[dst.vocab.audio_offset:].clone()
    transplant(src, dst)
    old, new = src.lm.get_input_embeddings().weight, dst.lm.get_input_embeddings().weight
    assert torch.equal(new[dst.vocab.audio_offset:], before)
    assert torch.equal(new[dst.vocab.special("<eos>")], old[src.vocab.special("<eos>")])
    assert torch.equal(dst.lm.model.layers[0].self_attn.q_proj.weight, src.lm.model.layers[0].self_attn.q_proj.weight)


def test_a_different_body_is_refused():
    with pytest.raises(ValueError, match="bodies differ"):
        transplant(built(256, layers=3), built(256, layers=2))
