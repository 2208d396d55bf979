"""Starting from another model whose tokenizer or codebook differs."""

import pytest
import torch

from tests.conftest import tiny_speech_lm
from gepard.lm.layout import Repetition
from gepard.lm.model import LMConfig
from gepard.lm.train import LMTrainConfig, build
from gepard.lm.transplant import nearest_codes, transplant
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


def test_a_finer_grid_starts_each_code_from_the_nearest_coarse_code():
    assert nearest_codes([2, 3], [4, 3]).tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    src = tiny_speech_lm()
    dst = built(256, levels=tuple(2 * lv if i == 0 else lv for i, lv in enumerate(src.voice.fsq.levels)))
    transplant(src, dst)
    old, new = src.lm.get_input_embeddings().weight, dst.lm.get_input_embeddings().weight
    fine = dst.voice.fsq.index_to_values(torch.arange(dst.vocab.codebook_size))
    for code in (0, 1, 7, dst.vocab.codebook_size - 1):
        coarse = int(torch.cdist(fine[code:code + 1], src.voice.fsq.index_to_values(
            torch.arange(src.vocab.codebook_size))).argmin())
        assert torch.equal(new[dst.vocab.audio_offset + code], old[src.vocab.audio_offset + coarse])
    assert torch.equal(new[dst.vocab.special("<eos>")], old[src.vocab.special("<eos>")])
    assert torch.equal(dst.lm.model.layers[0].self_attn.q_proj.weight, src.lm.model.layers[0].self_attn.q_proj.weight)


def test_a_grid_with_another_number_of_digits_is_refused():
    with pytest.raises(ValueError, match="number of digits"):
        transplant(tiny_speech_lm(), built(256, levels=(4, 4, 3, 2)))


def test_a_different_body_is_refused():
    with pytest.raises(ValueError, match="bodies differ"):
        transplant(built(256, layers=3), built(256, layers=2))
