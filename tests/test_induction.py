"""The induction probe tells a model that copies from one that cannot: an echo of the token one
sequence-half back scores every copy, a model blind to the past scores none and equal halves."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from inquire_lib.evaluation.copying import copy_attention, induction

VOCAB = 50


class HalfBack:
    """Puts the arg-max at position i on input token i + 1 - `period` (an ideal induction head)."""

    def __init__(self, period: int):
        self.period = period

    def eval(self):
        return self

    def __call__(self, input_ids):
        target = torch.roll(input_ids, self.period - 1, dims=1)
        target[:, : self.period - 1] = 0  # before the repeat there is nothing to copy
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


class FixedLook:
    """One layer, two heads: head 0 attends `back` positions behind each query, head 1 spreads evenly."""

    def __init__(self, back: int):
        self.back = back

    def eval(self):
        return self

    def __call__(self, input_ids, output_attentions=False):
        n, t = input_ids.shape
        look = torch.zeros(t, t)
        for q in range(t):
            look[q, max(q - self.back, 0)] = 1.0
        even = torch.tril(torch.ones(t, t)) / torch.arange(1, t + 1)[:, None]
        att = torch.stack([look, even])[None].expand(n, -1, -1, -1)
        return SimpleNamespace(attentions=(att,))


def test_copy_attention_reads_each_role_of_each_head():
    # strings of 12 written back to back: the source of a second-copy query lies 11 positions back
    roles = copy_attention(FixedLook(11), range(10, VOCAB), n=4, length=12)
    assert len(roles) == 1 and len(roles[0]) == 2
    assert roles[0][0] == {"source": 1.0, "previous": 0.0, "same": 0.0}
    # the even head gives each of the 13-23 keys it sees the same share
    expected = torch.tensor([1 / (q + 1) for q in range(13, 24)]).mean().item()
    assert roles[0][1]["source"] == pytest.approx(expected) == pytest.approx(roles[0][1]["previous"])


def test_a_head_that_looks_a_fixed_distance_back_loses_the_source_across_a_gap():
    assert copy_attention(FixedLook(11), range(10, VOCAB), n=4, length=12, gap=20)[0][0]["source"] == 0.0
    assert copy_attention(FixedLook(1), range(10, VOCAB), n=4, length=12, gap=20)[0][0]["previous"] == 1.0


def test_a_model_without_attention_weights_is_refused():
    class NoWeights(FixedLook):
        def __call__(self, input_ids, output_attentions=False):
            return SimpleNamespace(attentions=None)

    with pytest.raises(ValueError, match="eager"):
        copy_attention(NoWeights(1), range(10, VOCAB), n=2, length=6)
