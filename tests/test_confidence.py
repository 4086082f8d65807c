"""The confidence-threshold asker: its curve on known scores (no signal: the diagonal; the right
signal: the corner), the threshold chosen on validation, and the greedy pass on the smoke model."""

import math

import numpy as np
import pytest

from inquire_lib.evaluation.confidence import asker_outputs, confidence_curve
from inquire_lib.evaluation.operating_curve import choose_point


def _ends(points):
    return (points[0]["needless"], points[0]["isr"]), (points[-1]["needless"], points[-1]["isr"])


def test_confidence_that_carries_no_signal_traces_the_diagonal():
    rng = np.random.default_rng(1)
    scores = rng.normal(-1.0, 0.5, size=4000)
    labels = rng.random(4000) < 0.3  # drawn apart from the scores
    curve = confidence_curve(scores, labels, n_boot=200)
    assert _ends(curve["points"]) == ((0.0, 0.0), (1.0, 1.0))
    # tolerance: with ~1200 inquiry and ~2800 safe steps the AUC's standard error is about 0.01
    assert abs(curve["auc"]["value"] - 0.5) < 0.03
    assert curve["auc"]["lo"] < 0.5 < curve["auc"]["hi"]
    assert max(abs(p["isr"] - p["needless"]) for p in curve["points"]) < 0.06


def test_confidence_that_is_exactly_right_reaches_the_corner():
    # every inquiry step is less sure than every safe one
    scores = [-3.0, -2.5, -2.2, -0.4, -0.1, -0.3, -0.05]
    labels = [True, True, True, False, False, False, False]
    curve = confidence_curve(scores, labels, n_boot=200)
    assert curve["auc"]["value"] == 1.0 and curve["auc"]["lo"] == curve["auc"]["hi"] == 1.0
    corner = [p for p in curve["points"] if p["isr"] == 1.0 and p["needless"] == 0.0]
    assert corner and all(-2.2 < p["threshold"] <= -0.4 for p in corner)
    # below the least sure score nothing asks; above the surest everything does
    assert _ends(curve["points"]) == ((0.0, 0.0), (1.0, 1.0))
    assert curve["points"][0]["threshold"] <= -3.0 and curve["points"][-1]["threshold"] > -0.05


def test_a_step_that_asks_all_the_same_asks_at_every_threshold():
    curve = confidence_curve([-1.0, -0.2, -0.5], [True, False, False], acted_asks=[False, True, False], n_boot=50)
    assert curve["acted_asks"] == 1
    assert all(p["needless"] >= 0.5 for p in curve["points"])  # the acted ask is always counted
    assert _ends(curve["points"])[0] == (0.5, 0.0)
    # pairs (inquiry -1.0 against safe +inf, -0.5): 0 + 1 -> 0.5
    assert curve["auc"]["value"] == 0.5


def test_the_threshold_is_chosen_like_the_bias():
    points = [
        {"threshold": -9.0, "isr": 0.0, "needless": 0.0},
        {"threshold": -2.0, "isr": 0.5, "needless": 0.05},
        {"threshold": -1.5, "isr": 0.5, "needless": 0.02},
        {"threshold": -1.0, "isr": 0.8, "needless": 0.15},
        {"threshold": 0.0, "isr": 1.0, "needless": 1.0},
    ]
    best = choose_point(points, max_needless=0.1)
    assert best == {"threshold": -1.5, "isr": 0.5, "needless": 0.02, "met": True}  # ties to the lower needless
    assert choose_point(points, max_needless=0.2)["threshold"] == -1.0
    # a curve whose every point breaks the limit: the lowest needless rate, not met
    worst = choose_point([{"bias": 0.0, "isr": 1.0, "needless": 0.5}, {"bias": -3.0, "isr": 0.4, "needless": 0.3}], 0.1)
    assert worst == {"bias": -3.0, "isr": 0.4, "needless": 0.3, "met": False}
    with pytest.raises(ValueError):
        choose_point([], 0.1)


def test_the_asker_asks_below_the_threshold_and_acts_above():
    from inquire_lib.agent.actions import parse_completion
    from inquire_lib.profiles import get_profile

    prof = get_profile("smoke")
    acting = [
        '<think>t</think>\n<tool_call>{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [1, 2]}}</tool_call>'
    ] * 3
    out = asker_outputs(acting, [-2.0, -0.5, -math.inf], threshold=-1.0, profile=prof)
    assert out[1] == acting[1]
    asked = [parse_completion(o, require_think=prof.use_think).action for o in (out[0], out[2])]
    assert [a.type for a in asked] == ["call_user", "call_user"] and asked[0].text == asked[1].text


# ------------------------------------------------------------------ the greedy pass on a model
@pytest.fixture(scope="module")
def smoke_model():
    from inquire_lib.data.benchmark import test_records
    from inquire_lib.profiles import get_profile
    from inquire_lib.training.models import load_checkpoint

    smoke = get_profile("smoke", eval_max_new_tokens=12)
    records = test_records(smoke)[:10]
    model, processor = load_checkpoint(smoke, None)
    return smoke, records, model, processor


def test_the_greedy_pass_scores_every_step_and_its_sweep_runs_corner_to_corner(smoke_model):
    from inquire_lib.evaluation.confidence import confidence_operating_curve, confidence_scores

    smoke, records, model, processor = smoke_model
    scores, raw = confidence_scores(model, processor, records, smoke)
    assert len(scores) == len(raw) == 10 and all(math.isfinite(s) and s <= 0.0 for s in scores)
    curve = confidence_operating_curve(model, processor, records, smoke, n_boot=50)
    assert curve["n"] == 10 and curve["acted_asks"] == 0 and curve["scores"] == pytest.approx(scores)
    assert _ends(curve["points"]) == ((0.0, 0.0), (1.0, 1.0))
    assert curve["auc"]["value"] is not None and 0.0 <= curve["auc"]["lo"] <= curve["auc"]["hi"] <= 1.0
    # the scores come back in the records' order, whatever order the batches ran in
    back, _ = confidence_scores(model, processor, records[::-1], smoke)
    assert back[::-1] == pytest.approx(scores, abs=1e-4)


def test_one_pass_reads_both_families_as_their_own_passes_do(smoke_model):
    from inquire_lib.evaluation.confidence import asking_scores, confidence_scores
    from inquire_lib.evaluation.operating_curve import ask_margins

    smoke, records, model, processor = smoke_model
    scores, margins, raw = asking_scores(model, processor, records, smoke)
    alone, alone_raw = confidence_scores(model, processor, records, smoke)
    assert scores == pytest.approx(alone, abs=1e-5) and raw == alone_raw
    assert margins == ask_margins(model, processor, records, smoke)[0]


def test_in_record_order_puts_batch_rows_back():
    from inquire_lib.evaluation.operating_curve import in_record_order

    # rows generated in the order 2, 0, 1 (batches by prompt length) go back to records 0, 1, 2
    assert in_record_order(["c", "a", "b"], [2, 0, 1]) == ["a", "b", "c"]
    with pytest.raises(RuntimeError, match="2 of 3"):
        in_record_order(["a", "b"], [2, 0, 1])


# ------------------------------------------------------------------ the figure
def test_the_figure_puts_both_families_and_the_corners_on_one_axes():
    from inquire_lib.evaluation.operating_curve import bootstrap_auc, curve_points
    from inquire_lib.viz.plots import asking_compared

    labels = [True, True, False, False, False]
    margins = [2.0, -1.0, 0.5, -2.0, -3.0]
    learned = {
        "points": curve_points(margins, labels),
        "auc": bootstrap_auc(margins, labels, n_boot=100),
        "at_zero": {"isr": 0.5, "needless": 1 / 3},
    }
    confidence = confidence_curve([-3.0, -2.0, -0.5, -0.2, -1.0], labels, n_boot=100)
    fig = asking_compared("sft_weak", learned, confidence)
    names = [t.name for t in fig.data]
    a, c = learned["auc"], confidence["auc"]
    assert (a["value"], c["value"]) == (pytest.approx(5 / 6), 1.0)
    assert names == [
        "input-blind (AUC 0.5)",
        f"learned asking (bias): AUC 0.83 ({a['lo']:.2f}-{a['hi']:.2f})",
        "confidence threshold: AUC 1.00 (1.00-1.00)",
        "learned asking: greedy (bias 0)",
        "never ask",
        "always ask",
    ]
    learned_trace, confidence_trace = fig.data[1], fig.data[2]
    assert (learned_trace.x[0], learned_trace.y[0], learned_trace.x[-1], learned_trace.y[-1]) == (0, 0, 1, 1)
    # the least sure steps are the inquiry ones: ISR climbs to 1 before any safe step asks
    assert list(confidence_trace.x) == pytest.approx([0.0, 0.0, 0.0, 1 / 3, 2 / 3, 1.0, 1.0])
    assert list(confidence_trace.y) == [0.0, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0]
    assert (fig.data[4].x[0], fig.data[4].y[0], fig.data[5].x[0], fig.data[5].y[0]) == (0, 0, 1, 1)
    assert "sft_weak" in fig.layout.title.text


# ------------------------------------------------------------------ the pieces of the greedy pass
@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    from inquire_lib.training.models import build_tiny_model

    return AutoTokenizer.from_pretrained(build_tiny_model(tmp_path_factory.mktemp("tiny"), "smoke"))


def test_the_recorder_reads_each_chosen_token_until_its_sequence_stops():
    import torch

    from inquire_lib.evaluation.confidence import AnswerLogProbs

    stop = 0
    rec = AnswerLogProbs([stop, None])
    prompt = torch.tensor([[5, 6], [5, 6]])
    first = torch.log(torch.tensor([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]]))
    rec(prompt, first.clone())  # the prompt: nothing chosen yet
    second = torch.log(torch.tensor([[0.6, 0.2, 0.2], [0.1, 0.1, 0.8]]))
    rec(torch.cat([prompt, torch.tensor([[2], [1]])], 1), second.clone())
    # row 0 stops (token 0); row 1 writes token 2, then the pad that follows a stop is not read
    rec(torch.cat([prompt, torch.tensor([[2, 0], [1, 2]])], 1), first.clone())
    rec(torch.cat([prompt, torch.tensor([[2, 0, 0], [1, 2, 0]])], 1), first.clone())
    assert rec.tokens == [[2], [1, 2]]
    assert rec.logprobs[0] == pytest.approx([math.log(0.7)])
    assert rec.logprobs[1] == pytest.approx([math.log(0.25), math.log(0.8)])


def test_the_score_is_the_mean_after_the_reasoning(tokenizer):
    from inquire_lib.evaluation.confidence import answer_score

    think = tokenizer.encode("<think>Target: x.</think>", add_special_tokens=False)
    call = tokenizer.encode('\n<tool_call>{"action": "click"}</tool_call>', add_special_tokens=False)
    logprobs = [-5.0] * len(think) + [-0.5] * (len(call) - 1) + [-2.0]
    expected = (-0.5 * (len(call) - 1) - 2.0) / len(call)
    assert answer_score(tokenizer, think + call, logprobs) == pytest.approx(expected)
    # no reasoning closed: every token; nothing read: -inf (asks at any finite threshold)
    assert answer_score(tokenizer, call, [-1.0] * (len(call) - 1) + [-3.0]) == pytest.approx(-1.0 - 2.0 / len(call))
    assert answer_score(tokenizer, [], []) == -math.inf


def test_the_acting_pass_cannot_choose_call_user_at_the_fork(tokenizer):
    import torch

    from inquire_lib.evaluation.confidence import NO_ASK
    from inquire_lib.evaluation.fork import ask_bias_processor, find_fork

    fork = find_fork(tokenizer, use_think=False)
    prompt = tokenizer.encode("Task: delete it", add_special_tokens=False)
    at_action = tokenizer.encode(
        '<tool_call>{"name": "mobile_use", "arguments": {"action": "', add_special_tokens=False
    )
    ids = torch.tensor([prompt + at_action])
    proc = ask_bias_processor(tokenizer, NO_ASK)()
    proc(ids[:, : len(prompt)], torch.zeros(1, len(tokenizer)))
    scores = torch.zeros(1, len(tokenizer))
    scores[0, fork.ask_token], scores[0, fork.act_token] = 9.0, 1.0
    out = proc(ids, scores.clone())
    assert out[0, fork.ask_token].item() == -math.inf and out[0].argmax().item() == fork.act_token


def test_the_asker_plays_online(smoke_model):
    from inquire_lib.data.benchmark import held_out_tasks
    from inquire_lib.evaluation.confidence import confidence_policy
    from inquire_lib.evaluation.episodes import run_episodes

    smoke, _, model, processor = smoke_model
    tasks = held_out_tasks(smoke, 2)
    asks = run_episodes(confidence_policy(model, processor, smoke, threshold=math.inf), tasks, smoke, max_steps=2)
    acts = run_episodes(confidence_policy(model, processor, smoke, threshold=-math.inf), tasks, smoke, max_steps=2)
    turns = lambda eps: [st for e in eps for st in e["steps"]]
    assert turns(asks) and all(st["parsed_action"]["action"] == "call_user" for st in turns(asks))
    assert turns(acts) and not any((st["parsed_action"] or {}).get("action") == "call_user" for st in turns(acts))
