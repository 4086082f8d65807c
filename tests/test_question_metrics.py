"""Question quality in the metrics: asks answered and UIQ at step and task level, from the records alone,
and episodes played with the content user and with the older one."""

from __future__ import annotations

import json

import pytest

from inquire_lib.agent.actions import Action, format_completion
from inquire_lib.agent.prompts import frame_for
from inquire_lib.data.benchmark import generate_tasks, inquiry_need
from inquire_lib.evaluation import episodes as online
from inquire_lib.evaluation import metrics
from inquire_lib.evaluation import steps as evaluate
from inquire_lib.profiles import get_profile

SMOKE = get_profile("smoke")
FRAME = frame_for(SMOKE)


def test_ratio_interval_brackets_the_pooled_ratio_and_is_seeded():
    nums, dens = [1.0] * 30 + [0.0] * 70, [2.0] * 30 + [1.0] * 70
    r = metrics.ratio_interval(nums, dens)
    assert r["value"] == pytest.approx(30 / 130) and r["n"] == 100
    assert r["lo"] < r["value"] < r["hi"] and r["hi"] - r["lo"] < 0.2
    assert r == metrics.ratio_interval(nums, dens)
    assert metrics.ratio_interval([], [])["value"] is None and metrics.ratio_interval([0.0], [0.0])["value"] is None


def episode(**info) -> dict:
    return {"info": info}


def test_question_rates_of_episodes():
    eps = [
        episode(asks=1, answered=1, unanswered=0, repeats=0, asks_needed=1, answered_vague=0),  # the expert
        episode(asks=3, answered=1, unanswered=1, repeats=1, asks_needed=1, answered_vague=0),
        episode(asks=2, answered=0, unanswered=0, repeats=0, asks_needed=0, answered_vague=0),  # needless twice
        {"info": {"needless": 0}},  # played before the counts existed: left out
    ]
    r = metrics.question_rates(eps)
    assert (r["asks_answered"]["k"], r["asks_answered"]["n"]) == (2, 6)
    assert r["uiq"]["value"] == pytest.approx(2 / (2 + 6)) and r["uiq"]["n"] == 3
    assert r["mean_unanswered"] == pytest.approx(1 / 3) and r["mean_repeats"] == pytest.approx(1 / 3)
    assert r["answered_vague_rate"]["k"] == 0
    old = metrics.question_rates([{"info": {"needless": 0}}])
    assert old["asks_answered"]["value"] is None and old["uiq"]["value"] is None and old["mean_repeats"] is None


def pred(required: bool, answered) -> dict:
    return {"inquiry_required": required, "ask_answered": answered}


def test_step_question_rates():
    required = [pred(True, True), pred(True, False), pred(True, None), pred(True, True)]
    needless = [pred(False, False)]
    r = metrics.step_question_rates(required, needless)
    # answered 2; needed 4; made 3 at inquiry steps + 1 needless
    assert (r["asks_answered"]["k"], r["asks_answered"]["n"]) == (2, 4)
    assert r["uiq"]["value"] == pytest.approx(2 / (4 + 4))
    assert metrics.step_question_rates([{"inquiry_required": True}], [])["uiq"]["value"] is None


@pytest.fixture(scope="module")
def inquiry_record():
    """A step record at the inquiry of a real test task (what `score` reads of it)."""
    task = next(t for t in generate_tasks(0, "test", 40) if t.subcategory == "ambiguous_recipient")
    idx, st = next((i, s) for i, s in enumerate(task.steps) if s.inquiry)
    return {
        "id": f"{task.task_id}/{idx}",
        "task_id": task.task_id,
        "step": idx,
        "category": task.category,
        "subcategory": task.subcategory,
        "instruction": task.instruction,
        "history": [],
        "inquiry_required": True,
        "inquiry_reason": st.inquiry.reason,
        "gold_action": json.dumps(st.action.to_arguments()),
        "gold_bbox": [-1, -1, -1, -1],
    }, st.inquiry


def test_inquiry_need_is_rebuilt_from_a_task_or_record_id(inquiry_record):
    rec, inquiry = inquiry_record
    assert inquiry_need(rec["task_id"], inquiry.question) == inquiry.need
    assert inquiry_need(f"mistake/{rec['id']}", inquiry.question) == inquiry.need
    assert inquiry_need(rec["task_id"], "another question") is None and inquiry_need("drill-3", "q") is None


@pytest.mark.parametrize("user, vague_answered", [("content", False), ("any", True)])
def test_score_says_whether_the_user_would_answer(inquiry_record, user, vague_answered):
    rec, inquiry = inquiry_record
    profile = SMOKE.replace(user_answers=user)
    ask = lambda q: format_completion("Inquiry check: needed.", Action("call_user", text=q))
    assert evaluate.score(ask(inquiry.question), rec, profile, FRAME)["ask_answered"] is True
    assert evaluate.score(ask("Can you help?"), rec, profile, FRAME)["ask_answered"] is vague_answered
    click = format_completion("x", Action("click", coordinate=(5, 5)))
    assert evaluate.score(click, rec, profile, FRAME)["ask_answered"] is None


def test_always_ask_is_answered_by_the_older_user_only():
    """Always-ask never acts, so only a task that opens on its inquiry (a vague need) reaches one; its
    question names nothing: the content user answers none, the older user each of those, and says that the
    content user would have refused them."""
    tasks = generate_tasks(0, "test", 44)
    opening = sum(t.steps[0].inquiry is not None for t in tasks)
    assert opening > 0
    rates = {}
    for user in ("content", "any"):
        p = SMOKE.replace(user_answers=user)
        eps = online.run_episodes(online.reference_policy("always_ask", p), tasks, p)
        rates[user] = metrics.task_rates(eps)
    content, old = rates["content"], rates["any"]
    assert content["asks_answered"]["k"] == 0 and content["uiq"]["value"] == 0.0 and content["isr"]["k"] == 0
    assert old["isr"]["k"] == old["asks_answered"]["k"] == old["answered_vague_rate"]["k"] == opening
    assert content["answered_vague_rate"]["k"] == 0
    expert = metrics.task_rates(online.run_episodes(online.reference_policy("expert", SMOKE), tasks, SMOKE))
    assert expert["asks_answered"]["value"] == 1.0 and expert["uiq"]["value"] == 0.5
    assert expert["mean_repeats"] == 0 and expert["mean_unanswered"] == 0
