import pytest
import torch

from gepard.engine.cached_lm import CachedLM
from gepard.lm.layout import Vocab
from gepard.lm.model import LMConfig, build_lm

TINY = LMConfig(hidden_size=32, layers=2, heads=4, kv_heads=2, head_dim=8, intermediate_size=64, max_positions=256)
VOCAB = Vocab(text_size=40, codebook_size=60)


def model():
    torch.manual_seed(0)
    return build_lm(TINY, VOCAB).eval()


def test_cached_decoding_equals_a_full_forward_pass():
    hf = model()
    prefix = torch.randn(1, 4, 32)
    ids = torch.randint(0, VOCAB.size, (1, 12))
    embeds = torch.cat([prefix, hf.get_input_embeddings()(ids)], dim=1)
    with torch.no_grad():
        full = hf(inputs_embeds=embeds).logits[0]
    cached = CachedLM(hf, slots=3, max_len=64)
    slot = torch.tensor([1])
    steps = [cached.logits(cached.forward(embeds[:, :9], slot))[0]]  # prefill prefix + 5 tokens
    for t in range(9, 16):  # then one token at a time
        steps.append(cached.logits(cached.forward(embeds[:, t: t + 1], slot))[0])
    assert torch.allclose(torch.cat(steps), full, atol=1e-5)


@pytest.mark.parametrize("int8_head", [False, True])
def test_a_batch_invariant_decode_step_gives_each_slot_exactly_what_it_gets_alone(int8_head):
    """Bit for bit, whatever the other rows and their lengths: a seeded request samples the same codes under
    any load."""
    hf = model()
    prompts = [torch.randn(1, n, 32) for n in (3, 7, 5, 11, 2)]
    nxt = [torch.randn(1, 1, 32) for _ in prompts]
    alone = []
    for p, x in zip(prompts, nxt):
        c = CachedLM(hf, slots=1, max_len=32, int8_head=int8_head, batch_invariant=True)
        c.forward(p, torch.tensor([0]))
        alone.append(c.logits(c.forward(x, torch.tensor([0]))[:, -1])[0])
    for rows in (2, 3, 5):
        together = CachedLM(hf, slots=6, max_len=32, int8_head=int8_head, batch_invariant=True)
        slots = (2, 0, 3, 5, 1)[:rows]
        for slot, p in zip(slots, prompts):
            together.forward(p, torch.tensor([slot]))
        batched = together.logits(together.forward(torch.cat(nxt[:rows]), torch.tensor(slots))[:, -1])
        for b in range(rows):
            assert torch.equal(batched[b], alone[b])
    assert together.lengths.tolist() == [8, 3, 4, 6, 0, 12]


@pytest.mark.parametrize("batch_invariant", [False, True])
def test_one_ragged_pass_of_decode_tokens_and_a_prompt_chunk_equals_running_each_slot_alone(batch_invariant):
    """Bit for bit with `batch_invariant` (a request's codes never depend on what runs beside it), within
    float error without."""
    hf = model()
    prompts = [torch.randn(n, 32) for n in (5, 3, 9)]
    pieces = [torch.randn(1, 32), torch.randn(6, 32), torch.randn(1, 32)]  # slot 0: a token, 2: a chunk, 1: a token
    order = (0, 2, 1)
    alone = []
    for slot, piece in zip(order, pieces):
        c = CachedLM(hf, slots=1, max_len=32, batch_invariant=batch_invariant)
        if slot != 2:
            c.forward(prompts[slot][None], torch.tensor([0]))
        alone.append(c.forward(piece[None], torch.tensor([0]))[0])
    c = CachedLM(hf, slots=3, max_len=32, batch_invariant=batch_invariant)
    for slot in (0, 1):
        c.forward(prompts[slot][None], torch.tensor([slot]))
    together = c.forward_ragged(torch.cat(pieces), torch.tensor(order), [1, 6, 1]).split([1, 6, 1])
    for got, want in zip(together, alone):
        assert torch.equal(got, want) if batch_invariant else torch.allclose(got, want, atol=1e-5)
    assert c.lengths.tolist() == [6, 4, 6]


def test_the_int8_head_gives_each_row_exactly_what_it_gets_alone_and_stays_close_to_fp32():
    hf = model()
    c = CachedLM(hf, slots=1, max_len=8, int8_head=True)
    hidden = torch.randn(40, 1, 32) * torch.logspace(-2, 1, 40)[:, None, None]  # rows of very different scales
    together = c.logits(hidden)
    assert all(torch.equal(together[b], c.logits(hidden[b: b + 1])[0]) for b in range(40))
    exact = hidden @ hf.lm_head.weight.float().t()
    assert ((together - exact).norm(dim=-1) / exact.norm(dim=-1)).max() < 0.02
