"""The simulated user answers what a question asks: one check per sub-category (the expert's question
passes, a vague one and one about another slot fail), the environment's replies, and over every inquiry
step of the quick profile's test split the rates the issue asks for."""

from __future__ import annotations

import pytest

from inquire_lib.agent.actions import Action
from inquire_lib.agent.questions import CHECKS, OTHER_SLOT, VAGUE, Need, answerable, names_choices, words
from inquire_lib.agent.taxonomy import subcategories
from inquire_lib.data.benchmark import generate_tasks
from inquire_lib.profiles import get_profile
from inquire_lib.world.env import NEEDLESS_REPLY, PhoneEnv
from inquire_lib.world.expert import expert_act
from inquire_lib.world.user import NOT_ANSWERED, REPEATED


@pytest.fixture(scope="module")
def tasks():
    return generate_tasks(0, "test", 200)


def inquiry_of(tasks, sub: str):
    task = next(t for t in tasks if t.subcategory == sub)
    idx = next(i for i, s in enumerate(task.steps) if s.inquiry)
    return task, idx


def walk_to(env: PhoneEnv, task, idx: int) -> None:
    env.reset(task)
    while env.state.idx < idx:
        env.step(expert_act(env)[1])


def ask(env: PhoneEnv, question: str):
    obs, _, info = env.step(Action("call_user", text=question))
    return obs.user_reply, info


# ---------------------------------------------------------------------------------- the checks
def test_there_is_one_check_and_one_other_slot_question_per_subcategory():
    assert set(CHECKS) == set(subcategories()) == set(OTHER_SLOT) and len(CHECKS) == 22


@pytest.mark.parametrize("sub", subcategories())
def test_the_check_of_each_subcategory(tasks, sub):
    task, idx = inquiry_of(tasks, sub)
    inquiry = task.steps[idx].inquiry
    check = CHECKS[sub]
    assert check(inquiry.question, inquiry.need) is True
    assert check("ok?", inquiry.need) is False
    assert check("Can you help?", inquiry.need) is False
    assert check(OTHER_SLOT[sub](inquiry.need), inquiry.need) is False


def test_words_keep_an_apostrophe_word_whole_and_choices_need_their_own_words():
    assert words("What's next?") == {"whats", "next"}  # not a size "s"
    two = ("Cleo Patel", "Cleo Kim")
    assert names_choices("Cleo Patel or Cleo Kim?", two)
    assert not names_choices("Which Cleo?", two)  # the shared first name tells neither apart
    assert not names_choices("Patel?", two)  # one of two named
    assert names_choices("S or L?", ("S", "L")) and not names_choices("What's the size?", ("S", "L"))


def test_answerable_refuses_an_empty_question_and_a_step_without_a_need_answers_any():
    need = Need(("Mia Kim", "$40"))
    assert answerable("money_transfer", "Send $40 to Mia Kim?", need)
    assert not answerable("money_transfer", "", need) and not answerable("money_transfer", None, need)
    assert answerable("money_transfer", "ok?", None)


def test_a_need_reads_back_from_json_and_refuses_malformed_text():
    need = Need(("Mia Kim", "$40"), ("A", "B"))
    assert Need.from_json(need.to_json()) == need
    for bad in ("", "{", "[1]", '{"about": [1], "candidates": []}', '{"about": []}', None, 3):
        assert Need.from_json(bad) is None


# ------------------------------------------------------------------------------ the environment
def test_a_vague_ask_gets_nothing_and_the_step_stays(tasks):
    env = PhoneEnv()
    task, idx = inquiry_of(tasks, "ambiguous_recipient")
    walk_to(env, task, idx)
    reply, info = ask(env, "ok?")
    assert reply in NOT_ANSWERED and env.state.idx == idx and idx not in env.state.asked
    assert (info["asks"], info["answered"], info["unanswered"], info["repeats"], info["needless"]) == (1, 0, 1, 0, 0)
    assert info["asked_required"] is False
    reply, info = ask(env, task.steps[idx].inquiry.question)
    assert reply == task.steps[idx].inquiry.reply and env.state.idx == idx + 1
    assert (info["asks"], info["answered"], info["asks_needed"]) == (2, 1, 1) and info["asked_required"] is True


def test_asking_again_gets_the_earlier_answer_and_counts_as_a_repeat(tasks):
    env = PhoneEnv()
    task, idx = inquiry_of(tasks, "ambiguous_recipient")
    walk_to(env, task, idx)
    question, answer = task.steps[idx].inquiry.question, task.steps[idx].inquiry.reply
    ask(env, question)
    reply, info = ask(env, question)
    assert answer in reply and reply != answer
    assert any(reply == r.format(reply=answer) for r in REPEATED)
    assert (info["repeats"], info["needless"], info["answered"]) == (1, 1, 1) and env.state.idx == idx + 1
    reply, info = ask(env, "Which app?")  # not asked before: needless, as ever
    assert reply == NEEDLESS_REPLY and (info["repeats"], info["needless"]) == (1, 2)


def test_the_older_user_answers_a_vague_ask_and_calls_a_repeat_needless(tasks):
    env = PhoneEnv(user_answers="any")
    task, idx = inquiry_of(tasks, "ambiguous_recipient")
    walk_to(env, task, idx)
    reply, _ = ask(env, "ok?")
    assert reply == task.steps[idx].inquiry.reply
    reply, info = ask(env, task.steps[idx].inquiry.question)
    assert reply == NEEDLESS_REPLY and (info["repeats"], info["needless"]) == (0, 1)
    with pytest.raises(ValueError, match="user_answers"):
        PhoneEnv(user_answers="some")


def test_non_answers_vary_in_wording_and_repeat_with_the_same_play(tasks):
    def first_refusal(task) -> str:
        env = PhoneEnv()
        walk_to(env, task, next(i for i, s in enumerate(task.steps) if s.inquiry))
        return ask(env, "Can you help?")[0]

    needing = [t for t in tasks if t.inquiry_required][:40]
    replies = [first_refusal(t) for t in needing]
    assert set(replies) <= set(NOT_ANSWERED) and len(set(replies)) >= 4
    assert replies == [first_refusal(t) for t in needing]


# --------------------------------------------------------------------------- must show (test split)
def answered_share(tasks, question_of) -> tuple[int, int]:
    """(answered, asked) over every inquiry step of `tasks`, each asked `question_of(task, step)` in PhoneEnv."""
    env, hits, n = PhoneEnv(), 0, 0
    for task in tasks:
        for idx, step in enumerate(task.steps):
            if step.inquiry is None:
                continue
            for q in question_of(task, step):
                walk_to(env, task, idx)
                reply, _ = ask(env, q)
                hits += env.state.idx == idx + 1 and reply == step.inquiry.reply
                n += 1
    return hits, n


def test_over_the_quick_test_split_the_expert_is_answered_and_vague_or_other_slot_questions_are_not():
    p = get_profile("quick")
    tasks = generate_tasks(p.seed, "test", p.test_split_tasks)
    steps = sum(1 for t in tasks for s in t.steps if s.inquiry)
    rates = {
        "expert": answered_share(tasks, lambda t, s: [s.inquiry.question]),
        "vague": answered_share(tasks, lambda t, s: VAGUE),
        "other_slot": answered_share(tasks, lambda t, s: [OTHER_SLOT[t.subcategory](s.inquiry.need)]),
    }
    print(f"\n{p.name} test split: {len(tasks)} tasks, {steps} inquiry steps")
    for name, (k, n) in rates.items():
        print(f"  {name:<10} answered {k}/{n} = {k / n:.2f}")
    assert steps > 100 and {t.subcategory for t in tasks if t.inquiry_required} == set(subcategories())
    assert rates["expert"] == (steps, steps)
    assert rates["vague"] == (0, steps * len(VAGUE))
    assert rates["other_slot"] == (0, steps)
