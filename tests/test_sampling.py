"""Sampling one token: greedy, top-k, top-p, disallowed tokens, seeded generators."""

import math

import torch

from gepard.engine.base import SamplingParams
from gepard.engine.sampling import sample_tokens

LOGITS = torch.tensor([math.log(p) for p in (0.05, 0.5, 0.3, 0.15)] + [float("-inf")])


def sample_token(logits: torch.Tensor, params: SamplingParams, gen: torch.Generator) -> int:
    return sample_tokens(logits[None], [params], [gen])[0]


def draws(params: SamplingParams, n: int = 400) -> set[int]:
    gen = torch.Generator().manual_seed(0)
    return {sample_token(LOGITS, params, gen) for _ in range(n)}


def test_greedy_takes_the_argmax():
    assert sample_token(LOGITS, SamplingParams(temperature=0), torch.Generator()) == 1


def test_top_k_and_top_p_bound_the_candidates():
    assert draws(SamplingParams(temperature=1, top_k=0, top_p=1.0)) == {0, 1, 2, 3}  # never the -inf token
    assert draws(SamplingParams(temperature=1, top_k=2, top_p=1.0)) == {1, 2}
    assert draws(SamplingParams(temperature=1, top_k=0, top_p=0.7)) == {1, 2}  # 0.5 + 0.3 covers 0.7
    assert draws(SamplingParams(temperature=1, top_k=0, top_p=0.4)) == {1}


def test_frequencies_follow_the_distribution_and_seeds_repeat():
    gen = torch.Generator().manual_seed(1)
    params = SamplingParams(temperature=1, top_k=0, top_p=1.0)
    counts = torch.bincount(torch.tensor([sample_token(LOGITS, params, gen) for _ in range(4000)]), minlength=5)
    assert torch.allclose(counts / 4000, LOGITS.softmax(-1), atol=0.03)
    a, b = (torch.Generator().manual_seed(7) for _ in range(2))
    assert [sample_token(LOGITS, params, a) for _ in range(20)] == [sample_token(LOGITS, params, b) for _ in range(20)]


def test_a_batch_samples_each_row_as_it_would_alone():
    rows = torch.stack([LOGITS, LOGITS.flip(0), LOGITS])  # (3, V)
    params = [SamplingParams(temperature=1, top_k=2, top_p=1.0), SamplingParams(temperature=0),
              SamplingParams(temperature=0.5, top_k=0, top_p=0.9)]
    together, alone = [], []
    gens_a, gens_b = [torch.Generator().manual_seed(i) for i in range(3)], [torch.Generator().manual_seed(i)
                                                                             for i in range(3)]
    for _ in range(50):
        together.append(sample_tokens(rows, params, gens_a))
        alone.append([sample_tokens(rows[i: i + 1], [params[i]], [gens_b[i]])[0] for i in range(3)])
    assert together == alone
    assert {t[1] for t in together} == {3}  # greedy on the flipped row: its argmax


def test_block_topk_equals_torch_topk_on_a_large_vocabulary():
    from gepard.engine.sampling import block_topk

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 64517, generator=gen)
    x[1, :600] = float("-inf")  # blocked tokens, as the engine masks them
    for k in (1, 100, 250):
        values, ids = block_topk(x, k)
        expected_values, expected_ids = torch.topk(x, k)
        assert torch.equal(values, expected_values) and torch.equal(ids, expected_ids)
