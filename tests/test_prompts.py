"""One builder of chat messages: image placeholders, the accessibility list, model-frame gold
columns, and the training record that SFT and GRPO read."""

from __future__ import annotations

import json

from PIL import Image

from inquire_lib.agent import prompts
from inquire_lib.agent.actions import Action, parse_completion
from inquire_lib.data.benchmark import generate_tasks, task_records
from inquire_lib.profiles import get_profile

SMOKE = get_profile("smoke")
A11Y = [
    {"id": "back", "role": "button", "text": "Back", "detail": "", "bbox": [0, 24, 56, 80]},
    {"id": "r0", "role": "row", "text": "Will Tanaka", "detail": "", "bbox": [8, 88, 352, 152]},
    {"id": "r1", "role": "text", "text": "Balance", "detail": "$120", "bbox": [8, 160, 352, 224]},
    {"id": "f0", "role": "input", "text": "Amount", "detail": "", "bbox": [8, 232, 352, 296]},
]


def record(prev: bool = True, **changes) -> dict:
    screen = Image.new("RGB", (360, 720), "white")
    rec = {
        "id": "train-0-00001/2",
        "task_id": "train-0-00001",
        "step": 2,
        "instruction": "Send $20 to Will.",
        "history": [f"step {i}" for i in range(8)],
        "a11y": A11Y,
        "screenshot": screen,
        "prev_screenshot": Image.new("RGB", (360, 720), "black") if prev else None,
        "gold_action": json.dumps({"action": "click", "coordinate": [180, 120]}),
        "gold_bbox": [8, 88, 352, 152],
        "gold_think": "Two contacts could match. Inquiry check: not needed, because the row names Will Tanaka.",
        "inquiry_required": False,
        "category": "safe",
        "subcategory": "safe",
    }
    rec.update(changes)
    return rec


def placeholders(messages: list[dict]) -> int:
    return sum(1 for m in messages for part in m["content"] if part["type"] == "image")


def user_text(messages: list[dict]) -> str:
    return "".join(p.get("text", "") for p in messages[1]["content"] if p["type"] == "text")


def test_frame_of_the_smoke_profile_is_112_by_224():
    f = prompts.frame_for(SMOKE)
    assert (f.screen_w, f.screen_h, f.model_w, f.model_h) == (360, 720, 112, 224)


def test_image_placeholders_follow_use_prev_screenshot():
    on = SMOKE.replace(use_prev_screenshot=True)
    off = SMOKE.replace(use_prev_screenshot=False)
    msgs = prompts.prompt_messages(record(prev=True), on)
    assert placeholders(msgs) == 2 == len(prompts.images_of(record(prev=True), on))
    texts = [p["text"] for p in msgs[1]["content"] if p["type"] == "text"]
    assert texts[:2] == ["Previous screen:", "Current screen:"]
    # the previous screen comes first, matching the placeholder order
    imgs = prompts.images_of(record(prev=True), on)
    assert imgs[0].getpixel((0, 0)) == (0, 0, 0) and imgs[1].getpixel((0, 0)) == (255, 255, 255)
    # first step of a task: no previous screen even when the profile wants one
    assert placeholders(prompts.prompt_messages(record(prev=False), on)) == 1
    assert len(prompts.images_of(record(prev=False), on)) == 1
    msgs_off = prompts.prompt_messages(record(prev=True), off)
    assert placeholders(msgs_off) == 1 == len(prompts.images_of(record(prev=True), off))
    assert "Previous screen:" not in user_text(msgs_off)
    assert msgs[0]["role"] == "system" and msgs[0]["content"][0]["text"] == prompts.system_prompt()


def test_a11y_lines_in_the_model_frame():
    frame = prompts.frame_for(SMOKE)
    lines = prompts.a11y_lines(A11Y, frame, coords=True)
    # centres (28, 52), (180, 120), (180, 192), (180, 264) scaled by 112/360 (pixel centres, floored)
    assert lines == [
        "- Back <back> [8, 16]",
        "- Will Tanaka <r0> [56, 37]",
        "- Balance <r1> info [56, 59] $120",
        "- Amount <f0> field [56, 82]",
    ]
    assert prompts.a11y_lines(A11Y, None, coords=True)[1] == "- Will Tanaka <r0> [180, 120]"
    assert prompts.a11y_lines(A11Y, frame, coords=False) == [
        "- Back <back>",
        "- Will Tanaka <r0>",
        "- Balance <r1> info $120",
        "- Amount <f0> field",
    ]


def test_user_text_history_and_a11y_switch():
    rec = record()
    text = prompts.user_text(rec, use_a11y=True, n_images=2, frame=prompts.frame_for(SMOKE), coords=False)
    lines = text.split("\n")
    assert lines[0] == "Task: Send $20 to Will."
    # only the last HISTORY_LINES steps
    assert lines[1] == "History: " + "; ".join(f"step {i}" for i in range(8 - prompts.HISTORY_LINES, 8))
    assert lines[2] == "Elements:" and lines[3:] == prompts.a11y_lines(A11Y, None, coords=False)
    assert prompts.user_text(record(history=[]), use_a11y=False, n_images=1).split("\n") == [
        "Task: Send $20 to Will.",
        "History: none",
    ]
    # the profile's switches reach the chat message
    assert "Elements:" not in user_text(prompts.prompt_messages(rec, SMOKE.replace(use_a11y=False)))
    assert "[56, 37]" in user_text(prompts.prompt_messages(rec, SMOKE.replace(a11y_coords=True)))
    assert "[56, 37]" not in user_text(prompts.prompt_messages(rec, SMOKE))  # smoke lists slot ids only


def test_model_frame_gold_columns():
    cols = prompts.model_frame_columns(record(), prompts.frame_for(SMOKE))
    assert json.loads(cols["gold_action"]) == {"action": "click", "coordinate": [56, 37]}
    # [8, 88, 352, 152] * 112/360, by pixel centres
    assert cols["gold_bbox"] == [2, 27, 109, 47]
    none = prompts.model_frame_columns(
        record(gold_action=json.dumps({"action": "open", "text": "Chat"}), gold_bbox=[-1, -1, -1, -1]),
        prompts.frame_for(SMOKE),
    )
    assert json.loads(none["gold_action"]) == {"action": "open", "text": "Chat"} and none["gold_bbox"] == [-1] * 4
    swipe = prompts.model_frame_columns(
        record(gold_action=json.dumps({"action": "swipe", "coordinate": [180, 600], "coordinate2": [180, 200]})),
        prompts.frame_for(SMOKE),
    )
    assert json.loads(swipe["gold_action"]) == {"action": "swipe", "coordinate": [56, 186], "coordinate2": [56, 62]}


def test_training_record_keys_and_completion():
    tr = prompts.to_training_record(record(), SMOKE)
    assert set(tr) == {
        "prompt",
        "completion",
        "images",
        "gold_action",
        "gold_bbox",
        "inquiry_required",
        "frame_w",
        "frame_h",
        "category",
        "subcategory",
        "id",
    }
    assert tr["id"] == "train-0-00001/2" and tr["inquiry_required"] is False and tr["category"] == "safe"
    assert (tr["frame_w"], tr["frame_h"]) == (112, 224)  # the frame the graded click reward scales by
    assert len(tr["images"]) == placeholders(tr["prompt"]) == 2
    (msg,) = tr["completion"]
    assert msg["role"] == "assistant"
    text = msg["content"][0]["text"]
    parsed = parse_completion(text, require_think=True)
    assert parsed.format_ok and parsed.action == Action("click", coordinate=(56, 37))
    assert parsed.think == record()["gold_think"]


def test_use_think_false_drops_the_reasoning():
    tr = prompts.to_training_record(record(), SMOKE.replace(use_think=False))
    text = tr["completion"][0]["content"][0]["text"]
    assert "<think>" not in text and text.startswith("<tool_call>") and text.endswith("</tool_call>")
    parsed = parse_completion(text, require_think=False)
    assert parsed.format_ok and parsed.action == Action("click", coordinate=(56, 37))
    assert (
        prompts.completion_text("x", Action("open", text="Chat"), use_think=False, frame=None)
        == '<tool_call>{"name": "mobile_use", "arguments": {"action": "open", "text": "Chat"}}</tool_call>'
    )


def test_generated_steps_build_valid_records():
    recs = [r for task in generate_tasks(0, "train", 3) for r in task_records(task)]
    assert recs and all(r["screenshot"]["bytes"] for r in recs)
    frame = prompts.frame_for(SMOKE)
    for r in recs:
        r = dict(
            r,
            screenshot=Image.new("RGB", (360, 720)),
            prev_screenshot=None if r["prev_screenshot"] is None else Image.new("RGB", (360, 720)),
        )
        tr = prompts.to_training_record(r, SMOKE, frame)
        parsed = parse_completion(tr["completion"][0]["content"][0]["text"])
        assert parsed.format_ok, (r["id"], parsed.error)
        assert placeholders(tr["prompt"]) == len(tr["images"]) == (1 if r["step"] == 0 else 2)
        x0, y0, x1, y1 = tr["gold_bbox"]
        if x0 >= 0:  # boxes touching the screen's edge end on it
            assert 0 <= x0 <= x1 <= frame.model_w and 0 <= y0 <= y1 <= frame.model_h
        if parsed.action.coordinate is not None:
            x, y = parsed.action.coordinate
            assert 0 <= x < frame.model_w and 0 <= y < frame.model_h
