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


def test_slots_with_different_lengths_in_one_batch_match_running_alone():
    hf = model()
    prompts = [torch.randn(1, n, 32) for n in (3, 7, 5)]
    nxt = [torch.randn(1, 1, 32) for _ in range(3)]
    alone = []
    for p, x in zip(prompts, nxt):
        c = CachedLM(hf, slots=1, max_len=32)
        c.forward(p, torch.tensor([0]))
        alone.append(c.forward(x, torch.tensor([0]))[0, -1])
    together = CachedLM(hf, slots=4, max_len=32)
    for slot, p in zip((2, 0, 3), prompts):
        together.forward(p, torch.tensor([slot]))
    batched = together.forward(torch.cat(nxt), torch.tensor([2, 0, 3]))
    for b in range(3):
        assert torch.allclose(batched[b, -1], alone[b], atol=1e-5)
    assert together.lengths.tolist() == [8, 0, 4, 6]
