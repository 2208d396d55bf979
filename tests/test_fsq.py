import itertools

import torch

from gepard.codec.fsq import FSQ


def test_every_index_round_trips_through_digits_and_values():
    fsq = FSQ([5, 4, 3])
    index = torch.arange(fsq.codebook_size)
    digits = fsq.index_to_digits(index)
    assert set(map(tuple, digits.tolist())) == set(itertools.product(range(5), range(4), range(3)))
    values = fsq.index_to_values(index)
    assert torch.equal(fsq.values_to_index(values), index)
    assert torch.equal(fsq.values_to_digits(values), digits)


def test_quantized_values_are_on_the_grid_and_map_back():
    torch.manual_seed(0)
    fsq = FSQ([8, 8, 8, 5, 5, 5])
    assert fsq.codebook_size == 64000
    values = fsq(torch.randn(4, 50, 6) * 3)
    digits = fsq.values_to_digits(values)
    assert digits.min() >= 0 and (digits < torch.tensor(fsq.levels)).all()
    assert torch.equal(fsq.digits_to_values(digits), values)
    index = fsq.values_to_index(values)
    assert index.shape == (4, 50) and index.min() >= 0 and index.max() < 64000
    assert torch.equal(fsq.index_to_values(index), values)


def test_every_level_is_reachable():
    fsq = FSQ([8, 5])
    z = torch.linspace(-6, 6, 2001)[:, None].expand(-1, 2)
    digits = fsq.values_to_digits(fsq(z))
    assert set(digits[:, 0].tolist()) == set(range(8))
    assert set(digits[:, 1].tolist()) == set(range(5))


def test_straight_through_gradient_flows():
    fsq = FSQ([8, 5, 5])
    z = torch.randn(3, 3, requires_grad=True)
    fsq(z).sum().backward()
    assert z.grad is not None and z.grad.abs().sum() > 0


def test_unrounded_values_round_to_the_quantized_ones():
    torch.manual_seed(0)
    fsq = FSQ([8, 8, 8, 4, 4, 4])
    z = torch.randn(2, 30, 6) * 3
    soft, hard = fsq.unrounded(z), fsq(z)
    half = torch.tensor([4, 4, 4, 2, 2, 2])
    assert torch.equal((soft * half).round() / half, hard)
    assert (soft - hard).abs().max() <= 0.5 / 2 + 1e-6 and not torch.equal(soft, hard)
