"""Voice-prefix regularizers: SupCon on a hand-computed case, diversity at its extremes, both in training."""

import json
import math

import pytest
import torch

from gepard.lm.train import train_lm
from gepard.lm.voice_regularize import diversity_loss, supcon_loss
from tests.test_lm_train import tiny_config, write_shards


def test_supcon_matches_a_hand_computed_case():
    # three pooled prefixes on the unit circle: rows 0 and 1 are one speaker (90 degrees apart), row 2 another
    prefix = torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]], [[-1.0, 0.0]]])
    speakers, keep, t = torch.tensor([0, 0, 1]), torch.ones(3, dtype=torch.bool), 0.5
    # anchor 0: positive 1 (cos 0), negative 2 (cos -1); anchor 1: positive 0 (cos 0), negative 2 (cos 0)
    anchor0 = -(0 / t - math.log(math.exp(0 / t) + math.exp(-1 / t)))
    anchor1 = -(0 / t - math.log(math.exp(0 / t) + math.exp(0 / t)))
    assert supcon_loss(prefix, speakers, keep, t).item() == pytest.approx((anchor0 + anchor1) / 2, rel=1e-6)


def test_supcon_ignores_dropped_rows_and_is_zero_without_positives():
    prefix = torch.randn(3, 2, 4, requires_grad=True)
    loss = supcon_loss(prefix, torch.tensor([0, 0, 1]), torch.tensor([True, False, True]))
    assert loss.item() == 0.0
    loss.backward()  # still part of the graph


def test_diversity_is_zero_for_orthogonal_and_one_for_identical_vectors():
    assert diversity_loss(torch.eye(3)[None]).item() == pytest.approx(0.0)
    assert diversity_loss(torch.ones(2, 3, 4)).item() == pytest.approx(1.0)


def test_training_logs_the_voice_regularizers(tmp_path):
    write_shards(tmp_path / "shards")
    cfg = tiny_config(tmp_path / "run", tmp_path / "shards", steps=3)
    cfg.supcon, cfg.diversity = 0.1, 0.1
    train_lm(cfg)
    rows = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert all(r["supcon"] >= 0 and 0 <= r["diversity"] <= 0.1 for r in rows) and len(rows) == 3
