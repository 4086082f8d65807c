"""The induction probe tells a model that copies from one that cannot: an echo of the token one
sequence-half back scores every copy, a model blind to the past scores none and equal halves."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from inquire_lib.evaluation.copying import induction

VOCAB = 50


class HalfBack:
    """Puts the arg-max at position i on input token i + 1 - `period` (an ideal induction head)."""

    def __init__(self, period: int):
        self.period = period

    def eval(self):
        return self

    def __call__(self, input_ids):
        target = torch.roll(input_ids, self.period - 1, dims=1)
        target[:, :self.period - 1] = 0  # before the repeat there is nothing to copy
        return SimpleNamespace(logits=10 * torch.nn.functional.one_hot(target, VOCAB).float())


class Blind:
    """The same logits everywhere: knows nothing of the sequence."""

    def eval(self):
        return self

    def __call__(self, input_ids):
        return SimpleNamespace(logits=torch.zeros(*input_ids.shape, VOCAB))


def test_a_copier_copies_every_token_of_the_second_half():
    r = induction(HalfBack(20), range(10, VOCAB), n=8, length=20)
    assert r["copied"] == 1.0
    assert r["second_loss"] < 0.01 < r["first_loss"]


def test_a_blind_model_copies_nothing_and_both_halves_cost_the_same():
    r = induction(Blind(), range(10, VOCAB), n=8, length=20)
    assert r["copied"] == 0.0  # the arg-max of equal logits is token 0, never in the vocab
    assert r["first_loss"] == pytest.approx(r["second_loss"]) == pytest.approx(torch.log(torch.tensor(50.0)).item())


def test_a_copier_of_one_distance_fails_across_a_gap():
    assert induction(HalfBack(20), range(10, VOCAB), n=8, length=20, gap=30)["copied"] < 0.1
    r = induction(HalfBack(50), range(10, VOCAB), n=8, length=20, gap=30)
    assert r["copied"] == 1.0 and r["second_loss"] < 0.01


def test_the_draw_is_seeded():
    assert induction(Blind(), range(10, VOCAB), seed=3) == induction(Blind(), range(10, VOCAB), seed=3)
