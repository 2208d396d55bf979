"""Factorized audio codes: exact softmax over codes + <eos>, least-squares fit, and export to stock rows."""

import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM

from conftest import tiny_speech_lm
from gepard.lm.audio_codes import FactorizedCodes
from gepard.lm.layout import IGNORE, training_sequence
from gepard.lm.speech_lm import SpeechLM

LEVELS = [5, 4, 3]


def test_nll_equals_cross_entropy_over_all_codes_and_eos():
    torch.manual_seed(0)
    codes = FactorizedCodes(LEVELS, 16, std=1.0)
    hidden, eos = torch.randn(7, 16), torch.randn(16)
    targets = torch.tensor([0, 5, 59, -1, 12, -1, 33])  # -1: <eos>
    logits = torch.cat([hidden @ codes.materialize().T, (hidden @ eos)[:, None]], dim=1)  # (7, 60 + 1)
    expected = F.cross_entropy(logits, torch.where(targets < 0, 60, targets), reduction="none")
    assert torch.allclose(codes.nll(hidden, targets, eos), expected, atol=1e-5)


def test_embedding_of_a_code_is_the_sum_of_its_digit_rows():
    codes = FactorizedCodes(LEVELS, 8, std=1.0)
    digits = codes.fsq.index_to_digits(torch.tensor(37))  # 37 = 2 + 5 * (3 + 4 * 1)
    assert digits.tolist() == [2, 3, 1]
    expected = codes.table[2] + codes.table[5 + 3] + codes.table[5 + 4 + 1]
    assert torch.allclose(codes.embed(torch.tensor(37)), expected)


def test_fit_recovers_factorized_embeddings():
    torch.manual_seed(0)
    source = FactorizedCodes(LEVELS, 8, std=1.0)
    fitted = FactorizedCodes.fit(LEVELS, source.materialize().detach())
    assert torch.allclose(fitted.materialize(), source.materialize(), atol=1e-5)


def test_exported_stock_checkpoint_gives_the_trained_distribution(tmp_path):
    """The stock Qwen3's softmax restricted to audio + <eos> equals the factorized training loss."""
    model = tiny_speech_lm()
    assert model.codes is not None  # factorized is the default
    vocab, tok = model.vocab, model.tokenizer
    ids, labels = training_sequence(tok.encode("see you at nine").ids, [3, 17, 59, 0, 42], vocab, copies=1)
    ref = torch.tensor([[1, 2, 3, 4, 5, 6]])
    batch = {"ids": torch.tensor([ids]), "labels": torch.tensor([labels]), "lengths": torch.tensor([len(ids)]),
             "ref_codes": ref, "ref_lengths": torch.tensor([6]), "use_null": torch.tensor([False])}
    with torch.no_grad():
        trained = model.loss(batch)
    model.save_pretrained(tmp_path, dtype=torch.float32)
    stock = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    prefix = model.prefix(ref, torch.tensor([6]))
    with torch.no_grad():
        embeds = torch.cat([prefix, stock.get_input_embeddings()(torch.tensor([ids]))], dim=1)
        logits = stock(inputs_embeds=embeds).logits[0, prefix.shape[1]:]
    keep = torch.tensor(labels) != IGNORE
    allowed = [vocab.special("<eos>"), *range(vocab.audio_offset, vocab.size)]
    restricted = logits[keep][:, allowed]
    targets = torch.tensor([allowed.index(t) for t in torch.tensor(labels)[keep].tolist()])
    assert torch.allclose(F.cross_entropy(restricted, targets), trained, atol=1e-4)
    again = SpeechLM.from_pretrained(tmp_path)
    assert torch.allclose(again.codes.table, model.codes.table)
