"""Tests for inquire_lib.agent.actions: action space, parser, formatting, frames, action_match."""

import inspect
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inquire_lib.agent.actions import (
    ACTION_TYPES,
    MAX_CHARS,
    Action,
    ActionError,
    Frame,
    Parsed,
    action_match,
    format_action,
    format_completion,
    inquiry_check,
    parse_completion,
)

THINK = "Send button visible. Inquiry check: not needed, because the user named the recipient."
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def call(args, name="mobile_use") -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


def full(args, think=THINK) -> str:
    return f"<think>{think}</think>\n" + call(args)


EXAMPLES = [
    Action("click", coordinate=(56, 90)),
    Action("long_press", coordinate=(10, 20), time=2.0),
    Action("long_press", coordinate=(10, 20)),
    Action("swipe", coordinate=(50, 200), coordinate2=(50, 40)),
    Action("type", text="hello world"),
    Action("key", text="volume_up"),
    Action("open", text="Wallet"),
    Action("system_button", button="Back"),
    Action("wait", time=1.5),
    Action("wait"),
    Action("terminate", status="success"),
    Action("call_user", text="Which Anna do you mean?"),
]


# ---------------------------------------------------------------- Action


def test_action_types_are_the_ten_of_the_action_space():
    assert ACTION_TYPES == (
        "click",
        "long_press",
        "swipe",
        "type",
        "key",
        "open",
        "system_button",
        "wait",
        "terminate",
        "call_user",
    )


@pytest.mark.parametrize("action", EXAMPLES, ids=lambda a: a.type)
def test_arguments_round_trip(action):
    args = action.to_arguments()
    assert args["action"] == action.type
    assert Action.from_arguments(json.loads(json.dumps(args))) == action


def test_to_arguments_holds_only_set_fields():
    assert Action("click", coordinate=(1, 2)).to_arguments() == {"action": "click", "coordinate": [1, 2]}
    assert Action("wait", time=2.0).to_arguments() == {"action": "wait", "time": 2}
    assert Action("wait", time=0.5).to_arguments() == {"action": "wait", "time": 0.5}
    assert Action("swipe", coordinate=(1, 2), coordinate2=(3, 4)).to_arguments() == {
        "action": "swipe",
        "coordinate": [1, 2],
        "coordinate2": [3, 4],
    }


def test_from_arguments_normalises_and_rounds():
    assert Action.from_arguments({"action": "click", "coordinate": [10.4, 20.6]}).coordinate == (10, 21)
    assert Action.from_arguments({"action": "system_button", "button": " home "}).button == "Home"
    assert Action.from_arguments({"action": "terminate", "status": "FAILURE"}).status == "failure"
    # keys the type does not use are ignored
    a = Action.from_arguments({"action": "click", "coordinate": [1, 2], "text": "x", "foo": {"bar": 1}})
    assert a == Action("click", coordinate=(1, 2))


@pytest.mark.parametrize(
    "args,reason",
    [
        ({"coordinate": [1, 2]}, "missing_action"),
        ({"action": "tap", "coordinate": [1, 2]}, "unknown_action"),
        ({"action": ["click"], "coordinate": [1, 2]}, "unknown_action"),
        ({"action": "click"}, "bad_argument:coordinate"),
        ({"action": "click", "coordinate": ["56", "90"]}, "bad_argument:coordinate"),
        ({"action": "click", "coordinate": "[56, 90]"}, "bad_argument:coordinate"),
        ({"action": "click", "coordinate": [1, 2, 3]}, "bad_argument:coordinate"),
        ({"action": "click", "coordinate": [True, 2]}, "bad_argument:coordinate"),
        ({"action": "click", "coordinate": [-1, 2]}, "bad_argument:coordinate"),
        ({"action": "click", "coordinate": [10001, 2]}, "bad_argument:coordinate"),
        ({"action": "click", "coordinate": [float("nan"), 2]}, "bad_argument:coordinate"),
        ({"action": "click", "coordinate": [float("inf"), 2]}, "bad_argument:coordinate"),
        ({"action": "click", "coordinate": [10**400, 2]}, "bad_argument:coordinate"),
        ({"action": "click", "coordinate": [None, 2]}, "bad_argument:coordinate"),
        ({"action": "swipe", "coordinate": [1, 2]}, "bad_argument:coordinate2"),
        ({"action": "type"}, "bad_argument:text"),
        ({"action": "call_user", "content": "Which one?"}, "bad_argument:text"),
        ({"action": "open", "text": 5}, "bad_argument:text"),
        ({"action": "system_button", "button": "Power"}, "bad_argument:button"),
        ({"action": "system_button"}, "bad_argument:button"),
        ({"action": "terminate", "status": "done"}, "bad_argument:status"),
        ({"action": "wait", "time": "2"}, "bad_argument:time"),
        ({"action": "wait", "time": -1}, "bad_argument:time"),
        ({"action": "long_press", "coordinate": [1, 2], "time": float("nan")}, "bad_argument:time"),
    ],
)
def test_from_arguments_rejects(args, reason):
    with pytest.raises(ActionError) as exc:
        Action.from_arguments(args)
    assert exc.value.reason == reason


def test_from_arguments_rejects_non_dict():
    for bad in (None, [], "click", 3):
        with pytest.raises(ActionError) as exc:
            Action.from_arguments(bad)
        assert exc.value.reason == "bad_arguments"


# ---------------------------------------------------------------- formatting


def test_format_action_exact_string():
    assert format_action(Action("click", coordinate=(56, 90))) == (
        '<tool_call>{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [56, 90]}}</tool_call>'
    )


def test_format_completion_with_and_without_think():
    a = Action("call_user", text="Pay 30 € to Anna?")
    with_think = format_completion("why", a)
    assert with_think == "<think>why</think>\n" + format_action(a)
    assert "€" in with_think  # not escaped
    assert format_completion(None, a) == format_action(a)


@pytest.mark.parametrize("action", EXAMPLES, ids=lambda a: a.type)
def test_format_then_parse_round_trip(action):
    p = parse_completion(format_completion(THINK, action))
    assert p == Parsed(action, THINK, True, None)
    p2 = parse_completion(format_completion(None, action), require_think=False)
    assert p2 == Parsed(action, None, True, None)


# ---------------------------------------------------------------- parser

CLICK = {"action": "click", "coordinate": [56, 90]}
CLICK_ACTION = Action("click", coordinate=(56, 90))


@pytest.mark.parametrize(
    "text,error",
    [
        ("", "no_tool_call"),
        (f"<think>{THINK}</think>", "no_tool_call"),
        (f"<think>{THINK}</think><tool_call>" + json.dumps({"name": "mobile_use", "arguments": CLICK}), "no_tool_call"),
        (full(CLICK) + call(CLICK), "multiple_tool_calls"),
        (f"<think>{THINK}</think><tool_call>{{'name': 'mobile_use'}}</tool_call>", "bad_json"),
        (
            "<think>x</think><tool_call>" + '{"name": "mobile_use", "arguments": {"action": "click", '
            '"coordinate": [NaN, 1]}}</tool_call>',
            "bad_json",
        ),
        (
            "<think>x</think><tool_call>" + '{"name": "mobile_use", "arguments": {"action": "wait", '
            '"time": Infinity}}</tool_call>',
            "bad_json",
        ),
        (
            "<think>x</think><tool_call>" + '{"name": "mobile_use", "arguments": {"action": "click", '
            '"coordinate": [' + "9" * 5000 + ", 1]}}</tool_call>",
            "bad_json",
        ),
        ("<think>x</think><tool_call>" + "[" * 20_000 + "]" * 20_000 + "</tool_call>", "bad_json"),
        ("<think>x</think><tool_call>[1, 2]</tool_call>", "not_object"),
        ("<think>x</think>" + call(CLICK, name="computer_use"), "unknown_tool"),
        (
            "<think>x</think><tool_call>" + '{"name": "mobile_use", "arguments": "{\\"action\\": '
            '\\"click\\"}"}</tool_call>',
            "bad_arguments",
        ),
        (full({"coordinate": [1, 2]}), "missing_action"),
        (full({"action": "rm -rf", "coordinate": [1, 2]}), "unknown_action"),
        (full({"action": "click", "coordinate": ["56", "90"]}), "bad_argument:coordinate"),
        (
            "<think>x</think><tool_call>" + '{"name": "mobile_use", "arguments": {"action": "click", '
            '"coordinate": [1e400, 1]}}</tool_call>',
            "bad_argument:coordinate",
        ),
    ],
)
def test_parse_failures_have_no_action(text, error):
    p = parse_completion(text)
    assert (p.action, p.format_ok, p.error) == (None, False, error)


@pytest.mark.parametrize(
    "text,error",
    [
        (call(CLICK), "missing_think"),
        ("<think>a</think><think>b</think>" + call(CLICK), "multiple_think"),
        ("<think>  \n </think>" + call(CLICK), "empty_think"),
        (call(CLICK) + "<think>late</think>", "bad_order"),
        ("<think>a<think>b</think>" + call(CLICK), "unbalanced_tags"),
        ("<think>a</think></think>" + call(CLICK), "unbalanced_tags"),
        ("Sure! " + full(CLICK), "text_outside_tags"),
        (full(CLICK) + " done", "text_outside_tags"),
        ("<think>a</think> so: " + call(CLICK), "text_outside_tags"),
    ],
)
def test_parse_format_failures_keep_the_action(text, error):
    p = parse_completion(text)
    assert (p.action, p.format_ok, p.error) == (CLICK_ACTION, False, error)


def test_parse_tolerates_whitespace_and_inner_newlines():
    text = (
        "\n <think>\nplan\n</think>\n\n<tool_call>\n"
        + json.dumps({"name": "mobile_use", "arguments": CLICK})
        + "\n</tool_call>\n"
    )
    assert parse_completion(text) == Parsed(CLICK_ACTION, "plan", True, None)


def test_require_think_false_makes_think_optional():
    assert parse_completion(call(CLICK), require_think=False) == Parsed(CLICK_ACTION, None, True, None)
    assert parse_completion(full(CLICK), require_think=False).format_ok is True
    assert parse_completion(call(CLICK) + "<think>x</think>", require_think=False).error == "bad_order"


def test_extra_keys_are_ignored():
    text = (
        "<think>x</think><tool_call>"
        + json.dumps({"name": "mobile_use", "id": 7, "arguments": {**CLICK, "confidence": 0.9, "text": "?"}})
        + "</tool_call>"
    )
    assert parse_completion(text) == Parsed(CLICK_ACTION, "x", True, None)


def test_non_text_input_is_a_typed_failure():
    for bad in (None, 5, b"<tool_call>", ["<think>"]):
        assert parse_completion(bad) == Parsed(None, None, False, "not_text")


def test_over_long_text_is_judged_on_its_head_only():
    head = full(CLICK)
    p = parse_completion(head + " " * (MAX_CHARS - len(head)))
    assert (p.action, p.format_ok, p.error) == (CLICK_ACTION, True, None)
    p = parse_completion(head + " " * (MAX_CHARS - len(head) + 1))
    assert (p.action, p.format_ok, p.error) == (CLICK_ACTION, False, "too_long")
    # a tool call past the cap is not seen
    p = parse_completion("<think>x</think>" + "y" * MAX_CHARS + call(CLICK))
    assert (p.action, p.error) == (None, "no_tool_call")


def test_ten_megabytes_of_tags():
    p = parse_completion("<tool_call>" * 1_000_000)
    assert (p.action, p.format_ok, p.error) == (None, False, "no_tool_call")
    p = parse_completion(full(CLICK) + "<think>" * 1_400_000)
    assert (p.action, p.format_ok, p.error) == (CLICK_ACTION, False, "too_long")


def test_code_in_any_field_is_never_run(tmp_path):
    target = tmp_path / "pwned"
    payload = f"__import__('os').system('touch {target}')"
    texts = [
        f"<think>{payload}</think>" + call({"action": "type", "text": payload}),
        "<think>x</think>" + call({"action": payload, "coordinate": [1, 2]}),
        "<think>x</think>" + call({"action": "click", "coordinate": [payload, payload]}),
        "<think>x</think>" + call(CLICK, name=payload),
        f"<think>x</think><tool_call>{payload}</tool_call>",
        f'<think>x</think><tool_call>{{"name": "mobile_use", "arguments": {payload}}}</tool_call>',
        payload,
    ]
    results = [parse_completion(t) for t in texts]
    assert not target.exists()
    assert results[0] == Parsed(Action("type", text=payload), payload, True, None)
    assert [r.error for r in results[1:]] == [
        "unknown_action",
        "bad_argument:coordinate",
        "unknown_tool",
        "bad_json",
        "bad_json",
        "no_tool_call",
    ]


def _check_invariants(p: Parsed):
    assert isinstance(p, Parsed)
    if p.format_ok:
        assert p.action is not None and p.error is None
    else:
        assert isinstance(p.error, str) and p.error
    if p.action is None:
        assert p.format_ok is False and not p.error.startswith("internal")
    else:
        assert p.action.type in ACTION_TYPES


@FUZZ
@given(st.text())
def test_fuzz_any_text_never_raises(text):
    for require_think in (True, False):
        _check_invariants(parse_completion(text, require_think=require_think))


FRAGMENTS = [
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_call",
    "think>",
    " ",
    "\n",
    "x",
    "Inquiry check: needed",
    '{"name": "mobile_use", "arguments": ',
    '{"name": "mobile_use"}',
    '{"action": "click", "coordinate": [56, 90]}',
    '{"action": "click", "coordinate": ["1", 2]}',
    '{"action": "call_user", "text": ""}',
    '{"action": "swipe", "coordinate": [1, 2]}',
    '{"action": "wait", "time": NaN}',
    '{"action": "type", "text": "\\ud800"}',
    "}",
    "}}",
    "{",
    "[",
    "]",
    '"',
    "\\",
    "NaN",
    "-Infinity",
    "1e999",
    "null",
    "true",
    ",",
    ":",
    "\u0000",
    "\ud800",
]


@FUZZ
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=14).map("".join))
def test_fuzz_near_miss_strings_never_raise(text):
    for require_think in (True, False):
        _check_invariants(parse_completion(text, require_think=require_think))


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


@FUZZ
@given(
    st.sampled_from(list(ACTION_TYPES) + ["", "tap"]),
    st.dictionaries(
        st.sampled_from(["coordinate", "coordinate2", "text", "time", "button", "status", "extra"]),
        JSON_VALUES,
        max_size=5,
    ),
)
def test_fuzz_from_arguments_raises_only_action_error(kind, args):
    try:
        a = Action.from_arguments({"action": kind, **args})
    except ActionError as exc:
        assert exc.reason
    else:
        assert a.type == kind
        assert Action.from_arguments(a.to_arguments()) == a


# ---------------------------------------------------------------- inquiry_check


@pytest.mark.parametrize(
    "think,expected",
    [
        ("... Inquiry check: needed, because two Annas.", True),
        ("... inquiry check:not needed, because safe.", False),
        ("INQUIRY CHECK:  Not  Needed", False),
        ("Inquiry check: needed? no. Inquiry check: not needed, because safe.", False),
        ("no check here", None),
        ("", None),
        (None, None),
        (42, None),
    ],
)
def test_inquiry_check(think, expected):
    assert inquiry_check(think) is expected


# ---------------------------------------------------------------- frames

PROFILE_PIXELS = dict(min_pixels=28 * 28 * 4, max_pixels=28 * 28 * 36)


def test_smart_resize_signature_is_what_for_screen_calls():
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

    assert list(inspect.signature(smart_resize).parameters) == ["height", "width", "factor", "min_pixels", "max_pixels"]


def test_cpu_profile_frame_is_112_by_224():
    assert Frame.for_screen(360, 720, **PROFILE_PIXELS) == Frame(360, 720, 112, 224)


@pytest.mark.parametrize(
    "w,h,lo,hi",
    [
        (360, 720, 28 * 28 * 64, 28 * 28 * 512),
        (720, 1280, 28 * 28 * 4, 28 * 28 * 1280),
        (1440, 3200, 3136, 1003520),
    ],
)
def test_for_screen_agrees_with_smart_resize(w, h, lo, hi):
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

    f = Frame.for_screen(w, h, lo, hi)
    assert (f.model_h, f.model_w) == smart_resize(h, w, 28, lo, hi)
    assert f.model_w % 28 == 0 and f.model_h % 28 == 0
    assert lo <= f.model_w * f.model_h <= hi


def test_round_trip_screen_model_screen_within_one_model_pixel():
    f = Frame(360, 720, 112, 224)
    sx, sy = 360 / 112, 720 / 224
    worst = 0.0
    for x in range(0, 360, 1):
        for y in range(0, 720, 7):
            mx, my = f.to_model((x, y))
            assert 0 <= mx < 112 and 0 <= my < 224
            bx, by = f.to_screen((mx, my))
            assert 0 <= bx < 360 and 0 <= by < 720
            assert abs(bx - x) <= sx and abs(by - y) <= sy
            worst = max(worst, abs(bx - x) / sx, abs(by - y) / sy)
    assert worst > 0.3  # the conversion is lossy, as it must be


def test_model_screen_model_is_exact():
    f = Frame(360, 720, 112, 224)
    for x in range(112):
        for y in range(0, 224, 5):
            assert f.to_model(f.to_screen((x, y))) == (x, y)


def test_known_points():
    f = Frame(360, 720, 112, 224)
    assert f.to_model((0, 0)) == (0, 0)
    assert f.to_model((359, 719)) == (111, 223)
    assert f.to_model((180, 360)) == (56, 112)
    assert f.to_screen((56, 112)) == (181, 361)


def test_bbox_conversion_keeps_points_inside():
    f = Frame(360, 720, 112, 224)
    box = [40, 300, 320, 356]
    mbox = f.bbox_to_model(box)
    assert mbox == [12, 93, 99, 110]
    for x in range(box[0], box[2] + 1, 3):
        for y in range(box[1], box[3] + 1, 3):
            mx, my = f.to_model((x, y))
            assert mbox[0] <= mx <= mbox[2] and mbox[1] <= my <= mbox[3]
    back = f.bbox_to_screen(mbox)
    assert all(abs(a - b) <= 360 / 112 for a, b in zip(back[::2], box[::2]))
    assert all(abs(a - b) <= 720 / 224 for a, b in zip(back[1::2], box[1::2]))


@pytest.mark.parametrize("sizes", [(0, 720, 112, 224), (360, 720, -1, 224), (360.0, 720, 112, 224)])
def test_frame_rejects_bad_sizes(sizes):
    with pytest.raises(ValueError, match="positive int"):
        Frame(*sizes)


def test_no_bbox_stays():
    f = Frame(360, 720, 112, 224)
    assert f.bbox_to_model([-1, -1, -1, -1]) == [-1, -1, -1, -1]
    assert f.bbox_to_screen([-1, -1, -1, -1]) == [-1, -1, -1, -1]
    assert f.bbox_to_model(None) == [-1, -1, -1, -1]
    with pytest.raises(ValueError):
        f.bbox_to_model([1, 2, 3])


def test_action_conversion_touches_only_coordinates():
    f = Frame(360, 720, 112, 224)
    swipe = Action("swipe", coordinate=(180, 600), coordinate2=(180, 100))
    assert f.action_to_model(swipe) == Action("swipe", coordinate=(56, 186), coordinate2=(56, 31))
    assert f.action_to_screen(f.action_to_model(swipe)) == Action(
        "swipe", coordinate=(181, 599), coordinate2=(181, 101)
    )
    typed = Action("type", text="hi")
    assert f.action_to_model(typed) is typed


# ---------------------------------------------------------------- action_match


def test_action_match_points():
    gold = Action("click", coordinate=(50, 50))
    assert action_match(Action("click", coordinate=(60, 60)), gold, [40, 40, 60, 60]) == (True, True)
    assert action_match(Action("click", coordinate=(61, 60)), gold, [40, 40, 60, 60]) == (True, False)
    # no bbox: within 5% of the screen diagonal (40.25 px for 360x720) of the gold point
    assert action_match(Action("click", coordinate=(90, 50)), gold, [-1] * 4) == (True, True)
    assert action_match(Action("click", coordinate=(91, 50)), gold, None) == (True, False)
    # in the model frame the radius is 5% of 250.4 = 12.5 px
    assert action_match(Action("click", coordinate=(62, 50)), gold, None, frame_wh=(112, 224)) == (True, True)
    assert action_match(Action("click", coordinate=(63, 50)), gold, None, frame_wh=(112, 224)) == (True, False)
    assert action_match(Action("long_press", coordinate=(50, 50)), gold, None) == (False, False)
    assert action_match(None, gold, None) == (False, False)


def test_action_match_other_types():
    up = Action("swipe", coordinate=(50, 200), coordinate2=(55, 20))
    assert action_match(Action("swipe", coordinate=(0, 300), coordinate2=(10, 290)), up, None) == (True, True)
    assert action_match(Action("swipe", coordinate=(0, 300), coordinate2=(30, 290)), up, None) == (True, False)
    assert action_match(Action("swipe", coordinate=(5, 5), coordinate2=(5, 5)), up, None) == (True, False)
    assert action_match(Action("type", text=" Hello   WORLD"), Action("type", text="hello world"), None) == (True, True)
    assert action_match(Action("open", text="Wallet app"), Action("open", text="Wallet"), None) == (True, False)
    assert action_match(Action("system_button", button="Home"), Action("system_button", button="Back"), None) == (
        True,
        False,
    )
    assert action_match(Action("terminate", status="success"), Action("terminate", status="success"), None) == (
        True,
        True,
    )
    assert action_match(Action("wait", time=9), Action("wait", time=1), None) == (True, True)
    assert action_match(Action("call_user", text="?"), Action("call_user", text="Which?"), None) == (True, True)
    assert action_match(Action("call_user", text="  "), Action("call_user", text="Which?"), None) == (True, False)
    assert action_match(Action("wait"), Action("call_user", text="Which?"), None) == (False, False)
