"""Tests for inquire_lib.agent.rewards: exact rewards on hand-made and adversarial completions."""

import json
import math
import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inquire_lib.agent.actions import Action, format_completion
from inquire_lib.agent.questions import Need
from inquire_lib.profiles import get_profile
from inquire_lib.agent.rewards import (
    REWARDS,
    action_reward,
    action_reward_components,
    build_reward_funcs,
    completion_text,
    consistency_reward,
    format_reward,
    reasoned_ask_reward,
    make_format_reward,
    make_inquiry_reward,
    token_f1,
)

THINK = "Pay button visible. Inquiry check: not needed, because the amount was given."
DIAG = math.hypot(112, 224)  # default model frame
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def comp(action: Action, think: str | None = THINK) -> str:
    return format_completion(think, action)


def call(args, name="mobile_use") -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


def gold(action: Action) -> str:
    return json.dumps(action.to_arguments())


def click(x, y) -> Action:
    return Action("click", coordinate=(x, y))


def one_action(completion, gold_action: Action, bbox=(-1, -1, -1, -1), **kw) -> float:
    out = action_reward([completion], [gold(gold_action)], [list(bbox)], **kw)
    assert len(out) == 1
    return out[0]


ASK = Action("call_user", text="Which Anna should receive the money?")
BOX = [40, 40, 60, 60]


# ---------------------------------------------------------------- format


@pytest.mark.parametrize(
    "text,expected",
    [
        (comp(click(50, 50)), 1.0),
        ([{"role": "assistant", "content": comp(click(50, 50))}], 1.0),
        ([{"role": "assistant", "content": [{"type": "text", "text": comp(click(50, 50))}]}], 1.0),
        (comp(click(50, 50), think=None), -1.0),  # no think
        ("<think></think>" + call({"action": "wait"}), -1.0),  # empty think
        (comp(click(50, 50)) + call({"action": "wait"}), -1.0),  # two tool calls
        (call({"action": "wait"}) + "<think>x</think>", -1.0),  # tool call before think
        ("<think>x</think>" + call({"action": "click", "coordinate": ["5", "6"]}), -1.0),
        ("<think>x</think>" + call({"action": "click", "coordinate": [5, 6]}, name="computer"), -1.0),
        ("<think>x</think>" + call({"action": "wait"}) + " Hope this helps!", -1.0),
        ("<think>x</think>" + call({"action": "wait", "extra": [1, {"k": None}]}), 1.0),  # extra keys
        ("<think>x</think>" + call({"action": "call_user", "text": ""}), 1.0),  # a valid, empty question
        ("", -1.0),
        (None, -1.0),
        ([], -1.0),
        ([{"role": "assistant"}], -1.0),
    ],
)
def test_format_reward(text, expected):
    assert format_reward([text]) == [expected]


def test_format_reward_no_think_variant():
    no_think = make_format_reward(require_think=False)
    assert no_think.__name__ == "format"
    texts = [
        comp(click(1, 2), think=None),
        comp(click(1, 2)),
        "x" + comp(click(1, 2), think=None),
        call({"action": "wait"}) + call({"action": "wait"}),
    ]
    assert no_think(texts) == [1.0, 1.0, -1.0, -1.0]
    assert make_format_reward(True)(texts) == [-1.0, 1.0, -1.0, -1.0]


# ---------------------------------------------------------------- action


def test_click_inside_bbox_scores_two():
    assert one_action(comp(click(60, 40)), click(50, 50), BOX) == 2.0


def test_click_outside_bbox_is_graded_by_distance():
    expected = 1.0 + 0.5 * (1 - 10 / (0.25 * DIAG))
    assert one_action(comp(click(70, 50)), click(50, 50), BOX) == pytest.approx(expected, abs=1e-12)
    expected = 1.0 + 0.5 * (1 - 5 / (0.25 * DIAG))  # 3-4-5 from the corner (60, 60)
    assert one_action(comp(click(63, 64)), click(50, 50), BOX) == pytest.approx(expected, abs=1e-12)
    assert one_action(comp(click(200, 200)), click(50, 50), BOX) == 1.0


def test_click_without_bbox_uses_the_gold_point():
    assert one_action(comp(click(62, 50)), click(50, 50)) == 2.0  # within 5% of 250.4
    expected = 1.0 + 0.5 * (1 - 30 / (0.25 * DIAG))
    assert one_action(comp(click(80, 50)), click(50, 50)) == pytest.approx(expected, abs=1e-12)
    # the frame columns set the diagonal: 5% of the 360x720 diagonal is 40.2 px
    assert one_action(comp(click(80, 50)), click(50, 50), frame_w=[360], frame_h=[720]) == 2.0
    assert one_action(comp(click(80, 50)), click(50, 50), frame_w=["x"], frame_h=[None]) == (
        pytest.approx(expected, abs=1e-12)
    )


def test_long_press_is_scored_like_click():
    lp = Action("long_press", coordinate=(50, 50), time=2)
    assert one_action(comp(Action("long_press", coordinate=(45, 45))), lp, BOX) == 2.0
    assert one_action(comp(click(45, 45)), lp, BOX) == 0.0


def test_swipe_direction():
    up = Action("swipe", coordinate=(56, 180), coordinate2=(56, 40))
    assert one_action(comp(Action("swipe", coordinate=(10, 100), coordinate2=(12, 20))), up) == 2.0
    assert one_action(comp(Action("swipe", coordinate=(10, 20), coordinate2=(12, 100))), up) == 1.0


@pytest.mark.parametrize("kind", ["type", "open", "key"])
def test_text_actions(kind):
    g = Action(kind, text="buy oat milk")
    assert one_action(comp(Action(kind, text="  Buy   OAT milk ")), g) == 2.0
    assert one_action(comp(Action(kind, text="buy milk")), g) == pytest.approx(1.8, abs=1e-12)
    assert one_action(comp(Action(kind, text="")), g) == 1.0


def test_token_f1_splits_cjk_characters():
    assert token_f1("给第二个笔记", "给第二个笔记点赞") == pytest.approx(6 / 7, abs=1e-12)
    assert token_f1("Hello, world!", "hello world") == 1.0
    assert token_f1("", "x") == 0.0


def test_buttons_status_wait():
    back = Action("system_button", button="Back")
    assert one_action(comp(Action("system_button", button="Back")), back) == 2.0
    assert one_action(comp(Action("system_button", button="Home")), back) == 1.0
    ok = Action("terminate", status="success")
    assert one_action(comp(Action("terminate", status="failure")), ok) == 1.0
    assert one_action(comp(Action("wait", time=5)), Action("wait", time=1)) == 2.0


def test_call_user_question_overlap():
    pred = Action("call_user", text="Which Anna do you mean?")
    assert one_action(comp(pred), ASK) == pytest.approx(1 + 4 / 11, abs=1e-12)
    assert one_action(comp(ASK), ASK) == 2.0
    assert one_action(comp(Action("call_user", text="")), ASK) == 1.0  # empty content: type only
    assert one_action(comp(Action("call_user", text=" ?! ")), ASK) == 1.0  # no words
    assert one_action(comp(Action("call_user", text="ok?")), Action("call_user", text="")) == 2.0


def test_wrong_type_and_unparseable_score_zero():
    assert one_action(comp(ASK), click(50, 50), BOX) == 0.0
    assert one_action("I would click the button.", click(50, 50), BOX) == 0.0


@pytest.mark.parametrize(
    "text,expected",
    [
        (comp(click(50, 50)) + call({"action": "click", "coordinate": [50, 50]}), 0.0),  # two calls
        (call({"action": "click", "coordinate": [50, 50]}) + "<think>x</think>", 2.0),  # late think
        ("<think>x</think>" + call({"action": "click", "coordinate": ["50", "50"]}), 0.0),
        (
            "<think>x</think><tool_call>" + '{"name": "mobile_use", "arguments": {"action": "click", '
            '"coordinate": [NaN, 50]}}</tool_call>',
            0.0,
        ),
        (
            "<think>x</think><tool_call>" + '{"name": "mobile_use", "arguments": {"action": "click", '
            '"coordinate": [1e308, 50]}}</tool_call>',
            0.0,
        ),
        ("<think>x</think>" + call({"action": "click", "coordinate": [10**30, 50]}), 0.0),
        (
            "<think>x</think>"
            + call({"action": "click", "coordinate": [50, 50], "bbox": [0, 0, 1, 1], "status": "success"}),
            2.0,
        ),  # extra keys are ignored
    ],
)
def test_action_reward_adversarial(text, expected):
    assert one_action(text, click(50, 50), BOX) == expected


def test_bad_gold_scores_zero():
    good = comp(click(50, 50))
    assert action_reward([good] * 5, ["not json", '{"action": "tap"}', None, 7, "NaN"], [BOX] * 5) == [0.0] * 5
    # a whole tool call as gold, and a missing / broken bbox
    whole = json.dumps({"name": "mobile_use", "arguments": click(50, 50).to_arguments()})
    assert action_reward(
        [good, good, good], [whole, gold(click(50, 50)), gold(click(50, 50))], [BOX, None, ["a", 1, 2, 3]]
    ) == [2.0, 2.0, 2.0]


def test_action_reward_components_and_logging():
    texts = [comp(click(50, 50)), comp(click(200, 200)), comp(ASK), "garbage"]
    golds = [gold(click(50, 50))] * 4
    assert action_reward_components(texts[1], golds[1], BOX) == {"type": 1.0, "argument": 0.0}
    assert action_reward_components(texts[3], golds[3], BOX) == {"type": 0.0, "argument": 0.0}
    logged = []
    out = action_reward(texts, golds, [BOX] * 4, log_metric=lambda n, v: logged.append((n, v)))
    assert out == [2.0, 1.0, 0.0, 0.0]
    assert logged == [("rewards/action/type", 0.5), ("rewards/action/argument", 0.25)]


def test_action_reward_survives_a_broken_logger():
    def boom(name, value):
        raise RuntimeError("logger down")

    assert action_reward([comp(click(50, 50))], [gold(click(50, 50))], [BOX], log_metric=boom) == [2.0]
    assert action_reward([comp(click(50, 50))], [gold(click(50, 50))], [BOX], log_metric="no") == [2.0]


def test_ten_megabytes():
    head = comp(click(50, 50))
    big = head + "x" * 10_000_000
    assert format_reward([big]) == [-1.0]
    assert one_action(big, click(50, 50), BOX) == 2.0  # the head holds a valid action
    assert make_inquiry_reward()([big], inquiry_required=[True]) == [-0.5]
    junk = "<tool_call>" * 1_000_000
    assert format_reward([junk]) == [-1.0]
    assert one_action(junk, click(50, 50), BOX) == 0.0


# ---------------------------------------------------------------- inquiry


def test_inquiry_reward_defaults():
    f = make_inquiry_reward()
    assert f.__name__ == "inquiry"
    texts = [
        comp(click(1, 1)),
        comp(ASK),
        comp(click(1, 1)),
        comp(ASK),
        "garbage",
        "garbage",
        comp(Action("call_user", text="")),
    ]
    required = [True, True, False, False, True, False, True]
    assert f(texts, inquiry_required=required) == [-0.5, 0.0, 0.0, -0.5, -0.5, 0.0, 0.0]


def test_inquiry_reward_penalties_and_papers_setting():
    texts = [comp(click(1, 1)), comp(ASK), comp(click(1, 1)), comp(ASK)]
    required = [True, True, False, False]
    assert make_inquiry_reward(1.0, 0.25)(texts, inquiry_required=required) == [-1.0, 0.0, 0.0, -0.25]
    assert make_inquiry_reward(0, 0)(texts, inquiry_required=required) == [0.0] * 4
    with pytest.raises(ValueError):
        make_inquiry_reward(-1.0, 0.5)
    with pytest.raises(ValueError):
        make_inquiry_reward(0.5, float("nan"))


def test_inquiry_reward_odd_labels_score_zero():
    f = make_inquiry_reward()
    texts = [comp(click(1, 1))] * 5
    assert f(texts, inquiry_required=[None, "maybe", 2, "true", 1]) == [0.0, 0.0, 0.0, -0.5, -0.5]
    assert f(texts) == [0.0] * 5
    assert f(texts, inquiry_required=[True]) == [-0.5, 0.0, 0.0, 0.0, 0.0]


def test_inquiry_reward_logs_rates():
    logged = []
    make_inquiry_reward()(
        [comp(click(1, 1)), comp(ASK), comp(ASK), comp(ASK)],
        inquiry_required=[True, False, True, True],
        log_metric=lambda n, v: logged.append((n, v)),
    )
    assert logged == [
        ("rewards/inquiry/missed", 0.25),
        ("rewards/inquiry/needless", 0.25),
        ("rewards/inquiry/asked_when_required", 2 / 3),
    ]
    logged.clear()  # no inquiry-required row: no ask rate to log
    make_inquiry_reward()([comp(ASK)], inquiry_required=[False], log_metric=lambda n, v: logged.append((n, v)))
    assert [n for n, _ in logged] == ["rewards/inquiry/missed", "rewards/inquiry/needless"]


def test_inquiry_reward_pays_an_answerable_question_more_than_a_vague_one_and_a_vague_one_as_acting():
    need = Need(("Anna",), ("Anna Lee", "Anna Roy")).to_json()
    texts = [comp(ASK), comp(Action("call_user", text="ok?")), comp(click(1, 1)), comp(ASK)]
    cols = dict(
        inquiry_required=[True, True, True, False],
        subcategory=["ambiguous_recipient"] * 4,
        inquiry_need=[need, need, need, ""],
    )
    answerable, vague, acting, needless = make_inquiry_reward(0.5, 0.25, judge_questions=True)(texts, **cols)
    assert (answerable, vague, acting, needless) == (0.0, -0.5, -0.5, -0.25)
    assert answerable > vague and vague <= acting
    # the older user's reward: any ask where one is due pays as asking
    assert make_inquiry_reward(0.5, 0.25)(texts, **cols) == [0.0, 0.0, -0.5, -0.25]
    # a row without a readable Need judges no question
    odd = dict(cols, inquiry_need=["", "{bad", None, ""])
    assert make_inquiry_reward(0.5, 0.25, judge_questions=True)(texts, **odd) == [0.0, 0.0, -0.5, -0.25]


def test_the_profile_says_whether_the_inquiry_reward_judges_questions():
    need = Need(("Anna",), ("Anna Lee", "Anna Roy")).to_json()
    cols = dict(inquiry_required=[True], subcategory=["ambiguous_recipient"], inquiry_need=[need])
    vague = [comp(Action("call_user", text="Can you help?"))]
    (content,) = build_reward_funcs(["inquiry"], get_profile("cpu"))
    (older,) = build_reward_funcs(["inquiry"], get_profile("cpu", user_answers="any"))
    assert content.params["judge_questions"] is True and older.params["judge_questions"] is False
    logged = []
    assert content(vague, **cols, log_metric=lambda n, v: logged.append((n, v))) == [-2.0]  # cpu: missed_penalty 2
    assert older(vague, **cols) == [0.0]
    assert ("rewards/inquiry/vague_when_required", 1.0) in logged


# ---------------------------------------------------------------- consistency

NEEDED = "Two contacts named Anna. Inquiry check: needed, because the recipient is ambiguous."


def test_consistency_reward_penalises_an_action_that_contradicts_the_reasoning():
    logged = []
    texts = [
        comp(ASK, NEEDED),
        comp(click(1, 1), THINK),  # consistent: 0
        comp(ASK, THINK),
        comp(click(1, 1), NEEDED),  # contradicting: -1
        comp(ASK, "Asking."),
        comp(ASK, think=None),  # no check: 0
        "<think>" + NEEDED + "</think>" + call({"action": "teleport"}),
        None,
    ]  # no action: 0
    assert consistency_reward(texts, log_metric=lambda n, v: logged.append((n, v))) == [
        0.0,
        0.0,
        -1.0,
        -1.0,
        0.0,
        0.0,
        0.0,
        0.0,
    ]
    assert logged == [("rewards/consistency/contradicted", 2 / 8)]
    # the label does not matter: the reward judges the completion against its own reasoning
    assert consistency_reward([comp(ASK, THINK)], inquiry_required=[True]) == [-1.0]


def test_reasoned_ask_reward_penalises_only_an_ask_the_reasoning_argued_against():
    logged = []
    texts = [
        comp(ASK, NEEDED),
        comp(click(1, 1), THINK),  # consistent: 0
        comp(ASK, THINK),  # asks after "not needed": -1
        comp(click(1, 1), NEEDED),  # acts after "needed": 0 (the inquiry reward judges it)
        comp(ASK, "Asking."),
        comp(ASK, think=None),  # no check: 0
        "<think>" + THINK + "</think>" + call({"action": "teleport"}),
        None,
    ]  # no action: 0
    assert reasoned_ask_reward(texts, log_metric=lambda n, v: logged.append((n, v))) == [
        0.0,
        0.0,
        -1.0,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
    ]
    assert logged == [("rewards/reasoned_ask/unreasoned", 1 / 8)]
    assert build_reward_funcs(["reasoned_ask"])[0].__name__ == "reasoned_ask"


# ---------------------------------------------------------------- adversarial, all rewards


def test_code_in_any_field_is_never_run(tmp_path):
    target = tmp_path / "pwned"
    payload = f"__import__('os').system('touch {target}')"
    texts = [
        f"<think>{payload}</think>" + call({"action": "call_user", "text": payload}),
        "<think>x</think>" + call({"action": payload, "coordinate": [1, 2]}),
        "<think>x</think>" + call({"action": "click", "coordinate": [payload, 2]}),
        "<think>x</think>" + call({"action": "click", "coordinate": [1, 2]}, name=payload),
        f"<think>x</think><tool_call>{payload}</tool_call>",
        "<think>x</think>" + call({"action": "type", "text": payload}),
    ]
    n = len(texts)
    golds = [json.dumps({"action": "call_user", "text": payload})] * n
    fmt = format_reward(texts)
    act = action_reward(texts, golds, [[-1] * 4] * n)
    inq = make_inquiry_reward()(texts, inquiry_required=[True] * n)
    act_bad_gold = action_reward(texts, [payload] * n, [[payload] * 4] * n)
    assert not target.exists()
    assert fmt == [1.0, -1.0, -1.0, -1.0, -1.0, 1.0]
    assert act == [2.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert inq == [0.0, -0.5, -0.5, -0.5, -0.5, -0.5]
    assert act_bad_gold == [0.0] * n


ODD = st.one_of(
    st.text(),
    st.none(),
    st.integers(),
    st.floats(),
    st.binary(max_size=8),
    st.lists(
        st.dictionaries(
            st.sampled_from(["role", "content", "text"]),
            st.one_of(
                st.text(max_size=30),
                st.none(),
                st.integers(),
                st.lists(st.dictionaries(st.just("text"), st.text(max_size=30)), max_size=2),
            ),
            max_size=3,
        ),
        max_size=3,
    ),
)


@FUZZ
@given(
    st.lists(ODD, max_size=4),
    st.lists(st.one_of(st.text(max_size=40), st.none(), st.integers()), max_size=4),
    st.lists(st.one_of(st.none(), st.lists(st.one_of(st.integers(), st.floats()), max_size=5)), max_size=4),
    st.lists(st.one_of(st.booleans(), st.none(), st.text(max_size=5)), max_size=4),
)
def test_fuzz_rewards_never_raise(completions, golds, bboxes, required):
    n = len(completions)
    fmt = format_reward(completions)
    act = action_reward(completions, gold_action=golds, gold_bbox=bboxes)
    inq = make_inquiry_reward()(completions, inquiry_required=required)
    assert len(fmt) == len(act) == len(inq) == n
    assert all(v in (-1.0, 1.0) for v in fmt)
    assert all(0.0 <= v <= 2.0 for v in act)
    assert all(v in (0.0, -0.5) for v in inq)


def test_non_list_inputs():
    assert format_reward(None) == []
    assert action_reward(None, None, None) == []
    assert format_reward(comp(click(1, 1))) == [1.0]  # a bare str is one completion
    assert make_inquiry_reward()(iter([comp(ASK)]), inquiry_required=(False,)) == [-0.5]


def test_completion_text():
    assert completion_text("abc") == "abc"
    assert (
        completion_text(
            [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}, {"role": "tool", "content": "t"}]
        )
        == "a"
    )
    assert (
        completion_text(
            [{"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "image"}, {"text": "b"}]}]
        )
        == "ab"
    )
    assert completion_text({"role": "assistant", "content": "x"}) == "x"
    assert completion_text([{"content": 5}]) == ""


# ---------------------------------------------------------------- registry and TRL call


def test_registry_and_build_from_profile():
    assert sorted(REWARDS) == ["action", "consistency", "format", "inquiry", "reasoned_ask"]
    funcs = build_reward_funcs(["format", "action", "inquiry"], get_profile("cpu"))
    assert [f.__name__ for f in funcs] == ["format", "action", "inquiry"]
    no_think = get_profile("cpu", use_think=False, missed_penalty=1.0, needless_penalty=0.0)
    fmt, inq = build_reward_funcs(["format", "inquiry"], no_think)
    assert fmt([comp(click(1, 1), think=None)]) == [1.0]
    assert inq([comp(click(1, 1)), comp(ASK)], inquiry_required=[True, False]) == [-1.0, 0.0]
    assert [f.__name__ for f in build_reward_funcs(profile="smoke")] == ["format", "action", "inquiry"]
    assert build_reward_funcs(["consistency"], get_profile("cpu"))[0]([comp(click(1, 1), NEEDED)]) == [-1.0]
    with pytest.raises(KeyError, match="unknown reward 'task'"):
        build_reward_funcs(["task"], get_profile("cpu"))


def test_reward_funcs_pickle():
    for f in build_reward_funcs(profile=get_profile("cpu", missed_penalty=0.7)):
        g = pickle.loads(pickle.dumps(f))
        assert g.__name__ == f.__name__
    g = pickle.loads(pickle.dumps(build_reward_funcs(["inquiry"], get_profile("cpu", missed_penalty=0.7))[0]))
    assert g([comp(click(1, 1))], inquiry_required=[True]) == [-0.7]


def test_called_the_way_trl_calls_them():
    """GRPOTrainer passes prompts, completions, completion_ids, every dataset column as a list,
    trainer_state, log_extra and log_metric (trl/trainer/grpo_trainer.py, _calculate_rewards)."""
    logged = {}
    completions = [
        [{"role": "assistant", "content": comp(click(50, 50))}],
        [{"role": "assistant", "content": comp(ASK)}],
    ]
    kwargs = dict(
        prompts=[[{"role": "user", "content": "p"}]] * 2,
        completions=completions,
        completion_ids=[[1, 2], [3]],
        gold_action=[gold(click(50, 50)), gold(ASK)],
        gold_bbox=[BOX, [-1] * 4],
        inquiry_required=[False, True],
        category=["safe", "intent"],
        subcategory=["safe", "ambiguous_recipient"],
        images=[[None], [None]],
        trainer_state=object(),
        log_extra=lambda column, values: None,
        log_metric=lambda n, v: logged.setdefault(n, v),
    )
    funcs = build_reward_funcs(["format", "action", "inquiry"], get_profile("cpu"))
    assert [f(**kwargs) for f in funcs] == [[1.0, 1.0], [2.0, 2.0], [0.0, 0.0]]
    assert logged == {
        "rewards/action/type": 1.0,
        "rewards/action/argument": 1.0,
        "rewards/inquiry/missed": 0.0,
        "rewards/inquiry/needless": 0.0,
        "rewards/inquiry/asked_when_required": 1.0,
    }
