"""The decoder's input for the LM's frames: the sampled codes, or the mean values of each step's likeliest codes."""

import math

import pytest
import torch

from gepard.codec.fsq import FSQ
from gepard.codec.render import MEAN_TEMPERATURE, frame_values

FSQ_ = FSQ([5, 4, 3])


def test_codes_rendering_is_the_codes_values_whatever_the_step_believed():
    frames = [(7, ((3, 7), (-0.1, -2.5))), (12, None)]
    assert torch.equal(frame_values(FSQ_, frames, "codes"), FSQ_.index_to_values(torch.tensor([7, 12])))


def test_mean_rendering_weighs_each_likely_code_by_its_probability_whatever_the_logits_offset():
    logprobs = (math.log(0.75), math.log(0.25))
    [got] = frame_values(FSQ_, [(3, ((3, 40), tuple(x + 5.0 for x in logprobs)))], "mean")  # logits
    weights = torch.softmax(torch.tensor(logprobs) / MEAN_TEMPERATURE, 0)
    want = weights[0] * FSQ_.index_to_values(torch.tensor(3)) + weights[1] * FSQ_.index_to_values(torch.tensor(40))
    assert torch.allclose(got, want)


def test_mean_rendering_falls_back_to_the_code_where_a_step_has_no_top():
    assert torch.equal(frame_values(FSQ_, [(9, None)], "mean"), FSQ_.index_to_values(torch.tensor([9])))


def test_an_unknown_rendering_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown rendering 'soft'.*mean, codes"):
        frame_values(FSQ_, [(1, None)], "soft")
