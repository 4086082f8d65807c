"""The inquiry operating curve: the maths on known margins, and the fork found in real generation."""

import math

import numpy as np
import pytest

from inquire_lib.evaluation.operating_curve import auc, bootstrap_auc, curve_points


def _ends(points):
    return (points[0]["needless"], points[0]["isr"]), (points[-1]["needless"], points[-1]["isr"])


def test_input_blind_policy_gives_the_diagonal():
    rng = np.random.default_rng(0)
    margins = rng.normal(size=4000)
    labels = rng.random(4000) < 0.3  # labels drawn independently of the margins
    pts = curve_points(margins, labels)
    assert _ends(pts) == ((0.0, 0.0), (1.0, 1.0))
    gap = max(abs(p["isr"] - p["needless"]) for p in pts)
    assert gap < 0.06
    assert abs(auc(margins, labels) - 0.5) < 0.03


def test_perfect_policy_reaches_the_corner():
    margins = [3.0, 2.5, 2.0, -1.0, -2.0, -0.5, -4.0]
    labels = [True, True, True, False, False, False, False]
    pts = curve_points(margins, labels)
    assert any(p["isr"] == 1.0 and p["needless"] == 0.0 for p in pts)
    assert auc(margins, labels) == 1.0
    ci = bootstrap_auc(margins, labels, n_boot=200)
    assert ci["lo"] == ci["hi"] == 1.0


def test_bias_moves_along_the_curve_not_the_curve():
    margins = np.array([1.0, -0.5, 0.2, -2.0, -1.0, 0.5])
    labels = np.array([True, True, True, False, False, False])
    base = auc(margins, labels)
    assert auc(margins + 3.0, labels) == base  # a constant shift is a threshold change only
    pts = curve_points(margins, labels, biases=[-10, 0, 10])
    assert [(p["isr"], p["needless"]) for p in pts] == [(0.0, 0.0), (2 / 3, 1 / 3), (1.0, 1.0)]


def test_auc_counts_ties_as_half_and_never_reached_forks_as_never_asking():
    assert auc([1.0, 1.0], [True, False]) == 0.5
    margins = [-math.inf, 2.0, -math.inf, -1.0]
    labels = [True, True, False, False]
    # pairs (pos, neg): (-inf,-inf) tie 0.5, (-inf,-1) 0, (2,-inf) 1, (2,-1) 1 -> 2.5 / 4
    assert auc(margins, labels) == 0.625
    pts = curve_points(margins, labels, biases=[1e9])
    assert pts[0]["isr"] == 0.5 and pts[0]["needless"] == 0.5


def test_empty_class_has_no_area():
    assert auc([1.0, 2.0], [True, True]) is None
    assert bootstrap_auc([1.0], [False])["value"] is None
    with pytest.raises(ValueError, match="length"):
        curve_points([1.0, 2.0], [True])


# ------------------------------------------------------------------ the fork in generation
@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    from inquire_lib.training.models import build_tiny_model

    return AutoTokenizer.from_pretrained(build_tiny_model(tmp_path_factory.mktemp("tiny"), "smoke"))


@pytest.mark.parametrize("use_think", [True, False])
def test_fork_tokens_part_an_asking_completion_from_an_acting_one(tokenizer, use_think):
    from inquire_lib.evaluation.fork import find_fork

    fork = find_fork(tokenizer, use_think)
    assert fork.ask_token != fork.act_token
    ask_text = "Inquiry check: needed" if use_think else '"action": "call_user"'
    assert fork.ask_token in tokenizer.encode(ask_text, add_special_tokens=False)


def test_fork_bias_records_the_margin_and_shifts_only_the_fork(tokenizer):
    import torch

    from inquire_lib.evaluation.fork import ForkBias, find_fork

    fork = find_fork(tokenizer, use_think=True)
    prompt = tokenizer.encode("Task: delete it", add_special_tokens=False)
    at_fork = tokenizer.encode("<think>Target: Delete <b0>. Inquiry check:", add_special_tokens=False)
    elsewhere = tokenizer.encode("<think>Target:", add_special_tokens=False)
    pad = [tokenizer.pad_token_id] * (len(at_fork) - len(elsewhere))  # special: decodes to nothing
    ids = torch.tensor([prompt + at_fork, prompt + pad + elsewhere])
    proc = ForkBias(tokenizer, fork, bias=2.5)
    proc(ids[:, : len(prompt)], torch.zeros(2, len(tokenizer)))  # the first call sees the prompt only
    scores = torch.zeros(2, len(tokenizer))
    scores[:, fork.ask_token] = 1.0
    scores[:, fork.act_token] = 3.0
    out = proc(ids, scores.clone())
    assert proc.margins[0] == pytest.approx(-2.0)  # 1.0 against the best other token, 3.0
    assert out[0, fork.ask_token].item() == pytest.approx(3.5)
    assert math.isnan(proc.margins[1]) and out[1, fork.ask_token].item() == 1.0
    again = proc(ids, scores.clone())  # a sequence's fork is read once
    assert proc.margins[0] == pytest.approx(-2.0) and again[0, fork.ask_token].item() == 1.0


@pytest.mark.slow
def test_curve_of_an_untrained_model_never_reaches_the_fork():
    """The untrained smoke model writes no "Inquiry check:": every margin is -inf, so it never asks at
    any bias, the curve is the single point (0, 0) and the area is one half (all ties)."""
    from inquire_lib.data.benchmark import test_records
    from inquire_lib.evaluation.operating_curve import operating_curve
    from inquire_lib.profiles import get_profile
    from inquire_lib.training.models import load_checkpoint

    smoke = get_profile("smoke", eval_max_new_tokens=12)
    records = test_records(smoke)[:10]
    model, processor = load_checkpoint(smoke, None)
    curve = operating_curve(model, processor, records, smoke, verify_biases=(50.0,), n_boot=50)
    assert curve["n"] == 10 and curve["fork_reached"] == 0
    assert curve["margins"] == [None] * 10
    assert {(p["isr"], p["needless"]) for p in curve["points"]} == {(0.0, 0.0)}
    assert curve["auc"]["value"] == 0.5
    assert curve["verified"][0]["predicted_isr"] == 0.0 and curve["agreement"] == 1.0


def test_ask_bias_processor_shifts_the_tool_calls_ask_token_only(tokenizer):
    """Played at another operating point, an agent's tool call gets the bias on `call_user` where the
    action name is decided; the reasoning's "Inquiry check:" word is left alone."""
    import torch

    from inquire_lib.evaluation.fork import ask_bias_processor, find_fork

    fork = find_fork(tokenizer, use_think=False)
    prompt = tokenizer.encode("Task: delete it", add_special_tokens=False)
    at_action = tokenizer.encode(
        '<tool_call>{"name": "mobile_use", "arguments": {"action": "', add_special_tokens=False
    )
    at_think = tokenizer.encode("<think>Target: Delete <b0>. Inquiry check:", add_special_tokens=False)
    width = max(len(at_action), len(at_think))
    pad = lambda ids: [tokenizer.pad_token_id] * (width - len(ids)) + ids  # special: decodes to nothing
    ids = torch.tensor([prompt + pad(at_action), prompt + pad(at_think)])
    proc = ask_bias_processor(tokenizer, -4.0)()
    proc(ids[:, : len(prompt)], torch.zeros(2, len(tokenizer)))
    scores = torch.zeros(2, len(tokenizer))
    scores[:, fork.ask_token] = 5.0
    out = proc(ids, scores.clone())
    assert out[0, fork.ask_token].item() == pytest.approx(1.0) and proc.margins[0] == pytest.approx(5.0)
    assert out[1, fork.ask_token].item() == 5.0 and math.isnan(proc.margins[1])
